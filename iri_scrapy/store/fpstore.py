"""A compact set of request fingerprints and its resumable ``JOBDIR`` file.

Memory
======

Scrapy's ``RFPDupeFilter`` keeps a Python ``set`` of 20-byte ``bytes`` objects
(about 87 bytes per seen URL, object headers and set slots included).
:class:`FingerprintSet` keeps only the first 64 bits of each fingerprint, as bare
unsigned integers in open-addressing hash tables over ``array('Q')`` with linear
probing.  A slot costs 8 bytes; ``0`` marks an empty slot, so a fingerprint
whose 64 bits are all zero is stored as ``1``.

The set is :data:`SEGMENTS` (4096) independent tables, the *segments*: the top
12 bits of a value pick its segment, and the low 52 bits its first slot in it
(``(low52 * slots) >> 52``, Lemire's multiply-shift range reduction, so a
segment may have any number of slots, not only a power of two, and values in
sorted order have their first slots in order: a growth step sorts the segment
and lays it out without probing).  A segment
grows alone, by a quarter (:data:`GROWTH`), when more than :data:`MAX_LOAD`
(3/4) of its slots are used.  So:

* the load of every segment stays between 0.6 and 0.75 once it has 128 slots
  (below that a segment doubles: many tiny steps would cost more time than the
  memory they save): the set costs ``8 / load``, between 10.7 and 13.3 bytes
  per entry, at *every* size from about 500,000 entries on (worst case measured
  by ``benchmarks/bench_dupefilter.py`` right after each growth step, not only
  at lucky sizes; 11 to 17 from 10,000 entries on), and a growth step briefly
  adds one segment's old table (1/4096 of the data) instead of doubling the
  whole;
* one growth step rehashes one segment, about 1/4096 of the entries (2,400 at
  10 million, 24,000 at 100 million): a few milliseconds at 100 million in
  CPython, where rebuilding one big table took seconds on the reactor thread.

The initial set is 4096 x 4 slots (128 KiB).  Past 128 slots a segment's entries
are moved about four times over the set's life by growth steps
(``1 / (GROWTH - 1)``), against once with doubling; a growth step sorts the
segment and lays it out in one pass without probing.  Measured on 91,424 real
URLs, ``request_seen`` is about 12 % slower than over one doubling table: the
price of the small, even memory and the short pauses.

The fingerprints are SHA-1 digests (or any cryptographic digest), so their bits
are uniform: the slot is simply the low bits of the 64-bit value, with no
further hashing.  A fingerprint shorter than 8 bytes, or from a fingerprinter
whose output is not a digest of at least 16 bytes, is first hashed with
BLAKE2b (RFC 7693) to 64 bits (:func:`fp64`).

Collision risk
==============

Two different requests whose fingerprints share their first ``b`` bits are taken
for one another (a false merge: the second is dropped as a duplicate).  With
``n`` distinct requests the birthday bound gives the probability of *any*
false merge in the whole crawl as at most ``n**2 / 2**(b+1)``.  For ``b = 64``:

=========== =================
 n           P(any collision)
=========== =================
 1 million   2.7e-8
 10 million  2.7e-6
 100 million 2.7e-4
=========== =================

The width is fixed at 64 bits (not a setting): it is what makes a slot one
machine word, and a wider key would double the memory for a risk that is
already negligible at crawl sizes a single process holds.

The ``JOBDIR`` file (``<JOBDIR>/iri_fingerprints.bin``)
=======================================================

All integers big-endian::

    offset  size  field
    0       8     magic  b"IRIFPSET"
    8       2     format version (FORMAT_VERSION = 1)
    10      2     canonicalization version (iri_scrapy.CANONICALIZATION_VERSION)
    12      2     record size in bytes (8)
    14      2     length L of the options tag
    16      L     options tag, UTF-8 (IRIConfig.options_tag() and the fingerprinter)
    16+L    0-7   zero padding, so that records start at a multiple of 8
    H       8*k   records: the first 8 bytes of each new fingerprint, in the order seen

The header is written to a temporary file, fsync'ed and renamed into place, so
a crash never leaves a half-written header.  Records are appended through an
in-memory buffer that is written with one ``os.write`` when it holds
:data:`FLUSH_RECORDS` records or when :data:`FLUSH_SECONDS` have passed since the
last write (checked on every add, and by :meth:`FingerprintFile.flush`, which
the dupefilter calls once a second while the crawl runs), and on close (which
also fsyncs).  A record handed to the kernel by ``os.write`` survives the
process being killed (``kill -9``); only the unflushed buffer (at most 1000
records or one second of them) is lost, and those requests are fetched again
on resume.  On open a file whose length is not ``H + 8k`` ends in a torn
record: it is ignored and the file truncated to ``H + 8k``.

A header whose canonicalization version or options tag differ from the current
ones means the stored keys were made by a different canonicalization: mixing
them would silently merge or split resources, so opening raises
:class:`FingerprintFileMismatch`, unless ``allow_reset`` is true, in which case
the old file is renamed aside (``iri_fingerprints.bin.<time>.old``) and a new
one started.
"""

