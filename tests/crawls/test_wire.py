"""What goes on the wire is what the page meant: real crawls of a local legacy web.

Three parts, each crawled with the add-on alone (``ADDONS``) side by side with
stock Scrapy against :mod:`tests.support.wire` servers:

1. the query of a link in the page's charset (RFC 3987 section 3.1 note);
2. IDNA 2008 hosts on every path a URL takes into Scrapy;
3. servers that insist on a spelling (RFC 3987 section 5.3.4 evidence).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tests.support.crawl import CrawlResult, run_crawl
from tests.support.server import HitLog
from tests.support.watch import run_watched
from tests.support.wire import WireHost, WirePage, WireRoute, WireServer, WireSite

pytestmark = pytest.mark.slow  # every test here runs real crawls against the wire web

ADDON = {"ADDONS": {"iri_scrapy.Addon": 0}}
STRICT = {"IRI_SCRAPY_DEPRECATIONS_AS_ERRORS": "1"}
HERE = Path(__file__).resolve().parents[1] / "support"  # wire_spiders.py
SPIDERS = "wire_spiders"

Crawl = tuple[CrawlResult, HitLog]


def crawl(srv: WireServer, settings: dict[str, Any], start: list[str], **kwargs: Any) -> Crawl:
    """Reset the hit log, crawl (strict about deprecations), check it ran; result and hits."""
    srv.reset()
    env = {**STRICT, "PYTHONPATH": str(HERE)}
    result = run_crawl(settings, start, srv.proxy_url, env=env, **kwargs)
    assert result.errors == [], result.errors
    assert result.warnings == []
    assert result.ok, result.stderr[-3000:]
    log = HitLog()
    for hit in srv.hits.hits:
        log.record(hit)
    return result, log


# ------------------------------------------------------------ part 1: query charsets

WORDS = {
    "windows-1251": "привет",
    "shift_jis": "日本語",
    "euc-kr": "한국어",
    "gbk": "中文",
    "iso-8859-1": "café",
    "utf-8": "grüße",
}
CHARSET_HOSTS = (
    WireHost("ru.test", "windows-1251"),
    WireHost("jp.test", "shift_jis", header_charset=False),  # <meta charset> only
    WireHost("kr.test", "euc-kr"),
    WireHost("cn.test", "gbk", header_charset=False),
    WireHost("fr.test", "iso-8859-1"),
    WireHost("de.test", "utf-8"),
)


def _charset_pages(host: WireHost, nxt: WireHost) -> list[WirePage]:
    w = WORDS[host.charset]
    escaped = quote(w.encode(host.charset), safe="")  # the page-charset escapes
    links = [
        f"/search?q={w}",  # raw: means the page charset's bytes
        f"/search?q={escaped}",  # the same resource, already escaped: one fetch
        f"/{w}",  # the path is always UTF-8
        f"/{w}?q={w}",
        "/dir/",
        "/refresh",
        f"http://{nxt.name}/",
    ]
    out = [
        WirePage(host, "/", None, tuple(links), title="home"),
        WirePage(host, "/search", "q=" + w),
        WirePage(host, "/" + w),
        WirePage(host, "/" + w, "q=" + w),
        WirePage(host, "/dir/", None, (f"page?q={w}",),
                 head=f'<base href="http://{host.name}/base/">'),
        WirePage(host, "/base/page", "q=" + w),
        WirePage(host, "/refresh", None, (),
                 head=f'<meta http-equiv="refresh" content="0; url=/target?q={w}">'),
        WirePage(host, "/target", "q=" + w),
    ]
    if host.charset != "utf-8":
        # the UTF-8 escapes of the word are other bytes: another resource (here the
        # text those bytes spell in the host's charset), never merged with the first
        utf8 = quote(w.encode("utf-8"), safe="")
        try:
            mojibake = w.encode("utf-8").decode(host.charset)
        except UnicodeDecodeError:
            mojibake = None
        if mojibake is not None:
            out[0] = WirePage(host, "/", None, (*links, f"/raw?q={utf8}", f"/raw?q={w}"))
            out += [WirePage(host, "/raw", "q=" + mojibake), WirePage(host, "/raw", "q=" + w)]
    return out


CHARSET_SITE = WireSite(
    hosts=CHARSET_HOSTS,
    pages=tuple(
        p for i, h in enumerate(CHARSET_HOSTS)
        for p in _charset_pages(h, CHARSET_HOSTS[(i + 1) % len(CHARSET_HOSTS)])
    ),
)
CHARSET_START = [f"http://{CHARSET_HOSTS[0].name}/"]
# meta refresh pages are fetched but not handed to the spider (they redirect)
CHARSET_ITEMS = len(CHARSET_SITE.page_keys) - len(CHARSET_HOSTS)


@pytest.fixture(scope="module")
def charset_web() -> Iterator[WireServer]:
    with WireServer(CHARSET_SITE) as srv:
        yield srv


@pytest.fixture(scope="module")
def charset_crawls(charset_web: WireServer) -> dict[str, Crawl]:
    """The charset web crawled four ways: follow() and CrawlSpider, stock and add-on."""
    crawl_spider = {"spider": f"{SPIDERS}.IRIWireCrawlSpider"}
    stock_crawl_spider = {"spider": f"{SPIDERS}.StockWireCrawlSpider"}
    return {
        "follow/stock": crawl(charset_web, {}, CHARSET_START),
        "follow/addon": crawl(charset_web, ADDON, CHARSET_START),
        "crawlspider/stock": crawl(charset_web, {}, CHARSET_START, **stock_crawl_spider),
        "crawlspider/addon": crawl(charset_web, ADDON, CHARSET_START, **crawl_spider),
    }


@pytest.mark.parametrize("how", ["follow", "crawlspider"])
def test_charset_web_every_resource_once_none_missed_no_404(
    charset_crawls: dict[str, Crawl], how: str
) -> None:
    result, hits = charset_crawls[f"{how}/addon"]
    counts = hits.counts()
    assert hits.not_found() == [], [h.target for h in hits.not_found()]
    assert set(counts) == CHARSET_SITE.page_keys
    assert {k: n for k, n in counts.items() if n != 1} == {}
    assert result.stats["downloader/request_count"] == len(CHARSET_SITE.page_keys)
    assert len(result.items) == CHARSET_ITEMS


@pytest.mark.parametrize("how", ["follow", "crawlspider"])
def test_charset_web_never_more_than_stock(charset_crawls: dict[str, Crawl], how: str) -> None:
    stock, stock_hits = charset_crawls[f"{how}/stock"]
    addon, addon_hits = charset_crawls[f"{how}/addon"]
    assert stock_hits.fetched() <= addon_hits.fetched()  # nothing stock fetches is missed
    assert addon.stats["downloader/request_count"] <= stock.stats["downloader/request_count"]


def test_charset_web_query_bytes_are_the_page_charset(
    charset_crawls: dict[str, Crawl],
) -> None:
    _, hits = charset_crawls["follow/addon"]
    targets = hits.targets
    assert "http://ru.test/search?q=%EF%F0%E8%E2%E5%F2" in targets  # as browsers send it
    assert "http://ru.test/search?q=%D0%BF%D1%80%D0%B8%D0%B2%D0%B5%D1%82" not in targets
    assert "http://ru.test/%D0%BF%D1%80%D0%B8%D0%B2%D0%B5%D1%82" in targets  # path: UTF-8
    # the UTF-8 escapes written in the page are another resource: fetched too, once
    assert "http://ru.test/raw?q=%D0%BF%D1%80%D0%B8%D0%B2%D0%B5%D1%82" in targets
    assert "http://jp.test/search?q=%93%FA%96%7B%8C%EA" in targets  # Shift_JIS
    assert "http://fr.test/search?q=caf%E9" in targets  # ISO-8859-1
    assert "http://de.test/search?q=gr%C3%BC%C3%9Fe" in targets  # UTF-8 page: UTF-8


def _form_pages(host: WireHost, nxt: WireHost) -> list[WirePage]:
    w = WORDS[host.charset]
    form = (f'<form action="/find" method="get"><input name="q" value="{w}">'
            f'<input type="hidden" name="h" value="{w}"></form>')
    return [
        WirePage(host, "/", None, (f"http://{nxt.name}/",), markup=form),
        WirePage(host, "/find", f"q={w}&h={w}"),
    ]


FORM_SITE = WireSite(
    hosts=CHARSET_HOSTS,
    pages=tuple(
        p for i, h in enumerate(CHARSET_HOSTS)
        for p in _form_pages(h, CHARSET_HOSTS[(i + 1) % len(CHARSET_HOSTS)])
    ),
)


def test_get_forms_send_the_page_charset_in_a_crawl() -> None:
    """``FormRequest.from_response`` (GET) on every legacy host: as stock, no 404, once."""
    with WireServer(FORM_SITE) as srv:
        stock, stock_hits = crawl(srv, {}, CHARSET_START, spider=f"{SPIDERS}.FormSpider")
        addon, hits = crawl(srv, ADDON, CHARSET_START, spider=f"{SPIDERS}.FormSpider")
    assert hits.not_found() == [], hits.targets
    assert set(hits.counts()) == FORM_SITE.page_keys
    assert {k: n for k, n in hits.counts().items() if n != 1} == {}
    assert stock_hits.fetched() <= hits.fetched()
    assert addon.stats["downloader/request_count"] <= stock.stats["downloader/request_count"]
    assert "http://ru.test/find?q=%EF%F0%E8%E2%E5%F2&h=%EF%F0%E8%E2%E5%F2" in hits.targets


def test_charset_web_raw_keys_differ_by_charset() -> None:
    """Escapes of different charsets are different keys; raw and page-charset merge."""
    from scrapy.http import HtmlResponse

    from iri_scrapy.plugin.middleware import iri_response_class

    body = ('<a href="/s?q=привет">a</a><a href="/s?q=%EF%F0%E8%E2%E5%F2">b</a>'
            '<a href="/s?q=%D0%BF%D1%80%D0%B8%D0%B2%D0%B5%D1%82">c</a>').encode("cp1251")
    r = iri_response_class(HtmlResponse)("http://ru.test/", body=body, encoding="cp1251")
    urls = [x.url for x in r.follow_all(css="a")]
    assert urls[0] == urls[1] == "http://ru.test/s?q=%EF%F0%E8%E2%E5%F2"
    assert urls[2] == "http://ru.test/s?q=%D0%BF%D1%80%D0%B8%D0%B2%D0%B5%D1%82"


LEGACY = ('<meta charset="windows-1251"><base href="/b/">'
          '<a href="/search?q=привет">x</a><a href="p?q=привет&amp;x=日">y</a>'
          '<form action="/f" method="get"><input name="q" value="привет"></form>')


def _legacy_response(iri: bool = True) -> Any:
    from scrapy.http import HtmlResponse

    from iri_scrapy.plugin.middleware import iri_response_class

    cls = iri_response_class(HtmlResponse) if iri else HtmlResponse
    return cls("http://example.ru/", body=LEGACY.encode("cp1251", "xmlcharrefreplace"),
               encoding="cp1251")


def test_follow_and_urljoin_send_the_page_charset_like_stock() -> None:
    iri, stock = _legacy_response(), _legacy_response(iri=False)
    assert iri.urljoin("/search?q=привет") == "http://example.ru/search?q=%EF%F0%E8%E2%E5%F2"
    assert iri.follow("/search?q=привет").url == stock.follow("/search?q=привет").url
    # <base href> and a character cp1251 cannot hold (sent as &#26085; like browsers)
    assert [r.url for r in iri.follow_all(css="a")] == [
        "http://example.ru/search?q=%EF%F0%E8%E2%E5%F2",
        "http://example.ru/b/p?q=%EF%F0%E8%E2%E5%F2&x=%26%2326085%3B",
    ]
    # the path stays UTF-8 whatever the page charset
    assert iri.urljoin("/привет?q=привет") == (
        "http://example.ru/%D0%BF%D1%80%D0%B8%D0%B2%D0%B5%D1%82?q=%EF%F0%E8%E2%E5%F2")
    # a UTF-8 page: UTF-8 everywhere; a non-http(s) scheme: UTF-8 as well
    from scrapy.http import HtmlResponse

    from iri_scrapy.plugin.middleware import fetch_form, iri_response_class

    utf8 = iri_response_class(HtmlResponse)("http://x.test/", body=b"", encoding="utf-8")
    assert utf8.urljoin("?q=é") == "http://x.test/?q=%C3%A9"
    assert fetch_form("ftp://x.test/?q=é", "cp1251") == "ftp://x.test/?q=%C3%A9"


def test_link_extractor_sends_the_page_charset() -> None:
    from iri_scrapy import IRILinkExtractor

    links = [link.url for link in IRILinkExtractor().extract_links(_legacy_response())]
    assert links == [
        "http://example.ru/search?q=%EF%F0%E8%E2%E5%F2",
        "http://example.ru/b/p?q=%EF%F0%E8%E2%E5%F2&x=%26%2326085%3B",
    ]


@pytest.mark.filterwarnings("ignore::scrapy.exceptions.ScrapyDeprecationWarning")
def test_get_form_sends_the_page_charset() -> None:
    from scrapy.http import FormRequest

    request = FormRequest.from_response(_legacy_response())
    assert request.url == "http://example.ru/f?q=%EF%F0%E8%E2%E5%F2"
    assert request.url == FormRequest.from_response(_legacy_response(iri=False)).url


# -------------------------------------------------- part 2: IDNA 2008 on every path

STR = WireHost("straße.test")  # IDNA 2003: strasse.test, another domain
SIG = WireHost("σοφός.test")  # IDNA 2003 maps the final sigma to σ
ZWJ = WireHost("क्\u200dष.test")  # IDNA 2003 drops the ZWJ
PLAIN = WireHost("plain.test")
IDN_HOSTS = (STR, SIG, ZWJ)
A_LABELS = {"xn--strae-oqa.test", "xn--0xagbn4a.test", "xn--11b2ezcw70k.test"}
IDNA2003 = {"strasse.test", "xn--0xahbl4a.test", "xn--11b2ezc.test"}
SITEMAP = (
    '<?xml version="1.0" encoding="UTF-8"?>\n'
    '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
    "<url><loc>http://σοφός.test/seite</loc></url>"
    "<url><loc>http://straße.test/search?</loc></url>"
    "<url><loc>http://क्\u200dष.test/</loc></url>"
    "</urlset>"
).encode()
IDN_SITE = WireSite(
    hosts=(*IDN_HOSTS, PLAIN),
    pages=(
        WirePage(STR, "/", None, ("http://σοφός.test/seite", "http://क्\u200dष.test/", "/search?")),
        WirePage(STR, "/search", ""),
        WirePage(STR, "/ziel"),
        WirePage(STR, "/b/x"),
        WirePage(STR, "/sitemap.xml", body=SITEMAP),
        WirePage(SIG, "/seite", None, ("http://straße.test/",)),
        WirePage(ZWJ, "/", None, ("http://σοφός.test/seite",)),
        WirePage(PLAIN, "/refresh", None, (),
                 head='<meta http-equiv="refresh" content="0; url=http://straße.test/ziel">'),
        WirePage(PLAIN, "/basis", None, ("x",), head='<base href="http://straße.test/b/">'),
        WirePage(PLAIN, "/files", None, (
            "http://straße.test/ziel", "http://σοφός.test/seite", "http://क्\u200dष.test/")),
    ),
)


def _hosts(hits: HitLog) -> set[str]:
    return {h.target.split("/")[2] for h in hits.hits if h.target.startswith("http://")}


@pytest.fixture(scope="module")
def idn_web() -> Iterator[WireServer]:
    with WireServer(IDN_SITE) as srv:
        yield srv


def _check_idna2008(hits: HitLog, expect: set[str]) -> None:
    """Every request went to an IDNA 2008 A-label, those in *expect* among them, no 404."""
    hosts = _hosts(hits)
    assert not hosts & IDNA2003, hosts
    assert expect <= {t for h in hits.hits for t in [h.target]}, hits.targets
    assert hits.not_found() == [], hits.targets


IDN_PATHS: dict[str, tuple[dict[str, Any], list[str], dict[str, Any], set[str]]] = {
    # name: (extra settings, start_urls, run_crawl kwargs, targets that must be requested)
    "start_urls": ({}, [f"http://{h.name}/" for h in (STR, ZWJ)], {}, {
        "http://xn--strae-oqa.test/", "http://xn--11b2ezcw70k.test/",
        "http://xn--0xagbn4a.test/seite", "http://xn--strae-oqa.test/search?"}),
    "request_in_start_and_callbacks": ({}, [], {
        "spider": f"{SPIDERS}.RequestSpider",
        "spider_kwargs": {"start_iris": ["http://straße.test/"]}}, {
        "http://xn--strae-oqa.test/", "http://xn--11b2ezcw70k.test/",
        "http://xn--0xagbn4a.test/seite", "http://xn--strae-oqa.test/search?"}),
    "media_pipeline_file_urls": (
        {"ITEM_PIPELINES": {"scrapy.pipelines.files.FilesPipeline": 1}},
        ["http://plain.test/files"],
        {"spider": f"{SPIDERS}.RequestSpider", "spider_kwargs": {"files": True}}, {
            "http://xn--strae-oqa.test/ziel", "http://xn--0xagbn4a.test/seite",
            "http://xn--11b2ezcw70k.test/"}),
    "sitemap_loc": ({}, [], {
        "spider": f"{SPIDERS}.WireSitemapSpider",
        "spider_kwargs": {"sitemap_urls": ["http://straße.test/sitemap.xml"]}}, {
        "http://xn--strae-oqa.test/sitemap.xml", "http://xn--0xagbn4a.test/seite",
        "http://xn--strae-oqa.test/search?", "http://xn--11b2ezcw70k.test/"}),
    "meta_refresh": ({}, ["http://plain.test/refresh"], {}, {
        "http://xn--strae-oqa.test/ziel"}),
    "base_href": ({}, ["http://plain.test/basis"], {}, {"http://xn--strae-oqa.test/b/x"}),
}


@pytest.mark.parametrize("path", sorted(IDN_PATHS))
def test_idna2008_on_every_path_into_scrapy(
    idn_web: WireServer, path: str, tmp_path: Path
) -> None:
    extra, start, kwargs, expect = IDN_PATHS[path]
    settings = {**ADDON, **extra}
    if "ITEM_PIPELINES" in extra:
        settings["FILES_STORE"] = str(tmp_path / "files")
    result, hits = crawl(idn_web, settings, start, **kwargs)
    _check_idna2008(hits, expect)
    assert result.stats.get("downloader/response_status_count/200", 0) == len(hits.hits)


def test_idna2008_stock_goes_to_other_domains(idn_web: WireServer) -> None:
    """The same start URLs with stock settings reach the IDNA 2003 hosts (the bug)."""
    _, hits = crawl(idn_web, {}, [f"http://{h.name}/" for h in (STR, ZWJ)])
    assert {"strasse.test", "xn--11b2ezc.test"} <= _hosts(hits)


def test_idna2008_opt_out_gives_stock_requests(idn_web: WireServer) -> None:
    _, hits = crawl(idn_web, {**ADDON, "IRI_IDNA2008_REQUESTS": False},
                    [], spider=f"{SPIDERS}.RequestSpider",
                    spider_kwargs={"start_iris": ["http://straße.test/"]})
    assert "strasse.test" in _hosts(hits)


def _scrapy_command(srv: WireServer, *argv: str) -> str:
    env = {k: v for k, v in os.environ.items()
           if k.lower() not in {"no_proxy", "http_proxy", "https_proxy", "all_proxy"}
           and k != "SCRAPY_SETTINGS_MODULE"}
    env["http_proxy"] = srv.proxy_url
    env["PYTHONIOENCODING"] = "utf-8"
    proc = run_watched(  # bounded by progress (output, CPU time), not by a deadline
        [sys.executable, "-m", "scrapy", *argv], what=f"scrapy {argv[0]}",
        encoding="utf-8", env=env, cwd=tempfile.gettempdir(),  # no project
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


ADDON_ARG = ["-s", 'ADDONS={"iri_scrapy.Addon": 0}', "--nolog"]


def test_idna2008_scrapy_fetch(idn_web: WireServer) -> None:
    idn_web.reset()
    out = _scrapy_command(idn_web, "fetch", *ADDON_ARG, "http://straße.test/")
    assert "http://σοφός.test/seite" in out  # the page itself, not a 404
    assert _hosts(idn_web.hits) == {"xn--strae-oqa.test"}
    idn_web.reset()  # without the add-on: Scrapy's command, IDNA 2003
    _scrapy_command(idn_web, "fetch", "--nolog", "http://straße.test/")
    assert _hosts(idn_web.hits) == {"strasse.test"}


def test_idna2008_scrapy_shell(idn_web: WireServer) -> None:
    idn_web.reset()
    out = _scrapy_command(idn_web, "shell", *ADDON_ARG, "-c", "(response.url, response.status)",
                          "http://क्\u200dष.test/")
    assert "('http://xn--11b2ezcw70k.test/', 200)" in out
    assert _hosts(idn_web.hits) == {"xn--11b2ezcw70k.test"}


# ------------------------------------------- part 3: servers that insist on a spelling

EX = WireHost("example.test")
SPELLING_SITE = WireSite(
    hosts=(EX,),
    pages=(
        WirePage(EX, "/", None, ("/pref%c3%a9", "/~home", "/loop", "/mr-self", "/later")),
        WirePage(EX, "/later", None, ("/pref%C3%A9", "/pref%c3%a9", "/%7ehome", "/~home")),
    ),
    routes=(
        # served only under its lowercase escapes; the canonical spelling redirects there
        WireRoute(EX, "/pref%C3%A9", 301, "/pref%c3%a9"),
        WireRoute(EX, "/pref%c3%a9", page=WirePage(EX, "/pref%c3%a9", title="pref")),
        WireRoute(EX, "/~home", 302, "/%7Ehome"),
        WireRoute(EX, "/%7Ehome", page=WirePage(EX, "/%7Ehome", title="home")),
        WireRoute(EX, "/loop", 301, "http://Example.TEST:80/loop"),  # a true loop
        WireRoute(EX, "/mr-self", page=WirePage(EX, "/mr-self", title="mr", head=(
            '<meta http-equiv="refresh" content="0; url=http://EXAMPLE.test:80/mr-self#x">'))),
    ),
)
GROUPS = {  # the spellings of each resource
    "pref": {"/pref%C3%A9", "/pref%c3%a9"},
    "home": {"/~home", "/%7Ehome", "/%7ehome"},
    "loop": {"/loop"},
    "mr-self": {"/mr-self"},
}


def _per_resource(hits: HitLog) -> dict[str, int]:
    paths = ["/" + t.split("/", 3)[3].split("#")[0] for t in hits.targets]
    return {name: sum(p in spellings for p in paths) for name, spellings in GROUPS.items()}


@pytest.fixture(scope="module")
def spelling_crawls() -> Iterator[dict[str, Crawl]]:
    with WireServer(SPELLING_SITE) as srv:
        start = ["http://example.test/"]
        yield {
            "stock": crawl(srv, {}, start),
            "addon": crawl(srv, ADDON, start),
            "crawlspider": crawl(srv, ADDON, start, spider=f"{SPIDERS}.IRIWireCrawlSpider"),
        }


@pytest.mark.parametrize("how", ["addon", "crawlspider"])
def test_server_spelling_one_request_more_than_stock_at_most_never_a_loop(
    spelling_crawls: dict[str, Crawl], how: str
) -> None:
    stock, stock_hits = spelling_crawls["stock"]
    result, hits = spelling_crawls[how]
    ours, theirs = _per_resource(hits), _per_resource(stock_hits)
    assert ours == {"pref": 2, "home": 2, "loop": 2, "mr-self": 2}, hits.targets
    # stock: /%7Ehome is dropped as a duplicate of /~home (lost); the refresh to
    # :80/mr-self is fetched (another fingerprint), its own refresh dropped (page lost)
    assert theirs == {"pref": 1, "home": 1, "loop": 2, "mr-self": 2}, stock_hits.targets
    assert all(ours[k] <= theirs[k] + 1 for k in ours)
    assert result.stats["iri/protocol/server_spelling"] == 4
    assert result.stats["iri/protocol/server_spelling_loop"] == 2
    # the pages stock Scrapy gets, and the self-refreshing page it loses, all reach the spider
    got = {"/" + u.split("/", 3)[3] for u in result.urls}
    assert {"/pref%c3%a9", "/%7Ehome", "/later"} <= got
    assert any(u.startswith("/mr-self") for u in got)
    assert {"/" + u.split("/", 3)[3] for u in stock.urls} - {"/"} <= got
    # the server's spelling went out as written, byte for byte
    assert "http://example.test/pref%c3%a9" in hits.targets
    assert "http://example.test/%7Ehome" in hits.targets


def test_server_spelling_is_remembered_for_later_requests() -> None:
    from scrapy import Request
    from scrapy.utils.test import get_crawler

    from iri_scrapy.plugin.middleware import (
        Canonicalizer,
        IRINormalizationMiddleware,
        IRISpiderMiddleware,
    )

    crawler = get_crawler(settings_dict=ADDON)
    down = IRINormalizationMiddleware(crawler)
    spider_mw = IRISpiderMiddleware(crawler)
    redirected = Request("http://example.test/pref%c3%a9", meta={
        "redirect_urls": ["http://example.test/pref%C3%A9"], "redirect_reasons": [301]})
    assert down.process_request(redirected) is None  # sent as the server wrote it
    assert redirected.meta["iri_server_spelling"] == "http://example.test/pref%C3%A9"
    assert Canonicalizer.for_crawler(crawler).server_spellings == {
        "http://example.test/pref%C3%A9": "http://example.test/pref%c3%a9"}
    # a later link to that resource, in any spelling, goes out the way the server asked
    later = spider_mw.get_processed_request(
        Request("http://EXAMPLE.test:80/pref%C3%A9#top", dont_filter=True), None)
    assert later.url == "http://example.test/pref%c3%a9#top"
    assert down.process_request(later) is None
    # another resource of the host is not touched; a redirect elsewhere is not a spelling
    other = Request("http://example.test/x", meta={"redirect_urls": ["http://example.test/y"]})
    assert down.process_request(other) is None and "iri_server_spelling" not in other.meta


def test_protocol_middleware_leaves_a_spelling_redirect_as_written_and_stops_a_loop() -> None:
    from scrapy import Request
    from scrapy.http import HtmlResponse, Response
    from scrapy.utils.test import get_crawler

    from iri_scrapy import IRIProtocolMiddleware

    mw = IRIProtocolMiddleware.from_crawler(get_crawler(settings_dict=ADDON))

    def redirect(request: Any, location: str) -> Any:
        response = Response(request.url, status=301, headers={"Location": location},
                            request=request)
        return mw.process_response(request, response).headers[b"Location"].decode()

    first = Request("http://example.test/pref%C3%A9")
    assert redirect(first, "/pref%c3%a9") == "/pref%c3%a9"  # as written: the server's spelling
    assert "dont_redirect" not in first.meta
    # a non-ASCII host is written as its IDNA 2008 A-label, the rest as written
    idn = Request("http://xn--strae-oqa.test/%7Ea")
    assert redirect(idn, "http://straße.test/~a") == "http://xn--strae-oqa.test/~a"
    # another resource: the Location is canonicalized as before
    assert redirect(Request("http://example.test/a"), "/b/./c%7e") == "http://example.test/b/c~"
    # from the server's own spelling, to the same resource again: not followed
    again = Request("http://example.test/pref%c3%a9",
                    meta={"iri_server_spelling": "http://example.test/pref%C3%A9"})
    redirect(again, "/pref%C3%A9")
    assert again.meta["dont_redirect"] is True
    # the same with a meta refresh: the page goes to the spider
    page = Request("http://example.test:80/mr", meta={"iri_server_spelling": "http://example.test/mr"})
    body = b'<meta http-equiv="REFRESH" content="0; url=http://EXAMPLE.test/mr#x">'
    mw.process_response(page, HtmlResponse(page.url, body=body, request=page))
    assert page.meta["dont_redirect"] is True
    other = Request("http://example.test:80/mr2", meta={"iri_server_spelling": "http://example.test/mr2"})
    mw.process_response(other, HtmlResponse(other.url, body=body, request=other))
    assert "dont_redirect" not in other.meta  # a refresh to another resource is followed
