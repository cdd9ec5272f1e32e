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

The site also has meta refreshes to such URLs (followed by
:class:`~iri_scrapy.plugin.refresh.IRIMetaRefreshMiddleware`, in the place of
Scrapy's ``MetaRefreshMiddleware``, which requests ``..%5Cx.html``) and GET
forms (``FormRequest.from_response``, ``follow`` crawls only): an action with a
backslash not in first place (Scrapy's ``Request()`` reads the joined URL as a
browser does) and a ``<base href>`` with backslashes (read as a browser reads it
for Scrapy's base URL readers by :class:`~iri_scrapy.IRINormalizationMiddleware`).

The first tests check the same hrefs without a crawl, on each entry path:
``response.urljoin``/``follow``/``follow_all``, ``IRILinkExtractor``, ``<base
href>``, a redirect's ``Location`` (:class:`~iri_scrapy.plugin.location.IRILocationMiddleware`),
a meta refresh and a form's action.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from scrapy.downloadermiddlewares.redirect import MetaRefreshMiddleware
from scrapy.exceptions import NotConfigured, ScrapyDeprecationWarning
from scrapy.http import FormRequest, HtmlResponse, Request, Response
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

from iri_scrapy import IRILinkExtractor, IRINormalizationMiddleware
from iri_scrapy.addon import Addon
from iri_scrapy.plugin.location import IRILocationMiddleware
from iri_scrapy.plugin.middleware import iri_response_class
from iri_scrapy.plugin.refresh import IRIMetaRefreshMiddleware
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
    # the page's own special scheme without "//": relative (special relative or
    # authority state; RFC 3986 5.2.2's non-strict parser); slashes a browser skips
    ("http:rel.html", "http://site.test/a/rel.html"),
    ("///other.test/triple.html", "http://other.test/triple.html"),
]


def _page(body: str = "", url: str = PAGE) -> HtmlResponse:
    page = HtmlResponse(url, body=body.encode(), encoding="utf-8")
    return page.replace(cls=iri_response_class(HtmlResponse))  # as the middleware does


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
    mw = IRILocationMiddleware(get_crawler(settings_dict={}))
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


# ------------------------------------------------------------------ meta refresh

def _refresh_page(href: str, head: str = "", url: str = PAGE) -> HtmlResponse:
    body = (f'<html><head><meta charset="utf-8">{head}'
            f'<meta http-equiv="refresh" content="0; url={href}"></head><body></body></html>')
    return HtmlResponse(url, body=body.encode(), encoding="utf-8")


def _refresh(cls: type[MetaRefreshMiddleware], page: HtmlResponse, request: Request | None = None,
             settings: dict[str, Any] | None = None) -> str | None:
    """The URL *cls* refreshes *page* to (None: the response goes on to the spider)."""
    mw = cls.from_crawler(get_crawler(settings_dict=settings or {}))
    out = mw.process_response(request or Request(page.url), page)
    return out.url if isinstance(out, Request) else None


# (the URL in content="0; url=...", extra <head> markup, what a browser requests, stock Scrapy)
REFRESHES = [
    ("..\\x.html", "", "http://site.test/x.html", "http://site.test/a/..%5Cx.html"),
    ("\\dir\\x.html", "", "http://site.test/dir/x.html",
     "http://site.test/a/%5Cdir%5Cx.html"),
    ("\\\\other.test\\p.html", "", "http://other.test/p.html",
     "http://site.test/a/%5C%5Cother.test%5Cp.html"),
    ("'..\\q.html'", "", "http://site.test/q.html", "http://site.test/a/..%5Cq.html"),
    ("..&#92;e.html", "", "http://site.test/e.html", "http://site.test/a/..%5Ce.html"),
    ("x.html", '<base href="\\b\\">', "http://site.test/b/x.html", "http://site.test/a/x.html"),
    ("\\\\straße.test\\x.html", "", "http://xn--strae-oqa.test/x.html",  # IDNA 2008
     "http://site.test/a/%5C%5Cstra%C3%9Fe.test%5Cx.html"),
    ("/ta\tb.html\\", "", "http://site.test/tab.html/", "http://site.test/tab.html%5C"),
    # what stock Scrapy already reads as a browser does: the same
    ("/pa\nth.html", "", "http://site.test/path.html", "http://site.test/path.html"),
    ("http://h\\@evil.test/", "", "http://h/@evil.test/", "http://h/@evil.test/"),
    ("/q.html?a\\b", "", "http://site.test/q.html?a%5Cb", "http://site.test/q.html?a%5Cb"),
]


@pytest.mark.parametrize(("href", "head", "browser", "stock"), REFRESHES)
def test_meta_refresh_is_read_like_a_browser(href: str, head: str, browser: str,
                                             stock: str) -> None:
    assert _refresh(IRIMetaRefreshMiddleware, _refresh_page(href, head)) == browser
    assert _refresh(MetaRefreshMiddleware, _refresh_page(href, head)) == stock


@pytest.mark.parametrize("href", [
    "\\\\",  # "//": no host (a browser does not refresh; urljoin keeps the base's host)
    "\\\\a b\\x.html",  # a host Request() refuses
])
def test_a_meta_refresh_url_a_browser_would_not_use_is_left_to_scrapy(href: str) -> None:
    stock = _refresh(MetaRefreshMiddleware, _refresh_page(href))
    assert stock is not None and "%5C" in stock
    assert _refresh(IRIMetaRefreshMiddleware, _refresh_page(href)) == stock


def test_a_meta_refresh_with_extra_slashes_goes_where_a_browser_goes() -> None:
    """``\\\\\\x.html`` is ``///x.html``: a browser skips the slashes after the special
    scheme and refreshes to host ``x.html`` (stock: a path of the page's own host)."""
    assert _refresh(IRIMetaRefreshMiddleware, _refresh_page("\\\\\\x.html")) in (
        "http://x.html", "http://x.html/")


def test_meta_refresh_middleware_keeps_scrapys_rules() -> None:
    page = _refresh_page("..\\x.html")
    assert _refresh(IRIMetaRefreshMiddleware, page, Request(PAGE, meta={"dont_redirect": True})) \
        is None
    assert _refresh(IRIMetaRefreshMiddleware, _refresh_page("..\\x.html"),
                    Request(PAGE, method="HEAD")) is None
    as_stock = Request(PAGE, meta={"dont_normalize_iri": True})
    assert _refresh(IRIMetaRefreshMiddleware, _refresh_page("..\\x.html"), as_stock) \
        == "http://site.test/a/..%5Cx.html"
    assert _refresh(IRIMetaRefreshMiddleware, _refresh_page("..\\x.html"),
                    settings={"METAREFRESH_MAXDELAY": 0}) is None
    with pytest.raises(NotConfigured):
        IRIMetaRefreshMiddleware.from_crawler(
            get_crawler(settings_dict={"METAREFRESH_ENABLED": False}))
    # IDNA 2008 hosts only with IRI_IDNA2008_REQUESTS, as the rest of the add-on
    off = {"IRI_IDNA2008_REQUESTS": False}
    assert _refresh(IRIMetaRefreshMiddleware, _refresh_page("\\\\straße.test\\x.html"),
                    settings=off) == "http://strasse.test/x.html"


STOCK_REFRESH = "scrapy.downloadermiddlewares.redirect.MetaRefreshMiddleware"


def _downloader_mws(user: dict[str, Any]) -> dict[Any, Any]:
    settings = Settings(user)
    Addon().update_settings(settings)
    return dict(settings.getdict("DOWNLOADER_MIDDLEWARES"))


def test_the_addon_puts_its_meta_refresh_middleware_in_scrapys_place() -> None:
    mws = _downloader_mws({})
    assert mws[IRIMetaRefreshMiddleware] == 580
    assert [v for k, v in mws.items() if k is MetaRefreshMiddleware or k == STOCK_REFRESH] \
        == [None]
    # the user's own choice is left alone: Scrapy's, or none
    for choice in (570, None):
        mine = _downloader_mws({"DOWNLOADER_MIDDLEWARES": {STOCK_REFRESH: choice}})
        assert mine[STOCK_REFRESH] == choice and IRIMetaRefreshMiddleware not in mine


# --------------------------------------------------------------------------- forms

def _form_page(action: str, head: str = "") -> HtmlResponse:
    body = (f'<html><head>{head}</head><body><form method="get" action="{action}">'
            '<input name="q" value="v"></form></body></html>')
    page = HtmlResponse(PAGE, body=body.encode(), encoding="utf-8")
    mw = IRINormalizationMiddleware.from_crawler(get_crawler(settings_dict={}))
    return mw.process_response(Request(PAGE), page)  # type: ignore[return-value]


def _form_url(page: HtmlResponse) -> str:
    with warnings.catch_warnings():  # deprecated in Scrapy 2.19 (form2request)
        warnings.simplefilter("ignore", ScrapyDeprecationWarning)
        return FormRequest.from_response(page).url


@pytest.mark.parametrize(("action", "head", "expected"), [
    ("..\\f.html", "", "http://site.test/f.html?q=v"),  # Request() reads the joined "\\" as "/"
    ("/ta\tb.html", "", "http://site.test/tab.html?q=v"),
    ("f.html", '<base href="\\b\\">', "http://site.test/b/f.html?q=v"),  # the add-on's base
])
def test_a_form_action_reaches_what_a_browser_submits_to(action: str, head: str,
                                                         expected: str) -> None:
    page = _form_page(action, head)
    assert page.urljoin(_form_url(page)) == expected  # the add-on then stamps it


@pytest.mark.parametrize(("action", "browser", "sent"), [
    ("\\dir\\f.html", "http://site.test/dir/f.html?q=v", "http://site.test/a//dir/f.html?q=v"),
    ("\\\\other.test\\f.html", "http://other.test/f.html?q=v",
     "http://site.test/a///other.test/f.html?q=v"),
])
def test_a_form_action_starting_with_a_backslash_is_joined_as_scrapy_joins_it(
    action: str, browser: str, sent: str
) -> None:
    """Not done (docs/links.md): Scrapy joins the action with ``urljoin`` before any
    hook sees it, so ``\\dir`` is a relative path there; stock does the same."""
    page = _form_page(action)
    assert _form_url(page) == sent != browser
    stock = HtmlResponse(PAGE, body=page.body, encoding="utf-8")
    assert _form_url(stock) == sent
    # the workaround docs/links.md gives: the add-on's urljoin reads the action
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScrapyDeprecationWarning)
        assert FormRequest.from_response(page, url=page.urljoin(action)).url == browser


