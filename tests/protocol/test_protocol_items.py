"""What the user keeps at level protocol: one item per page where a rule is learned.

A site whose every link carries a session id the server ignores (three values
per page, as ``benchmarks/bench_sid.py`` does to python3-doc) teaches
``drop-param:sid`` from content: two spellings of one page fetched, their
content the same.  Each fetch that nominates or confirms the rule is the second
spelling of a page the spider already had: it is dropped before the spider
(``iri/protocol/duplicate_dropped``), so every page gives one item, not two.
Real crawl: Scrapy's own ``CrawlSpider`` against a local static site, the feed
file read back.
"""

from __future__ import annotations

import collections
import hashlib
import json
import re
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.support.crawl import run_crawl
from tests.support.dirsite import DirServer

HOST = "docs.example"
SIDS = ("a81f3c", "b2277e", "c90d14")
SPIDER = "tests.support.wire_spiders.StockWireCrawlSpider"
_HREF = re.compile(rb'href="([^"#:]*)"')
WORDS = ("river", "stone", "lantern", "orchard", "meadow", "harbor", "violet", "copper",
         "falcon", "willow", "ember", "quartz", "thistle", "maple", "cobalt", "juniper")


def _with_sids(path: str, body: bytes) -> bytes:
    sid = SIDS[hashlib.blake2b(path.encode(), digest_size=2).digest()[0] % len(SIDS)].encode()
    return _HREF.sub(lambda m: b'href="' + m.group(1) + b"?sid=" + sid + b'"', body)


def _site(root: Path, pages: int) -> None:
    for n in range(pages):
        links = "".join(f'<li><a href="p{(n * 7 + k) % pages}.html">page {(n * 7 + k) % pages}'
                        "</a></li>" for k in (1, 2, 3, 5))
        text = " ".join(WORDS[(n + i) % len(WORDS)] for i in range(12))
        name = "index.html" if n == 0 else f"p{n}.html"
        (root / name).write_text(
            f"<!DOCTYPE html><html><head><title>Page {n}</title></head><body>"
            f"<h1>Page {n}</h1><p>{text} number {n}.</p><ul>{links}</ul></body></html>",
            encoding="utf-8")
    (root / "p0.html").write_text((root / "index.html").read_text(encoding="utf-8"),
                                  encoding="utf-8")


@pytest.mark.slow
def test_the_fetches_that_teach_a_rule_give_no_second_item(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    _site(site, 40)
    feed = tmp_path / "items.jsonl"
    settings = {"ADDONS": {"iri_scrapy.Addon": 0}, "IRI_LEVEL": "protocol",
                "FEEDS": {str(feed): {"format": "jsonlines"}}}
    with DirServer(site, host=HOST, rewrite=_with_sids) as server:
        result = run_crawl(settings, [server.start_url], server.proxy_url, spider=SPIDER,
                           spider_kwargs={"allowed_domains": [HOST]})
        served = {h.key.path for h in server.hits.hits
                  if h.key is not None and 200 <= h.status < 300}
    assert result.finish_reason == "finished", result.stderr[-2000:]
    items = [json.loads(line) for line in feed.read_text(encoding="utf-8").splitlines()]
    per_page = collections.Counter(urlsplit(item["url"]).path for item in items)
    assert set(per_page) == served  # every page served reached the feed
    assert {f"/p{n}.html" for n in range(1, 40)} <= served  # nothing missed
    assert set(per_page.values()) == {1}, per_page
    stats = result.stats
    assert stats.get("iri/protocol/content/learned", 0) >= 1
    assert stats.get("iri/protocol/duplicate_dropped", 0) >= 1


def _answer(mw: object, url: str, body: bytes) -> bool:
    """Whether the middleware hands the 200 response of *url* on to the spider."""
    from scrapy import Request
    from scrapy.exceptions import IgnoreRequest
    from scrapy.http import HtmlResponse

    request = Request(url)
    response = HtmlResponse(url, status=200, request=request, body=body)
    try:
        return mw.process_response(request, response) is response  # type: ignore[attr-defined]
    except IgnoreRequest:
        return False


def test_a_page_only_an_earlier_run_served_drops_no_alias() -> None:
    """A ``JOBDIR`` resumed after ``kill -9``: a page the killed run served (its
    content read back) may have had its items still buffered, and its request comes
    back.  An alias served now with its content goes on to the spider (dropping it
    would leave the resource with no item when the page's own request is then
    dropped as the alias's duplicate); the page, when it comes back, is dropped."""
    from scrapy import Spider
    from scrapy.utils.test import get_crawler

    from iri_scrapy.protocol.fingerprint import fingerprint
    from iri_scrapy.protocol.middleware import IRIProtocolMiddleware

    class _Spider(Spider):
        name = "items"

    page = b"<html><body><h1>Post 7</h1><p>The text of post seven.</p></body></html>"
    first, alias = "http://blog.test/p/7/?sid=a", "http://blog.test/p/7/?sid=b"

    def middleware() -> IRIProtocolMiddleware:
        crawler = get_crawler(_Spider, {"ADDONS": {"iri_scrapy.Addon": 0},
                                        "IRI_LEVEL": "protocol"})
        return IRIProtocolMiddleware.from_crawler(crawler)

    here = middleware()  # one process: the alias of a page it served is dropped
    assert _answer(here, first, page) and not _answer(here, alias, page)

    resumed = middleware()
    assert resumed.learned is not None
    resumed.learned.observe_content(first, fingerprint(page.decode()), replayed=True)
    assert _answer(resumed, alias, page)  # the killed run's page does not count
    assert not _answer(resumed, first, page)  # the alias was served here: the page is
