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

It also holds one switch between public APIs that changed across the
supported range: :func:`close_spider` (``ExecutionEngine.close_spider_async``
from Scrapy 2.14, ``close_spider`` before).
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

import scrapy
from scrapy.core.engine import ExecutionEngine
from scrapy.spiders import CrawlSpider

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.link import Link
    from twisted.internet.defer import Deferred

__all__ = ["SUPPORTED_SCRAPY", "LinkRequestCrawlSpider", "close_spider"]

#: The Scrapy releases this module's seams were checked against (tests run on both ends).
SUPPORTED_SCRAPY = "Scrapy 2.13 to 2.19"


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


# ----------------------------------------------------- closing the spider

_CLOSE_ASYNC = hasattr(ExecutionEngine, "close_spider_async")
if not _CLOSE_ASYNC and not hasattr(ExecutionEngine, "close_spider"):
    raise unsupported("scrapy.core.engine.ExecutionEngine.close_spider_async(reason=...)")


def close_spider(crawler: Crawler, reason: str) -> Deferred[None]:
    """Close *crawler*'s spider with *reason*; a Deferred that fires when it is closed.

    Public API either way: ``engine.close_spider_async(reason=...)`` (Scrapy 2.14+;
    ``close_spider`` is deprecated there), else ``engine.close_spider(spider, reason)``.
    """
    engine = crawler.engine
    if engine is None:
        raise RuntimeError("the crawler has no engine")
    if _CLOSE_ASYNC:
        from scrapy.utils.defer import deferred_from_coro

        return deferred_from_coro(engine.close_spider_async(reason=reason))  # type: ignore[no-any-return]
    return engine.close_spider(crawler.spider, reason)  # type: ignore[arg-type]
