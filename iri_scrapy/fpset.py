"""A compact set of 64-bit fingerprints: open addressing over ``array('Q')``.

Used by ``iri-scrapy dedupe`` to remember which resources it has seen without
keeping their text.  A Python ``set`` of ints costs about 60-90 bytes per entry
(the int object plus the hash table slot); this table stores the bare 8-byte
fingerprint in a flat array with linear probing and costs 8 bytes / load
factor, i.e. 10 to 20 bytes per entry between resizes (peak 30 bytes per entry
while a resize copies the old table into the new one).

Fingerprints are 64-bit BLAKE2b digests of the canonical key (RFC 7693); two
different keys collide with probability about n**2 / 2**65 for n distinct keys
(3e-4 for 10**8 keys), in which case the later one is taken for a duplicate.

Pure Python, no Scrapy.
"""

from __future__ import annotations

from array import array
from hashlib import blake2b

__all__ = ["FingerprintSet", "fingerprint"]

_MASK64 = (1 << 64) - 1
# Fibonacci hashing (Knuth, TAOCP 6.4): the slot is the top bits of fp * 2**64/phi,
# so callers that pass non-random ints (counters) still spread over the table.
_GOLDEN = 0x9E3779B97F4A7C15


def fingerprint(key: str) -> int:
    """The 64-bit BLAKE2b fingerprint of *key* (UTF-8; lone surrogates kept as escapes)."""
    digest = blake2b(key.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "little")


class FingerprintSet:
    """A set of 64-bit unsigned ints in one ``array('Q')`` with linear probing.

    ``0`` marks an empty slot, so the fingerprint ``0`` is stored as ``1`` (one
    more collision in 2**64).  The table doubles when it is more than
    ``max_load`` full; it never shrinks and never deletes.
    """

    __slots__ = ("_table", "_mask", "_shift", "_len", "_limit", "_max_load")

    def __init__(self, capacity: int = 1024, *, max_load: float = 0.75) -> None:
        if not 0.1 <= max_load <= 0.9:
            raise ValueError("max_load must be between 0.1 and 0.9")
        size = 16
        while size * max_load < capacity:
            size *= 2
        self._max_load = max_load
        self._alloc(size)
        self._len = 0

    def _alloc(self, size: int) -> None:
        self._table = array("Q", [0]) * size
        self._mask = size - 1
        self._shift = 64 - (size.bit_length() - 1)
        self._limit = int(size * self._max_load)

    def __len__(self) -> int:
        return self._len

    @property
    def capacity(self) -> int:
        """Number of slots of the table."""
        return self._mask + 1

    @property
    def nbytes(self) -> int:
        """Bytes held by the table itself (8 per slot)."""
        return len(self._table) * self._table.itemsize

    def __contains__(self, fp: object) -> bool:
        if not isinstance(fp, int):
            return False
        fp = (fp & _MASK64) or 1
        table, mask = self._table, self._mask
        i = ((fp * _GOLDEN) & _MASK64) >> self._shift
        while True:
            slot = table[i]
            if slot == fp:
                return True
            if slot == 0:
                return False
            i = (i + 1) & mask

    def add(self, fp: int) -> bool:
        """Insert *fp*; return ``True`` if it was new, ``False`` if already present."""
        fp = (fp & _MASK64) or 1
        table, mask = self._table, self._mask
        i = ((fp * _GOLDEN) & _MASK64) >> self._shift
        while True:
            slot = table[i]
            if slot == fp:
                return False
            if slot == 0:
                break
            i = (i + 1) & mask
        table[i] = fp
        self._len += 1
        if self._len > self._limit:
            self._grow()
        return True

    def _grow(self) -> None:
        old = self._table
        self._alloc(2 * len(old))
        table, mask, shift = self._table, self._mask, self._shift
        for fp in old:
            if fp:
                i = ((fp * _GOLDEN) & _MASK64) >> shift
                while table[i]:
                    i = (i + 1) & mask
                table[i] = fp
