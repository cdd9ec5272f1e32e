"""A crash-tolerant ``JOBDIR`` frontier: ``kill -9`` at any moment loses no scheduled request.

Scrapy writes its ``JOBDIR`` queue only on a clean close, so after a kill every
waiting request is seen but not pending and never fetched (scrapy#7978).
:class:`IRIFrontierScheduler` is :class:`~.scheduler.FrontierScheduler` over the
SQLite back-end (:mod:`.sqlite_backend`): the dupefilter's seen-set and the
pending requests in one SQLite database in WAL mode
(``<JOBDIR>/iri_frontier.sqlite3``), a pending row deleted only once its request
is *answered* (:mod:`.middlewares`, or the request object released).  After any
crash the same command fetches every request not yet answered, and again at most
those in flight (``IRI_FRONTIER_MAX_INFLIGHT``), in Scrapy's own order
(:mod:`.lanes`).  This module chooses between it and Scrapy's own scheduler and
reads the settings; its settings :mod:`.options`, opening :mod:`.jobdir_start`.

Design: docs/jobdir.md; what is stored and refused, faults, salvage: docs/frontier.md.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from iri_scrapy.core.ladder import CANONICALIZATION_VERSION
from iri_scrapy.frontier.lanes import Lanes, lanes_mode
from iri_scrapy.frontier.options import (
    DEFAULT_FSYNC_MS,
    DEFAULT_WRITE_RETRY,
    fsync_setting,
    max_inflight_setting,
)
from iri_scrapy.frontier.scheduler import FrontierScheduler
from iri_scrapy.frontier.sqlite_backend import SqliteBackend
from iri_scrapy.frontier.stock_jobdir import legacy_state
from iri_scrapy.plugin import compat  # noqa: F401 - checks the installed Scrapy first
from iri_scrapy.plugin.config import load_object, setting
from iri_scrapy.plugin.dupefilter import IRIDupeFilter, jobdir_setting
from iri_scrapy.store.fpstore import FILENAME as FP_FILENAME
from iri_scrapy.store.frontier_file import FILENAME

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.dupefilters import BaseDupeFilter
    from scrapy.settings import BaseSettings
    from scrapy.statscollectors import StatsCollector
    from typing_extensions import Self

    from iri_scrapy.frontier.sqlite_store import FrontierStore

__all__ = ["IRIFrontierScheduler"]

logger = logging.getLogger(__name__)


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


class IRIFrontierScheduler(FrontierScheduler):
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
        super().__init__(
            dupefilter, jobdir=None if frontier else jobdir, dqclass=dqclass, mqclass=mqclass,
            logunser=logunser, stats=stats, pqclass=pqclass, crawler=crawler,
            max_inflight=max_inflight, stall_seconds=stall_seconds,
        )
        if not frontier or not jobdir:
            return
        settings = crawler.settings if crawler is not None else None
        #: ``SCHEDULER_START_DISK_QUEUE`` and ``SCHEDULER_START_MEMORY_QUEUE``
        #: (documented, Scrapy 2.13+): the order of start requests in the store and in
        #: memory, or None when start requests go in the regular queues.
        start_dqclass = _queue_class(settings, "SCHEDULER_START_DISK_QUEUE")
        start_mqclass = _queue_class(settings, "SCHEDULER_START_MEMORY_QUEUE")
        self.backend = SqliteBackend(
            self, jobdir,
            options={
                "canonicalization_version": CANONICALIZATION_VERSION,
                "fsync_ms": fsync_ms,
                "allow_reset": allow_reset,
                "lifo": not _is_fifo(dqclass),
                "start_lifo": start_dqclass is not None and not _is_fifo(start_dqclass),
            },
            # ScrapyPriorityQueue: one lane; DownloaderAwarePriorityQueue: one per
            # download slot; None: another class, refused at open (see .lanes)
            lanes_mode=lanes_mode(pqclass),
            start_stored=start_dqclass is not None,
            start_memory=start_mqclass is not None,
            memory_lifo=not _is_fifo(mqclass),
            start_memory_lifo=start_mqclass is not None and not _is_fifo(start_mqclass),
            write_retry=write_retry,
        )

    # --- the back-end's parts, by their former names (tests, tools) -------------

    @property
    def store(self) -> FrontierStore | None:
        """The open SQLite store (:mod:`.sqlite_store`), or None."""
        backend = self.backend
        return backend.store if isinstance(backend, SqliteBackend) else None

    def _commit(self) -> None:
        """Commit now (what the end of a reactor turn does)."""
        if isinstance(self.backend, SqliteBackend):
            self.backend.writer.commit()

    @property
    def _stored(self) -> Lanes:
        assert isinstance(self.backend, SqliteBackend)
        return self.backend.stored
