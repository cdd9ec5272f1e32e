"""A spider that follows every link of the alias web and yields one item per page."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from importlib import import_module
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
        link_extractor: str | None = None,
        request_factory: str | None = None,
        join_first: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.start_urls = list(start_urls)
        if allowed_domains is not None:
            self.allowed_domains = list(allowed_domains)
        # Import paths (strings, so that this module imports no iri_scrapy core):
        # a LinkExtractor class whose links are followed, as in a CrawlSpider
        # rule, instead of response.follow; and the function that builds their
        # requests (default scrapy.Request).
        self.link_extractor: Any = load_object(link_extractor)() if link_extractor else None
        self.request_factory: Any = (
            load_object(request_factory) if request_factory else scrapy.Request
        )
        #: the common idiom ``response.follow(response.urljoin(href))`` instead of
        #: ``response.follow(href)``
        self.join_first = join_first

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
            if self.link_extractor is not None:
                for link in self.link_extractor.extract_links(response):
                    yield self.request_factory(link.url, callback=self.parse)
                return
            hrefs = response.css("a::attr(href)").getall()
            if self.join_first:
                for href in hrefs:
                    yield response.follow(response.urljoin(href), callback=self.parse)
                return
            for href in hrefs:
                yield response.follow(href, callback=self.parse)


def load_object(path: str) -> Any:
    """The object at import path *path* (``"pkg.module.Name"``)."""
    module, _, name = path.rpartition(".")
    return getattr(import_module(module), name)
