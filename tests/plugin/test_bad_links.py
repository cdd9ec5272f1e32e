"""A bad link never costs the good ones: real crawls of a page of malformed hrefs.

The page ``http://bad.test/`` holds 40 hrefs no request can be made for (or that
need care: an unclosed ``[``, bad IPv6, ports out of range, an empty host, a
space in the host, ``a..b``, NUL, a lone surrogate, a 100 kB URL,
``javascript:``, ``data:``...) between 14 good links, a redirect whose
``Location`` is unusable and a page whose meta refresh is.  Crawled with
``response.follow`` (and ``follow_all``), and with a real ``IRICrawlSpider``:
every good page is fetched, at least as many as stock Scrapy fetches, and each
skipped link is counted and logged once with its page.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from typing import Any

import pytest
from scrapy import Spider
from scrapy.http import HtmlResponse
from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule

from iri_scrapy import IRICrawlSpider, IRILinkExtractor
from tests.support.crawl import CrawlResult, run_crawl
from tests.support.server import SiteServer, serve_site
from tests.support.site import Host, Link, Resource, ResourceKey, Site

MODULE = "tests.plugin.test_bad_links"  # what the crawl subprocess imports (cwd: the checkout)
BAD = Host("bad.test", "en")
BAD_HREFS = [
    "http://[::1", "HTTP://[::1", "  http://[::1  ", "//[::1/x", "http://[::1]x/",
    "http://[:::1]/", "http://[zz]/", "http://[1:2:3:4:5:6:7:8:9]/", "http://[]/",
    "https://[::ffff:1.2.3]/", "ftp://[/", "http://[::1/]",
    "http://example.test:99999/", "http://[::1]:99999/", "http://bad.test:65536/x",
    "http://bad.test:99999999999999999999/", "http://bad.test:abc/", "http://bad.test:-1/",
    "http://[::1]:port/",
    "http:///nohost", "http://:80/", "http://user@:8080/",
    "http://a b.test/", "http://exa mple.test/", "http://a..b.test/", "http://-/",
    "http://xn--/", "http://%zz/", "http://a\u200db.test/",
    "http://bad.test/nul\x00here", "http://bad.test/&#xD800;", "http://bad.test/\udc80",
    "http://bad.test/" + "a" * 100_000,
    "javascript:void(0)", "javascript:go('/g/0')", "data:text/html,hi", "mailto:x@bad.test",
    "http:", "http://[v1.x]/", "http://bad.test:0/",
]
GOOD = [f"/g/{i}" for i in range(14)]
# the good links, in several spellings, spread between the bad ones
GOOD_HREFS = [
    "/g/0", "g/1", "http://bad.test/g/2", "HTTP://BAD.TEST/g/3", "http://bad.test:80/g/4",
    "/g/./5", "/g/x/../6", "/g/%37", "//bad.test/g/8", "/g/9#frag", "/g/10", "/g/11",
    "/redirect-bad", "/refresh-bad",
]


def _page_html() -> str:
    hrefs: list[str] = []
    good = iter(GOOD_HREFS)
    for i, bad in enumerate(BAD_HREFS):
        if i % 3 == 0:
            hrefs.append(next(good, "/g/12"))
        hrefs.append(bad)
    hrefs.extend(good)
    hrefs.append("/g/13")
    links = "\n".join(
        f'<a href="{href if "&#" in href else html.escape(href, quote=True)}">{i}</a>'
        for i, href in enumerate(hrefs)
    )
    return f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>bad links</title>' \
           f"</head><body>\n{links}\n</body></html>\n"


REFRESH_HTML = (
    '<!DOCTYPE html><html><head><meta charset="utf-8"><title>refresh</title>'
    '<meta http-equiv="refresh" content="0; url=http://example.test:99999/"></head>'
    '<body><a href="/g/12">after the refresh</a></body></html>\n'
)

BAD_SITE = Site(
    hosts=(BAD,),
    resources=(
        Resource("home", BAD, "/", None, "bad links", html=_page_html()),
        *(Resource(f"g{i}", BAD, f"/g/{i}", None, f"good {i}", "", (Link("/", "home"),))
          for i in range(14)),
        Resource("redirect-bad", BAD, "/redirect-bad", location="http://[::1"),
        Resource("refresh-bad", BAD, "/refresh-bad", None, "refresh", html=REFRESH_HTML),
    ),
    start_urls=("http://bad.test/",),
)
GOOD_KEYS = {ResourceKey("bad.test", p, None) for p in GOOD} | {
    ResourceKey("bad.test", "/", None), ResourceKey("bad.test", "/refresh-bad", None),
}
ADDON = {"ADDONS": {"iri_scrapy.Addon": 0}, "LOG_LEVEL": "DEBUG"}
STRICT = {"IRI_SCRAPY_DEPRECATIONS_AS_ERRORS": "1"}


class RulesSpider(IRICrawlSpider):
    """A real ``IRICrawlSpider``: one rule, every link followed."""

    name = "rules"
    rules = (Rule(IRILinkExtractor(), callback="parse_item", follow=True),)

    def parse_start_url(self, response: Any, **kwargs: Any) -> Any:
        return self.parse_item(response)

    def parse_item(self, response: Any) -> Any:
        yield {"url": response.url}


class StockRulesSpider(CrawlSpider):
    """The same with Scrapy's own ``CrawlSpider`` and ``LinkExtractor``."""

    name = "stock-rules"
    rules = (Rule(LinkExtractor(), callback="parse_item", follow=True),)

    def parse_start_url(self, response: Any, **kwargs: Any) -> Any:
        return self.parse_item(response)

    def parse_item(self, response: Any) -> Any:
        yield {"url": response.url}


