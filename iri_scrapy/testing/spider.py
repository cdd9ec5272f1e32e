"""A spider that follows every link of the alias web and yields one item per page."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import scrapy
from scrapy.http import Response, TextResponse

__all__ = ["AliasSpider"]


class AliasSpider(scrapy.Spider):
    """Start at *start_urls*, follow every ``<a href>``, yield ``{"url", "title", "status"}``.

    When the request's meta has ``iri_original`` (set by the plugin's middleware)
    the item carries it too.  *allowed_domains* is optional (default: none, so the
    offsite middleware lets everything through).
    """

    name = "alias"

    def __init__(
        self,
        start_urls: Iterable[str] = (),
        allowed_domains: Iterable[str] | None = None,
        *args: Any,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.start_urls = list(start_urls)
        if allowed_domains is not None:
            self.allowed_domains = list(allowed_domains)

    def parse(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        """Yield the page item, then a request for every link."""
        title = None
        if isinstance(response, TextResponse):
            title = response.css("title::text").get()
        item: dict[str, Any] = {"url": response.url, "title": title, "status": response.status}
        original = response.meta.get("iri_original")
        if original is not None:
            item["iri_original"] = original
        yield item
        if isinstance(response, TextResponse):
            for href in response.css("a::attr(href)").getall():
                yield response.follow(href, callback=self.parse)