from __future__ import annotations

import logging
import os
import struct
import sys
import time
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from hashlib import blake2b
from pathlib import Path
from typing import Any

from iri_scrapy.core.shorten import shorten

__all__ = [
    "FingerprintSet",
    "FingerprintFile",
    "FingerprintFileError",
    "FingerprintFileMismatch",
    "mismatch_text",
    "fp64",
    "FILENAME",
    "MAGIC",
    "FORMAT_VERSION",
    "RECORD_SIZE",
    "MAX_LOAD",
    "GROWTH",
    "SEGMENT_BITS",
    "SEGMENTS",
    "FLUSH_RECORDS",
    "FLUSH_SECONDS",
]

logger = logging.getLogger(__name__)

FILENAME = "iri_fingerprints.bin"
MAGIC = b"IRIFPSET"
FORMAT_VERSION = 1
RECORD_SIZE = 8
#: A segment grows when more than this fraction of its slots is used...
MAX_LOAD = 0.75
#: ... to this many times its size (rounded up to a multiple of 4 slots).
GROWTH = 1.25
#: The top SEGMENT_BITS bits of a fingerprint pick its segment.
SEGMENT_BITS = 12
SEGMENTS = 1 << SEGMENT_BITS
#: Write the record buffer when it holds this many records...
FLUSH_RECORDS = 1000
#: ... or when this many seconds have passed since the last write.
FLUSH_SECONDS = 1.0

_HEADER = struct.Struct(">8sHHHH")
_SEGMENT_SHIFT = 64 - SEGMENT_BITS
_MIN_SEGMENT_SLOTS = 4
#: :meth:`FingerprintSet.update` rebuilds segments for a batch this large or larger.
BULK_MIN = 4096


def _grown(slots: int) -> int:
    """The size a segment of *slots* slots grows to: 1/4 more, a multiple of 4.

    Below 128 slots (a set of under about 400,000 entries) it doubles: many tiny
    growth steps would cost more time than the memory they save.
    """
    if slots < 128:
        return 2 * slots
    return (int(slots * GROWTH) + 3) & ~3


def fp64(fingerprint: bytes) -> bytes:
    """The 8-byte record kept for a request *fingerprint*.

    The first 8 bytes of a digest of at least 16 bytes (SHA-1 gives 20);
    anything else is hashed to 8 bytes with BLAKE2b (RFC 7693).
    """
    if len(fingerprint) >= 16:
        return fingerprint[:8]
    return blake2b(fingerprint, digest_size=8).digest()


