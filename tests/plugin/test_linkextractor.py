"""IRILinkExtractor: CrawlSpider links resolved by the IRI core (no IDNA 2003)."""

from __future__ import annotations

from typing import Any

import pytest
from scrapy.http import HtmlResponse
from scrapy.linkextractors import LinkExtractor

from iri_scrapy import IRILinkExtractor
from tests.support.crawl import run_crawl
from tests.support.server import SiteServer, serve_site
from tests.support.site import DEMO_SITE

BODY = """<html><body>
<a href="http://straße.example/karte">map</a>
<a href="/list?a=1&amp;b=2">1</a><a href="/list?b=2&amp;a=1">2</a>
<a href="HTTP://WWW.Example.TEST:80/a/./b">dots</a><a href="/a/b">same</a>
<a href="/a/b#x">fragment</a>
<a href="/caf%C3%A9">café</a><a href="/café">café again</a>
<a href="http://пример.испытание/статья">ru</a>
</body></html>""".encode()


def response() -> HtmlResponse:
    return HtmlResponse("http://www.example.test/dir/page", body=BODY, encoding="utf-8")


def test_links_are_fetch_form_iris_resolved_per_rfc3986() -> None:
    urls = [link.url for link in IRILinkExtractor().extract_links(response())]
    assert urls == [
        "http://xn--strae-oqa.example/karte",  # IDNA 2008, not strasse.example
        "http://www.example.test/list?a=1&b=2",
        "http://www.example.test/list?b=2&a=1",  # another resource: kept
        "http://www.example.test/a/b",  # two spellings, one link
        "http://www.example.test/a/b#x",  # fragments kept, as Scrapy does
        "http://www.example.test/caf%C3%A9",
        "http://xn--e1afmkfd.xn--80akhbyknj4f/%D1%81%D1%82%D0%B0%D1%82%D1%8C%D1%8F",
    ]
    stock = [link.url for link in LinkExtractor().extract_links(response())]
    assert "http://strasse.example/karte" in stock  # the trap this class removes


def test_idn_and_uppercase_allow_domains() -> None:
    le = IRILinkExtractor(allow_domains=["STRASSE.example", "Straße.example", "ПРИМЕР.испытание"])
    assert [link.url for link in le.extract_links(response())] == [
        "http://xn--strae-oqa.example/karte",
        "http://xn--e1afmkfd.xn--80akhbyknj4f/%D1%81%D1%82%D0%B0%D1%82%D1%8C%D1%8F",
    ]
    assert LinkExtractor(allow_domains=["Straße.example"]).extract_links(response()) == []
    denied = IRILinkExtractor(deny_domains=["WWW.EXAMPLE.test"]).extract_links(response())
    assert all("www.example.test" not in link.url for link in denied) and denied


def test_canonicalize_gives_retrieval_keys_without_sorting() -> None:
    urls = [link.url for link in IRILinkExtractor(canonicalize=True).extract_links(response())]
    assert "http://www.example.test/list?b=2&a=1" in urls
    assert "http://www.example.test/a/b#x" not in urls  # fragment dropped (RFC 3987 5.1)


def test_process_value_and_unnormalizable_hrefs_are_kept() -> None:
    body = b'<a href="javascript:go(\'/a/b\')">js</a><a href="http://a\xe2\x80\x8db.com/">zwj</a>'
    resp = HtmlResponse("http://www.example.test/", body=body, encoding="utf-8")

    def value(v: str) -> str | None:
        return "/a/./b" if v.startswith("javascript:") else v

    urls = [link.url for link in IRILinkExtractor(process_value=value).extract_links(resp)]
    assert urls[0] == "http://www.example.test/a/b"
    # a host that fails UTS 46 (ZWJ): extracted the stock way, never dropped
    assert len(urls) == 2


@pytest.fixture(scope="module")
def demo() -> Any:
    with serve_site(DEMO_SITE) as srv:
        yield srv


ADDON = {"ADDONS": {"iri_scrapy.Addon": 0}}
LINK_REQUEST = "iri_scrapy.plugin.linkextractor.link_request"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("extractor", "factory", "settings"),
    [
        pytest.param("iri_scrapy.IRILinkExtractor", LINK_REQUEST, ADDON, id="iri"),
        pytest.param("scrapy.linkextractors.LinkExtractor", None, ADDON, id="stock-extractor"),
    ],
)
def test_crawlspider_style_crawl(
    demo: SiteServer, extractor: str, factory: str | None, settings: dict[str, Any]
) -> None:
    """Links from a LinkExtractor, requests built as IRICrawlSpider builds them."""
    demo.reset()
    result = run_crawl(settings, list(DEMO_SITE.start_urls), demo.proxy_url, timeout=60,
                       env={"IRI_SCRAPY_DEPRECATIONS_AS_ERRORS": "1"},
                       spider_kwargs={"link_extractor": extractor, "request_factory": factory})
    assert result.finish_reason == "finished", result.stderr[-2000:]
    counts = demo.hits.counts()
    fetched = {k for k in counts if k in DEMO_SITE.keys}
    if extractor.startswith("iri_scrapy"):
        assert fetched == DEMO_SITE.keys  # nothing lost
        assert {k: n for k, n in counts.items() if n != 1} == {}  # nothing twice
    else:
        # stock LinkExtractor: straße.example became strasse.example before the plugin saw it
        assert DEMO_SITE.trap_keys("idna2008") - fetched


def test_link_request_keeps_an_empty_query() -> None:
    from iri_scrapy.plugin.linkextractor import link_request

    request = link_request("http://www.example.test/search?")
    assert request.url == "http://www.example.test/search?"
    assert request.meta["verbatim_url"] and request.meta["iri_original"] == request.url
    plain = link_request("http://www.example.test/search")
    assert "verbatim_url" not in plain.meta


def test_iricrawlspider_builds_rule_requests_with_link_request() -> None:
    from scrapy.spiders import Rule
    from scrapy.utils.test import get_crawler
    from twisted.internet.defer import Deferred

    from iri_scrapy import IRICrawlSpider

    class Spider(IRICrawlSpider):
        name = "t"
        rules = (Rule(IRILinkExtractor()),)

    spider = Spider.from_crawler(get_crawler(Spider))
    response = HtmlResponse("http://www.example.test/", body=b'<a href="/search?">s</a>',
                            encoding="utf-8")
    requests: list[Any] = []

    async def follow() -> None:  # what CrawlSpider does with a response its rules follow
        async for request in spider.parse_with_rules(response, None, {}, follow=True):
            requests.append(request)

    failures: list[Any] = []
    Deferred.fromCoroutine(follow()).addErrback(failures.append)  # runs to the end now
    assert failures == []
    (request,) = requests
    assert request.url == "http://www.example.test/search?"
    assert request.meta["rule"] == 0 and request.meta["verbatim_url"]
