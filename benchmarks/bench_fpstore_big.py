"""Benchmark: the fingerprint table at 100M URLs in one pass, minutes not hours.

Run from the repository root::

    python benchmarks/bench_fpstore_big.py [--size 100000000]

``bench_dupefilter.py --big`` measures memory under ``tracemalloc`` and then times
every call in a second pass; at 100M on a busy 2-core machine that takes well
over an hour.  This script fills one :class:`~iri_scrapy.store.fpstore.FingerprintSet`
with synthetic 64-bit fingerprint records once, and on the way reads:

* bytes per URL of the table's own arrays (``slots * 8`` plus each segment
  array's and the segment lists' object sizes), right after every growth step
  from 1M up (the worst case of a growing table) and at 1M, 3M, 10M, 30M, 100M;
  the process's peak RSS at the end as a cross-check (it also holds the
  interpreter, about 10 MB);
* the longest single ``add`` (CPU time of the calling thread, and wall time),
  and how many calls took over 50 ms of wall time.

The values are ``fp64(sha1(i))`` as in ``bench_dupefilter.py``.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import resource
import sys
import time
from array import array
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from iri_scrapy.store.fpstore import FingerprintSet, fp64  # noqa: E402

STOPS = (1_000_000, 3_000_000, 10_000_000, 30_000_000, 100_000_000, 300_000_000)


def table_bytes(store: FingerprintSet) -> int:
    """The table's own memory: its arrays and the lists that hold them."""
    tables = store._tables  # noqa: SLF001  (our own class: the benchmark reads its layout)
    room = store._room  # noqa: SLF001
    return (store.slots * 8 + len(tables) * sys.getsizeof(array("Q"))
            + sys.getsizeof(tables) + sys.getsizeof(room))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000_000)
    args = parser.parse_args(argv)
    n = args.size
    sha1, from_bytes = hashlib.sha1, int.from_bytes
    store = FingerprintSet()
    add = store.add
    cpu, pc = time.thread_time, time.perf_counter
    last_slots = store.slots
    worst_bytes = 0.0
    longest_cpu = longest_wall = 0.0
    slow = 0
    stops = [s for s in STOPS if s <= n]
    if n not in stops:
        stops.append(n)
    print(f"FingerprintSet filled with {n:,} synthetic fingerprint records, one pass",
          flush=True)
    print(f"  {'URLs':>12} {'B/URL':>6} {'worst':>6} {'longest call':>24} {'elapsed':>8}",
          flush=True)
    start = pc()
    gc.disable()
    try:
        stop_iter = iter(stops)
        stop = next(stop_iter)
        for i in range(n):
            v = from_bytes(fp64(sha1(i.to_bytes(8, "little")).digest()), "big")  # noqa: S324
            c = cpu()
            t = pc()
            add(v)
            d = pc() - t
            e = cpu() - c
            if e > longest_cpu:
                longest_cpu = e
            if d > longest_wall:
                longest_wall = d
            if d > 0.05:
                slow += 1
            count = i + 1
            if store.slots != last_slots:
                last_slots = store.slots
                if count >= 1_000_000:
                    worst_bytes = max(worst_bytes, table_bytes(store) / count)
            if count == stop:
                now = table_bytes(store) / count
                worst_bytes = max(worst_bytes, now)
                print(f"  {count:>12,} {now:6.1f} {worst_bytes:6.1f} "
                      f"{longest_cpu * 1e3:8.1f} ms CPU {longest_wall * 1e3:6.1f} ms wall "
                      f"{pc() - start:7.0f}s", flush=True)
                stop = next(stop_iter, 0)
    finally:
        gc.enable()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(f"  calls over 50 ms wall: {slow}; largest segment {store.max_segment_slots:,} slots; "
          f"peak RSS of the process {rss / n:.1f} B/URL ({rss / 1e9:.2f} GB)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