# --------------------------------------------------------------------- the crawls

SITE_HOST = WireHost("site.test")
H = WireHost("h")
OTHER = WireHost("other.test")
EVIL = WireHost("evil.test")  # never contacted; a page, so that a wrong fetch would be a 200


def _meta(href: str) -> str:
    return f'<meta http-equiv="refresh" content="0; url={href}">'


def _form(action: str) -> str:
    return f'<form method="get" action="{action}"><input name="q" value="v"></form>'


# (page, its meta refresh, the page a browser goes to): "/r/..." on site.test
CRAWL_REFRESHES = (
    ("/r/up.html", _meta("..\\r-up.html"), WirePage(SITE_HOST, "/r-up.html")),
    ("/r/abs.html", _meta("\\r\\abs-to.html"), WirePage(SITE_HOST, "/r/abs-to.html")),
    ("/r/net.html", _meta("\\\\other.test\\r-net.html"), WirePage(OTHER, "/r-net.html")),
    ("/r/entity.html", _meta("..&#92;r-entity.html"), WirePage(SITE_HOST, "/r-entity.html")),
    ("/r/quoted.html", _meta("'..\\r-quoted.html'"), WirePage(SITE_HOST, "/r-quoted.html")),
    ("/r/based.html", '<base href="\\rb\\">' + _meta("x.html"), WirePage(SITE_HOST, "/rb/x.html")),
    ("/r/tab.html", _meta("/r-ta\tb.html"), WirePage(SITE_HOST, "/r-tab.html")),
    ("/r/evil.html", _meta("http://h\\@evil.test/refresh.html"),
     WirePage(H, "/@evil.test/refresh.html")),
)
# (page, <head> markup, its GET form's action, the page a browser submits to): "follow" only
CRAWL_FORMS = (
    ("/f/up.html", "", "..\\f-up.html", WirePage(SITE_HOST, "/f-up.html", "q=v")),
    ("/f/tab.html", "", "/f-ta\tb.html", WirePage(SITE_HOST, "/f-tab.html", "q=v")),
    ("/f/based.html", '<base href="\\fb\\">', "x.html", WirePage(SITE_HOST, "/fb/x.html", "q=v")),
)
#: the refresh targets stock Scrapy requests as "%5C" (a 404), and the add-on reaches
STOCK_LOSES = {p.key for _, m, p in CRAWL_REFRESHES if "\\" in m or "&#92;" in m}
STOCK_LOSES -= {WirePage(H, "/@evil.test/refresh.html").key}  # absolute: w3lib reads it
STOCK_LOSES |= {CRAWL_FORMS[2][3].key}  # the form under <base href="\\fb\\">
FORM_KEYS = {target.key for *_, target in CRAWL_FORMS}