class FollowAllSpider(Spider):
    """``response.follow_all(css="a")`` instead of a loop of ``follow``."""

    name = "follow-all"

    def parse(self, response: Any, **kwargs: Any) -> Any:
        yield {"url": response.url}
        if isinstance(response, HtmlResponse):
            yield from response.follow_all(css="a")


@pytest.fixture(scope="module")
def server() -> Iterator[SiteServer]:
    with serve_site(BAD_SITE) as srv:
        yield srv


def crawl(srv: SiteServer, settings: dict[str, Any], spider: str | None = None) -> CrawlResult:
    srv.reset()
    result = run_crawl(settings, list(BAD_SITE.start_urls), srv.proxy_url, timeout=90,
                       env=STRICT, spider=spider)
    assert result.errors == [], result.errors
    return result


def good_fetched(srv: SiteServer) -> set[ResourceKey]:
    return {h.key for h in srv.hits.hits if h.status == 200 and h.key in GOOD_KEYS}


def skipped_lines(result: CrawlResult) -> list[str]:
    return re.findall(r"IRI: skipped a link of (\S+) .*", result.stderr)


def test_the_page_has_30_bad_links_and_the_site_serves_them() -> None:
    assert len(BAD_HREFS) >= 30
    body = BAD_SITE.render(BAD_SITE.get("home"))
    assert b"http://[::1" in body and b"a" * 100_000 in body and b"\x00" in body


def check_plugin_crawl(result: CrawlResult, srv: SiteServer) -> None:
    assert result.finish_reason == "finished", result.stderr[-3000:]
    assert good_fetched(srv) == GOOD_KEYS, sorted(GOOD_KEYS - good_fetched(srv))
    stats = result.stats
    lines = skipped_lines(result)
    assert stats["iri/links/skipped"] == len(lines) >= 20
    assert {page for page in lines} <= {
        "http://bad.test/", "http://bad.test/redirect-bad", "http://bad.test/refresh-bad",
    }
    # each skip is also an iri/unnormalizable, and each has its reason
    reasons = {k: v for k, v in stats.items() if k.startswith("iri/unnormalizable/")}
    assert sum(reasons.values()) == stats["iri/unnormalizable"]
    assert stats["iri/unnormalizable/host"] and stats["iri/unnormalizable/port"]
    # the first of each reason is a WARNING naming the page, the rest DEBUG
    warnings = re.findall(r"\[iri_scrapy\.plugin\.links\] WARNING: IRI: skipped", result.stderr)
    assert 1 <= len(warnings) <= len(reasons)
    assert "ValueError" not in result.stderr, result.stderr[-3000:]
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("spider", [None, f"{MODULE}.FollowAllSpider"],
                         ids=["follow", "follow_all"])
@pytest.mark.slow
def test_follow_skips_bad_links_and_keeps_the_good_ones(
    server: SiteServer, spider: str | None
) -> None:
    result = crawl(server, ADDON, spider)
    check_plugin_crawl(result, server)
    # the redirect and the meta refresh to an unusable URL were not followed
    assert "http://bad.test/redirect-bad" in skipped_lines(result)
    assert "http://bad.test/refresh-bad" in skipped_lines(result)


@pytest.mark.slow
def test_iricrawlspider_skips_bad_links_and_fetches_as_much_as_stock(server: SiteServer) -> None:
    result = crawl(server, ADDON, f"{MODULE}.RulesSpider")
    check_plugin_crawl(result, server)
    ours = good_fetched(server)
    stock = crawl(server, {"LOG_LEVEL": "DEBUG"}, f"{MODULE}.StockRulesSpider")
    assert stock.finish_reason == "finished"
    assert good_fetched(server) <= ours


def test_stock_follow_loses_the_page_links_after_a_bad_one(server: SiteServer) -> None:
    """What the plugin fixes: stock ``response.follow`` raises on the first bad href."""
    result = crawl(server, {})
    assert GOOD_KEYS - good_fetched(server)
    assert "ValueError" in result.stderr


def test_extract_links_keeps_every_good_link_offline() -> None:
    response = HtmlResponse("http://bad.test/", body=BAD_SITE.render(BAD_SITE.get("home")),
                            encoding="utf-8")
    urls = {link.url.split("#")[0] for link in IRILinkExtractor().extract_links(response)}
    for path in [*GOOD[:12], GOOD[13], "/redirect-bad", "/refresh-bad"]:  # /g/12: refresh page
        assert f"http://bad.test{path}" in urls
    assert "http://example.test:99999/" not in urls


def test_follow_raises_the_callers_own_errors() -> None:
    """Only a URL no request can be made for is skipped; a bad argument still raises."""
    from iri_scrapy.plugin.middleware import iri_response_class

    cls = iri_response_class(HtmlResponse)
    response = cls("http://bad.test/", body=b"<p>x</p>", encoding="utf-8")
    with pytest.raises(ValueError, match="<p>"):
        response.follow(response.css("p")[0])  # Scrapy: only <a> and <link> selectors
    with pytest.raises(ValueError):
        response.follow(None)  # type: ignore[arg-type]
    skipped = response.follow("http://[::1")
    assert skipped.meta["iri_skipped_link"]["reason"] == "host"
    assert list(response.follow_all(["/g/1", "http://h.test:99999/", "/g/2"])) != []
    assert [r.url for r in response.follow_all(["/g/1", "http://h.test:99999/", "/g/2"])] == [
        "http://bad.test/g/1", "http://bad.test/g/2"]
