"""The frontier store's file (``<JOBDIR>/iri_frontier.sqlite3``): its schema, and salvage.

The schema is shared by :class:`iri_scrapy.frontier.sqlite_store.FrontierStore` (which
reads and writes it during a crawl) and ``iri-scrapy frontier salvage`` (which
must not load Scrapy, see ``docs/architecture.md``): stdlib :mod:`sqlite3` only.

:func:`salvage` copies every record SQLite can still read out of a damaged or
truncated store into a fresh one: the pending requests (as stored: records are
data, checked when the crawl reads them), the seen fingerprints, the refused
records, the feed offsets, the meta table.  It reads past damaged pages id by id, so one bad page
costs only the rows on it, and it says how many ids it could not read.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iri_scrapy.core.errors import IRIScrapyError

FILENAME = "iri_frontier.sqlite3"
#: Held (``flock``, exclusive) by the crawl that uses the ``JOBDIR``.
LOCK_FILENAME = "iri_frontier.lock"
FORMAT_VERSION = 3

META_DDL = "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
SEEN_DDL = "CREATE TABLE seen (fp INTEGER NOT NULL)"
PENDING_DDL = (
    "CREATE TABLE pending (id INTEGER PRIMARY KEY AUTOINCREMENT, request BLOB NOT NULL, "
    "np INTEGER NOT NULL DEFAULT 0, kind INTEGER NOT NULL DEFAULT 0, "
    "ord INTEGER NOT NULL DEFAULT 0, lane TEXT NOT NULL DEFAULT '')"
)
#: Rows in crawl order within a lane (a download slot, see iri_scrapy.frontier.lanes).
PENDING_INDEX = "CREATE INDEX IF NOT EXISTS pending_lane ON pending (lane, np, kind, ord)"
REFUSED_DDL = (
    "CREATE TABLE IF NOT EXISTS refused (id INTEGER PRIMARY KEY, request BLOB NOT NULL, "
    "kind TEXT NOT NULL, at REAL NOT NULL)"
)
#: Each staged feed file: its committed byte offset and item count (iri_scrapy.frontier.feeds).
#: A batch feed's file also names its URI template and batch id.
FEEDS_DDL = (
    "CREATE TABLE IF NOT EXISTS feeds (path TEXT PRIMARY KEY, offset INTEGER NOT NULL, "
    "items INTEGER NOT NULL, template TEXT NOT NULL DEFAULT '', batch INTEGER NOT NULL "
    "DEFAULT 0)"
)

#: The learned protocol level's state (iri_scrapy.protocol.jobdir_store): per *kind*
#: (``held``: a request a learned rule holds back; ``holder``: the alias that holds
#: a key; ``page``: a 2xx page's content digest), one value per key.
PROTOCOL_DDL = (
    "CREATE TABLE IF NOT EXISTS protocol (kind TEXT NOT NULL, key TEXT NOT NULL, "
    "value BLOB NOT NULL, PRIMARY KEY (kind, key))"
)


def order_key(rowid: int, priority: int, start: bool, *, lifo: bool = True,
              start_lifo: bool = False) -> tuple[int, int, int]:
    """``(np, kind, ord)``: the crawl order of a pending request, smallest first.

    Scrapy's ``ScrapyPriorityQueue``: the highest priority first (``np`` is the
    negated priority); within a priority, regular requests (kind 0) before start
    requests (kind 1, only when a start queue class is set); within those, the
    newest first for a LIFO queue (Scrapy's default ``PickleLifoDiskQueue``), the
    oldest first for a FIFO one (start requests: ``PickleFifoDiskQueue``).  Row ids
    grow, so ``ord`` is ``-id`` or ``id``.
    """
    if start:
        return -priority, 1, -rowid if start_lifo else rowid
    return -priority, 0, -rowid if lifo else rowid


def order_modes(order: str) -> tuple[bool, bool]:
    """The meta ``order`` value (``"lifo,fifo"``) as (regular LIFO, start LIFO)."""
    regular, _, start = order.partition(",")
    return regular != "fifo", start == "lifo"


def priority_of(data: Any) -> tuple[int, bool]:
    """Priority and start flag of a JSON record; ``(0, False)`` for anything else."""
    try:
        loaded = json.loads(bytes(data).decode("utf-8"))
    except (ValueError, TypeError, RecursionError):
        return 0, False
    if type(loaded) is not dict:
        return 0, False
    priority = loaded.get("priority")
    meta = loaded.get("meta")
    start = type(meta) is dict and meta.get("is_start_request") is True
    return (priority if type(priority) is int else 0), start


class SalvageError(IRIScrapyError, RuntimeError):
    """Nothing can be salvaged (no store, no readable meta table, a crawl running)."""


@dataclass
class SalvageReport:
    """What :func:`salvage` saved and could not read."""

    source: Path
    target: Path
    #: Where the damaged store was moved (in place), else None.
    kept_as: Path | None = None
    #: The store was readable and whole (:func:`is_whole`): left untouched, nothing copied.
    whole: bool = False
    pending: int = 0
    pending_unreadable: int = 0
    seen: int = 0
    seen_unreadable: int = 0
    refused: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def lost(self) -> bool:
        return bool(self.pending_unreadable or self.seen_unreadable)


def _rows(conn: sqlite3.Connection, table: str, columns: str, key: str,
          last: int) -> Iterator[tuple[Any, ...]]:
    """Rows of *table* by *key* order (the rowid), skipping ids SQLite cannot read:
    yields ``("bad", id)`` for each of them, ``("ok", row)`` else.  Bounded by *last*,
    the highest id that may exist."""
    cur = 0
    done: set[int] = set()  # a damaged b-tree may give a row twice, or out of order
    while cur <= last:
        try:
            for row in conn.execute(
                    f"SELECT {key}, {columns} FROM {table} WHERE {key} > ? ORDER BY {key}",
                    (cur,)):
                rowid = int(row[0])
                if rowid in done:
                    continue
                done.add(rowid)
                cur = max(cur, rowid)
                yield ("ok", row)
            return
        except sqlite3.DatabaseError:
            pass
        # the scan broke after id cur: probe the next ids one by one
        while cur < last:
            cur += 1
            try:
                row = conn.execute(f"SELECT {key}, {columns} FROM {table} WHERE {key} = ?",
                                   (cur,)).fetchone()
            except sqlite3.DatabaseError:
                yield ("bad", cur)
                continue
            if row is not None and int(row[0]) not in done:
                done.add(int(row[0]))
                yield ("ok", row)
            break  # readable again: back to scanning
        else:
            return


def _highest(conn: sqlite3.Connection, table: str, key: str, floor: int) -> int:
    """The highest id of *table* SQLite can tell, at least *floor*."""
    best = floor
    for query in (f"SELECT max({key}) FROM {table}",
                  "SELECT seq FROM sqlite_sequence WHERE name = 'pending'"):
        with contextlib.suppress(sqlite3.DatabaseError, TypeError):
            row = conn.execute(query).fetchone()
            if row is not None and row[0] is not None:
                best = max(best, int(row[0]))
    return best


def _damaged_json(data: bytes | str) -> bool:
    """True for a JSON record (the codec's data records start with ``{``) that does not
    parse: part of it was on a page that is gone.  Signed records cannot be checked
    without the secret: the crawl checks them."""
    raw = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data
    if raw[:1] != b"{":
        return False
    try:
        json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):
        return True
    return False


def _pad_truncated(path: Path) -> bool:
    """A truncated SQLite file is refused whole by SQLite ("malformed", even its schema):
    pad the copy with zero bytes up to the size its header gives (file format,
    section 1.3: page size at offset 16, page count at 28), so that only the pages
    that are gone cannot be read.  True if padded."""
    size = path.stat().st_size
    with path.open("r+b") as f:
        header = f.read(100)
        if len(header) < 100 or not header.startswith(b"SQLite format 3\0"):
            return False
        page_size = int.from_bytes(header[16:18], "big")
        page_size = 65536 if page_size == 1 else page_size
        pages = int.from_bytes(header[28:32], "big")
        want = pages * page_size
        if page_size < 512 or want <= size:
            return False
        f.truncate(want)  # extends with zero bytes
    return True


def is_whole(path: Path) -> bool:
    """True if the SQLite file at *path* is readable and whole: ``PRAGMA quick_check``
    finds nothing wrong (every page and b-tree of the file), and it has the tables of a
    frontier store with a meta table naming its options and a format a crawl reads.
    Such a store needs no salvage: the crawl opens it as it is."""
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True,
                               isolation_level=None)
    except sqlite3.DatabaseError:
        return False
    try:
        if conn.execute("PRAGMA quick_check").fetchall() != [("ok",)]:
            return False
        tables = {row[0] for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not {"meta", "pending", "seen"} <= tables:
            return False
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    except sqlite3.DatabaseError:
        return False
    finally:
        conn.close()
    return ({"canonicalization", "tag"} <= set(meta)
            and meta.get("format") in ("1", str(FORMAT_VERSION)))


def _lock(jobdir: Path) -> int:
    path = jobdir / LOCK_FILENAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise SalvageError(
            f"JOBDIR {jobdir} is in use by a crawl: stop it before salvaging its store"
        ) from None
    return fd


def salvage(jobdir: str | os.PathLike[str], out: str | os.PathLike[str] | None = None,
            *, progress: Callable[[str], None] | None = None) -> SalvageReport:
    """Copy every readable record of ``<jobdir>/iri_frontier.sqlite3`` into a new store.

    Without *out*: in place (the ``JOBDIR`` must be writable and no crawl may hold
    it): the new store takes the old one's name and the damaged file is kept as
    ``iri_frontier.sqlite3.damaged-<time>``.  With *out* (a folder, for a
    read-only ``JOBDIR``): the new store is ``<out>/iri_frontier.sqlite3``; point
    ``JOBDIR`` at *out* (copy the rest of the old ``JOBDIR`` beside it if you use
    it).  In place, a store that is readable and whole (:func:`is_whole`) is left
    untouched: the report says so (``whole``).  Raises :class:`SalvageError` when
    nothing can be salvaged.
    """
    src_dir = Path(jobdir)
    source = src_dir / FILENAME
    if not source.is_file():
        raise SalvageError(f"{source} does not exist: nothing to salvage")
    dest_dir = Path(out) if out is not None else src_dir
    dest_dir.mkdir(parents=True, exist_ok=True)
    target = dest_dir / FILENAME
    if out is not None and target.exists():
        raise SalvageError(f"{target} exists already: give --out an empty folder")
    report = SalvageReport(source=source, target=target)
    lock_fd = _lock(dest_dir) if out is None else None
    stamp = time.strftime("%Y%m%dT%H%M%S")
    work = dest_dir / f".{FILENAME}.salvage-{os.getpid()}"
    copy = dest_dir / f".{FILENAME}.source-{os.getpid()}"
    try:
        # read a copy (with its write-ahead log): the original is never written
        shutil.copyfile(source, copy)
        wal = Path(f"{source}-wal")
        if wal.exists():
            shutil.copyfile(wal, Path(f"{copy}-wal"))
        if _pad_truncated(copy):
            report.notes.append("the file was shorter than its header says (truncated): "
                                "the missing pages were read as empty")
        elif out is None and is_whole(copy):
            report.whole = True
            return report
        _copy_records(copy, work, report)
        if out is None:
            kept = src_dir / f"{FILENAME}.damaged-{stamp}"
            os.replace(source, kept)
            for suffix in ("-wal", "-shm"):
                side = Path(f"{source}{suffix}")
                if side.exists():
                    os.replace(side, Path(f"{kept}{suffix}"))
            report.kept_as = kept
        os.replace(work, target)
    finally:
        for leftover in (work, copy, Path(f"{copy}-wal"), Path(f"{copy}-shm"),
                         Path(f"{work}-journal")):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
        if lock_fd is not None:
            os.close(lock_fd)
    return report


def _copy_records(source: Path, target: Path, report: SalvageReport) -> None:
    src = _open_source(source, report)
    meta = _source_meta(src, report)
    fmt = meta.get("format")
    order = meta.get("order") or "lifo,fifo"
    with contextlib.suppress(FileNotFoundError):
        target.unlink()
    dst = sqlite3.connect(target, isolation_level=None)
    try:
        dst.execute("PRAGMA journal_mode=DELETE")
        dst.execute("BEGIN")
        for ddl in (META_DDL, SEEN_DDL, PENDING_DDL, PENDING_INDEX, REFUSED_DDL):
            dst.execute(ddl)
        if fmt != str(FORMAT_VERSION):
            meta["lanes"] = ""  # every row in lane '': the crawl places them again
        meta.update({"format": str(FORMAT_VERSION), "clean": "1", "order": order})
        dst.executemany("INSERT INTO meta VALUES (?, ?)", sorted(meta.items()))
        highest = _copy_pending(src, dst, fmt, order, report)
        _copy_seen(src, dst, report)
        highest = _copy_refused(src, dst, report, highest)
        _copy_feeds(src, dst, report)
        _copy_protocol(src, dst, report)
        # ids are never reused: the sequence goes on from the highest id known
        if dst.execute("UPDATE sqlite_sequence SET seq = max(seq, ?) WHERE name = 'pending'",
                       (highest,)).rowcount == 0:
            dst.execute("INSERT INTO sqlite_sequence (name, seq) VALUES ('pending', ?)",
                        (highest,))
        dst.execute("COMMIT")
    finally:
        src.close()
        dst.close()


def _copy_feeds(src: sqlite3.Connection, dst: sqlite3.Connection,
                report: SalvageReport) -> None:
    """Copy the staged feed files' committed offsets (iri_scrapy.frontier.feeds), if any."""
    if src.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'feeds'"
                   ).fetchone() is None:
        return
    try:
        rows = src.execute("SELECT path, offset, items, template, batch FROM feeds").fetchall()
    except sqlite3.DatabaseError as exc:
        report.notes.append(
            f"its feed offsets could not be read ({exc}): each feed file is taken as it is "
            "at the next start (items of the pages then in flight may be written twice)")
        return
    dst.execute(FEEDS_DDL)
    dst.executemany("INSERT INTO feeds VALUES (?, ?, ?, ?, ?)", rows)


def _copy_protocol(src: sqlite3.Connection, dst: sqlite3.Connection,
                   report: SalvageReport) -> None:
    """Copy the learned protocol level's state (requests held back...), if any."""
    if src.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'protocol'"
                   ).fetchone() is None:
        return
    try:
        rows = src.execute("SELECT kind, key, value FROM protocol").fetchall()
    except sqlite3.DatabaseError as exc:
        report.notes.append(
            f"its protocol state could not be read ({exc}): the requests learned rules "
            "held back are not in the salvaged store (crawl again without JOBDIR's seen "
            "pages, or at another IRI_LEVEL, to fetch them)")
        return
    dst.execute(PROTOCOL_DDL)
    dst.executemany("INSERT INTO protocol VALUES (?, ?, ?)", rows)