CRAWL_LINKS = (
    *(href for href, _ in HREFS),
    "/redirect", "/redirect-evil", "/redirect-tab", "/based/",
    *(path for path, _, _ in CRAWL_REFRESHES), *(path for path, *_ in CRAWL_FORMS),
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
        WirePage(SITE_HOST, "/a/rel.html"),
        WirePage(OTHER, "/triple.html"),
        WirePage(H, "/@evil.test/"),
        WirePage(H, "/@evil.test/r.html"),
        WirePage(EVIL, "/"),
        WirePage(EVIL, "/hijack.html"),
        WirePage(EVIL, "/r.html"),
        WirePage(EVIL, "/refresh.html"),
        *(WirePage(SITE_HOST, path, head=meta) for path, meta, _ in CRAWL_REFRESHES),
        *(target for *_, target in CRAWL_REFRESHES),
        *(WirePage(SITE_HOST, path, head=head, markup=_form(action))
          for path, head, action, _ in CRAWL_FORMS),
        *(target for *_, target in CRAWL_FORMS),
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
    expected = BROWSER_KEYS if how == "follow" else BROWSER_KEYS - FORM_KEYS  # forms: follow
    assert fetched == expected, (expected - fetched, fetched - expected)
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


@pytest.mark.slow
@pytest.mark.parametrize("how", ["follow", "crawlspider"])
def test_meta_refreshes_and_forms_reach_what_stock_loses(
    crawls: dict[str, Crawl], how: str
) -> None:
    """Side by side: stock Scrapy requests "%5C" for these (a 404), the add-on the page."""
    _, stock_hits = crawls[f"{how}/stock"]
    _, addon_hits = crawls[f"{how}/addon"]
    lost = STOCK_LOSES if how == "follow" else STOCK_LOSES - FORM_KEYS
    assert {h.key for h in stock_hits.hits if h.status == 200} & lost == set()
    assert {h.key for h in addon_hits.hits if h.status == 200} >= lost
    stock_404 = [h.target for h in stock_hits.not_found()]
    assert "http://site.test/r/%5C%5Cother.test%5Cr-net.html" in stock_404
    assert "http://other.test/r-net.html" in addon_hits.targets