class FingerprintSet:
    """A set of 64-bit unsigned integers in :data:`SEGMENTS` small tables.

    ``add`` and ``in`` take the integer form of a record
    (``int.from_bytes(record, "big")``).  The top :data:`SEGMENT_BITS` bits pick a
    segment (an ``array('Q')``, linear probing); the low 52 bits pick the first
    slot in it (``(low52 * slots) >> 52``, so a segment may have any size).  Each
    segment grows alone by 1/4 (:data:`GROWTH`) when more than :data:`MAX_LOAD`
    of its slots are used.  Not thread-safe.
    """

    __slots__ = ("_tables", "_room", "_len", "_slots", "_peak")

    def __init__(self, capacity: int = 0) -> None:
        per = _MIN_SEGMENT_SLOTS
        while per * MAX_LOAD < capacity / SEGMENTS:
            per = _grown(per)
        self._alloc(per)

    def _alloc(self, per: int) -> None:
        # Repetition allocates exactly; array("Q", bytes(n)) over-allocates by 1/16.
        self._tables = [array("Q", [0]) * per for _ in range(SEGMENTS)]
        #: Adds left in each segment before it grows.
        self._room = [int(per * MAX_LOAD)] * SEGMENTS
        self._len = 0
        self._slots = per * SEGMENTS
        self._peak = self._slots

    def add(self, value: int) -> bool:
        """Add *value*; True if it was new, False if it was already there."""
        if not value:
            value = 1
        s = value >> 52  # _SEGMENT_SHIFT
        table = self._tables[s]
        size = len(table)
        i = ((value & 0xFFFFFFFFFFFFF) * size) >> 52
        while True:
            slot = table[i]
            if slot == value:
                return False
            if not slot:
                table[i] = value
                self._len += 1
                room = self._room
                left = room[s] - 1
                room[s] = left
                if left < 0:
                    self._grow(s)
                return True
            i += 1
            if i == size:
                i = 0

    def __contains__(self, value: object) -> bool:
        if not isinstance(value, int) or not 0 <= value < 1 << 64:
            return False
        if not value:
            value = 1
        table = self._tables[value >> 52]
        size = len(table)
        i = ((value & 0xFFFFFFFFFFFFF) * size) >> 52
        while True:
            slot = table[i]
            if slot == value:
                return True
            if not slot:
                return False
            i += 1
            if i == size:
                i = 0

    def update(self, values: Iterable[int]) -> int:
        """Add every value; return how many were new.

        A batch of :data:`BULK_MIN` values or more (a resume loading a JOBDIR's or a
        store's fingerprints) is sorted once and each segment rebuilt at its final
        size in one pass, as :meth:`_grow` does, instead of growing step by step
        under one ``add`` per value (about 2.5x faster at 1,000,000).
        """
        batch = values if isinstance(values, list) else list(values)
        if len(batch) < BULK_MIN:
            added = 0
            for value in batch:
                if self.add(value):
                    added += 1
            return added
        before = self._len
        new = sorted(value or 1 for value in batch)
        start = 0
        for s in range(SEGMENTS):
            end = bisect_left(new, (s + 1) << 52, start)
            if end > start:
                self._rebuild(s, new[start:end])
            start = end
        return self._len - before

    def _rebuild(self, s: int, more: list[int]) -> None:
        """Segment *s* rebuilt with the sorted values *more* added (see :meth:`_grow`)."""
        old = self._tables[s]
        kept = len(old) - old.count(0)
        if kept:
            merged = [v for v in old if v] + more
            merged.sort()
        else:
            merged = more
        distinct = list(dict.fromkeys(merged))  # sorted, each value once
        size = len(old)
        while size * MAX_LOAD < len(distinct):
            size = _grown(size)
        table = array("Q", [0]) * size
        last = -1
        wrapped = []
        for value in distinct:
            i = ((value & 0xFFFFFFFFFFFFF) * size) >> 52
            if i <= last:
                i = last + 1
                if i == size:
                    wrapped.append(value)
                    continue
            table[i] = value
            last = i
        for value in wrapped:  # past the end: probe from slot 0, as lookups wrap
            i = 0
            while table[i]:
                i += 1
            table[i] = value
        self._tables[s] = table
        self._room[s] = int(size * MAX_LOAD) - len(distinct)
        self._len += len(distinct) - kept
        if self._slots + size > self._peak:
            self._peak = self._slots + size
        self._slots += size - len(old)

    def _grow(self, s: int) -> None:
        """Rebuild segment *s* 1/4 larger (about 1/SEGMENTS of the data moves).

        A value's first slot grows with the value itself (its segment's values
        share their top bits), so in sorted order each value goes to its first
        slot or just after the previous one: no probing, except for a run that
        reaches the end and wraps around to the start.
        """
        old = self._tables[s]
        size = _grown(len(old))
        table = array("Q", [0]) * size
        last = -1
        wrapped = []
        values = sorted(filter(None, old))
        for value in values:
            i = ((value & 0xFFFFFFFFFFFFF) * size) >> 52
            if i <= last:
                i = last + 1
                if i == size:
                    wrapped.append(value)
                    continue
            table[i] = value
            last = i
        for value in wrapped:  # past the end: probe from slot 0, as lookups wrap
            i = 0
            while table[i]:
                i += 1
            table[i] = value
        self._tables[s] = table
        self._room[s] = int(size * MAX_LOAD) - len(values)
        if self._slots + size > self._peak:  # the old segment was alive until now
            self._peak = self._slots + size
        self._slots += size - len(old)

    def clear(self) -> None:
        self._alloc(_MIN_SEGMENT_SLOTS)

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[int]:
        return (v for table in self._tables for v in table if v)

    @property
    def slots(self) -> int:
        """Slots of all segments together."""
        return self._slots

    @property
    def nbytes(self) -> int:
        """Bytes held by the tables (the array buffers)."""
        return 8 * self._slots

    @property
    def peak_nbytes(self) -> int:
        """The most bytes the tables held at once (during a growth step: old segment too)."""
        return 8 * self._peak

    @property
    def max_segment_slots(self) -> int:
        """Slots of the largest segment: what one growth step may have to move."""
        return max(len(t) for t in self._tables)


