"""The ``demo`` spider: follow every link of the demo web, one item per HTML page."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import scrapy
from scrapy.http import Response, TextResponse

from iri_scrapy import IRIError, normalize

from ..items import PageItem


class DemoSpider(scrapy.Spider):
    """Start at the demo web's home page and follow every ``<a href>``.

    Nothing here is specific to the plugin: the same spider runs with stock
    Scrapy (``-s ADDONS={}``).  Each item carries the page's canonical URI
    (``url``) and the readable IRI of the same address (``iri``).
    """

    name = "demo"
    start_urls = ["http://www.example.test/"]

    def parse(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        """Yield the page's item, then follow its links."""
        if not isinstance(response, TextResponse):
            return
        yield self.page_item(response)
        yield from response.follow_all(css="a", callback=self.parse)

    @staticmethod
    def page_item(response: TextResponse) -> PageItem:
        """The item for *response*: canonical URI, readable IRI, title, language."""
        try:
            url = normalize(response.url)
            iri = normalize(response.url, form="iri")
        except IRIError:  # no canonical form: keep what Scrapy fetched
            url = iri = response.url
        item = PageItem(
            url=url,
            iri=iri,
            title=response.css("title::text").get(),
            lang=response.xpath("/html/@lang").get(),
        )
        original = response.meta.get("iri_original")
        if original is not None:
            item["original"] = original
        return item
