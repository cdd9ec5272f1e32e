"""Opening the ``JOBDIR`` frontier's SQLite file: its faults, its schema, its checks.

:class:`~iri_scrapy.frontier.sqlite_store.FrontierStore` calls :func:`check_store`
when it opens ``<JOBDIR>/iri_frontier.sqlite3``: a new file gets the schema of
:mod:`iri_scrapy.store.frontier_file` (one home, with salvage); an existing one
must have this format, this canonicalization version and these options (else a
:class:`~iri_scrapy.store.fpstore.FingerprintFileMismatch`), and its stored order
is flipped when the queue classes changed (LIFO <-> FIFO).  A file that cannot be
read or written is a :class:`FrontierStoreUnreadable` of a kind (:data:`READ_ONLY`,
:data:`DAMAGED`), which the scheduler turns into one ERROR line saying what to do.
Faults and salvage: docs/frontier.md.
"""

from __future__ import annotations

import errno
import logging
import os
import sqlite3
from pathlib import Path
from typing import Any

from iri_scrapy.frontier.errors import FrontierError
from iri_scrapy.store.fpstore import (
    FingerprintFileError,
    FingerprintFileMismatch,
    mismatch_text,
)
from iri_scrapy.store.frontier_file import (
    FEEDS_DDL,
    FORMAT_VERSION,
    META_DDL,
    PENDING_DDL,
    PENDING_INDEX,
    PROTOCOL_DDL,
    REFUSED_DDL,
    SEEN_DDL,
    order_modes,
)

#: The store's log lines (one logger for the store and its opening).
logger = logging.getLogger("iri_scrapy.frontier.sqlite_store")


#: ``FrontierStoreUnreadable.kind``: the store's file or disk cannot be written.
READ_ONLY = "read-only"
#: ``FrontierStoreUnreadable.kind``: SQLite cannot read the file (damaged, truncated, not SQLite).
DAMAGED = "damaged"


class FrontierStoreUnreadable(FingerprintFileError, FrontierError):
    """The store cannot be used: *kind* :data:`DAMAGED` or :data:`READ_ONLY`."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


def read_only_medium(path: Path) -> bool:
    """True if *path*'s folder is on a read-only file system or cannot be written."""
    folder = path.parent
    try:
        if os.statvfs(folder).f_flag & os.ST_RDONLY:
            return True
    except OSError:  # pragma: no cover
        return False
    if not os.access(folder, os.W_OK):
        return True
    return path.exists() and not os.access(path, os.W_OK)


def error_kind(exc: BaseException, path: Path) -> str | None:
    """:data:`READ_ONLY`, :data:`DAMAGED`, or None (another error: a full disk...)."""
    name = str(getattr(exc, "sqlite_errorname", "") or "")
    text = str(exc).lower()
    if (name.startswith("SQLITE_READONLY") or "readonly" in text or "read-only" in text
            or (isinstance(exc, OSError) and exc.errno in (errno.EROFS, errno.EACCES,
                                                           errno.EPERM))):
        return READ_ONLY
    if (name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")) or "malformed" in text
            or "not a database" in text):
        return DAMAGED
    if name.startswith("SQLITE_CANTOPEN") or "unable to open" in text:
        return READ_ONLY if read_only_medium(path) else DAMAGED
    return None


def unreadable_store(path: Path, kind: str, exc: BaseException) -> FrontierStoreUnreadable:
    """The one-line refusal for a store that cannot be used, saying what to do."""
    jobdir = path.parent
    if kind == READ_ONLY:
        return FrontierStoreUnreadable(
            f"Frontier store {path} cannot be written: JOBDIR {jobdir} is read-only ({exc}). "
            "The store itself may well be intact, keep it: make JOBDIR writable (its disk "
            "and its files), or copy the JOBDIR folder to a writable disk and point JOBDIR "
            "at the copy", kind)
    return FrontierStoreUnreadable(
        f"Frontier store {path} cannot be read: it is damaged, truncated or not an "
        f"iri_scrapy frontier store ({exc}). Run `iri-scrapy frontier salvage {jobdir}` to "
        "copy every readable pending request into a new store (it keeps the damaged file "
        "aside), then run the "
        "crawl again; or move the file aside to start over (pages seen before are "
        "fetched again)", kind)


