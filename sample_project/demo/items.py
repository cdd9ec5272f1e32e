"""Items of the ``demo`` project."""

from __future__ import annotations

import scrapy


class PageItem(scrapy.Item):
    """One fetched HTML page of the demo web."""

    #: The canonical URI (ASCII: A-label host, %-encoded UTF-8), the page's identity.
    url = scrapy.Field()
    #: The same address, readable: Unicode host and path (RFC 3987 section 3.2).
    iri = scrapy.Field()
    #: ``<title>`` text.
    title = scrapy.Field()
    #: ``<html lang>``.
    lang = scrapy.Field()
    #: The spelling the linking page used, when the plugin rewrote it
    #: (``response.meta["iri_original"]``); absent otherwise, and always with stock Scrapy.
    original = scrapy.Field()
