"""Opening the ``JOBDIR`` frontier store at start, or refusing to start.

:func:`open_frontier` refuses a ``SCHEDULER_PRIORITY_QUEUE`` whose order the
frontier does not know, then :func:`open_store` is the refusal ladder of
:class:`~iri_scrapy.frontier.jobdir.IRIFrontierScheduler`: it takes the ``JOBDIR``
lock (:mod:`.lock`) and opens the store (:mod:`.sqlite_store`); when either cannot
be done (another crawl holds the lock, a read-only disk, a store of another crawl,
damaged or of another format, a disk full) it releases what it took and refuses
the start with that fault's own finish_reason, as one ERROR line saying what to do
(:func:`~iri_scrapy.plugin.refusal.refuse_start`, exit status 1): nothing is
fetched.  :func:`adopt_stock` takes over a ``JOBDIR`` written by stock Scrapy
(:mod:`.stock_jobdir`).  Faults: docs/frontier.md.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from iri_scrapy.frontier.lock import JobdirLocked, lock_jobdir
from iri_scrapy.frontier.sqlite_schema import READ_ONLY, unreadable_store
from iri_scrapy.frontier.sqlite_store import FrontierStore
from iri_scrapy.frontier.stock_jobdir import QUEUE_DIRNAME, SEEN_FILENAME, StockAdoption
from iri_scrapy.frontier.store_writer import REASON_FRONTIER_UNREADABLE
from iri_scrapy.plugin.refusal import (
    REASON_FRONTIER_WRITE_FAILED,
    REASON_JOBDIR_LOCKED,
    REASON_JOBDIR_MISMATCH,
    refuse_start,
)
from iri_scrapy.store.fpstore import FingerprintFileError, FingerprintFileMismatch
from iri_scrapy.store.frontier_file import FILENAME

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler

    from iri_scrapy.frontier.codec import RefusedRecord, RequestCodec

#: The scheduler's log lines (one logger for the JOBDIR scheduler and its parts).
logger = logging.getLogger("iri_scrapy.frontier.jobdir")

#: finish_reason: the store, or its JOBDIR, cannot be written (a read-only disk or file).
REASON_FRONTIER_READ_ONLY = "iri_frontier_read_only"
#: finish_reason: ``SCHEDULER_PRIORITY_QUEUE`` names a class whose order the frontier
#: does not know (docs/jobdir.md, "Ordering").
REASON_FRONTIER_PRIORITY_QUEUE = "iri_frontier_priority_queue"


def open_frontier(crawler: Crawler | None, jobdir: str, lanes: str | None, pqclass: Any,
                  **options: Any) -> tuple[FrontierStore, int] | None:
    """:func:`open_store` with *options*, the lanes *lanes*; None when the start was
    refused, first of all for a priority queue *pqclass* of unknown order (*lanes*
    None, see :mod:`.lanes`)."""
    if lanes is None:
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
        return None
    return open_store(crawler, jobdir, lanes=lanes, **options)


def open_store(
    crawler: Crawler | None, jobdir: str, **options: Any
) -> tuple[FrontierStore, int] | None:
    """Lock *jobdir* and open its store with *options* (:class:`.FrontierStore`'s):
    the store and the lock's file descriptor, or None when the start was refused
    (the lock is not held then).  On an older Scrapy, or without a *crawler*, a
    refusal raises its error after its line (see :func:`.refuse_start`)."""
    Path(jobdir).mkdir(parents=True, exist_ok=True)
    try:
        lock_fd = lock_jobdir(jobdir)
    except OSError as exc:  # a read-only JOBDIR: the lock file cannot be written
        error = unreadable_store(Path(jobdir, FILENAME), READ_ONLY, exc)
        refuse_start(crawler, REASON_FRONTIER_READ_ONLY, str(error), error)
        return None
    except JobdirLocked as exc:
        # one ERROR line, finish_reason iri_jobdir_locked, exit status 1; the
        # store is not opened, nothing is fetched
        refuse_start(crawler, REASON_JOBDIR_LOCKED, str(exc), exc)
        return None
    try:
        store = FrontierStore(Path(jobdir, FILENAME), **options)
    except FingerprintFileMismatch as exc:
        # one ERROR line, finish_reason iri_jobdir_mismatch, exit status 1 (the
        # store is left untouched); the spider is closed before any request
        os.close(lock_fd)  # releases the flock
        refuse_start(crawler, REASON_JOBDIR_MISMATCH, str(exc), exc)
        return None
    except FingerprintFileError as exc:
        # damaged, truncated, read-only, another format: one ERROR line saying
        # what to do, its own finish_reason, exit status 1
        os.close(lock_fd)
        reason = (REASON_FRONTIER_READ_ONLY if getattr(exc, "kind", "") == READ_ONLY
                  else REASON_FRONTIER_UNREADABLE)
        refuse_start(crawler, reason, str(exc), exc)
        return None
    except sqlite3.OperationalError as exc:  # disk full, I/O error, read-only...
        os.close(lock_fd)
        refuse_start(
            crawler, REASON_FRONTIER_WRITE_FAILED,
            f"Frontier store {Path(jobdir, FILENAME)} cannot be written "
            f"({exc}): free space on the disk of JOBDIR (or fix the error) and run the "
            "same command again", exc,
        )
        return None
    except BaseException:
        os.close(lock_fd)
        raise
    return store, lock_fd


def adopt_stock(
    stock: StockAdoption, store: FrontierStore, codec: RequestCodec, *,
    enqueue: Callable[[Request], bool],
    refused: Callable[[RefusedRecord, str, bytes | None], None],
    inc: Callable[[str, int], None], set_stat: Callable[[str, int], None], spider: Spider,
) -> None:
    """A ``JOBDIR`` written by stock Scrapy (*stock*, already the scheduler's: what it
    saw is dropped): its seen fingerprints read, its queue's requests *enqueue*-d
    into *store* (see :class:`.StockAdoption`), said once."""
    loaded = stock.load_seen()
    if loaded is not None:
        set_stat("iri/frontier/stock_seen_loaded", loaded)
    counts = stock.adopt(store, codec, enqueue, refused)
    if counts is None:
        return
    adopted, dropped = counts
    inc("iri/frontier/stock_adopted", adopted)
    logger.warning(
        "IRIFrontierScheduler: JOBDIR %s was started by stock Scrapy: adopted the %d "
        "requests of its queue (%d duplicates dropped) into the crash-safe frontier "
        "store; its %d seen fingerprints (%s) keep what it fetched from being fetched "
        "again. %s is left in place and no longer read", stock.jobdir, adopted, dropped,
        0 if stock.seen is None else len(stock.seen), SEEN_FILENAME,
        QUEUE_DIRNAME, extra={"spider": spider},
    )