class FingerprintFileError(RuntimeError):
    """The fingerprint file cannot be used (not ours, unreadable header)."""


class FingerprintFileMismatch(FingerprintFileError):
    """The file was written by another canonicalization version or options."""


def mismatch_text(canon: Any, tag: str, version: int, our_tag: str) -> str:
    """What differs between stored keys and this crawl's, briefly, for one log line:
    ``level=simple (this crawl: scheme)``; the version only when it differs."""
    parts = []
    if str(canon) != str(version):
        parts.append(f"canonicalization version {canon} (this crawl: {version})")
    theirs = dict(p.partition("=")[::2] for p in str(tag).split(";") if p)
    mine = dict(p.partition("=")[::2] for p in our_tag.split(";") if p)
    for name in [*mine, *(n for n in theirs if n not in mine)]:
        if theirs.get(name) != mine.get(name):
            parts.append(f"{name}={shorten(theirs.get(name, '(none)'), 60)} "
                         f"(this crawl: {shorten(mine.get(name, '(none)'), 60)})")
    return ", ".join(parts) or "other options"


def _header(canonicalization_version: int, tag: str) -> bytes:
    raw = tag.encode("utf-8")
    head = _HEADER.pack(MAGIC, FORMAT_VERSION, canonicalization_version, RECORD_SIZE, len(raw))
    head += raw
    return head + bytes(-len(head) % RECORD_SIZE)


def _records_to_ints(data: bytes) -> array:
    values = array("Q", data)
    if sys.byteorder == "little":
        values.byteswap()
    return values


