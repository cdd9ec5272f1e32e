"""``FrontierScheduler``: one crash-tolerant scheduler over a queue back-end.

A request's durable record (a pending row in the ``JOBDIR`` SQLite store, a leased
entry in Redis) goes only once the request is *answered* (:mod:`.ledger`), so a
kill at any moment loses no scheduled page.  What both frontiers do is written
once here: a replacement (redirect, retry) answers the request it replaces; the
dupefilter decides; a request that cannot be stored as data (:mod:`.codec`) is
kept in memory, the others pushed to the back-end; the in-flight cap and its
lifting; the answers; the signals; every loud stop through
:func:`~iri_scrapy.plugin.refusal.stop_crawl` (exit status 1).  What differs is a
:class:`QueueBackend`: :class:`~.sqlite_backend.SqliteBackend` (selected by
:class:`~iri_scrapy.frontier.jobdir.IRIFrontierScheduler`) and
:class:`~.redis_backend.RedisBackend` (by :class:`~iri_scrapy.RedisIRIScheduler`).
Without a back-end (no ``JOBDIR``, ``IRI_FRONTIER = False``...) it is Scrapy's
:class:`~scrapy.core.scheduler.Scheduler` unchanged.  Design: docs/jobdir.md,
docs/redis-fleet.md.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any, Protocol

from scrapy import signals
from scrapy.core.scheduler import Scheduler

from iri_scrapy.frontier.codec import RequestCodec, frontier_secret
from iri_scrapy.frontier.errors import FrontierError
from iri_scrapy.frontier.ledger import Ledger
from iri_scrapy.plugin import compat  # noqa: F401 - checks the installed Scrapy first
from iri_scrapy.plugin.context import CrawlContext
from iri_scrapy.plugin.entry import enter
from iri_scrapy.plugin.middleware import Canonicalizer
from iri_scrapy.plugin.refusal import stop_crawl

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.http import Response


class QueueBackend(Protocol):
    """What a queue back-end gives :class:`FrontierScheduler` (its records, its start)."""

    #: The component's name in log lines and stops (``IRIFrontierScheduler``).
    name: str
    #: The request meta key of the ledger's key (a row id, a lease).
    meta_key: str
    #: ``scheduler/enqueued/<kind>``, ``scheduler/dequeued/<kind>`` (``disk``, ``redis``).
    kind: str
    #: Stats prefix of its counters (``iri/frontier/``, ``iri/redis_scheduler/``).
    prefix: str
    #: Where the records go, and what becomes of one that cannot be stored (for
    #: :meth:`~.codec.RequestCodec.record_or_none`'s one line).
    store_label: str
    kept_label: str
    #: The record is written before the dupefilter records the URL (an *intent*).
    intents: bool
    #: The in-flight cap counts only the requests still downloading.
    cap_downloading: bool
    #: After a refused start, Scrapy's own scheduler carries on (it was opened).
    stock_after_refusal: bool
    #: The start was not refused (set by :meth:`open`).
    opened: bool
    log: logging.Logger

    @property
    def usable(self) -> bool: ...
    def open(self, spider: Spider) -> Any: ...
    def open_protocol(self, learned: Any) -> tuple[Any, list[Request]] | None: ...
    def start(self) -> None: ...
    def stop(self) -> None: ...
    def close(self, reason: str, protocol: Any) -> None: ...
    def admits(self, request: Request) -> bool: ...
    def intent(self, request: Request, data: bytes | None) -> str: ...
    def push(self, request: Request, data: bytes, intent: str) -> None: ...
    def keep(self, request: Request) -> None: ...
    def held(self) -> Request | None: ...
    def pop(self) -> tuple[Request, Any, str] | None: ...
    def settle(self, keys: list[Any]) -> None: ...
    def touch(self) -> None: ...
    def idle(self, held: list[Any]) -> None: ...
    def has_pending(self) -> bool: ...
    def __len__(self) -> int: ...
    def inc(self, name: str, count: int = 1) -> None: ...


class FrontierScheduler(Scheduler):
    """Scrapy's scheduler over a :class:`QueueBackend` (module doc); Scrapy's own
    :class:`~scrapy.core.scheduler.Scheduler` while :attr:`backend` is None."""

    def __init__(self, *args: Any, max_inflight: int = 0, stall_seconds: float = 360.0,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: Set by the entry point (:mod:`.jobdir`, :mod:`.redis_scheduler`) after this.
        self.backend: QueueBackend | None = None
        #: The requests handed out and not answered, by key (see :mod:`.ledger`).
        self.ledger: Ledger[Any] = Ledger(self._settle, on_reaped=self._reaped)
        self.max_inflight = max_inflight
        self.stall_seconds = stall_seconds
        self.codec: RequestCodec | None = None
        #: At level protocol: the learned rules' store (:mod:`iri_scrapy.protocol.jobdir_store`,
        #: :mod:`iri_scrapy.protocol.redis_store`), once open.
        self.protocol: Any = None
        self._listening = False

    # --- life cycle ------------------------------------------------------------

    def open_stock(self, spider: Spider) -> Any:
        """Scrapy's own ``open`` (the dupefilter, the in-memory queues)."""
        return super().open(spider)

    def open(self, spider: Spider) -> Any:
        backend = self.backend
        if backend is None:
            return super().open(spider)
        self.spider = spider
        crawler = self.crawler
        self.codec = RequestCodec(spider, frontier_secret(
            crawler.settings if crawler is not None else None))
        result = backend.open(spider)
        if not backend.opened:  # refused: said, the crawl closes before any request
            if backend.stock_after_refusal:
                self.backend = None
            return result
        learned = getattr(self.df, "learned", None)
        if learned is not None:  # level protocol: learned rules, what they skipped
            opened = backend.open_protocol(learned)
            if opened is None:
                return None
            self.protocol, again = opened
            for request in again:
                self.enqueue_request(request)
        if crawler is not None:
            CrawlContext.of(crawler).register_frontier(self)
            crawler.signals.connect(self._on_response, signal=signals.response_received)
            crawler.signals.connect(self._on_idle, signal=signals.spider_idle)
            self._listening = True
        backend.start()
        return result

    def close(self, reason: str) -> Any:
        backend = self.backend
        if backend is None:
            return super().close(reason)
        backend.stop()
        crawler = self.crawler
        if crawler is not None and self._listening:
            self._listening = False
            crawler.signals.disconnect(self._on_response, signal=signals.response_received)
            crawler.signals.disconnect(self._on_idle, signal=signals.spider_idle)
            CrawlContext.of(crawler).unregister_frontier(self)
        protocol, self.protocol = self.protocol, None
        backend.close(reason, protocol)
        self.ledger.forget()
        return self.df.close(reason)

    def stop(self, reason: str) -> None:
        """Close the crawl with *reason*: loud, exit status 1 (the line is said)."""
        stop_crawl(self.crawler, reason, self.backend.name if self.backend else "scheduler")

    # --- the queue ---------------------------------------------------------------

    def enqueue_request(self, request: Request) -> bool:
        request = enter(request, Canonicalizer.for_crawler(self.crawler))
        backend = self.backend
        if backend is None:
            return super().enqueue_request(request)
        parent = request.meta.get(backend.meta_key)
        replacing = self.ledger.downloading(parent)
        if not backend.usable:
            backend.keep(request)
            return True
        try:
            added = self._enqueue(backend, request)
        except FrontierError:  # gave up after retries (said; the spider closes)
            backend.keep(request)
            return True
        if replacing:  # a downloader middleware's replacement (redirect, retry...)
            self.ledger.answered(parent)
            backend.inc("replaced")
        backend.touch()
        return added

    def _enqueue(self, backend: QueueBackend, request: Request) -> bool:
        """The dupefilter decides; the record is pushed, or the request kept in memory."""
        if not backend.admits(request):
            return False
        data = self._serialize(backend, request) if backend.intents else None
        intent = ""
        if not request.dont_filter:
            intent = backend.intent(request, data)
            marks = len(request.meta)
            if self.df.request_seen(request):
                self.df.log(request, self.spider)
                return False
            if data is not None and len(request.meta) != marks:
                # the filter marked it (its key, a rule's sample): queued with the marks
                data = self._serialize(backend, request)
        if not backend.intents:
            data = self._serialize(backend, request)
        stats = self.stats
        if data is None:
            backend.keep(request)
            kind = "memory"
        else:
            backend.push(request, data, intent)
            kind = backend.kind
        if stats is not None:
            stats.inc_value(f"scheduler/enqueued/{kind}")
            stats.inc_value("scheduler/enqueued")
        return True

    def next_request(self) -> Request | None:
        backend = self.backend
        if backend is None:
            return super().next_request()
        ledger = self.ledger
        ledger.reap()
        request = backend.held()
        if request is not None or not backend.usable:
            return request
        if ledger.at_cap(self.max_inflight, downloading=backend.cap_downloading):
            if not ledger.stalled(self.stall_seconds):
                return None  # has_pending_requests() stays True: asked again later
            backend.log.warning(
                "%(n)d requests handed out have not been answered for %(s).0f s (does "
                "the spider keep references to its requests?): lifting the in-flight "
                "cap for the rest of this run; after a kill, up to every request "
                "handed out since may be fetched again",
                {"n": len(ledger), "s": self.stall_seconds},
                extra={"spider": self.spider},
            )
            backend.inc("cap_lifted")
            self.max_inflight = 0
        popped = backend.pop()
        if popped is None:
            return None
        request, key, kind = popped
        if key is not None:
            request.meta[backend.meta_key] = key
            ledger.hand_out(key, request)
        if self.stats is not None:
            self.stats.inc_value(f"scheduler/dequeued/{kind}")
            self.stats.inc_value("scheduler/dequeued")
        return request

    def has_pending_requests(self) -> bool:
        backend = self.backend
        return super().has_pending_requests() if backend is None else backend.has_pending()

    def __len__(self) -> int:
        backend = self.backend
        return super().__len__() if backend is None else len(backend)

    def _serialize(self, backend: QueueBackend, request: Request) -> bytes | None:
        codec = self.codec
        assert codec is not None
        return codec.record_or_none(
            request, drop_meta=(backend.meta_key,), log=backend.log,
            count=lambda: backend.inc("unserializable"), store=backend.store_label,
            stat=f"{backend.prefix}unserializable", kept=backend.kept_label)

    # --- answers -------------------------------------------------------------------

    @property
    def feeds(self) -> Any:
        """The feed files the back-end stages with its commits (:mod:`.feeds`: the
        SQLite back-end), which the frontier spider middleware marks; else None."""
        return getattr(self.backend, "feeds", None)

    def answered(self, request: Request) -> None:
        """*request* was answered (the middlewares): its record goes (:mod:`.ledger`)."""
        if self.backend is not None:
            self.ledger.answered(request.meta.get(self.backend.meta_key))

    def failed(self, request: Request) -> None:
        """The download of *request* failed for good (no downloader middleware handled it)."""
        if self.backend is not None:
            self.ledger.failed(request.meta.get(self.backend.meta_key),
                               errback=request.errback is not None)

    def _settle(self, keys: list[Hashable]) -> None:
        if self.backend is not None:
            self.backend.settle(keys)

    def _reaped(self, key: Hashable) -> None:
        if self.backend is not None:
            self.backend.inc("answered_on_release")

    def _on_response(self, response: Response, request: Request, **_: Any) -> None:
        if self.backend is not None:
            self.ledger.responded(request.meta.get(self.backend.meta_key))

    def _on_idle(self, **_: Any) -> None:
        """Nothing in the downloader or the scraper: every request out was answered;
        the back-end says whether the crawl may close (``DontCloseSpider``,
        ``CloseSpider`` with a loud reason)."""
        held = self.ledger.drain()
        if self.backend is not None:
            self.backend.idle(held)
