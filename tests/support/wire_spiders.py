"""Spiders for the wire crawls (tests/crawls/test_wire.py); imported in the crawl subprocess.

Each yields one item ``{"url", "status"}`` per page.
"""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import urljoin

import scrapy
from scrapy.exceptions import ScrapyDeprecationWarning
from scrapy.http import FormRequest, Response, TextResponse
from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule, SitemapSpider

from iri_scrapy import IRICrawlSpider, IRILinkExtractor


def _item(response: Response) -> dict[str, Any]:
    return {"url": response.url, "status": response.status}


def _join(base: str, href: str) -> str:
    """*href* against *base* as text (``urljoin`` would drop a bare ``?``)."""
    if "://" in href:
        return href
    if href.startswith("/"):
        return "/".join(base.split("/", 3)[:3]) + href
    return urljoin(base, href)


class IRIWireCrawlSpider(IRICrawlSpider):
    """``IRICrawlSpider`` + ``IRILinkExtractor``, every link followed."""

    name = "wire-iri-crawl"
    rules = (Rule(IRILinkExtractor(), callback="parse_item", follow=True),)

    def parse_start_url(self, response: Response, **kwargs: Any) -> Any:
        return [_item(response)]

    def parse_item(self, response: Response) -> Any:
        yield _item(response)


class StockWireCrawlSpider(CrawlSpider):
    """The same with Scrapy's own ``CrawlSpider`` and ``LinkExtractor``."""

    name = "wire-stock-crawl"
    rules = (Rule(LinkExtractor(), callback="parse_item", follow=True),)

    def parse_start_url(self, response: Response, **kwargs: Any) -> Any:
        return [_item(response)]

    def parse_item(self, response: Response) -> Any:
        yield _item(response)


class RequestSpider(scrapy.Spider):
    """``Request()`` everywhere: from ``start()`` and from callbacks, URLs joined as text.

    *start_iris* are requested from ``start()`` (``start_urls`` by Scrapy's
    default ``start()``); links are joined with ``urllib.parse.urljoin`` and
    requested with ``scrapy.Request``.  With *files*, items carry the links in
    ``file_urls`` (for ``FilesPipeline``) instead of following them.
    """

    name = "wire-request"

    def __init__(self, *args: Any, start_iris: list[str] | None = None, files: bool = False,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.start_iris = list(start_iris or [])
        self.files = files

    async def start(self) -> AsyncIterator[Any]:
        async for request in super().start():
            yield request
        for url in self.start_iris:
            yield scrapy.Request(url, callback=self.parse)

    def parse(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        item = _item(response)
        hrefs = response.css("a::attr(href)").getall() if isinstance(response, TextResponse) \
            else []
        urls = [_join(response.url, h) for h in hrefs]
        if self.files:
            item["file_urls"] = urls
            yield item
            return
        yield item
        for url in urls:
            yield scrapy.Request(url, callback=self.parse)


class WireSitemapSpider(SitemapSpider):
    """``SitemapSpider``: every ``<loc>`` of ``sitemap_urls`` fetched."""

    name = "wire-sitemap"

    def parse(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        yield _item(response)


class FormSpider(scrapy.Spider):
    """Follows every link with ``response.follow`` and submits every GET form."""

    name = "wire-form"

    def parse(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        yield _item(response)
        if not isinstance(response, TextResponse):
            return
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href, callback=self.parse)
        for index, _ in enumerate(response.css("form")):
            with warnings.catch_warnings():  # deprecated in Scrapy 2.19 (form2request)
                warnings.simplefilter("ignore", ScrapyDeprecationWarning)
                yield FormRequest.from_response(response, formnumber=index, callback=self.parse)
