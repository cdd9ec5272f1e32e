"""Links read like a browser reads them: real crawls of a local site, stock side by side.

A site whose pages link with backslashes (``..\\index.html``, ``\\dir\\x.html``,
``\\\\other.test\\p.html``), embedded tab, CR and LF, leading and trailing spaces,
a ``<base href>`` with backslashes, redirects whose ``Location`` holds a
backslash or a tab, and ``http://h\\@evil.test/`` (host ``h`` for a browser: for
a special scheme ``\\`` ends the authority, URL Standard).  Crawled with
``response.follow`` and with ``CrawlSpider`` rules, stock Scrapy and the add-on
(``ADDONS``) through :mod:`tests.support.wire`'s loopback proxy (every host
resolves to it; nothing leaves 127.0.0.1): the add-on fetches every page the
site has (what a browser reaches), everything stock fetches, no 404, never
more requests than stock, and never a request to ``evil.test``.

The first tests check the same hrefs without a crawl, on each entry path:
``response.urljoin``/``follow``/``follow_all``, ``IRILinkExtractor``, ``<base
href>`` and a redirect's ``Location`` (:class:`~iri_scrapy.plugin.protocol_mw.IRIProtocolMiddleware`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from scrapy.http import HtmlResponse, Request, Response
from scrapy.utils.test import get_crawler

from iri_scrapy import IRILinkExtractor
from iri_scrapy.plugin.middleware import iri_response_class
from iri_scrapy.plugin.protocol_mw import IRIProtocolMiddleware
from tests.support.crawl import CrawlResult, run_crawl
from tests.support.server import HitLog
from tests.support.wire import WireHost, WirePage, WireRoute, WireServer, WireSite

ADDON = {"ADDONS": {"iri_scrapy.Addon": 0}}
STRICT = {"IRI_SCRAPY_DEPRECATIONS_AS_ERRORS": "1"}
SUPPORT = Path(__file__).resolve().parents[1] / "support"  # wire_spiders.py
PAGE = "http://site.test/a/start.html"

# (href as written in the page, what a browser requests from PAGE)
HREFS = [
    ("..\\index.html", "http://site.test/index.html"),
    ("\\dir\\x.html", "http://site.test/dir/x.html"),
    ("/pa\nth.html", "http://site.test/path.html"),
    ("/ta\tb.html", "http://site.test/tab.html"),
    ("/c\r\nr.html", "http://site.test/cr.html"),
    ("  /spaced.html \t", "http://site.test/spaced.html"),
    ("\\\\other.test\\p.html", "http://other.test/p.html"),
    ("http://h\\@evil.test/", "http://h/@evil.test/"),
    ("http://site.test\\@evil.test/hijack.html", "http://site.test/@evil.test/hijack.html"),
    ("/q.html?a\\b", "http://site.test/q.html?a%5Cb"),  # query: "\" is a character
]


def _page(body: str = "", url: str = PAGE) -> HtmlResponse:
    page = HtmlResponse(url, body=body.encode(), encoding="utf-8")
    page.__class__ = iri_response_class(HtmlResponse)  # type: ignore[assignment]  # as the middleware does
    return page


@pytest.mark.parametrize(("href", "expected"), HREFS)
def test_follow_and_urljoin_read_hrefs_like_a_browser(href: str, expected: str) -> None:
    page = _page()
    assert page.urljoin(href) == expected
    assert page.follow(href).url == expected


def test_dont_normalize_iri_follows_the_href_as_stock_does() -> None:
    stock = HtmlResponse(PAGE, body=b"", encoding="utf-8")
    for href, _ in HREFS:
        meta = {"dont_normalize_iri": True}
        assert _page().follow(href, meta=meta).url == stock.follow(href, meta=meta).url
    assert _page().follow("\\dir\\x.html").url == "http://site.test/dir/x.html"  # reset


def test_follow_all_and_the_link_extractor_read_hrefs_like_a_browser() -> None:
    links = "".join(f'<a href="{href}">x</a>' for href, _ in HREFS)
    page = _page(f"<html><body>{links}</body></html>")
    expected = [url for _, url in HREFS]
    assert [r.url for r in page.follow_all(css="a")] == expected
    assert [link.url for link in IRILinkExtractor().extract_links(page)] == expected
    # strip=False: the browser trims whatever the option says
    assert [link.url for link in IRILinkExtractor(strip=False).extract_links(page)] == expected


def test_base_href_with_backslashes_is_read_like_a_browser() -> None:
    page = _page('<html><head><base href="\\docs\\v1\\"></head>'
                 '<body><a href="x.html">x</a><a href="..\\y.html">y</a></body></html>')
    assert page.urljoin("x.html") == "http://site.test/docs/v1/x.html"
    assert [link.url for link in IRILinkExtractor().extract_links(page)] == [
        "http://site.test/docs/v1/x.html", "http://site.test/docs/y.html",
    ]
    # a <base href> a browser reads as written stays what w3lib reads
    plain = _page('<html><head><base href="/b/"></head><body>\\</body></html>')
    assert plain.urljoin("x") == "http://site.test/b/x"


@pytest.mark.parametrize("tag", [
    "<base href='\\docs\\v1\\'>",
    "<BASE HREF=\\docs\\v1\\>",
    '<base target="_top" href="\\docs\\v1\\">',
    '<base data-href="/no/" href="\\docs\\v1\\">',
    '<base href="\\docs\\v1\\"><base href="/second/">',  # the first one counts
])
def test_base_href_spellings(tag: str) -> None:
    page = _page(f"<html><head>{tag}</head><body></body></html>")
    assert page.urljoin("x.html") == "http://site.test/docs/v1/x.html"


def _redirect(location: bytes, url: str = "http://site.test/from") -> bytes:
    mw = IRIProtocolMiddleware(get_crawler(settings_dict={}))
    request = Request(url)
    response = Response(url, status=301, headers={"Location": location}, request=request)
    mw.process_response(request, response)
    return bytes(response.headers[b"Location"] or b"")


@pytest.mark.parametrize(("location", "expected"), [
    (b"\\target.html", b"http://site.test/target.html"),
    (b"..\\up\\x.html", b"http://site.test/up/x.html"),
    (b"http://h\\@evil.test/r.html", b"http://h/@evil.test/r.html"),
    (b"\\\\other.test\\p.html", b"http://other.test/p.html"),
    (b"/re\tdir.html", b"http://site.test/redir.html"),
    (b" /spaced.html ", b"http://site.test/spaced.html"),
    (b"\\from", b"/from"),  # its own resource: the server's spelling, read as a browser does
])
def test_redirect_location_is_read_like_a_browser(location: bytes, expected: bytes) -> None:
    assert _redirect(location) == expected


# --------------------------------------------------------------------- the crawls

SITE_HOST = WireHost("site.test")
H = WireHost("h")
OTHER = WireHost("other.test")
EVIL = WireHost("evil.test")  # never contacted; a page, so that a wrong fetch would be a 200

CRAWL_LINKS = (
    *(href for href, _ in HREFS),
    "/redirect", "/redirect-evil", "/redirect-tab", "/based/",
)
SITE = WireSite(
    hosts=(SITE_HOST, H, OTHER, EVIL),
    pages=(
        WirePage(SITE_HOST, "/a/start.html", None, CRAWL_LINKS),
        WirePage(SITE_HOST, "/index.html"),
        WirePage(SITE_HOST, "/dir/x.html"),
        WirePage(SITE_HOST, "/path.html"),
        WirePage(SITE_HOST, "/tab.html"),
        WirePage(SITE_HOST, "/cr.html"),
        WirePage(SITE_HOST, "/spaced.html"),
        WirePage(SITE_HOST, "/@evil.test/hijack.html"),
        WirePage(SITE_HOST, "/q.html", "a\\b"),
        WirePage(SITE_HOST, "/target.html"),
        WirePage(SITE_HOST, "/redir.html"),
        WirePage(SITE_HOST, "/based/", None, ("x.html",), head='<base href="\\b\\">'),
        WirePage(SITE_HOST, "/b/x.html"),
        WirePage(OTHER, "/p.html"),
        WirePage(H, "/@evil.test/"),
        WirePage(H, "/@evil.test/r.html"),
        WirePage(EVIL, "/"),
        WirePage(EVIL, "/hijack.html"),
        WirePage(EVIL, "/r.html"),
    ),
    routes=(
        WireRoute(SITE_HOST, "/redirect", 301, "\\target.html"),
        WireRoute(SITE_HOST, "/redirect-evil", 301, "http://h\\@evil.test/r.html"),
        WireRoute(SITE_HOST, "/redirect-tab", 301, "/re\tdir.html"),
    ),
)
EVIL_KEYS = {p.key for p in SITE.pages if p.host == EVIL}
BROWSER_KEYS = SITE.page_keys - EVIL_KEYS  # every page a browser reaches from the start

Crawl = tuple[CrawlResult, HitLog]


@pytest.fixture(scope="module")
def web() -> Iterator[WireServer]:
    with WireServer(SITE) as srv:
        yield srv


def _crawl(srv: WireServer, settings: dict[str, Any], spider: str) -> Crawl:
    srv.reset()
    env = {**STRICT, "PYTHONPATH": str(SUPPORT)}
    result = run_crawl(settings, [PAGE], srv.proxy_url, env=env, spider=spider)
    assert result.errors == [], result.errors
    assert result.ok, result.stderr[-3000:]
    log = HitLog()
    for hit in srv.hits.hits:
        log.record(hit)
    return result, log


@pytest.fixture(scope="module")
def crawls(web: WireServer) -> dict[str, Crawl]:
    """The site crawled four ways: follow() and CrawlSpider rules, stock and add-on."""
    return {
        "follow/stock": _crawl(web, {}, "wire_spiders.FormSpider"),
        "follow/addon": _crawl(web, ADDON, "wire_spiders.FormSpider"),
        "crawlspider/stock": _crawl(web, {}, "wire_spiders.StockWireCrawlSpider"),
        "crawlspider/addon": _crawl(web, ADDON, "wire_spiders.IRIWireCrawlSpider"),
    }


def _hosts(hits: HitLog) -> set[str]:
    return {h.target.split("/")[2] for h in hits.hits if h.target.startswith("http://")}


@pytest.mark.slow
@pytest.mark.parametrize("how", ["follow", "crawlspider"])
def test_the_addon_reaches_every_page_a_browser_reaches(
    crawls: dict[str, Crawl], how: str
) -> None:
    result, hits = crawls[f"{how}/addon"]
    assert hits.not_found() == [], [h.target for h in hits.not_found()]
    fetched = {h.key for h in hits.hits if h.status == 200}
    assert fetched == BROWSER_KEYS, (BROWSER_KEYS - fetched, fetched - BROWSER_KEYS)
    assert {k: n for k, n in hits.counts().items() if n != 1} == {}  # each once
    assert result.stats.get("log_count/ERROR", 0) == 0


@pytest.mark.slow
@pytest.mark.parametrize("how", ["follow", "crawlspider"])
def test_the_addon_never_contacts_the_host_behind_the_backslash(
    crawls: dict[str, Crawl], how: str
) -> None:
    _, hits = crawls[f"{how}/addon"]
    assert _hosts(hits) == {"site.test", "h", "other.test"}, hits.targets
    assert "http://h/@evil.test/" in hits.targets
    assert "http://h/@evil.test/r.html" in hits.targets  # the redirect, too


@pytest.mark.slow
@pytest.mark.parametrize("how", ["follow", "crawlspider"])
def test_the_addon_fetches_all_stock_fetches_and_no_more_requests(
    crawls: dict[str, Crawl], how: str
) -> None:
    stock, stock_hits = crawls[f"{how}/stock"]
    addon, addon_hits = crawls[f"{how}/addon"]
    stock_pages = {h.key for h in stock_hits.hits if h.status == 200}
    addon_pages = {h.key for h in addon_hits.hits if h.status == 200}
    assert stock_pages <= addon_pages, stock_pages - addon_pages
    assert "evil.test" not in _hosts(stock_hits)
    # what stock loses here and the add-on fetches (stock sends %5C: a 404)
    assert stock_hits.not_found(), "stock lost no page: the site no longer tests anything"
    assert addon.stats["downloader/request_count"] <= stock.stats["downloader/request_count"]
