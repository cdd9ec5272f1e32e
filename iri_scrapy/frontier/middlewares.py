"""The two middlewares that tell the frontier scheduler a request was answered.

A pending request leaves the store only once it is *answered*: its callback's
output consumed and every item of it through the item pipelines
(:class:`FrontierSpiderMiddleware`, outermost, which also schedules each request
of that output itself, so that they are stored in the transaction that answers
their parent, and tells a staged feed which request each exported item belongs
to, see :mod:`.feeds`) or its download failed for good with no one to handle it
(:class:`FrontierDownloaderMiddleware`).  Both answer to
the scheduler of the crawl's context.  Design: docs/jobdir.md.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from scrapy import signals

from iri_scrapy.frontier.ledger import Answering
from iri_scrapy.plugin import compat  # noqa: F401 - checks the installed Scrapy first
from iri_scrapy.plugin.context import ADDON_LINE, CrawlContext
from iri_scrapy.plugin.refusal import (
    REASON_BAD_SETTING,
    refuse_start,
)

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from typing_extensions import Self

logger = logging.getLogger(__name__)


class _FrontierMiddleware:
    """Answers to the frontier scheduler of the crawl's context, which the add-on builds.

    Named by hand without the add-on it could not reach the scheduler (requests
    would stay unanswered): the start is refused, with one ERROR line.
    """

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.context = CrawlContext.of(crawler)
        if not self.context.shared:
            error = ValueError(f"{type(self).__name__} answers to the frontier scheduler "
                               f"through the add-on's crawl context: {ADDON_LINE}")
            refuse_start(crawler, REASON_BAD_SETTING, str(error), error)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    @property
    def frontier(self) -> Answering | None:
        frontier: Answering | None = self.context.frontier
        return frontier


class FrontierSpiderMiddleware(_FrontierMiddleware):
    """Outermost spider middleware: a request is answered once its callback's output is
    consumed and each item of it has left the item pipelines.

    Its ``process_spider_output`` wraps every other middleware's.  It schedules
    each request of the output itself (``crawler.engine.crawl``, what Scrapy's
    scraper would do) as soon as it comes out of the other middlewares, instead
    of passing it on: on an asyncio reactor the scraper pulls the output into a
    queue and schedules its requests on later turns of the loop, so when the
    output ends some of them would not be stored yet, and answering the parent
    then would lose them if the process died in between (the parent is not
    fetched again).  So when the output ends every request in it has been
    scheduled and stored, in the transaction that answers the parent.  Items go
    on to the scraper as usual, counted: the request is answered only when the
    last of them was scraped, dropped or failed (``item_scraped``,
    ``item_dropped``, ``item_error``), and a scraped item's feed bytes are then
    marked as its request's (:meth:`.feeds.FeedGate.mark`, after Scrapy's feed
    exporter wrote them).  An exception from the callback or a middleware also
    answers the request.
    """

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        #: id(request) -> [request, items in the pipelines, output ended]
        self._items: dict[int, list[Any]] = {}
        crawler.signals.connect(self._item_scraped, signal=signals.item_scraped)
        crawler.signals.connect(self._item_left, signal=signals.item_dropped)
        crawler.signals.connect(self._item_left, signal=signals.item_error)

    def _scheduled(self, item: Any, response: Response) -> bool:
        from scrapy import Request

        if self.frontier is None:
            return False
        if not isinstance(item, Request):
            request = getattr(response, "request", None)
            if item is not None and request is not None:  # the scraper pipes it
                entry = self._items.setdefault(id(request), [request, 0, False])
                entry[1] += 1
            return False
        engine = compat.running_engine(self.crawler)
        if engine is None:
            return False
        engine.crawl(item)
        return True

    def _done(self, response: Response) -> None:
        request = getattr(response, "request", None)
        entry = self._items.get(id(request)) if request is not None else None
        if entry is not None and entry[1] > 0:
            entry[2] = True  # answered when its last item leaves the pipelines
            return
        self._items.pop(id(request), None)
        frontier = self.frontier
        if frontier is not None and request is not None:
            frontier.answered(request)

    def _item_scraped(self, item: Any, response: Any = None, **_: Any) -> None:
        request = getattr(response, "request", None)
        feeds = getattr(self.frontier, "feeds", None)
        if feeds is not None:
            feeds.mark(feeds.key(request))
        self._item_left(item, response)

    def _item_left(self, item: Any, response: Any = None, **_: Any) -> None:
        request = getattr(response, "request", None)
        entry = self._items.get(id(request)) if request is not None else None
        if entry is None or entry[0] is not request:
            return
        entry[1] -= 1
        if entry[1] <= 0 and entry[2]:
            del self._items[id(request)]
            frontier = self.frontier
            if frontier is not None:
                frontier.answered(request)

    # ``spider`` is optional: Scrapy 2.13 passes it, later versions do not (and warn
    # only when it is required).

    def process_spider_output(
        self, response: Response, result: Iterable[Any], spider: Spider | None = None
    ) -> Iterator[Any]:
        try:
            for item in result:
                if not self._scheduled(item, response):
                    yield item
        except Exception:
            self._done(response)
            raise
        self._done(response)

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any], spider: Spider | None = None
    ) -> AsyncIterator[Any]:
        try:
            async for item in result:
                if not self._scheduled(item, response):
                    yield item
        except Exception:
            self._done(response)
            raise
        self._done(response)

    def process_spider_exception(
        self, response: Response, exception: Exception, spider: Spider | None = None
    ) -> None:
        self._done(response)


class FrontierDownloaderMiddleware(_FrontierMiddleware):
    """Outermost downloader middleware: sees the download failures no one handled."""

    def process_exception(
        self, request: Request, exception: Exception, spider: Spider | None = None
    ) -> None:
        frontier = self.frontier
        if frontier is not None:
            frontier.failed(request)
