"""Dedupe as a batch: the lines of a block of bytes through one native loop.

:func:`run` gives a block of input lines to the native loop (``_batch.c``, through
:func:`iri_scrapy.core.native.dedupe_block`), which answers every line already
canonical at level SCHEME in URI form (the ladder's fast path, RFC 3987 section
5.3, with no rung applied) and every ASCII alias the common rungs make canonical
(``_aliases.c``: case, percent-encoding, dot segments, default port, empty path;
the key and rungs of ``ladder.fused_rungs``) without a Python object per line: the
key, its 64-bit fingerprint (BLAKE2b, RFC 7693, as
:func:`iri_scrapy.store.dedupe.fingerprint`) and the add to the
:class:`~iri_scrapy.store.dedupe.Deduper`'s seen-set, the first spellings copied
to the output, the counts under the rungs that changed the line (``simple`` for
none, ``fragment`` for a dropped fragment).  At the first line it cannot answer
(non-ASCII, an IP address or literal, userinfo, an A-label...) it stops; that
line goes to the caller (the streaming path, :meth:`Deduper.process`, which
climbs the ladder) and the loop goes on after it.  So the order of first
spellings, the output, the rejects and the statistics are the streaming path's,
byte for byte (tests/store/test_dedupe_batch.py), and a rung statistic never
costs a second climb: the loop finds a line's rungs with its key, and a line of
the reference is climbed once.  Without the native module, or with options the
loop does not know (a level below SCHEME, NFC, the query heuristics, a written
form other than the URI, the samples of ``--report``), :func:`ready` is false and
every line takes the streaming path.  The Spark pass
(:mod:`iri_scrapy.integrations.spark`) runs the same loop keeping a row per line
(:func:`records`: each answered line's fingerprint, rungs and first-or-duplicate as
bytes, the lines it leaves classified by the caller with :meth:`Deduper.classify`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
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
    table, keep_fragment, write_key = deduper.seen, deduper.keep_fragment, deduper.canonical
    pos, end = 0, len(block)
    while pos < end:
        stop, pos, out, first, dup, first_rungs, dup_rungs = loop(
            table, block, pos, keep_fragment, write_key)
        if out:
            write(out)
        deduper.stats.lines += first + dup
        count(deduper, first, dup, first_rungs, dup_rungs)
        if stop < end:
            miss(block[stop:pos])


def rung_keys() -> tuple[str, ...]:
    """The rungs the loop's by-rung tuples count, in order: ``simple``, the alias
    rungs, ``fragment``."""
    return ("simple", *native.ALIAS_RUNG_KEYS, FRAGMENT)


def count(deduper: Deduper, first: int, duplicates: int, first_rungs: tuple[int, ...],
          duplicate_rungs: tuple[int, ...]) -> None:
    """Count what the loop answered into *deduper*'s statistics, as :meth:`Deduper.add`
    counts each line (not ``lines``: the caller counts them)."""
    if not (first or duplicates):
        return
    stats = deduper.stats
    stats.unique += first
    stats.duplicates += duplicates
    if deduper.rung_stats:
        by_rung, first_by_rung = stats.by_rung, stats.first_by_rung
        for key, firsts, dups in zip(rung_keys(), first_rungs, duplicate_rungs, strict=True):
            first_by_rung[key] += firsts
            by_rung[key] += dups


@dataclass(frozen=True)
class Answered:
    """The lines one call of the loop answered, one item each, in order (the ``record``
    mode of ``dedupe_block``): ``fps`` their fingerprints (8 bytes each, native
    order), ``rungs`` a byte each (bit *k* for ``rung_keys()[k + 1]``: an alias rung,
    or the dropped fragment), ``added`` a byte each (1 for the first of its resource),
    ``keys`` each key with ``\\n`` (empty unless asked); *first*, *duplicates* and the
    by-rung tuples as for :func:`count`; ``miss``: the line after them is not answered
    (the caller classifies it with :meth:`Deduper.classify`)."""

    fps: bytes
    rungs: bytes
    added: bytes
    keys: bytes
    first: int
    duplicates: int
    first_rungs: tuple[int, ...]
    duplicate_rungs: tuple[int, ...]
    miss: bool


def records(deduper: Deduper, block: bytes, write_key: bool) -> Iterator[Answered]:
    """The loop over *block* (:func:`ready` must be true) a line at a time for a caller
    that keeps a row per line (the Spark pass): the lines it answers are added to
    *deduper*'s seen-set (not counted: see :func:`count`), each run of them one
    :class:`Answered`; the caller must classify the line after a run that says
    ``miss`` before it takes the next one."""
    loop: Callable[..., Any] | None = native.dedupe_block()  # with record: 10 items
    assert loop is not None
    table, keep_fragment = deduper.seen, deduper.keep_fragment
    pos, end = 0, len(block)
    while pos < end:
        stop, pos, keys, first, dup, first_rungs, dup_rungs, fps, rungs, added = loop(
            table, block, pos, keep_fragment, write_key, True)
        yield Answered(fps, rungs, added, keys, first, dup, first_rungs, dup_rungs, stop < end)
