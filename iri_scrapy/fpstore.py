"""A compact set of request fingerprints and its resumable ``JOBDIR`` file.

Memory
======

Scrapy's ``RFPDupeFilter`` keeps a Python ``set`` of 20-byte ``bytes`` objects
(about 87 bytes per seen URL, object headers and set slots included).
:class:`FingerprintSet` keeps only the first 64 bits of each fingerprint, as bare
unsigned integers in one open-addressing hash table over ``array('Q')`` with
linear probing.  A slot costs 8 bytes; ``0`` marks an empty slot, so a
fingerprint whose 64 bits are all zero is stored as ``1``.  The table doubles
when more than :data:`MAX_LOAD` (3/4) of its slots are full, so it costs
``8 / load`` bytes per entry: between 10.7 and 21.3 bytes, and for 10 million
URLs exactly 2**24 slots = 134 MB = 13.4 bytes per URL (load 0.60).  While the
table doubles, old and new tables are alive at once (for one rehash).

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
from collections.abc import Iterable, Iterator
from hashlib import blake2b
from pathlib import Path

__all__ = [
    "FingerprintSet",
    "FingerprintFile",
    "FingerprintFileError",
    "FingerprintFileMismatch",
    "fp64",
    "FILENAME",
    "MAGIC",
    "FORMAT_VERSION",
    "RECORD_SIZE",
    "MAX_LOAD",
    "FLUSH_RECORDS",
    "FLUSH_SECONDS",
]

logger = logging.getLogger(__name__)

FILENAME = "iri_fingerprints.bin"
MAGIC = b"IRIFPSET"
FORMAT_VERSION = 1
RECORD_SIZE = 8
#: The table doubles when more than this fraction of its slots is used.
MAX_LOAD = 0.75
#: Write the record buffer when it holds this many records...
FLUSH_RECORDS = 1000
#: ... or when this many seconds have passed since the last write.
FLUSH_SECONDS = 1.0

_HEADER = struct.Struct(">8sHHHH")
_MIN_SLOTS = 1 << 12


def fp64(fingerprint: bytes) -> bytes:
    """The 8-byte record kept for a request *fingerprint*.

    The first 8 bytes of a digest of at least 16 bytes (SHA-1 gives 20);
    anything else is hashed to 8 bytes with BLAKE2b (RFC 7693).
    """
    if len(fingerprint) >= 16:
        return fingerprint[:8]
    return blake2b(fingerprint, digest_size=8).digest()


class FingerprintSet:
    """A set of 64-bit unsigned integers in one ``array('Q')`` (linear probing).

    ``add`` and ``in`` take the integer form of a record
    (``int.from_bytes(record, "big")``).  Not thread-safe.
    """

    __slots__ = ("_table", "_mask", "_len", "_limit")

    def __init__(self, capacity: int = 0) -> None:
        slots = _MIN_SLOTS
        while slots * MAX_LOAD < capacity:
            slots <<= 1
        self._alloc(slots)
        self._len = 0

    def _alloc(self, slots: int) -> None:
        # Repetition allocates exactly; array("Q", bytes(n)) over-allocates by 1/16.
        self._table = array("Q", [0]) * slots
        self._mask = slots - 1
        self._limit = int(slots * MAX_LOAD)

    def add(self, value: int) -> bool:
        """Add *value*; True if it was new, False if it was already there."""
        if not value:
            value = 1
        table = self._table
        mask = self._mask
        i = value & mask
        while True:
            slot = table[i]
            if slot == value:
                return False
            if not slot:
                table[i] = value
                self._len += 1
                if self._len > self._limit:
                    self._grow()
                return True
            i = (i + 1) & mask

    def __contains__(self, value: object) -> bool:
        if not isinstance(value, int):
            return False
        if not value:
            value = 1
        table = self._table
        mask = self._mask
        i = value & mask
        while True:
            slot = table[i]
            if slot == value:
                return True
            if not slot:
                return False
            i = (i + 1) & mask

    def update(self, values: Iterable[int]) -> int:
        """Add every value; return how many were new."""
        added = 0
        for value in values:
            if self.add(value):
                added += 1
        return added

    def _grow(self) -> None:
        old = self._table
        self._alloc(2 * (self._mask + 1))
        table = self._table
        mask = self._mask
        for value in old:
            if value:
                i = value & mask
                while table[i]:
                    i = (i + 1) & mask
                table[i] = value

    def clear(self) -> None:
        self._alloc(_MIN_SLOTS)
        self._len = 0

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[int]:
        return (v for v in self._table if v)

    @property
    def slots(self) -> int:
        return self._mask + 1

    @property
    def nbytes(self) -> int:
        """Bytes held by the table (the array buffer)."""
        return self._table.itemsize * len(self._table)


class FingerprintFileError(RuntimeError):
    """The fingerprint file cannot be used (not ours, unreadable header)."""


class FingerprintFileMismatch(FingerprintFileError):
    """The file was written by another canonicalization version or options."""


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
                f"{self.path} holds keys of canonicalization version {canon} with options "
                f"{tag!r}, but this crawl uses version {self.canonicalization_version} with "
                f"options {self.tag!r}: refusing to mix keys (set IRI_JOBDIR_ALLOW_RESET = "
                "True to start a new file, or use a new JOBDIR)"
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
