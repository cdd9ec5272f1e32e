"""The ``JOBDIR`` queue back-end of :class:`~.scheduler.FrontierScheduler`: SQLite.

The dupefilter's seen-set and the pending requests live in one SQLite database in
WAL mode (``<JOBDIR>/iri_frontier.sqlite3``, :mod:`.sqlite_store`), written in
the same transactions (:mod:`.store_writer`); a pending row is deleted only once
its request is answered, so after any crash the same command fetches every
request not yet answered.  Requests go out in Scrapy's own order (:mod:`.lanes`),
the stored ones read a batch at a time (:mod:`.stored_queue`); a request that
cannot be stored as data waits in memory in its place (a negative row id).  The
store is opened, or the start refused, by :mod:`.jobdir_start`, which also takes
over a stock Scrapy ``JOBDIR`` (:mod:`.stock_jobdir`).
Design: docs/jobdir.md; what is stored and refused, faults: docs/frontier.md.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import CloseSpider, DontCloseSpider

from iri_scrapy.frontier.codec import REASON_REFUSED_RECORDS, RefusalLog, RefusedRecord
from iri_scrapy.frontier.feeds import FeedGate, staged_feeds
from iri_scrapy.frontier.jobdir_start import adopt_stock, open_frontier
from iri_scrapy.frontier.lanes import PER_SLOT, Lanes
from iri_scrapy.frontier.spider_state import SpiderStateKeeper
from iri_scrapy.frontier.sqlite_schema import DAMAGED, unreadable_store
from iri_scrapy.frontier.stock_jobdir import StockAdoption
from iri_scrapy.frontier.store_writer import REASON_FRONTIER_UNREADABLE, StoreWriter
from iri_scrapy.frontier.stored_queue import META_FRONTIER_ID, StoredQueue
from iri_scrapy.plugin import compat
from iri_scrapy.plugin.context import CrawlContext
from iri_scrapy.plugin.dupefilter import IRIDupeFilter
from iri_scrapy.plugin.refusal import refuse_start
from iri_scrapy.store.fpstore import fp64

if TYPE_CHECKING:
    from scrapy import Request, Spider

    from iri_scrapy.frontier.scheduler import FrontierScheduler
    from iri_scrapy.frontier.sqlite_store import FrontierStore

#: The scheduler's log lines (one logger for the JOBDIR scheduler and its parts).
logger = logging.getLogger("iri_scrapy.frontier.jobdir")

_PREFIX = "iri/frontier/"


class SqliteBackend:
    """The SQLite ``JOBDIR`` store as a :class:`~.scheduler.QueueBackend` (module doc)."""

    name = "IRIFrontierScheduler"
    meta_key = META_FRONTIER_ID
    kind = "disk"
    prefix = _PREFIX
    store_label = "the frontier"
    kept_label = "kept in memory, lost if the crawl is killed before it is answered"
    intents = False
    cap_downloading = True
    stock_after_refusal = True
    log = logger

    def __init__(self, host: FrontierScheduler, jobdir: str, *, options: dict[str, Any],
                 lanes_mode: str | None, start_stored: bool, memory_lifo: bool,
                 start_memory: bool, start_memory_lifo: bool, write_retry: float) -> None:
        self.host = host
        self.jobdir = jobdir
        #: :class:`.FrontierStore`'s options (fsync, reset, order); see :func:`.open_frontier`.
        self.options = options
        self.lanes_mode = lanes_mode
        self.opened = False
        self.store: FrontierStore | None = None
        self.lock_fd: int | None = None
        #: memory-only (unserializable) request id -> its fingerprint record or None.
        self._unser: dict[int, int | None] = {}
        self._next_memory_id = -1
        #: The pending rows refused at open (see :mod:`.codec`).
        self.refusals = RefusalLog(self.name, "the frontier store")
        #: Commits, syncs, write retries (see :mod:`.store_writer`).
        self.writer = StoreWriter(
            lambda: self.store, write_retry=write_retry, fsync_ms=options.get("fsync_ms"),
            log=logger, stop=host.stop, inc=self._inc, spider=lambda: host.spider,
            reap=host.ledger.reap, sweep=host.ledger.sweep, before_commit=self._before_commit)
        #: The staged feed files, while the frontier runs (see :mod:`.feeds`).
        self.feeds: FeedGate | None = None
        #: ``spider.state`` as JSON in the store (see :mod:`.spider_state`).
        self.state = SpiderStateKeeper(lambda: self.store)
        #: The requests waiting, stored and memory-only (see :mod:`.stored_queue`).
        self.queue = StoredQueue(
            store=lambda: self.store, codec=lambda: host.codec, ledger=host.ledger,
            lane=self._lane, active=self._active, lanes_mode=lanes_mode,
            start_stored=start_stored, start_memory=start_memory, memory_lifo=memory_lifo,
            start_memory_lifo=start_memory_lifo, readable=self._readable,
            refused=self._refused, damaged=self._damaged, log=logger)
        #: A stock Scrapy JOBDIR taken over (see :mod:`.stock_jobdir`), once open.
        self.stock: StockAdoption | None = None

    # --- life cycle ------------------------------------------------------------

    @property
    def usable(self) -> bool:
        return self.store is not None

    def open(self, spider: Spider) -> Any:
        host = self.host
        result = host.open_stock(spider)
        df = host.df
        assert isinstance(df, IRIDupeFilter)
        opened = open_frontier(host.crawler, self.jobdir, self.lanes_mode, host.pqclass,
                               tag=df.options_tag(), **self.options)
        if opened is None:
            return result
        store, self.lock_fd = opened
        self.store = store
        self.refusals.store = f"the frontier store {store.path}"
        loaded = self._load(spider, df, store)
        if loaded is None:
            return result
        self.opened = True
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
                assert self.host.codec is not None
                self.stock = StockAdoption(self.jobdir)
                adopt_stock(
                    self.stock, store, self.host.codec, enqueue=self.host.enqueue_request,
                    refused=self._refused_stock, inc=self._inc, set_stat=self._set_stat,
                    spider=spider)
                stock_refused = self.refusals.count

            recovered = self.queue.load(adopt=adopt)
        except sqlite3.DatabaseError as exc:  # damaged pages: refused, one line
            self.store = None
            with contextlib.suppress(sqlite3.Error):
                store.close(clean=False)
            self._unlock()
            error = unreadable_store(store.path, DAMAGED, exc)
            refuse_start(self.host.crawler, REASON_FRONTIER_UNREADABLE, str(error), error)
            return None
        return recovered - (self.refusals.count - stock_refused), seen

    def open_protocol(self, learned: Any) -> tuple[Any, list[Request]]:
        df = self.host.df
        assert isinstance(df, IRIDupeFilter) and self.host.codec is not None
        protocol = CrawlContext.of(self.host.crawler).protocol.jobdir_store(
            self.jobdir, self.host.codec, learned, lambda: self.store,
            seen=lambda request: request in df)
        return protocol, protocol.open()

    def start(self) -> None:
        host = self.host
        crawler, spider = host.crawler, host.spider
        if crawler is not None:
            crawler.signals.connect(self._on_opened, signal=signals.spider_opened)
            self.feeds = staged_feeds(
                crawler, spider, lambda: self.store, blocked=host.ledger.__contains__,
                release=self._release, wake=self.writer.wake, commit=self.writer.commit,
                stop=host.stop)
        self.writer.start()

    def stop(self) -> None:
        self.writer.stop()

    def close(self, reason: str, protocol: Any) -> None:
        if protocol is not None:
            protocol.close()
        if self.store is not None:
            self._before_commit()  # what is answered with its items, and the state
        if self.feeds is not None:
            self.feeds.detach()
        self.feeds = None  # the feed files' closing bytes follow (feeds.finish)
        store, self.store = self.store, None
        if store is not None:
            lost = len(self._unser)
            if lost and reason != "finished":
                logger.warning(
                    "%d requests that could not be serialized were still pending or in "
                    "flight: they are not in the frontier store and are lost with this run",
                    lost, extra={"spider": self.host.spider},
                )
            self._set_stat("iri/frontier/pending_at_close", store.pending_count())
            self._set_stat("iri/frontier/inflight_max", self.host.ledger.inflight_max)
            store.close(clean=True)
            self._set_stat("iri/frontier/commits", store.commits)
            self._set_stat("iri/frontier/syncs", store.syncs)
        crawler = self.host.crawler
        if crawler is not None:
            crawler.signals.disconnect(self._on_opened, signal=signals.spider_opened)
        self._unlock()

    def _unlock(self) -> None:
        if self.lock_fd is not None:
            os.close(self.lock_fd)  # releases the flock
            self.lock_fd = None

    # --- the queue -------------------------------------------------------------

    def admits(self, request: Request) -> bool:
        if self.stock is not None and self.stock.saw(request):  # fetched, or adopted
            df = self.host.df
            df.request_seen(request)  # its aliases are seen too
            df.log(request, self.host.spider)
            self._inc("iri/frontier/stock_seen_dropped")
            return False
        return True

    def intent(self, request: Request, data: bytes | None) -> str:
        return ""  # one transaction holds the seen-set and the pending row

    def _record(self, request: Request) -> int | None:
        """The fingerprint record the dupefilter just saw, for the seen table."""
        if request.dont_filter:
            return None
        fingerprint = self.host.df.seen_fingerprint(request)  # type: ignore[attr-defined]
        return int.from_bytes(fp64(fingerprint), "big")

    def push(self, request: Request, data: bytes, intent: str) -> None:
        store = self.store
        assert store is not None
        lane = self._lane(request)
        start = self.queue.is_start(request, stored=True)
        rowid = store.add(self._record(request), data, priority=request.priority,
                          start=start, lane=lane)
        request.meta[META_FRONTIER_ID] = rowid
        self.queue.add_stored(lane, store.key(rowid, request.priority, start), rowid, request)

    def keep(self, request: Request) -> None:
        rowid = self._next_memory_id
        self._next_memory_id -= 1
        self._unser[rowid] = self._record(request)
        request.meta[META_FRONTIER_ID] = rowid
        self.queue.add_memory(self._lane(request), rowid, request)

    def held(self) -> Request | None:
        return None  # memory-only requests wait in their place in the lanes

    def pop(self) -> tuple[Request, Any, str] | None:
        store = self.store
        if store is None or store.failed is not None:
            return None  # nothing goes out while the store cannot be written
        request = self.queue.pop()
        if request is None:
            return None
        if store.in_transaction:
            # every answer so far is on disk before another request goes out, so
            # the rows a kill leaves pending are at most the ones handed out
            self.writer.write()
            if store.failed is not None:
                self.queue.unpop(request)  # not handed out: stays queued
                self.writer.check()
                return None
        rowid = request.meta.get(META_FRONTIER_ID)
        return request, rowid, "memory" if rowid is None or rowid < 0 else "disk"

    def has_pending(self) -> bool:
        return len(self) > 0

    def __len__(self) -> int:
        return len(self.queue)

    def _lane(self, request: Request) -> str:
        """The lane of *request*: its download slot with ``DownloaderAwarePriorityQueue``."""
        if self.lanes_mode == PER_SLOT:
            return compat.download_slot_key(self.host.crawler, request)
        return ""

    def _active(self, slot: str) -> int:
        """The active downloads of *slot* (``DownloaderAwarePriorityQueue``'s measure)."""
        return compat.active_downloads(self.host.crawler, slot)

    @property
    def stored(self) -> Lanes:
        return self.queue.stored

    # --- answers ---------------------------------------------------------------

    def settle(self, rowids: list[int]) -> None:
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
        self.touch()

    def _before_commit(self) -> None:
        if self.feeds is not None:
            self.feeds.flush()
        self.state.save(self.host.spider)

    def _on_opened(self, spider: Spider) -> None:
        """After Scrapy's ``SpiderState`` loaded its file: the store's state if newer; after
        the feed exporter opened its slots: batch feeds continue (see :mod:`.feeds`)."""
        store = self.store
        if store is not None:
            self.state.restore(spider, self.jobdir, unclean=store.unclean)
        if self.feeds is not None and self.host.crawler is not None:
            self.feeds.opened(self.host.crawler, spider)

    def idle(self, held: list[Any]) -> None:
        """Every request out was answered: committed.  A store whose changes wait to
        be written keeps the crawl open; one that refused records closes it with
        ``iri_frontier_refused_records``, never ``finished``."""
        self.writer.commit()
        store = self.store
        if store is not None and store.failed is not None and not self.writer.gave_up:
            raise DontCloseSpider  # not "finished" while changes wait to be written
        if self.refusals.count:
            self.refusals.closing(self.host.spider)
            raise CloseSpider(REASON_REFUSED_RECORDS)

    def _refused(self, exc: RefusedRecord, rowid: int) -> None:
        """A pending row that cannot be read back: moved aside, counted, logged."""
        store = self.store
        assert store is not None
        store.refuse(rowid, exc.kind)
        self.refusals.refused(exc, f"pending row {rowid}", self.host.spider,
                              crawler=self.host.crawler, count=self.inc)

    def _refused_stock(self, exc: RefusedRecord, where: str, data: bytes | None) -> None:
        """A stock queue record that is not plain data: kept aside, counted, loud."""
        store = self.store
        assert store is not None
        if data is not None:
            store.refuse(store.add(None, data), exc.kind)
        self.refusals.refused(exc, f"stock Scrapy queue record in {where}", self.host.spider,
                              crawler=self.host.crawler, count=self.inc)

    # --- persistence -------------------------------------------------------------

    def touch(self) -> None:
        """Commit at the end of the current reactor turn."""
        self.writer.touch()

    def _damaged(self, exc: sqlite3.DatabaseError) -> None:
        """The store cannot be read mid-crawl: nothing more goes out, the crawl closes
        with ``iri_frontier_unreadable`` (one ERROR line, exit status 1)."""
        self.queue.exhaust()
        self.writer.damaged(exc)

    def _readable(self) -> bool:
        """Whether the store can be read now (not failing, writes not given up)."""
        store = self.store
        return store is not None and store.failed is None and not self.writer.gave_up

    def inc(self, name: str, count: int = 1) -> None:
        self._inc(_PREFIX + name, count)

    def _inc(self, key: str, count: int = 1) -> None:
        stats = self.host.stats
        if stats is not None:
            stats.inc_value(key, count)

    def _set_stat(self, key: str, value: int) -> None:
        stats = self.host.stats
        if stats is not None:
            stats.set_value(key, value)
