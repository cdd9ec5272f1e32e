"""Benchmark: IRIDupeFilter + IRIRequestFingerprinter vs Scrapy's RFPDupeFilter.

Run from the repository root::

    python benchmarks/bench_dupefilter.py [--repeat N] [--big]

1. ``request_seen`` throughput on the URLs of ``../shared/corpus/urls_real.txt``
   (relative to the repository; ``--corpus`` another file): each filter gets
   fresh ``Request`` objects, built before timing, the same URLs in the same
   order for all; CPU time (``time.process_time``), the contenders interleaved
   in one process (their order alternating per round), and the figure is the
   median of the per-round ratios stock / ours (paired: a slow moment of a
   shared machine weighs on the round's contenders alike).  Contenders:
   Scrapy's ``RFPDupeFilter``, ``IRIDupeFilter`` and the entry + ``IRIDupeFilter``
   (:func:`iri_scrapy.plugin.entry.enter` first: a request's whole path into
   the scheduler).  ``--min-ratio R`` exits 1 below R (a regression check: the
   five look-ups of the per-request cache per request that took the ratio from
   2.6x to 1.6x would have failed ``--min-ratio 2.5``).
2. Scale, over synthetic SHA-1 fingerprints at 100k, 1M, 3M and 10M (with
   ``--big`` also 30M and 100M; ``--max-size`` stops earlier): bytes per seen
   URL of the store alone (``tracemalloc``), at each size and in the worst case
   (read right after every growth step from 1M URLs up to that size), for
   Scrapy's ``set`` of 20-byte ``bytes`` (up to 10M),
   :class:`~iri_scrapy.store.fpstore.FingerprintSet` and, for reference, the
   previous design (one table doubling); and the longest single call of
   ``IRIDupeFilter.seen_add`` (what ``request_seen`` does after fingerprinting)
   against the doubling table's ``add``, timed one by one with the garbage
   collector off.  On a shared machine a call can also be long because the
   process was descheduled: the count of calls over 50 ms is printed too.

Prints a skip notice and exits 0 when the corpus is absent.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import os
import statistics
import sys
import time
import tracemalloc
import warnings
from array import array
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scrapy import Request  # noqa: E402
from scrapy.dupefilters import RFPDupeFilter  # noqa: E402
from scrapy.utils.request import RequestFingerprinter  # noqa: E402

from iri_scrapy.plugin.dupefilter import IRIDupeFilter  # noqa: E402
from iri_scrapy.plugin.entry import enter  # noqa: E402
from iri_scrapy.plugin.fingerprinter import IRIRequestFingerprinter  # noqa: E402
from iri_scrapy.plugin.middleware import Canonicalizer  # noqa: E402
from iri_scrapy.store.fpstore import FingerprintSet, fp64  # noqa: E402

CORPUS = ROOT.parent / "shared" / "corpus" / "urls_real.txt"


def load_urls(path: Path) -> list[str]:
    urls = []
    for line in path.read_text(encoding="utf-8", errors="surrogateescape").splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            Request(line)
        except (ValueError, TypeError, UnicodeError):
            continue
        urls.append(line)
    return urls


def run(make_filter, urls: list[str], per_call: bool = False,
        entry: bool = False) -> tuple[float, int, float]:
    """CPU seconds for request_seen over fresh Requests, duplicates, longest call.

    *entry*: each request goes through the scheduler's entry first
    (:func:`iri_scrapy.plugin.entry.enter`, as ``IRIScheduler.enqueue_request``
    does), then ``request_seen``: the request's whole path into the frontier.
    The longest call (CPU time of each call) only when *per_call*: reading the
    clock twice per call costs about as much as a fast call, so the throughput
    rounds do not.
    """
    requests = [Request(u) for u in urls]
    df = make_filter()
    canon = Canonicalizer(df.config, None, stamper=df.stamper) if entry else None
    gc.collect()
    gc.disable()
    try:
        seen = df.request_seen
        cpu = time.process_time
        longest = 0.0
        dups = 0
        start = cpu()
        if per_call:
            for r in requests:
                t = cpu()
                if seen(r):
                    dups += 1
                t = cpu() - t
                if t > longest:
                    longest = t
        elif canon is not None:
            for r in requests:
                if seen(enter(r, canon)):
                    dups += 1
        else:
            for r in requests:
                if seen(r):
                    dups += 1
        elapsed = cpu() - start
    finally:
        gc.enable()
    return elapsed, dups, longest


STOCK = "scrapy RFPDupeFilter"


def throughput(urls: list[str], repeat: int) -> float:
    """request_seen side by side: CPU time, contenders interleaved (their order
    alternating), one ratio per round (stock's time / ours in the same round),
    the median ratio reported (the ratio of the medians and the best rounds too).
    Returns the median paired ratio of IRIDupeFilter."""

    def scrapy_filter() -> RFPDupeFilter:
        return RFPDupeFilter(fingerprinter=RequestFingerprinter())

    def iri_filter() -> IRIDupeFilter:
        return IRIDupeFilter(fingerprinter=IRIRequestFingerprinter())

    contenders = ((STOCK, scrapy_filter, False), ("IRIDupeFilter", iri_filter, False),
                  ("entry + IRIDupeFilter", iri_filter, True))
    times: dict[str, list[float]] = {name: [] for name, _, _ in contenders}
    dups = {}
    for round_ in range(repeat):
        order = contenders if round_ % 2 == 0 else contenders[::-1]
        for name, make, entry in order:
            elapsed, d, _ = run(make, urls, entry=entry)
            times[name].append(elapsed)
            dups[name] = d
    longest = {name: run(make, urls, per_call=True)[2]
               for name, make, entry in contenders if not entry}
    print(f"request_seen, {len(urls):,} fresh requests (URLs of {CORPUS.name}), CPU time, "
          f"{repeat} interleaved rounds (median; ratio = {STOCK}'s CPU / the contender's "
          "in the same round):")
    stock = times[STOCK]
    result = 0.0
    for name, _, _ in contenders:
        mine = times[name]
        med = statistics.median(mine)
        line = (f"  {name:<22} {len(urls) / med:>10,.0f} requests/s"
                f"  ({med / len(urls) * 1e6:.2f} us/request CPU, {dups[name]:,} duplicates")
        if name in longest:
            line += f", longest call {longest[name] * 1e3:.1f} ms CPU"
        line += ")"
        if name != STOCK:
            paired = [a / b for a, b in zip(stock, mine, strict=True)]
            ratio = statistics.median(paired)
            line += (f"\n  {'':<22} paired ratio {ratio:.2f}x (rounds {min(paired):.2f}-"
                     f"{max(paired):.2f}; ratio of medians "
                     f"{statistics.median(stock) / med:.2f}x; target >= 2.5x)")
            if name == "IRIDupeFilter":
                result = ratio
        print(line)
    return result


def _fp(i: int) -> bytes:
    return hashlib.sha1(i.to_bytes(8, "little")).digest()  # noqa: S324


class Stream:
    """*n* values made on the fly, ``fn(0) .. fn(n - 1)``, each time it is iterated.

    At 100M a list of the fingerprints alone would take about 6 GB; streamed, the
    process holds only the stores being measured.
    """

    def __init__(self, n: int, fn) -> None:
        self.n, self.fn = n, fn

    def __len__(self) -> int:
        return self.n

    def __iter__(self):
        fn = self.fn
        for i in range(self.n):
            yield fn(i)


def _value(i: int) -> int:
    return int.from_bytes(fp64(_fp(i)), "big")


class DoublingSet:
    """The previous design, for reference: one linear-probing table that doubles."""

    def __init__(self) -> None:
        self._table = array("Q", [0]) * 4096
        self._mask = 4095
        self._len = 0

    def add(self, value: int) -> bool:
        value = value or 1
        table, mask = self._table, self._mask
        i = value & mask
        while True:
            slot = table[i]
            if slot == value:
                return False
            if not slot:
                table[i] = value
                self._len += 1
                if self._len > (mask + 1) * 3 // 4:
                    self._grow()
                return True
            i = (i + 1) & mask

    def _grow(self) -> None:
        old = self._table
        self._table = table = array("Q", [0]) * (2 * len(old))
        self._mask = mask = len(table) - 1
        for value in old:
            if value:
                i = value & mask
                while table[i]:
                    i = (i + 1) & mask
                table[i] = value

    @property
    def slots(self) -> int:
        return len(self._table)


def memory_curve(make, values, sizes: list[int], floor: int) -> dict[int, tuple]:
    """Fill a fresh store with *values* under tracemalloc.

    For each size in *sizes*: (bytes/URL at that size, worst bytes/URL over every
    growth step between *floor* and that size).  The worst case of a growing table
    is right after a growth step, so the traced memory is read at each one.
    """
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    store = make()
    add = store.add
    out = {}
    worst = 0.0
    last = store.slots
    stops = iter(sorted(sizes))
    stop = next(stops)
    for n, v in enumerate(values, 1):
        add(v)
        if store.slots != last:
            last = store.slots
            if n >= floor:
                worst = max(worst, (tracemalloc.get_traced_memory()[0] - base) / n)
        if n == stop:
            now = (tracemalloc.get_traced_memory()[0] - base) / n
            out[n] = (now, max(worst, now) if n >= floor else float("nan"))
            stop = next(stops, 0)
    tracemalloc.stop()
    return out


def scrapy_memory(sizes: list[int]) -> dict[int, float]:
    """Scrapy's set of 20-byte digests, each a new object (as the fingerprinter makes)."""
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    scrapy_set: set[bytes] = set()
    out = {}
    stops = set(sizes)
    for n in range(1, max(sizes) + 1):
        scrapy_set.add(_fp(n - 1))
        if n in stops:
            out[n] = (tracemalloc.get_traced_memory()[0] - base) / n
    tracemalloc.stop()
    del scrapy_set
    return out


def call_times(add, values) -> tuple[float, float, float, int]:
    """(max wall seconds of one call, max CPU seconds of one call, mean wall
    seconds per call (the calls alone, not making their arguments), calls over
    50 ms of wall time).

    CPU time (``time.thread_time``) is what the call itself costs; wall time also
    counts the moments the process was descheduled on a shared machine.
    """
    pc, cpu = time.perf_counter, time.thread_time
    worst = worst_cpu = 0.0
    slow = 0
    total = 0.0
    for v in values:
        c = cpu()
        t = pc()
        add(v)
        d = pc() - t
        e = cpu() - c
        total += d
        if d > worst:
            worst = d
            if d > 0.05:
                slow += 1
        elif d > 0.05:
            slow += 1
        if e > worst_cpu:
            worst_cpu = e
    return worst, worst_cpu, total / len(values), slow


def scale(sizes: list[int], scrapy_up_to: int, reference: bool = True) -> None:
    """Bytes/URL (typical and worst) and the longest call, at each size."""
    n = max(sizes)
    print(f"\nscale: {n:,} synthetic SHA-1 fingerprints (tracemalloc; worst case = the "
          "largest bytes/URL right after any growth step from 1M URLs up to that size)")
    fps = Stream(n, _fp)
    values = Stream(n, _value)
    scrapy = scrapy_memory([s for s in sizes if s <= scrapy_up_to])
    rows = {}
    contenders = [("FingerprintSet (segments)", FingerprintSet)]
    if reference:
        contenders.append(("one table doubling (before)", DoublingSet))
    for name, make in contenders:
        curve = memory_curve(make, values, sizes, 1_000_000)
        gc.collect()
        gc.disable()
        try:
            if name.startswith("FingerprintSet"):
                # what request_seen does after fingerprinting: IRIDupeFilter.seen_add
                df = IRIDupeFilter(fingerprinter=IRIRequestFingerprinter())
                worst, worst_cpu, mean, slow = call_times(df.seen_add, fps)
                segment = df._set.max_segment_slots
            else:
                worst, worst_cpu, mean, slow = call_times(make().add, values)
                segment = 0
        finally:
            gc.enable()
        rows[name] = (curve, worst, mean, slow, segment)
        print(f"  {name}: longest call {worst_cpu * 1e3:.1f} ms CPU, {worst * 1e3:.1f} ms "
              f"wall ({slow} calls over 50 ms wall), "
              f"{mean * 1e6:.2f} us/call" + (f", largest segment {segment:,} slots"
                                             if segment else ""), flush=True)
    old_rows = rows.get("one table doubling (before)")
    print(f"  {'URLs':>12} {'Scrapy set':>10} | {'segments':>8} {'worst':>6} | "
          f"{'doubling':>8} {'worst':>6}   (bytes/URL)")
    for size in sizes:
        ours = rows["FingerprintSet (segments)"][0][size]
        old = old_rows[0][size] if old_rows else (float("nan"), float("nan"))
        theirs = f"{scrapy[size]:10.1f}" if size in scrapy else f"{'-':>10}"
        print(f"  {size:>12,} {theirs} | {ours[0]:8.1f} {ours[1]:6.1f} | "
              f"{old[0]:8.1f} {old[1]:6.1f}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--corpus", type=Path, default=None, help="URLs, one a line")
    parser.add_argument("--limit", type=int, default=0, help="the first N URLs only")
    parser.add_argument("--min-ratio", type=float, default=0.0,
                        help="exit 1 if request_seen's paired ratio is below this")
    parser.add_argument("--big", action="store_true", help="also 30M and 100M fingerprints")
    parser.add_argument("--max-size", type=int, default=0, help="stop at this size")
    parser.add_argument("--no-scale", action="store_true", help="throughput only")
    parser.add_argument("--scale-only", action="store_true", help="no throughput section")
    parser.add_argument("--no-reference", action="store_true",
                        help="scale: FingerprintSet only, not the doubling table of before")
    args = parser.parse_args(argv)
    warnings.simplefilter("error")
    global CORPUS
    CORPUS = args.corpus or CORPUS
    if not CORPUS.exists():
        print(f"SKIP: corpus not found at {CORPUS}")
        return 0
    if not args.scale_only:
        urls = load_urls(CORPUS)
        ratio = throughput(urls[:args.limit] if args.limit else urls, args.repeat)
        if ratio < args.min_ratio:
            print(f"FAIL: request_seen {ratio:.2f}x RFPDupeFilter, below {args.min_ratio}x")
            return 1
    if args.no_scale:
        return 0
    sizes = [100_000, 1_000_000, 3_000_000, 10_000_000]
    if args.big:
        sizes += [30_000_000, 100_000_000]
    if args.max_size:
        sizes = [s for s in sizes if s <= args.max_size]
    scale(sizes, scrapy_up_to=10_000_000, reference=not args.no_reference)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    raise SystemExit(main())
