"""Opening the ``JOBDIR`` frontier store at start, or refusing to start.

:func:`open_store` is the refusal ladder of
:class:`~iri_scrapy.frontier.jobdir.IRIFrontierScheduler`: it takes the ``JOBDIR``
lock (:mod:`.lock`) and opens the store (:mod:`.sqlite_store`); when either cannot
be done (another crawl holds the lock, a read-only disk, a store of another crawl,
damaged or of another format, a disk full) it releases what it took and refuses
the start with that fault's own finish_reason, as one ERROR line saying what to do
(:func:`~iri_scrapy.plugin.refusal.refuse_start`, exit status 1): nothing is
fetched.  Faults: docs/frontier.md.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

from iri_scrapy.frontier.lock import JobdirLocked, lock_jobdir
from iri_scrapy.frontier.sqlite_schema import READ_ONLY, unreadable_store
from iri_scrapy.frontier.sqlite_store import FrontierStore
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
    from scrapy.crawler import Crawler

#: finish_reason: the store, or its JOBDIR, cannot be written (a read-only disk or file).
REASON_FRONTIER_READ_ONLY = "iri_frontier_read_only"


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
