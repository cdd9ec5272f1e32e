"""The ``JOBDIR`` frontier's SQLite store: seen fingerprints and pending requests, one file.

:class:`FrontierStore` keeps the dupefilter's seen-set and the pending requests
in ``<JOBDIR>/iri_frontier.sqlite3`` (WAL mode), written in the same
transactions, so that after any crash the two agree.  Its schema and order
columns are :mod:`iri_scrapy.store.frontier_file`'s (one home, with salvage);
its opening checks and a store it cannot read or write (a
:class:`~.sqlite_schema.FrontierStoreUnreadable` the scheduler turns into one
ERROR line) are :mod:`.sqlite_schema`'s.
Design: docs/jobdir.md; what is stored, faults and salvage: docs/frontier.md.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import time
from array import array
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from iri_scrapy.core.ladder import CANONICALIZATION_VERSION
from iri_scrapy.frontier.lanes import (
    ONE,
)
from iri_scrapy.frontier.options import DEFAULT_FSYNC_MS
from iri_scrapy.frontier.sqlite_schema import DAMAGED as DAMAGED  # its faults, named here too
from iri_scrapy.frontier.sqlite_schema import (
    READ_ONLY,
    apply_change,
    check_store,
    error_kind,
    has_table,
    max_id,
    meta_get,
    unreadable_store,
)
from iri_scrapy.frontier.sqlite_schema import FrontierStoreUnreadable as FrontierStoreUnreadable
from iri_scrapy.plugin import compat  # noqa: F401 - checks the installed Scrapy first
from iri_scrapy.store.fpstore import FingerprintFileError
from iri_scrapy.store.frontier_file import order_key

logger = logging.getLogger(__name__)


class FrontierStore:
    """The SQLite store of one ``JOBDIR``: seen fingerprint records and pending requests.

    Tables: ``meta(key, value)`` (format and canonicalization versions, the
    options tag, the ``clean`` flag), ``seen(fp)`` (64-bit records, signed,
    append-only: the dupefilter's table deduplicates them on load) and
    ``pending(id, request)`` (a :mod:`.codec` record; ``AUTOINCREMENT`` so
    an id is never reused) and, once a record was refused, ``refused(id,
    request, kind, at)`` (the records that could not be read back, kept for
    inspection, never read), and once a feed file is staged, ``feeds(path, offset,
    items)`` (:mod:`.feeds`; ``spider.state`` as JSON is the meta key
    ``spider_state``), and at level protocol ``protocol(kind, key, value)`` (the
    requests learned rules hold back, and what deciding them needs:
    :mod:`iri_scrapy.protocol.jobdir_store`).  Writes go into one open transaction until
    :meth:`commit`; :meth:`sync` makes every commit durable.  *fsync_ms*
    ``None`` means every commit is synced.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        canonicalization_version: int = CANONICALIZATION_VERSION,
        tag: str = "",
        fsync_ms: int | None = DEFAULT_FSYNC_MS,
        allow_reset: bool = False,
        lifo: bool = True,
        start_lifo: bool = False,
        lanes: str = ONE,
    ) -> None:
        self.path = Path(path)
        #: What the ``lane`` column holds (:func:`.lanes.lanes_mode`): one lane ``""``
        #: or the download slot of each request.
        self.lanes = lanes
        #: LIFO or FIFO within a priority, for regular and for start requests.
        self.lifo = lifo
        self.start_lifo = start_lifo
        self.order = f"{'lifo' if lifo else 'fifo'},{'lifo' if start_lifo else 'fifo'}"
        self.canonicalization_version = canonicalization_version
        self.tag = tag
        self.fsync_ms = fsync_ms
        self.reset_from: Path | None = None
        #: True if the store existed and its last run did not close it.
        self.unclean = False
        self.commits = 0
        self.syncs = 0
        self._unsynced = False
        self._in_tx = False
        #: The changes of the open transaction, kept until they are committed: a
        #: failed write rolls the transaction back, and :meth:`commit` replays them.
        self._ops: list[tuple[Any, ...]] = []
        #: The last write error while the store's changes are not on disk, else None.
        self.failed: sqlite3.Error | None = None
        self._next_id = 1
        self._conn: sqlite3.Connection = None  # type: ignore[assignment]
        existed = self.path.exists()
        try:
            self._open(existed, allow_reset)
        except FingerprintFileError:
            raise
        except sqlite3.DatabaseError as exc:
            kind = error_kind(exc, self.path)
            if self._conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    self._conn.close()
            if kind is None:
                raise  # a write that fails (disk full...): the caller says so
            raise unreadable_store(self.path, kind, exc) from exc

    def _open(self, existed: bool, allow_reset: bool) -> None:
        self._conn = self._connect()
        problem = self._check(existed)
        if problem is not None:
            if not allow_reset or getattr(problem, "kind", "") == READ_ONLY:
                self._conn.close()
                raise problem
            self._conn.close()
            aside = self.path.with_name(f"{self.path.name}.{int(time.time())}.old")
            os.replace(self.path, aside)
            for suffix in ("-wal", "-shm"):
                side = Path(str(self.path) + suffix)
                if side.exists():
                    os.replace(side, Path(str(aside) + suffix))
            self.reset_from = aside
            logger.warning(
                "%s; renamed it to %s and started a new frontier store (allowed by "
                "IRI_JOBDIR_ALLOW_RESET): requests seen before will be fetched again",
                problem, aside,
            )
            existed = False
            self._conn = self._connect()
            self._check(False)
        self.unclean = existed and self._get("clean") == "0"
        self._next_id = max_id(self._conn) + 1
        self._set("clean", "0")
        self.commit()
        if self.failed is not None:
            error, self.failed = self.failed, None
            self._conn.close()
            raise error
        self.sync()

    # --- opening -------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        except sqlite3.DatabaseError:
            conn.close()
            raise
        if str(mode).lower() != "wal":  # pragma: no cover - e.g. a read-only medium
            logger.warning("%s: SQLite refused WAL mode (%s)", self.path, mode)
        conn.execute(f"PRAGMA synchronous={'FULL' if self.fsync_ms is None else 'NORMAL'}")
        return conn

    @property
    def stored_lanes(self) -> str:
        """What the ``lane`` column holds now (``""``: not known, rows to be placed)."""
        return self._get("lanes") or ""

    def relane(self, lanes: Iterable[tuple[str, int]]) -> None:
        """Set the ``lane`` of each row id (``(lane, id)`` pairs) and record that the
        column holds :attr:`lanes` (one transaction: the pending rows do not change)."""
        conn = self._conn
        conn.execute("BEGIN")
        conn.executemany("UPDATE pending SET lane = ? WHERE id = ?", lanes)
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('lanes', ?)", (self.lanes,))
        conn.execute("COMMIT")

    def _check(self, existed: bool) -> FingerprintFileError | None:
        return check_store(
            self._conn, self.path, existed, canonicalization_version=self.canonicalization_version,
            tag=self.tag, order=self.order, lanes=self.lanes)

    def _get(self, key: str) -> str | None:
        return meta_get(self._conn, key)

    def _set(self, key: str, value: str) -> None:
        self._write(("meta", key, value))

    # --- reading -------------------------------------------------------------

    def seen_records(self) -> Iterator[int]:
        """Every stored fingerprint record, as an unsigned 64-bit integer."""
        return iter(self.seen_array())

    def seen_array(self) -> array[int]:
        """Every stored fingerprint record, unsigned 64-bit, in one ``array('Q')``
        (stored signed; converted in C, not one Python call per record)."""
        signed = array("q")
        cursor = self._conn.execute("SELECT fp FROM seen")
        while rows := cursor.fetchmany(65536):
            signed.extend(value for (value,) in rows)
        return array("Q", signed.tobytes())

    def pending_rows(self) -> list[tuple[int, bytes]]:
        """``(id, serialized request)`` of every pending request, oldest first."""
        return list(self._conn.execute("SELECT id, request FROM pending ORDER BY id"))

    def pending_after(
        self, lane: str, key: tuple[int, int, int] | None, limit: int
    ) -> list[tuple[int, bytes, int, int, int]]:
        """``(id, record, np, kind, ord)`` of the next *limit* pending rows of *lane*
        in crawl order (:func:`order_key`) after *key* (from the first if ``None``)."""
        if key is None:
            return list(self._conn.execute(
                "SELECT id, request, np, kind, ord FROM pending WHERE lane = ? "
                "ORDER BY lane, np, kind, ord LIMIT ?", (lane, limit)))
        return list(self._conn.execute(
            "SELECT id, request, np, kind, ord FROM pending WHERE lane = ? AND "
            "(np, kind, ord) > (?, ?, ?) ORDER BY lane, np, kind, ord LIMIT ?",
            (lane, *key, limit)))

    def lane_counts(self) -> dict[str, int]:
        """The number of pending rows of each lane."""
        return dict(self._conn.execute("SELECT lane, count(*) FROM pending GROUP BY lane"))

    def pending_count(self) -> int:
        return int(self._conn.execute("SELECT count(*) FROM pending").fetchone()[0])

    def seen_count(self) -> int:
        return int(self._conn.execute("SELECT count(*) FROM seen").fetchone()[0])

    # --- writing (into the open transaction) ---------------------------------

    def _begin(self) -> None:
        if not self._in_tx:
            self._conn.execute("BEGIN")
            self._in_tx = True

    def _write(self, op: tuple[Any, ...]) -> None:
        """Record *op* in the open transaction and apply it (unless a write failed:
        then it waits for :meth:`commit` to replay every change)."""
        self._ops.append(op)
        if self.failed is not None:
            return
        try:
            self._begin()
            apply_change(self._conn, op)
        except sqlite3.Error as exc:
            self._fail(exc)

    def _fail(self, exc: sqlite3.Error) -> None:
        """A write failed: SQLite may have rolled the transaction back (it does on
        ``SQLITE_FULL``, ``SQLITE_IOERR``...); roll back what it did not, so that no
        change of the transaction is on disk, and keep the changes to replay."""
        self.failed = exc
        conn = self._conn
        if conn is not None and conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):  # already rolled back
                conn.execute("ROLLBACK")
        self._in_tx = False

    def add(self, record: int | None, data: bytes, *, priority: int = 0,
            start: bool = False, lane: str = "") -> int:
        """Store a pending request (and its fingerprint *record*, if any); its row id.

        *priority*, *start* (a start request) and *lane* place it in the crawl order."""
        rowid = self._next_id
        self._next_id += 1
        self._write(("add", record, data, rowid, *self.key(rowid, priority, start), lane))
        return rowid

    def key(self, rowid: int, priority: int, start: bool) -> tuple[int, int, int]:
        """The crawl-order key of a request (see :func:`order_key`)."""
        return order_key(rowid, priority, start, lifo=self.lifo, start_lifo=self.start_lifo)

    @property
    def next_id(self) -> int:
        """The id the next stored request will get."""
        return self._next_id

    def add_seen(self, record: int) -> None:
        """Store a fingerprint record without a pending request."""
        self._write(("seen", record))

    def done(self, rowid: int) -> None:
        """Delete the pending row *rowid* (its request was answered)."""
        self._write(("done", rowid))

    def remove(self, rowid: int) -> None:
        """Alias of :meth:`done` for rows that cannot be read back."""
        self.done(rowid)

    def refuse(self, rowid: int, kind: str) -> None:
        """Move the pending row *rowid* to the ``refused`` table (a record that could
        not be read back: kept for inspection, never read again by the crawl)."""
        self._write(("refuse", rowid, kind, time.time()))

    def set_feed(self, path: str, offset: int, items: int, template: str = "",
                 batch: int = 0) -> None:
        """Record that the feed file *path* holds *offset* committed bytes, *items* items
        (batch *batch* of the feed URI *template*, for a batch feed)."""
        self._write(("feed", path, offset, items, template, batch))

    def last_batch(self, template: str) -> tuple[int, int] | None:
        """``(batch id, items)`` of the newest file recorded for the feed URI *template*."""
        if not self._has_table("feeds"):
            return None
        row = self._conn.execute(
            "SELECT batch, items FROM feeds WHERE template = ? AND batch > 0 ORDER BY batch "
            "DESC LIMIT 1", (template,)).fetchone()
        return None if row is None else (int(row[0]), int(row[1]))

    def feed(self, path: str) -> tuple[int, int] | None:
        """``(offset, items)`` committed for the feed file *path*, or None."""
        if not self._has_table("feeds"):
            return None
        row = self._conn.execute("SELECT offset, items FROM feeds WHERE path = ?",
                                 (path,)).fetchone()
        return None if row is None else (int(row[0]), int(row[1]))

    def protocol_set(self, kind: str, key: str, value: bytes) -> None:
        """Record the learned protocol level's *value* for (*kind*, *key*)
        (:mod:`iri_scrapy.protocol.jobdir_store`), in the open transaction."""
        self._write(("pset", kind, key, value))

    def protocol_delete(self, kind: str, key: str) -> None:
        """Delete what :meth:`protocol_set` recorded for (*kind*, *key*)."""
        self._write(("pdel", kind, key))

    def protocol_rows(self, kind: str) -> list[tuple[str, bytes]]:
        """``(key, value)`` of every record of *kind*, oldest first."""
        if not self._has_table("protocol"):
            return []
        return [(str(k), bytes(v)) for k, v in self._conn.execute(
            "SELECT key, value FROM protocol WHERE kind = ? ORDER BY rowid", (kind,))]

    def set_spider_state(self, data: str) -> None:
        """Record ``spider.state`` as JSON text (``""``: not kept, see spider_state)."""
        self._set("spider_state", data)

    def spider_state(self) -> str | None:
        """The JSON text recorded by :meth:`set_spider_state`, or None."""
        return self._get("spider_state")

    def _has_table(self, name: str) -> bool:
        return has_table(self._conn, name)

    def refused_rows(self) -> list[tuple[int, bytes, str]]:
        """``(id, record, kind)`` of every refused record (see :meth:`refuse`)."""
        tables = {row[0] for row in self._conn.execute(
            "SELECT name FROM sqlite_master WHERE type='table'")}
        if "refused" not in tables:
            return []
        return list(self._conn.execute("SELECT id, request, kind FROM refused ORDER BY id"))

    @property
    def in_transaction(self) -> bool:
        """True while changes wait for :meth:`commit` (also after a failed write)."""
        return bool(self._ops)

    @property
    def synchronous(self) -> str:
        """SQLite's ``synchronous`` mode on this store's connection, read from SQLite:
        ``"FULL"`` when every commit is synced (*fsync_ms* ``None``), ``"NORMAL"``
        when :meth:`sync` makes the commits durable."""
        level = int(self._conn.execute("PRAGMA synchronous").fetchone()[0])
        return {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}.get(level, str(level))

    def commit(self) -> bool:
        """Commit the open transaction (survives the process being killed).

        A write error (disk full, I/O error) is not raised: the transaction is
        rolled back, :attr:`failed` says why and the changes are kept; the next
        call replays them in a new transaction.  True if changes were committed.
        """
        if not self._ops:
            return False
        try:
            if self.failed is not None or not self._in_tx:
                # replay: nothing of the changes is on disk
                self._begin()
                for op in self._ops:
                    apply_change(self._conn, op)
            self._conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self._fail(exc)
            return False
        self._in_tx = False
        self._ops.clear()
        self.failed = None
        self.commits += 1
        self._unsynced = self.fsync_ms is not None
        return True

    def sync(self) -> bool:
        """Make every commit durable (survives power loss): a WAL checkpoint.

        With ``synchronous=NORMAL`` SQLite syncs the log before a checkpoint and
        the database after it.  The open transaction is committed first (any
        point between two changes is a consistent state, see docs/jobdir.md,
        "Design").  A no-op when nothing was committed since.
        """
        self.commit()
        if not self._unsynced or self.failed is not None:
            return False
        self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        self._unsynced = False
        self.syncs += 1
        return True

    def close(self, clean: bool = True) -> None:
        """Commit, mark the store cleanly closed (if *clean*), sync and close."""
        if self.closed:
            return
        try:
            self.commit()
            if clean and self.failed is None:
                self._set("clean", "1")
                self.commit()
            if self.failed is None:
                self._unsynced = True
                self.sync()
        finally:
            self._conn.close()
            self._conn = None  # type: ignore[assignment]

    @property
    def closed(self) -> bool:
        return self._conn is None
