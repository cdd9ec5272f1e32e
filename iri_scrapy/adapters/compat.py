"""Every use of a Scrapy API that is not public, in one place, each checked at import.

The rest of the package uses only the public APIs of Scrapy, w3lib, Twisted,
scrapy-redis and idna (``tests/test_compat.py`` enforces it).  Where Scrapy
offers no public seam for something the plugin must do, the seam is here, and
this module checks at import time that the installed Scrapy still has it in the
expected shape: if not, importing ``iri_scrapy``'s Scrapy adapters fails at once
with an :class:`ImportError` naming the seam, the installed Scrapy version and
the supported range, instead of misbehaving in the middle of a crawl.

Seams:

``CrawlSpider._build_request(rule_index, link)``
    ``CrawlSpider`` builds each rule request with ``Request(url=link.url, ...)``,
    and ``Request()`` passes the URL through ``w3lib.url.safe_url_string``, which
    drops a bare ``?`` (another resource for RFC 3987 section 5.3.3).  No
    public hook sees the :class:`~scrapy.link.Link` and the request together
    (``Rule(process_request=...)`` gets the request only, its URL already
    altered), so :class:`LinkRequestCrawlSpider` overrides this method and
    hands both to its public hook :meth:`~LinkRequestCrawlSpider.rule_request`.

It also checks the public features the plugin cannot work without, which
set the floor of the supported range:

``meta["verbatim_url"]`` (Scrapy 2.17+)
    ``Request()`` keeps such a URL as given.  Without it a canonical URI that
    ``safe_url_string`` would alter (a bare ``?``) cannot be requested as is.
    (Scrapy 2.14+ also calls downloader middlewares without a ``spider``
    argument, as the plugin's are written, and has
    ``ExecutionEngine.close_spider_async``, which the Redis filter uses.)

Every adapter module that meets Scrapy imports this one first, so these checks run
as soon as any part of the plugin is loaded (the core and the CLI import no Scrapy).
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

import scrapy
from scrapy import Request
from scrapy.spiders import CrawlSpider

if TYPE_CHECKING:
    from scrapy.link import Link

__all__ = ["SUPPORTED_SCRAPY", "LinkRequestCrawlSpider", "unsupported"]

#: The Scrapy releases supported: CI runs the tests on 2.17.0 and on the newest release.
SUPPORTED_SCRAPY = "Scrapy 2.17 or later (tested on 2.17.0 and the newest)"


def unsupported(what: str) -> ImportError:
    """The error for a seam the installed Scrapy lacks (or has in another shape)."""
    return ImportError(
        f"iri_scrapy needs {what}, which Scrapy {scrapy.__version__} does not have; "
        f"supported: {SUPPORTED_SCRAPY}"
    )


def _parameters(func: Any) -> list[str] | None:
    try:
        return list(inspect.signature(func).parameters)
    except (TypeError, ValueError):
        return None


# --------------------------------------------------------- meta["verbatim_url"]

VERBATIM_URL = 'the request meta key "verbatim_url" (Request() keeping the URL as given)'
if Request("http://example.test/?", meta={"verbatim_url": True}).url != "http://example.test/?":
    raise unsupported(VERBATIM_URL)


# --------------------------------------------------- CrawlSpider._build_request

BUILD_REQUEST = "scrapy.spiders.CrawlSpider._build_request(rule_index, link)"
if _parameters(getattr(CrawlSpider, "_build_request", None)) != ["self", "rule_index", "link"]:
    raise unsupported(BUILD_REQUEST)


class LinkRequestCrawlSpider(CrawlSpider):
    """``CrawlSpider`` with a hook on each rule request and the link it was built for."""

    def rule_request(self, request: Request, link: Link) -> Request:
        """The request to send for *link* (*request* is the one ``CrawlSpider`` built).

        Override to adjust it; ``Rule(process_request=...)`` still runs afterwards.
        """
        return request

    def _build_request(self, rule_index: int, link: Link) -> Request:
        return self.rule_request(super()._build_request(rule_index, link), link)
