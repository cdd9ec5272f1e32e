"""Spiders for tests/plugin/test_compose.py (run by :mod:`tests.support.multi_crawl`).

:class:`ProbeSpider` follows every link once it has asked the crawler's request
fingerprinter about a few pairs of requests (while the engine runs, as
scrapy-poet's fingerprinter needs); :class:`UrlSpider` records the URLs that
``Request()`` and w3lib's ``<base href>``/meta refresh parsers give in its
process, and fetches its start URLs.  Both keep what they saw in ``self.record``.
Like the rest of :mod:`tests.support`, nothing here imports the IRI core.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

from scrapy import Request, Spider
from scrapy.http import Response
from scrapy.utils.request import RequestFingerprinter

__all__ = ["ProbeSpider", "UrlSpider", "FALSE_MERGE", "ALIASES"]

#: Stock canonicalization merges these (an empty query parameter dropped); RFC 3987 does not.
FALSE_MERGE = ("http://shop.test/item?id=1", "http://shop.test/item?id=1&")
#: The same resource at level SCHEME (case, default port, dot segment, %7e).
ALIASES = ("HTTP://Shop.TEST:80/a/./b/%7euser", "http://shop.test/a/b/~user")


class ProbeSpider(Spider):
    name = "probe"
    start_urls = ["http://shop.test/"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.record: dict[str, Any] = {}

    def _probe(self) -> None:
        fp = self.crawler.request_fingerprinter.fingerprint
        stock = RequestFingerprinter().fingerprint
        plain = {"zyte_api_automap": False}

        def same(f: Any, a: str, b: str, ma: Any = None, mb: Any = None) -> bool:
            return bool(f(Request(a, meta=dict(ma or plain))) == f(Request(b, meta=dict(mb or plain))))

        self.record.update(
            fingerprinter=type(self.crawler.request_fingerprinter).__name__,
            false_merge_same=same(fp, *FALSE_MERGE),
            aliases_same=same(fp, *ALIASES),
            stock_false_merge_same=same(stock, *FALSE_MERGE),
            stock_aliases_same=same(stock, *ALIASES),
        )
        if "zyte" in self.record["fingerprinter"].lower():
            url = "http://shop.test/item?id=1"
            self.record["zyte_params_same"] = same(
                fp, url, url, {"zyte_api": {"browserHtml": True}},
                {"zyte_api": {"httpResponseBody": True}})
            self.record["zyte_vs_plain_same"] = same(
                fp, url, url, {"zyte_api": {"browserHtml": True}}, plain)
            # what the dupefilter keys on (the chain with our key folded in)
            from iri_scrapy import IRIDupeFilter

            keyed = IRIDupeFilter.from_crawler(self.crawler).fingerprint
            body = {"zyte_api": {"httpResponseBody": True}}
            self.record.update(
                zyte_chain_false_merge_same=same(fp, *FALSE_MERGE, body, body),
                zyte_keyed_false_merge_same=same(keyed, *FALSE_MERGE, body, body),
                zyte_keyed_params_same=same(
                    keyed, url, url, {"zyte_api": {"browserHtml": True}}, body),
                zyte_keyed_plain_is_chain=keyed(Request(url, meta=dict(plain)))
                == fp(Request(url, meta=dict(plain))),
            )

    def parse(self, response: Response) -> Iterator[Request]:
        if not self.record:
            self._probe()
        self.record.setdefault("fetched", []).append(response.url)
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href, meta={"zyte_api_automap": False})


class UrlSpider(Spider):
    """Records ``Request(url).url`` and w3lib's parsers for *urls*; fetches *fetch*."""

    name = "urls"

    def __init__(self, urls: list[str] = (), fetch: list[str] = (),  # type: ignore[assignment]
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.urls = list(urls)
        self.fetch = list(fetch)
        self.record: dict[str, Any] = {}

    def _parsers(self, key: str) -> None:
        from w3lib.html import get_base_url, get_meta_refresh

        self.record[key] = {
            "request": [Request(u).url for u in self.urls],
            "base_href": [get_base_url(f'<base href="{u}">', "http://plain.test/") for u in self.urls],
            "meta_refresh": [
                get_meta_refresh(f'<meta http-equiv="refresh" content="0; url={u}">',
                                 "http://plain.test/")[1] for u in self.urls],
        }

    async def start(self) -> AsyncIterator[Request]:
        self._parsers("at_start")
        for url in self.fetch:
            yield Request(url, dont_filter=True)

    def parse(self, response: Response) -> None:
        self.record.setdefault("fetched", []).append(response.url)
        self._parsers("in_callback")