class FingerprintFile:
    """The append-only record file of a :class:`FingerprintSet` in ``JOBDIR``.

    Opening reads the records already there into :attr:`seen`; :meth:`add`
    adds to the set and, for a new fingerprint, buffers its record.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        canonicalization_version: int,
        tag: str,
        allow_reset: bool = False,
        flush_records: int = FLUSH_RECORDS,
        flush_seconds: float = FLUSH_SECONDS,
    ) -> None:
        self.path = Path(path)
        self.canonicalization_version = canonicalization_version
        self.tag = tag
        self.flush_records = flush_records
        self.flush_seconds = flush_seconds
        self._buf = bytearray()
        self._buf_limit = flush_records * RECORD_SIZE
        self._last_flush = time.monotonic()
        self.truncated_bytes = 0
        self.reset_from: Path | None = None
        self._fd = -1
        records = self._open(allow_reset)
        self.seen = FingerprintSet(capacity=len(records))
        self.seen.update(records)
        #: Records in the file when it was opened (after dropping a torn one).
        self.loaded = len(records)
        #: Records written to the file (handed to the kernel) since opening.
        self.flushed = 0

    # --- opening -----------------------------------------------------------

    def _open(self, allow_reset: bool) -> array:
        expected = _header(self.canonicalization_version, self.tag)
        if not self.path.exists():
            self._create(expected)
            return array("Q")
        with self.path.open("rb") as f:
            data = f.read()
        problem = self._check_header(data, expected)
        if problem is not None:
            if not allow_reset:
                raise problem
            aside = self.path.with_name(f"{self.path.name}.{int(time.time())}.old")
            os.replace(self.path, aside)
            self.reset_from = aside
            logger.warning(
                "%s; renamed it to %s and started a new fingerprint file (allowed by "
                "IRI_JOBDIR_ALLOW_RESET): requests seen before will be fetched again",
                problem, aside,
            )
            self._create(expected)
            return array("Q")
        body = len(data) - len(expected)
        torn = body % RECORD_SIZE
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        if torn:
            os.ftruncate(self._fd, len(data) - torn)
            self.truncated_bytes = torn
            logger.warning(
                "%s ended in a torn record (%d bytes after the last whole record, from an "
                "unclean shutdown): ignored and truncated", self.path, torn,
            )
        return _records_to_ints(data[len(expected) : len(data) - torn])

    def _check_header(self, data: bytes, expected: bytes) -> FingerprintFileError | None:
        if len(data) < _HEADER.size or data[:8] != MAGIC:
            return FingerprintFileError(
                f"{self.path} is not an iri_scrapy fingerprint file (bad magic or too "
                "short); remove it or point JOBDIR elsewhere"
            )
        magic, fmt, canon, record, tag_len = _HEADER.unpack_from(data)
        if fmt != FORMAT_VERSION or record != RECORD_SIZE:
            return FingerprintFileError(
                f"{self.path} has format version {fmt} with {record}-byte records; this "
                f"iri_scrapy reads format {FORMAT_VERSION} with {RECORD_SIZE}-byte records"
            )
        raw_tag = data[_HEADER.size : _HEADER.size + tag_len]
        tag = raw_tag.decode("utf-8", "replace")
        if canon != self.canonicalization_version or tag != self.tag:
            return FingerprintFileMismatch(
                f"{self.path} was written with "
                f"{mismatch_text(canon, tag, self.canonicalization_version, self.tag)}: "
                "refusing to mix keys (set IRI_JOBDIR_ALLOW_RESET = True to start a new file, "
                "or use a new JOBDIR)"
            )
        if data[: len(expected)] != expected:
            return FingerprintFileError(f"{self.path} has a damaged header")
        return None

    def _create(self, header: bytes) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, header)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        self._fsync_dir()
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)

    def _fsync_dir(self) -> None:
        try:
            dfd = os.open(self.path.parent, os.O_RDONLY)
        except OSError:  # pragma: no cover - platforms without directory fds
            return
        try:
            os.fsync(dfd)
        except OSError:  # pragma: no cover
            pass
        finally:
            os.close(dfd)

    # --- use ---------------------------------------------------------------

    def add(self, record: bytes) -> bool:
        """Add an 8-byte *record*; True if it was new (and is now buffered)."""
        if not self.seen.add(int.from_bytes(record, "big")):
            return False
        buf = self._buf
        buf += record
        if len(buf) >= self._buf_limit or time.monotonic() - self._last_flush >= self.flush_seconds:
            self.flush()
        return True

    def __contains__(self, record: bytes) -> bool:
        return int.from_bytes(record, "big") in self.seen

    def __len__(self) -> int:
        return len(self.seen)

    @property
    def pending(self) -> int:
        """Records buffered and not yet written."""
        return len(self._buf) // RECORD_SIZE

    def flush(self) -> None:
        """Hand the buffered records to the kernel (survives ``kill -9``)."""
        self._last_flush = time.monotonic()
        if not self._buf or self._fd < 0:
            return
        data = bytes(self._buf)
        view = memoryview(data)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]
        self.flushed += len(data) // RECORD_SIZE
        self._buf.clear()

    def clear(self) -> None:
        """Forget every fingerprint: empty the set and the file (header kept)."""
        self._buf.clear()
        self.seen.clear()
        header = _header(self.canonicalization_version, self.tag)
        os.ftruncate(self._fd, len(header))

    def close(self) -> None:
        """Flush, fsync and close the file.  Idempotent."""
        if self._fd < 0:
            return
        try:
            self.flush()
            os.fsync(self._fd)
        finally:
            os.close(self._fd)
            self._fd = -1

    @property
    def closed(self) -> bool:
        return self._fd < 0
