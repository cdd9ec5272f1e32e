"""A crash-tolerant ``JOBDIR`` frontier: ``kill -9`` at any moment loses no scheduled request.

Scrapy writes its ``JOBDIR`` queue only on a clean close, so after a kill every
waiting request is seen but not pending and never fetched (scrapy#7978).
:class:`IRIFrontierScheduler` keeps the dupefilter's seen-set and the pending
requests in one SQLite database in WAL mode (``<JOBDIR>/iri_frontier.sqlite3``),
written in the same transactions, and deletes a pending row only once its request
is *answered* (:mod:`.middlewares`, or the request object released).  After any
crash the same command fetches every request not yet answered, and again at most
those in flight (``IRI_FRONTIER_MAX_INFLIGHT``).  It hands requests out in Scrapy's
own order (:mod:`.lanes`), reading the stored ones a batch at a time
(:mod:`.stored_queue`).  This module is the scheduler; the store is
:mod:`.sqlite_store` (opened by :mod:`.jobdir_start`, written by :mod:`.store_writer`),
the lock :mod:`.lock`, its settings :mod:`.options`, requests as data :mod:`.codec`,
a stock Scrapy ``JOBDIR`` read as data and taken over :mod:`.stock_jobdir`.

Design: docs/jobdir.md; what is stored and refused, faults, salvage: docs/frontier.md.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.core.scheduler import Scheduler
from scrapy.exceptions import CloseSpider, DontCloseSpider

from iri_scrapy.core.ladder import CANONICALIZATION_VERSION
from iri_scrapy.frontier.codec import (
    REASON_REFUSED_RECORDS,
    RefusalLog,
    RefusedRecord,
    RequestCodec,
    frontier_secret,
)
from iri_scrapy.frontier.feeds import FeedGate, staged_feeds
from iri_scrapy.frontier.jobdir_start import open_store
from iri_scrapy.frontier.lanes import (
    PER_SLOT,
    Lanes,
    lanes_mode,
)
from iri_scrapy.frontier.ledger import Ledger
from iri_scrapy.frontier.options import (
    DEFAULT_FSYNC_MS,
    DEFAULT_WRITE_RETRY,
    fsync_setting,
    max_inflight_setting,
)
from iri_scrapy.frontier.spider_state import SpiderStateKeeper
from iri_scrapy.frontier.sqlite_store import (
    DAMAGED,
    FrontierStore,
    unreadable_store,
)
from iri_scrapy.frontier.stock_jobdir import (
    QUEUE_DIRNAME,
    SEEN_FILENAME,
    StockAdoption,
    legacy_state,
)
from iri_scrapy.frontier.store_writer import REASON_FRONTIER_UNREADABLE, StoreWriter
from iri_scrapy.frontier.stored_queue import META_FRONTIER_ID, StoredQueue
from iri_scrapy.plugin import compat  # noqa: F401 - checks the installed Scrapy first
from iri_scrapy.plugin.config import load_object, setting
from iri_scrapy.plugin.context import CrawlContext
from iri_scrapy.plugin.dupefilter import IRIDupeFilter, jobdir_setting
from iri_scrapy.plugin.entry import enter
from iri_scrapy.plugin.middleware import Canonicalizer
from iri_scrapy.plugin.refusal import (
    refuse_start,
    stop_crawl,
)
from iri_scrapy.store.fpstore import FILENAME as FP_FILENAME
from iri_scrapy.store.fpstore import (
    fp64,
)
from iri_scrapy.store.frontier_file import (
    FILENAME,
)

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.dupefilters import BaseDupeFilter
    from scrapy.http import Response
    from scrapy.settings import BaseSettings
    from scrapy.statscollectors import StatsCollector
    from typing_extensions import Self

__all__ = ["IRIFrontierScheduler"]

logger = logging.getLogger(__name__)

#: finish_reason: ``SCHEDULER_PRIORITY_QUEUE`` names a class whose order the frontier
#: does not know (docs/jobdir.md, "Ordering").
REASON_FRONTIER_PRIORITY_QUEUE = "iri_frontier_priority_queue"



# --------------------------------------------------------------------------- scheduler

def _local_iri_dupefilter(df_cls: Any) -> bool:
    """True if *df_cls* is an IRIDupeFilter keeping its seen-set in this process."""
    return (
        isinstance(df_cls, type)
        and issubclass(df_cls, IRIDupeFilter)
        and df_cls.seen_add is IRIDupeFilter.seen_add
    )


def _is_fifo(queue_cls: Any) -> bool:
    """True for a FIFO queue class (Scrapy's ``FifoMemoryQueue``, ``Pickle/MarshalFifo...``)."""
    for klass in getattr(queue_cls, "__mro__", ()):
        name = klass.__name__.lower()
        if "lifo" in name:
            return False
        if "fifo" in name:
            return True
    return False


def _queue_class(settings: BaseSettings | None, name: str) -> type[Any] | None:
    """The queue class setting *name* names, or None when it is empty."""
    value = settings.get(name) if settings is not None else None
    return load_object(value) if value else None


def _refuse_priority_queue(crawler: Crawler | None, pqclass: Any) -> None:
    """Refuse the start: the frontier does not know the order of *pqclass*."""
    name = crawler.settings.get("SCHEDULER_PRIORITY_QUEUE") if crawler else None
    if not isinstance(name, str):
        name = (f"{getattr(pqclass, '__module__', '')}."
                f"{getattr(pqclass, '__qualname__', pqclass)}")
    message = (
        f"IRIFrontierScheduler: SCHEDULER_PRIORITY_QUEUE = {name} is not supported "
        "by the crash-safe JOBDIR frontier, which hands requests out in Scrapy's "
        "order only for scrapy.pqueues.DownloaderAwarePriorityQueue and "
        "scrapy.pqueues.ScrapyPriorityQueue: set SCHEDULER_PRIORITY_QUEUE to one "
        "of those, or IRI_FRONTIER = False to use Scrapy's JOBDIR queue (not "
        "crash-safe)")
    refuse_start(crawler, REASON_FRONTIER_PRIORITY_QUEUE, message, ValueError(message))


def _frontier_wanted(settings: BaseSettings, jobdir: str | None, df_cls: Any) -> bool:
    """Whether the crash-safe frontier runs: ``JOBDIR`` set, ``IRI_FRONTIER`` on, a local
    IRI dupefilter, and not a ``JOBDIR`` started without the frontier."""
    if not jobdir or not setting(settings, "IRI_FRONTIER"):
        return False
    if not _local_iri_dupefilter(df_cls):
        logger.warning(
            "IRIFrontierScheduler: DUPEFILTER_CLASS %s keeps its seen-set outside the "
            "frontier store, so the two cannot agree after a crash: using Scrapy's JOBDIR "
            "queue instead (not crash-safe)", getattr(df_cls, "__qualname__", df_cls),
        )
        return False
    legacy = legacy_state(jobdir)
    if legacy == FP_FILENAME and not Path(jobdir, FILENAME).exists():
        logger.warning(
            "IRIFrontierScheduler: JOBDIR %s was started without the crash-safe frontier "
            "(it has %s): continuing it with Scrapy's JOBDIR queue (not crash-safe); "
            "start a new JOBDIR for crash safety", jobdir, legacy,
        )
        return False
    return True


class IRIFrontierScheduler(Scheduler):
    """Scrapy's scheduler with a crash-tolerant ``JOBDIR`` (design: docs/jobdir.md).

    Without ``JOBDIR``, with ``IRI_FRONTIER = False``, with a dupefilter that
    keeps its seen-set elsewhere, or on a ``JOBDIR`` started without the
    frontier, it is Scrapy's :class:`~scrapy.core.scheduler.Scheduler` unchanged.
    """

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        jobdir = jobdir_setting(settings)
        df_cls = load_object(settings["DUPEFILTER_CLASS"])
        use = _frontier_wanted(settings, jobdir, df_cls)
        dupefilter: BaseDupeFilter
        if use:
            kwargs = df_cls.kwargs_from_crawler(crawler)
            kwargs["jobdir"] = None  # the store replaces the fingerprint file
            dupefilter = df_cls(**kwargs)
        else:
            from_crawler = getattr(df_cls, "from_crawler", None)
            dupefilter = from_crawler(crawler) if from_crawler is not None else df_cls()
        return cls(
            dupefilter=dupefilter,
            jobdir=jobdir,
            dqclass=load_object(settings["SCHEDULER_DISK_QUEUE"]),
            mqclass=load_object(settings["SCHEDULER_MEMORY_QUEUE"]),
            logunser=settings.getbool("SCHEDULER_DEBUG"),
            stats=crawler.stats,
            pqclass=load_object(settings["SCHEDULER_PRIORITY_QUEUE"]),
            crawler=crawler,
            frontier=use,
            fsync_ms=fsync_setting(setting(settings, "IRI_FRONTIER_FSYNC")),
            max_inflight=max_inflight_setting(settings),
            stall_seconds=max(60.0, 2 * settings.getfloat("DOWNLOAD_TIMEOUT", 180)),
            allow_reset=setting(settings, "IRI_JOBDIR_ALLOW_RESET"),
            write_retry=max(0.0, setting(settings, "IRI_FRONTIER_WRITE_RETRY")),
        )

    def __init__(
        self,
        dupefilter: BaseDupeFilter,
        jobdir: str | None = None,
        dqclass: type[Any] | None = None,
        mqclass: type[Any] | None = None,
        logunser: bool = False,
        stats: StatsCollector | None = None,
        pqclass: type[Any] | None = None,
        crawler: Crawler | None = None,
        *,
        frontier: bool = False,
        fsync_ms: int | None = DEFAULT_FSYNC_MS,
        allow_reset: bool = False,
        max_inflight: int = 0,
        stall_seconds: float = 360.0,
        write_retry: float = DEFAULT_WRITE_RETRY,
    ) -> None:
        self.frontier_dir: str | None = jobdir if frontier else None
        super().__init__(
            dupefilter, jobdir=None if frontier else jobdir, dqclass=dqclass, mqclass=mqclass,
            logunser=logunser, stats=stats, pqclass=pqclass, crawler=crawler,
        )
        settings = crawler.settings if crawler is not None else None
        #: ``SCHEDULER_START_DISK_QUEUE`` and ``SCHEDULER_START_MEMORY_QUEUE``
        #: (documented, Scrapy 2.13+): the order of start requests in the store and in
        #: memory, or None when start requests go in the regular queues.
        self.start_dqclass = _queue_class(settings, "SCHEDULER_START_DISK_QUEUE")
        self.start_mqclass = _queue_class(settings, "SCHEDULER_START_MEMORY_QUEUE")
        #: ``ScrapyPriorityQueue``: one lane; ``DownloaderAwarePriorityQueue``: one per
        #: download slot; None: another class, refused at open (see :mod:`.lanes`).
        self.lanes_mode = lanes_mode(pqclass)
        self.fsync_ms = fsync_ms
        self.allow_reset = allow_reset
        self.store: FrontierStore | None = None
        #: The requests handed out and not answered, by row id (see :mod:`.ledger`).
        self.ledger: Ledger[int] = Ledger(self._settle, on_reaped=self._reaped)
        self.max_inflight = max_inflight
        self.stall_seconds = stall_seconds
        #: memory-only (unserializable) request id -> its fingerprint record or None.
        self._unser: dict[int, int | None] = {}
        self._next_memory_id = -1
        self.codec: RequestCodec | None = None
        #: At level protocol: the learned rules' files (:mod:`iri_scrapy.protocol.jobdir_store`).
        self.protocol: Any = None
        #: The pending rows refused at open (see :mod:`.codec`).
        self.refusals = RefusalLog("IRIFrontierScheduler", "the frontier store")
        #: Commits, syncs, write retries (see :mod:`.store_writer`).
        self.writer = StoreWriter(
            lambda: self.store, write_retry=write_retry, fsync_ms=fsync_ms, log=logger,
            stop=self._stop, inc=self._inc, spider=lambda: self.spider,
            reap=self.ledger.reap, sweep=self.ledger.sweep, before_commit=self._before_commit)
        #: The staged feed files, while the frontier runs (see :mod:`.feeds`).
        self.feeds: FeedGate | None = None
        #: ``spider.state`` as JSON in the store (see :mod:`.spider_state`).
        self.state = SpiderStateKeeper(lambda: self.store)
        self._lock_fd: int | None = None
        #: The requests waiting, stored and memory-only (see :mod:`.stored_queue`).
        self.queue = StoredQueue(
            store=lambda: self.store, codec=lambda: self.codec, ledger=self.ledger,
            lane=self._lane, active=self._active, lanes_mode=self.lanes_mode,
            start_stored=self.start_dqclass is not None,
            start_memory=self.start_mqclass is not None,
            memory_lifo=not _is_fifo(mqclass),
            start_memory_lifo=self.start_mqclass is not None and not _is_fifo(
                self.start_mqclass),
            readable=self._readable, refused=self._refused, damaged=self._damaged,
            log=logger)
        #: A stock Scrapy JOBDIR taken over (see :mod:`.stock_jobdir`), once open.
        self.stock: StockAdoption | None = None

    # --- life cycle ------------------------------------------------------------

    def open(self, spider: Spider) -> Any:
        result = super().open(spider)
        if self.frontier_dir is None:
            return result
        if self.lanes_mode is None:
            self.frontier_dir = None
            _refuse_priority_queue(self.crawler, self.pqclass)
            return result
        df = self.df
        assert isinstance(df, IRIDupeFilter)
        jobdir = self.frontier_dir
        self.frontier_dir = None  # until the store is open: a refusal may raise
        opened = open_store(
            self.crawler, jobdir,
            canonicalization_version=CANONICALIZATION_VERSION,
            tag=df.options_tag(),
            fsync_ms=self.fsync_ms,
            allow_reset=self.allow_reset,
            lifo=not _is_fifo(self.dqclass),
            start_lifo=self.start_dqclass is not None and not _is_fifo(self.start_dqclass),
            lanes=self.lanes_mode,
        )
        if opened is None:
            return result
        self.frontier_dir = jobdir
        store, self._lock_fd = opened
        self.store = store
        crawler = self.crawler
        assert crawler is not None
        self.codec = RequestCodec(spider, frontier_secret(crawler.settings))
        self.refusals.store = f"the frontier store {store.path}"
        loaded = self._load(spider, df, store)
        if loaded is None:
            return result
        recovered, seen = loaded
        store.commit()
        self.writer.check()
        self._inc("iri/frontier/recovered", recovered)
        if store.unclean:
            self._inc("iri/frontier/unclean_shutdown")
            logger.warning(
                "Frontier store %s: the previous run did not close (killed or crashed); "
                "rescheduling its %d pending requests (the ones in flight then are fetched "
                "again)", store.path, recovered, extra={"spider": spider},
            )
        if recovered or seen:
            logger.info(
                "Resuming crawl (%(queuesize)d requests scheduled)",
                {"queuesize": recovered}, extra={"spider": spider},
            )
        context = CrawlContext.of(crawler)
        context.register_frontier(self)
        if df.learned is not None:  # level protocol: learned rules, what they skipped
            self.protocol = context.protocol.jobdir_store(
                self.frontier_dir, self.codec, df.learned, seen=lambda request: request in df)
            for request in self.protocol.open():
                self.enqueue_request(request)
        crawler.signals.connect(self._on_response, signal=signals.response_received)
        crawler.signals.connect(self._on_idle, signal=signals.spider_idle)
        crawler.signals.connect(self._on_opened, signal=signals.spider_opened)
        self.feeds = staged_feeds(
            crawler, spider, lambda: self.store, blocked=self.ledger.__contains__,
            release=self._release, wake=self.writer.wake, commit=self._commit, stop=self._stop)
        self.writer.start()
        return result

    def _load(self, spider: Spider, df: IRIDupeFilter,
              store: FrontierStore) -> tuple[int, int] | None:
        """Read the open store: the seen-set into the dupefilter, the pending rows'
        counts by lane, a stock Scrapy queue adopted, the first batch.  (requests
        recovered, fingerprints seen), or None when damaged pages refused the start."""
        try:
            records = store.seen_array()
            seen = df.preload(records)  # one bulk load (FingerprintSet.update)
            del records
            # the pending rows stay on disk, read a batch at a time, in crawl order
            stock_refused = 0

            def adopt() -> None:
                nonlocal stock_refused
                self._adopt_stock(spider)
                stock_refused = self.refusals.count

            recovered = self.queue.load(adopt=adopt)
        except sqlite3.DatabaseError as exc:  # damaged pages: refused, one line
            self.store = None
            with contextlib.suppress(sqlite3.Error):
                store.close(clean=False)
            self.frontier_dir = None
            self._unlock()
            error = unreadable_store(store.path, DAMAGED, exc)
            refuse_start(self.crawler, REASON_FRONTIER_UNREADABLE, str(error), error)
            return None
        return recovered - (self.refusals.count - stock_refused), seen

    def close(self, reason: str) -> Any:
        if self.protocol is not None:
            self.protocol.close()
            self.protocol = None
        store = self.store
        if store is not None:
            self.writer.stop()
            lost = len(self._unser)
            if lost and reason != "finished":
                logger.warning(
                    "%d requests that could not be serialized were still pending or in "
                    "flight: they are not in the frontier store and are lost with this run",
                    lost, extra={"spider": self.spider},
                )
            self._set_stat("iri/frontier/pending_at_close", store.pending_count())
            self._set_stat("iri/frontier/inflight_max", self.ledger.inflight_max)
            self._before_commit()  # what is answered with its items, and the state
            if self.feeds is not None:
                self.feeds.detach()
            self.feeds = None  # the feed files' closing bytes follow (feeds.finish)
            store.close(clean=True)
            self._set_stat("iri/frontier/commits", store.commits)
            self._set_stat("iri/frontier/syncs", store.syncs)
            crawler = self.crawler
            if crawler is not None:
                crawler.signals.disconnect(self._on_response, signal=signals.response_received)
                crawler.signals.disconnect(self._on_idle, signal=signals.spider_idle)
                crawler.signals.disconnect(self._on_opened, signal=signals.spider_opened)
                CrawlContext.of(crawler).unregister_frontier(self)
            self.store = None
        self._unlock()
        return super().close(reason)

    def _unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None

    # --- the queue -------------------------------------------------------------

    def enqueue_request(self, request: Request) -> bool:
        request = enter(request, Canonicalizer.for_crawler(self.crawler))
        store = self.store
        if store is None:
            return super().enqueue_request(request)
        meta = request.meta
        parent = meta.get(META_FRONTIER_ID)
        if self.ledger.downloading(parent):
            # a downloader middleware's replacement (redirect, retry, re-issue)
            self.ledger.answered(parent)
            self._inc("iri/frontier/replaced")
        if self.stock is not None and self.stock.saw(request):  # fetched, or adopted
            self.df.request_seen(request)  # its aliases are seen too
            self.df.log(request, self.spider)
            self._inc("iri/frontier/stock_seen_dropped")
            self._touch()
            return False
        record: int | None = None
        if not request.dont_filter:
            if self.df.request_seen(request):
                self.df.log(request, self.spider)
                self._touch()
                return False
            fingerprint = self.df.seen_fingerprint(request)  # type: ignore[attr-defined]
            record = int.from_bytes(fp64(fingerprint), "big")
        data = self._serialize(request)
        stats = self.stats
        assert stats is not None
        lane = self._lane(request)
        if data is None:
            rowid = self._next_memory_id
            self._next_memory_id -= 1
            self._unser[rowid] = record
            meta[META_FRONTIER_ID] = rowid
            self.queue.add_memory(lane, rowid, request)
            stats.inc_value("scheduler/enqueued/memory")
        else:
            start = self.queue.is_start(request, stored=True)
            rowid = store.add(record, data, priority=request.priority, start=start, lane=lane)
            meta[META_FRONTIER_ID] = rowid
            self.queue.add_stored(lane, store.key(rowid, request.priority, start), rowid,
                                  request)
            stats.inc_value("scheduler/enqueued/disk")
            stats.inc_value("iri/frontier/stored")
        stats.inc_value("scheduler/enqueued")
        self._touch()
        return True

    def next_request(self) -> Request | None:
        if self.store is None:
            return super().next_request()
        ledger = self.ledger
        ledger.reap()
        if ledger.at_cap(self.max_inflight, downloading=True):
            if not ledger.stalled(self.stall_seconds):
                return None  # has_pending_requests() stays True: asked again later
            logger.warning(
                "%(n)d requests handed out have not been answered for %(s).0f s (does "
                "the spider keep references to its requests?): lifting the in-flight "
                "cap for the rest of this run; after a kill, up to every request "
                "handed out since may be fetched again",
                {"n": len(ledger), "s": self.stall_seconds},
                extra={"spider": self.spider},
            )
            self._inc("iri/frontier/cap_lifted")
            self.max_inflight = 0
        store = self.store
        if store.failed is not None:
            return None  # nothing goes out while the store cannot be written
        request = self.queue.pop()
        if request is None:
            return None
        if store.in_transaction:
            # every answer so far is on disk before another request goes out, so
            # the rows a kill leaves pending are at most the ones handed out
            store.commit()
            if store.failed is not None:
                self.queue.unpop(request)  # not handed out: stays queued
                self.writer.check()
                return None
        stats = self.stats
        assert stats is not None
        rowid = request.meta.get(META_FRONTIER_ID)
        if rowid is not None:
            ledger.hand_out(rowid, request)
        stats.inc_value(
            "scheduler/dequeued/memory" if rowid is None or rowid < 0 else "scheduler/dequeued/disk"
        )
        stats.inc_value("scheduler/dequeued")
        return request

    def _adopt_stock(self, spider: Spider) -> None:
        """A ``JOBDIR`` written by stock Scrapy: see :class:`.StockAdoption`."""
        jobdir = self.frontier_dir
        store = self.store
        codec = self.codec
        assert jobdir is not None and store is not None and codec is not None
        self.stock = stock = StockAdoption(jobdir)
        loaded = stock.load_seen()
        if loaded is not None:
            self._set_stat("iri/frontier/stock_seen_loaded", loaded)
        counts = stock.adopt(store, codec, self.enqueue_request, self._refused_stock)
        if counts is None:
            return
        adopted, dropped = counts
        self._inc("iri/frontier/stock_adopted", adopted)
        logger.warning(
            "IRIFrontierScheduler: JOBDIR %s was started by stock Scrapy: adopted the %d "
            "requests of its queue (%d duplicates dropped) into the crash-safe frontier "
            "store; its %d seen fingerprints (%s) keep what it fetched from being fetched "
            "again. %s is left in place and no longer read", jobdir, adopted, dropped,
            0 if stock.seen is None else len(stock.seen), SEEN_FILENAME,
            QUEUE_DIRNAME, extra={"spider": spider},
        )

    def _refused_stock(self, exc: RefusedRecord, where: str, data: bytes | None) -> None:
        """A stock queue record that is not plain data: kept aside, counted, loud."""
        store = self.store
        assert store is not None
        if data is not None:
            store.refuse(store.add(None, data), exc.kind)
        self.refusals.refused(exc, f"stock Scrapy queue record in {where}", self.spider,
                              crawler=self.crawler,
                              count=lambda name: self._inc(f"iri/frontier/{name}"))

    def __len__(self) -> int:
        if self.store is None:
            return super().__len__()
        return len(self.queue)

    def _lane(self, request: Request) -> str:
        """The lane of *request*: its download slot with ``DownloaderAwarePriorityQueue``."""
        if self.lanes_mode == PER_SLOT:
            return compat.download_slot_key(self.crawler, request)
        return ""

    def _active(self, slot: str) -> int:
        """The active downloads of *slot* (``DownloaderAwarePriorityQueue``'s measure)."""
        return compat.active_downloads(self.crawler, slot)

    @property
    def _stored(self) -> Lanes:
        return self.queue.stored


    # --- answers ---------------------------------------------------------------

    def answered(self, request: Request) -> None:
        """*request* was answered: its pending row goes (see "What answered means")."""
        self.ledger.answered(request.meta.get(META_FRONTIER_ID))

    def failed(self, request: Request) -> None:
        """The download of *request* failed for good (no downloader middleware handled it)."""
        self.ledger.failed(request.meta.get(META_FRONTIER_ID), errback=request.errback is not None)

    def _settle(self, rowids: list[int]) -> None:
        """The ledger's answer: delete the pending rows, once the items of each are
        written to the staged feeds (see :mod:`.feeds`)."""
        self._inc("iri/frontier/answered", len(rowids))
        self._release(self.feeds.settle(rowids) if self.feeds is not None else rowids)

    def _release(self, rowids: list[int]) -> None:
        """Delete the pending rows of *rowids* (an unserializable request's fingerprint
        goes into the seen-set only now)."""
        store = self.store
        if store is None or not rowids:
            return
        for rowid in rowids:
            if rowid > 0:
                store.done(rowid)
            else:
                record = self._unser.pop(rowid, None)
                if record is not None:
                    store.add_seen(record)
        self._touch()

    def _reaped(self, rowid: int) -> None:
        self._inc("iri/frontier/answered_on_release")

    def _before_commit(self) -> None:
        if self.feeds is not None:
            self.feeds.flush()
        self.state.save(self.spider)

    def _on_opened(self, spider: Spider) -> None:
        """After Scrapy's ``SpiderState`` loaded its file: the store's state if newer; after
        the feed exporter opened its slots: batch feeds continue (see :mod:`.feeds`)."""
        store = self.store
        if store is not None and self.frontier_dir is not None:
            self.state.restore(spider, self.frontier_dir, unclean=store.unclean)
        if self.feeds is not None and self.crawler is not None:
            self.feeds.opened(self.crawler, spider)

    def _on_response(self, response: Response, request: Request, **_: Any) -> None:
        self.ledger.responded(request.meta.get(META_FRONTIER_ID))

    def _on_idle(self, **_: Any) -> None:
        """Nothing is in the downloader or the scraper: every request out was answered.

        A crawl that refused stored records does not end ``finished``: it closes with
        ``iri_frontier_refused_records``.
        """
        self.ledger.drain()
        self._commit()
        store = self.store
        if store is not None and store.failed is not None and not self.writer.gave_up:
            raise DontCloseSpider  # not "finished" while changes wait to be written
        if self.refusals.count:
            self.refusals.closing(self.spider)
            raise CloseSpider(REASON_REFUSED_RECORDS)

    def _refused(self, exc: RefusedRecord, rowid: int) -> None:
        """A pending row that cannot be read back: moved aside, counted, logged."""
        store = self.store
        assert store is not None
        store.refuse(rowid, exc.kind)
        self.refusals.refused(exc, f"pending row {rowid}", self.spider, crawler=self.crawler,
                              count=lambda name: self._inc(f"iri/frontier/{name}"))

    # --- persistence -------------------------------------------------------------

    def _serialize(self, request: Request) -> bytes | None:
        codec = self.codec
        assert codec is not None
        return codec.record_or_none(
            request, drop_meta=(META_FRONTIER_ID,), log=logger,
            count=lambda: self._inc("iri/frontier/unserializable"),
            store="the frontier", stat="iri/frontier/unserializable",
            kept="kept in memory, lost if the crawl is killed before it is answered",
        )

    def _touch(self) -> None:
        """Commit at the end of the current reactor turn."""
        self.writer.touch()

    def _commit(self) -> None:
        self.writer.commit()

    def _damaged(self, exc: sqlite3.DatabaseError) -> None:
        """The store cannot be read mid-crawl: nothing more goes out, the crawl closes
        with ``iri_frontier_unreadable`` (one ERROR line, exit status 1)."""
        self.queue.exhaust()
        self.writer.damaged(exc)

    def _readable(self) -> bool:
        """Whether the store can be read now (not failing, writes not given up)."""
        store = self.store
        return store is not None and store.failed is None and not self.writer.gave_up

    def _stop(self, reason: str) -> None:
        stop_crawl(self.crawler, reason, "IRIFrontierScheduler")

    def _inc(self, key: str, count: int = 1) -> None:
        if self.stats is not None:
            self.stats.inc_value(key, count)

    def _set_stat(self, key: str, value: int) -> None:
        if self.stats is not None:
            self.stats.set_value(key, value)