def _open_source(source: Path, report: SalvageReport) -> sqlite3.Connection:
    """The damaged store, opened, if it has a frontier store's tables."""
    try:
        src = sqlite3.connect(source, isolation_level=None)
        tables = {row[0] for row in src.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as exc:
        raise SalvageError(
            f"{report.source} cannot be read at all ({exc}): nothing can be salvaged; move "
            "it aside and start the crawl again") from None
    if "pending" not in tables or "seen" not in tables:
        src.close()
        raise SalvageError(f"{report.source} is not an iri_scrapy frontier store: nothing "
                           "to salvage")
    return src


def _source_meta(src: sqlite3.Connection, report: SalvageReport) -> dict[str, str]:
    """The store's meta table (or a stand-in when unreadable); *src* closed on refusal."""
    try:
        meta = dict(src.execute("SELECT key, value FROM meta").fetchall())
    except sqlite3.DatabaseError as exc:
        names = {row[1] for row in src.execute("PRAGMA table_info(pending)")}
        meta = {"format": str(FORMAT_VERSION) if "ord" in names else "1",
                "canonicalization": "", "tag": "", "adopt_options": "1"}
        report.notes.append(
            f"its meta table could not be read ({exc}): the next crawl on this JOBDIR "
            "takes its own options (run it with the settings of the crawl that wrote it)")
    if not {"canonicalization", "tag"} <= set(meta):
        src.close()
        raise SalvageError(f"{report.source} is not an iri_scrapy frontier store (no options "
                           "in its meta table): nothing to salvage")
    fmt = meta.get("format")
    if fmt not in ("1", "2", str(FORMAT_VERSION)):
        src.close()
        raise SalvageError(f"{report.source} has frontier format {fmt}; this iri_scrapy "
                           f"reads formats 1 to {FORMAT_VERSION}")
    return meta


def _copy_pending(src: sqlite3.Connection, dst: sqlite3.Connection, fmt: str | None,
                  order: str, report: SalvageReport) -> int:
    """Copy the readable pending requests; the highest id the source had."""
    lifo, start_lifo = order_modes(order)
    # pending: with the order columns (format 1 has none: from the JSON record)
    columns = {"1": "request", "2": "request, np, kind, ord"}.get(
        str(fmt), "request, np, kind, ord, lane")
    last = _highest(src, "pending", "id", 0)
    for state, row in _rows(src, "pending", columns, "id", last):
        if state == "bad":
            report.pending_unreadable += 1
            continue
        assert isinstance(row, tuple)
        rowid, data = row[0], row[1]
        if not isinstance(data, (bytes, str)) or not isinstance(rowid, int) or (
                _damaged_json(data)):
            report.pending_unreadable += 1  # a damaged cell or overflow page
            continue
        if fmt == "1" or not all(isinstance(v, int) for v in row[2:5]):
            priority, start = priority_of(data)
            key = order_key(rowid, priority, start, lifo=lifo, start_lifo=start_lifo)
        else:
            key = (row[2], row[3], row[4])
        lane = row[5] if len(row) > 5 and isinstance(row[5], str) else ""
        dst.execute("INSERT INTO pending VALUES (?, ?, ?, ?, ?, ?)",
                    (rowid, data, *key, lane))
        report.pending += 1
    return last


def _copy_seen(src: sqlite3.Connection, dst: sqlite3.Connection,
               report: SalvageReport) -> None:
    """Copy the readable seen fingerprints (rowid order)."""
    seen_last = _highest(src, "seen", "rowid", 0)
    batch: list[tuple[int]] = []
    for state, row in _rows(src, "seen", "fp", "rowid", seen_last):
        if state == "bad":
            report.seen_unreadable += 1
            continue
        assert isinstance(row, tuple)
        if not isinstance(row[1], int):
            report.seen_unreadable += 1
            continue
        batch.append((row[1],))
        if len(batch) >= 10000:
            dst.executemany("INSERT INTO seen VALUES (?)", batch)
            batch.clear()
    dst.executemany("INSERT INTO seen VALUES (?)", batch)
    report.seen = _count(dst, "seen")


def _copy_refused(src: sqlite3.Connection, dst: sqlite3.Connection,
                  report: SalvageReport, highest: int) -> int:
    """Copy the refused records (kept for inspection), best effort; *highest* raised to
    their highest id."""
    try:
        refused = list(src.execute("SELECT id, request, kind, at FROM refused"))
    except sqlite3.DatabaseError:
        refused = []
    dst.executemany("INSERT OR REPLACE INTO refused VALUES (?, ?, ?, ?)", refused)
    report.refused = len(refused)
    for rowid, *_ in refused:
        highest = max(highest, int(rowid))
    return highest


def _count(conn: sqlite3.Connection, table: str) -> int:
    return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
