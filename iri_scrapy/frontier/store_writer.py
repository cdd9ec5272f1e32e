"""When the ``JOBDIR`` frontier store is written, and what happens when it cannot be.

:class:`StoreWriter` is the store-failure policy of
:class:`~iri_scrapy.frontier.jobdir.IRIFrontierScheduler`: its changes are committed
at the end of the reactor turn that made them and synced every
``IRI_FRONTIER_FSYNC`` milliseconds; a failed write is retried with backoff for at
most ``IRI_FRONTIER_WRITE_RETRY`` seconds (no request goes out meanwhile, the
changes wait in memory), then the crawl closes loudly with
``iri_frontier_write_failed``; a store found damaged mid-crawl closes it with
``iri_frontier_unreadable``.  One job apart from the queue, so the scheduler keeps
only its order.  Design: docs/jobdir.md; faults: docs/frontier.md.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from iri_scrapy.frontier.options import DEFAULT_FSYNC_MS
from iri_scrapy.frontier.sqlite_store import DAMAGED, FrontierStore, unreadable_store
from iri_scrapy.plugin.refusal import REASON_FRONTIER_WRITE_FAILED

if TYPE_CHECKING:
    from twisted.internet.task import LoopingCall

#: finish_reason: the store is damaged, truncated or of another format (at start or mid-crawl).
REASON_FRONTIER_UNREADABLE = "iri_frontier_unreadable"


class StoreWriter:
    """Commits, syncs and write retries of one frontier store (see the module)."""

    def __init__(
        self,
        store: Callable[[], FrontierStore | None],
        *,
        write_retry: float,
        fsync_ms: int | None,
        log: logging.Logger,
        stop: Callable[[str], None],
        inc: Callable[[str], None],
        spider: Callable[[], Any],
        reap: Callable[[], object],
        sweep: Callable[[], object],
        before_commit: Callable[[], object] = lambda: None,
    ) -> None:
        self._store = store
        #: Seconds a failing store is retried before the crawl closes.
        self.write_retry = write_retry
        self.fsync_ms = fsync_ms
        self._log = log
        self._stop = stop
        self._inc = inc
        self._spider = spider
        self._reap = reap
        self._sweep = sweep
        #: Called before each commit of :meth:`commit`: the staged feeds write what
        #: the commit records (see :mod:`.feeds`), ``spider.state`` is taken.
        self._before_commit = before_commit
        self._commit_call: Any = None
        self._syncer: LoopingCall | None = None
        self._failing_since: float | None = None
        self._retry_call: Any = None
        self._retry_delay = 0.0
        #: The crawl is closing for a store that cannot be written or read.
        self.gave_up = False
        self._sync_failed = False

    def start(self) -> None:
        """Sync every ``IRI_FRONTIER_FSYNC`` ms (with "always" every commit is synced
        already: the loop then only releases failed requests, see :meth:`sync`)."""
        from twisted.internet.task import LoopingCall

        self._syncer = LoopingCall(self.sync)
        self._syncer.start((self.fsync_ms or DEFAULT_FSYNC_MS) / 1000.0, now=False)

    def stop(self) -> None:
        """Stop the sync loop and cancel the pending commit and retry."""
        if self._syncer is not None and self._syncer.running:
            self._syncer.stop()
        self._syncer = None
        if self._commit_call is not None and self._commit_call.active():
            self._commit_call.cancel()
        self._commit_call = None
        if self._retry_call is not None and self._retry_call.active():
            self._retry_call.cancel()
        self._retry_call = None

    def touch(self) -> None:
        """Commit at the end of the current reactor turn."""
        store = self._store()
        if self._commit_call is None and store is not None and store.in_transaction:
            from twisted.internet import reactor

            self._commit_call = cast(Any, reactor).callLater(0, self.commit)

    def wake(self) -> None:
        """Commit at the end of the current reactor turn even without changes yet (the
        staged feeds have answers to write, see :mod:`.feeds`)."""
        if self._commit_call is None and self._store() is not None:
            from twisted.internet import reactor

            self._commit_call = cast(Any, reactor).callLater(0, self.commit)

    def commit(self) -> None:
        self._commit_call = None
        self._reap()
        if self._store() is not None:
            self.write()
            self.check()

    def write(self) -> None:
        """Commit the open transaction now, with what *before_commit* adds to it (the
        staged feeds' bytes, ``spider.state``): every commit of the crawl goes through
        here, so no answer is on disk without the state its callback left."""
        store = self._store()
        if store is not None:
            self._before_commit()
            store.commit()

    def check(self) -> None:
        """After a commit: a failed write is retried with backoff, for at most
        ``IRI_FRONTIER_WRITE_RETRY`` seconds, then the crawl closes with
        ``iri_frontier_write_failed`` (exit status 1).  Meanwhile no request goes
        out, and the changes (answers, new requests) wait in memory: a request
        whose children could not be stored is not answered on disk."""
        store = self._store()
        if store is None:
            return
        if store.failed is None:
            if self._failing_since is not None:
                self._log.warning(
                    "Frontier store %s: writing works again after %.1f s; crawl resumed",
                    store.path, time.monotonic() - self._failing_since,
                    extra={"spider": self._spider()},
                )
                self._failing_since = None
                self._retry_delay = 0.0
            return
        if self.gave_up:
            return
        now = time.monotonic()
        if self._failing_since is None:
            self._failing_since = now
            self._inc("iri/frontier/write_failures")
            self._log.warning(
                "Frontier store %s: write failed (%s): no request goes out; retrying for up "
                "to %.0f s (IRI_FRONTIER_WRITE_RETRY)", store.path, store.failed,
                self.write_retry, extra={"spider": self._spider()},
            )
        if now - self._failing_since >= self.write_retry:
            self._give_up(store)
            return
        if self._retry_call is None or not self._retry_call.active():
            from twisted.internet import reactor

            self._retry_delay = min(5.0, max(0.25, self._retry_delay * 2))
            delay = min(self._retry_delay, max(0.0, self._failing_since + self.write_retry - now))
            self._retry_call = cast(Any, reactor).callLater(delay, self.commit)

    def damaged(self, exc: sqlite3.DatabaseError) -> None:
        """The store cannot be read mid-crawl: the crawl closes with
        ``iri_frontier_unreadable`` (one ERROR line, exit status 1)."""
        store = self._store()
        assert store is not None
        if self.gave_up:
            return
        self.gave_up = True
        self._log.error("%s", unreadable_store(store.path, DAMAGED, exc),
                        extra={"spider": self._spider()})
        self._stop(REASON_FRONTIER_UNREADABLE)

    def _give_up(self, store: FrontierStore) -> None:
        self.gave_up = True
        self._log.error(
            "Frontier store %s: writes failed for %.0f s (%s): closing the crawl with "
            "finish_reason %s; the requests answered since the last write stay pending "
            "on disk. Free space on the disk of JOBDIR (or fix the error) and run the same "
            "command with the same JOBDIR: nothing is lost",
            store.path, self.write_retry, store.failed, REASON_FRONTIER_WRITE_FAILED,
            extra={"spider": self._spider()},
        )
        self._stop(REASON_FRONTIER_WRITE_FAILED)

    def sync(self) -> None:
        store = self._store()
        if store is None:
            return
        # failed requests whose errback has run are released (and answered) within
        # this interval (see the ledger's sweep)
        self._sweep()
        if store.failed is not None:
            return  # the retry loop commits (see check)
        try:
            self.write()
            store.sync()
        except sqlite3.Error as exc:  # commits are in the log: keep syncing later
            if not self._sync_failed:
                self._sync_failed = True
                # the commits are in the log (a kill loses nothing); a write that
                # fails too is handled by check
                self._log.warning(
                    "Frontier store %s: sync failed: %s (retried every %d ms; logged once)",
                    store.path, exc, self.fsync_ms or DEFAULT_FSYNC_MS,
                )
        else:
            self._sync_failed = False
        self.check()
