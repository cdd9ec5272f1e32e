"""Dedupe as a batch: the lines of a block of bytes through one native loop.

:func:`run` gives a block of input lines to the native loop (``_batch.c``, through
:func:`iri_scrapy.core.native.dedupe_block`), which answers every line already
canonical at level SCHEME in URI form (the ladder's fast path, RFC 3987 section
5.3, with no rung applied) without a Python object per line: the key, its 64-bit
fingerprint (BLAKE2b, RFC 7693, as :func:`iri_scrapy.store.dedupe.fingerprint`)
and the add to the :class:`~iri_scrapy.store.dedupe.Deduper`'s seen-set, the first
spellings copied to the output, the counts under ``simple`` or ``fragment``.  At
the first line it cannot answer it stops; that line goes to the caller (the
streaming path, :meth:`Deduper.process`, which climbs the ladder) and the loop
goes on after it.  So the order of first spellings, the output, the rejects and
the statistics are the streaming path's, byte for byte (tests/store/
test_dedupe_batch.py), and a rung statistic never costs a second climb: a line of
the loop has none, and a line of the reference is climbed once.  Without the
native module, or with options the loop does not know (a level below SCHEME,
NFC, the query heuristics, a written form other than the URI, the samples of
``--report``), :func:`ready` is false and every line takes the streaming path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

from iri_scrapy.core import native
from iri_scrapy.core.ladder import Level
from iri_scrapy.store.dedupe import FRAGMENT, Deduper

#: Bytes read at a time (the block ends at its last line feed).
BLOCK_SIZE = 1 << 18
_BOM = b"\xef\xbb\xbf"


def ready(deduper: Deduper) -> bool:
    """Whether the native loop can take *deduper*'s lines (else: the streaming path)."""
    return (
        native.MODULE is not None
        and isinstance(deduper.seen, native.MODULE.FingerprintTable)
        and deduper.level >= Level.SCHEME
        and not deduper.nfc
        and not deduper.heuristics
        and deduper.samples is None
        and (not deduper.canonical or deduper.form == "uri")
    )


def blocks(stream: BinaryIO, size: int = BLOCK_SIZE) -> Iterator[bytes]:
    """The input in blocks of whole lines (the last may lack its line feed), without the
    UTF-8 byte order mark at its start (as the streaming path's reader)."""
    read = getattr(stream, "read1", stream.read)
    carry = b""
    first = True
    while True:
        data = read(size)
        if not data:
            break
        if first:
            carry += data
            if len(carry) < len(_BOM) and _BOM.startswith(carry):
                continue  # a stream that gives the BOM a byte at a time
            first = False
            data, carry = (carry[len(_BOM):] if carry.startswith(_BOM) else carry), b""
        end = data.rfind(b"\n")
        if end < 0:
            carry += data
            continue
        yield carry + data[: end + 1]
        carry = data[end + 1:]
    if carry:
        yield carry


def run(deduper: Deduper, block: bytes, write: Callable[[bytes], object],
        miss: Callable[[bytes], object]) -> None:
    """Dedupe the lines of *block* (:func:`ready` must be true): the first spellings the
    loop answers go to *write* (bytes, each line with ``\\n``); every other line, with
    its end of line, to *miss*, in order, which must hand it to :meth:`Deduper.process`."""
    loop = native.dedupe_block()
    assert loop is not None
    stats = deduper.stats
    table, keep_fragment, write_key = deduper.seen, deduper.keep_fragment, deduper.canonical
    rung_stats = deduper.rung_stats
    pos, end = 0, len(block)
    while pos < end:
        stop, pos, out, first_simple, first_fragment, dup_simple, dup_fragment = loop(
            table, block, pos, keep_fragment, write_key)
        if out:
            write(out)
        first = first_simple + first_fragment
        dup = dup_simple + dup_fragment
        if first or dup:
            stats.lines += first + dup
            stats.unique += first
            stats.duplicates += dup
            if rung_stats:
                stats.first_by_rung["simple"] += first_simple
                stats.first_by_rung[FRAGMENT] += first_fragment
                stats.by_rung["simple"] += dup_simple
                stats.by_rung[FRAGMENT] += dup_fragment
        if stop < end:
            miss(block[stop:pos])


def fingerprints(deduper: Deduper, values: list[Any]) -> list[int | None] | None:
    """The batch entry point for a list of values (the Spark pass): for each ``str``
    the native loop answers, the :func:`~iri_scrapy.store.dedupe.fingerprint` of its
    key, else None (classify it with :meth:`Deduper.classify`); None for all when not
    :func:`ready`.  The key of an answered value is the value less its fragment
    (:func:`fast_key`), its rungs none (``fragment`` if that was dropped)."""
    if not ready(deduper):
        return None
    assert native.MODULE is not None
    result: list[int | None] = native.MODULE.fingerprints(values, deduper.keep_fragment)
    return result


def fast_key(value: str, keep_fragment: bool) -> str:
    """The key of a value :func:`fingerprints` answered: itself, less its fragment
    unless kept (RFC 3987 section 5.1; the first ``#`` starts it, RFC 3986 3.5)."""
    if keep_fragment:
        return value
    cut = value.find("#")
    return value if cut < 0 else value[:cut]