def meta_get(conn: sqlite3.Connection, key: str) -> str | None:
    """The ``meta`` table's value for *key*, or None."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


def check_store(conn: sqlite3.Connection, path: Path, existed: bool, *,
                canonicalization_version: int, tag: str, order: str,
                lanes: str) -> FingerprintFileError | None:
    """The fault of the store at *path* open on *conn* (None: it may be used), its
    schema created when new and its order flipped to *order* when it changed."""
    try:
        tables = {row[0] for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.DatabaseError as exc:
        kind = error_kind(exc, path)
        if kind is None:
            raise
        return unreadable_store(path, kind, exc)
    if existed and tables and "meta" not in tables:
        return FingerprintFileError(
            f"{path} is not an iri_scrapy frontier store (no meta table); remove it "
            "or point JOBDIR elsewhere"
        )
    if "meta" not in tables:
        conn.execute("BEGIN")
        conn.execute(META_DDL)
        conn.execute(SEEN_DDL)
        conn.execute(PENDING_DDL)
        conn.execute(PENDING_INDEX)
        for key, value in (
            ("format", str(FORMAT_VERSION)),
            ("canonicalization", str(canonicalization_version)),
            ("tag", tag),
            ("clean", "1"),
            ("order", order),
            ("lanes", lanes),
        ):
            conn.execute("INSERT INTO meta VALUES (?, ?)", (key, value))
        conn.execute("COMMIT")
        return None
    fmt = meta_get(conn, "format")
    if fmt != str(FORMAT_VERSION):
        return FingerprintFileError(
            f"{path} has frontier format {fmt}; this iri_scrapy reads format "
            f"{FORMAT_VERSION}"
        )
    if meta_get(conn, "adopt_options") == "1":
        # salvaged from a store whose meta table could not be read: this crawl's
        # options are taken (the salvage said so)
        logger.warning(
            "%s was salvaged without its options (its meta table could not be read): "
            "taking this crawl's (canonicalization version %d, options %r)",
            path, canonicalization_version, tag)
        conn.execute("BEGIN")
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('canonicalization', ?)",
                     (str(canonicalization_version),))
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('tag', ?)", (tag,))
        conn.execute("DELETE FROM meta WHERE key = 'adopt_options'")
        conn.execute("COMMIT")
    canon, stored_tag = meta_get(conn, "canonicalization"), meta_get(conn, "tag")
    if canon != str(canonicalization_version) or stored_tag != tag:
        return FingerprintFileMismatch(
            f"{path} was written with "
            f"{mismatch_text(canon, stored_tag or '', canonicalization_version, tag)}: "
            "refusing to mix keys (set IRI_JOBDIR_ALLOW_RESET = True to start a new "
            "store, or use a new JOBDIR)"
        )
    reorder(conn, order)
    return None


def reorder(conn: sqlite3.Connection, order: str) -> None:
    """The queue classes changed since the last run (LIFO <-> FIFO): flip the stored
    order of the kind of rows concerned."""
    stored = meta_get(conn, "order") or "lifo,fifo"
    if stored == order:
        return
    old, new = order_modes(stored), order_modes(order)
    conn.execute("BEGIN")
    for kind in (0, 1):
        if old[kind] != new[kind]:
            conn.execute("UPDATE pending SET ord = -ord WHERE kind = ?", (kind,))
    conn.execute("INSERT OR REPLACE INTO meta VALUES ('order', ?)", (order,))
    conn.execute("COMMIT")


def max_id(conn: sqlite3.Connection) -> int:
    """The highest request id ever given (``sqlite_sequence``, ``pending``, ``refused``)."""
    tables = {row[0] for row in conn.execute(
        "SELECT name FROM sqlite_master WHERE type='table'")}
    ids = [0]
    if "sqlite_sequence" in tables:
        row = conn.execute(
            "SELECT seq FROM sqlite_sequence WHERE name = 'pending'").fetchone()
        ids.append(int(row[0]) if row is not None else 0)
    for table in ("pending", "refused"):
        if table in tables:
            ids.append(int(conn.execute(f"SELECT coalesce(max(id), 0) FROM {table}")
                           .fetchone()[0]))
    return max(ids)


#: ``2**64`` and ``2**63``: fingerprint records are unsigned, SQLite integers signed.
_U64 = 1 << 64
_I64 = 1 << 63

def signed(value: int) -> int:
    """A fingerprint record (unsigned 64 bits) as SQLite stores it (signed)."""
    return value - _U64 if value >= _I64 else value


def has_table(conn: sqlite3.Connection, name: str) -> bool:
    """True if the store has the (optional) table *name*."""
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?",
                        (name,)).fetchone() is not None


def apply_change(conn: sqlite3.Connection, op: tuple[Any, ...]) -> None:
    """Apply one change of the open transaction (:class:`.FrontierStore` keeps the
    changes, to replay them after a failed write): the SQL of each kind of change."""
    kind = op[0]
    if kind == "add":
        _, record, data, rowid, np_, kind_, ord_, lane = op
        if record is not None:
            conn.execute("INSERT INTO seen (fp) VALUES (?)", (signed(record),))
        conn.execute("INSERT INTO pending (id, request, np, kind, ord, lane) VALUES "
                     "(?, ?, ?, ?, ?, ?)", (rowid, data, np_, kind_, ord_, lane))
    elif kind == "seen":
        conn.execute("INSERT INTO seen (fp) VALUES (?)", (signed(op[1]),))
    elif kind == "done":
        conn.execute("DELETE FROM pending WHERE id = ?", (op[1],))
    elif kind == "refuse":
        _, rowid, why, at = op
        conn.execute(REFUSED_DDL)
        conn.execute(
            "INSERT OR REPLACE INTO refused SELECT id, request, ?, ? FROM pending WHERE id = ?",
            (why, at, rowid))
        conn.execute("DELETE FROM pending WHERE id = ?", (rowid,))
    elif kind == "pset":
        conn.execute(PROTOCOL_DDL)
        conn.execute("INSERT OR REPLACE INTO protocol VALUES (?, ?, ?)", op[1:])
    elif kind == "pdel":
        if has_table(conn, "protocol"):
            conn.execute("DELETE FROM protocol WHERE kind = ? AND key = ?", op[1:])
    elif kind == "feed":
        conn.execute(FEEDS_DDL)
        conn.execute("INSERT OR REPLACE INTO feeds VALUES (?, ?, ?, ?, ?)", op[1:])
    else:  # "meta"
        conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (op[1], op[2]))
