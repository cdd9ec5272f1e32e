"""Benchmark: IRIDupeFilter + IRIRequestFingerprinter vs Scrapy's RFPDupeFilter.

Run from the repository root::

    python benchmarks/bench_dupefilter.py [--repeat N] [--big]

1. ``request_seen`` throughput on the URLs of ``../shared/corpus/urls_real.txt``
   (relative to the repository): each filter gets fresh ``Request`` objects,
   built before timing, the same URLs in the same order for both; the filters
   run alternately, best of ``--repeat`` runs each, in one process.
2. Memory per seen URL of the fingerprint store alone, measured with
   ``tracemalloc`` after adding 1 million (and with ``--big`` 10 million)
   synthetic SHA-1 fingerprints: Scrapy's ``set`` of 20-byte ``bytes`` vs
   :class:`~iri_scrapy.fpstore.FingerprintSet`.

Prints a skip notice and exits 0 when the corpus is absent.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import os
import sys
import time
import tracemalloc
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scrapy import Request  # noqa: E402
from scrapy.dupefilters import RFPDupeFilter  # noqa: E402
from scrapy.utils.request import RequestFingerprinter  # noqa: E402

from iri_scrapy.adapters.dupefilter import IRIDupeFilter  # noqa: E402
from iri_scrapy.adapters.fingerprinter import IRIRequestFingerprinter  # noqa: E402
from iri_scrapy.fpstore import FingerprintSet, fp64  # noqa: E402

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


def run(make_filter, urls: list[str]) -> tuple[float, int]:
    """Seconds for request_seen over fresh Requests, and how many were duplicates."""
    requests = [Request(u) for u in urls]
    df = make_filter()
    gc.collect()
    gc.disable()
    try:
        seen = df.request_seen
        start = time.perf_counter()
        dups = 0
        for r in requests:
            if seen(r):
                dups += 1
        elapsed = time.perf_counter() - start
    finally:
        gc.enable()
    return elapsed, dups


def throughput(urls: list[str], repeat: int) -> None:
    def scrapy_filter() -> RFPDupeFilter:
        return RFPDupeFilter(fingerprinter=RequestFingerprinter())

    def iri_filter() -> IRIDupeFilter:
        return IRIDupeFilter(fingerprinter=IRIRequestFingerprinter())

    best = {"scrapy RFPDupeFilter": float("inf"), "IRIDupeFilter": float("inf")}
    dups = {}
    for _ in range(repeat):
        for name, make in (("scrapy RFPDupeFilter", scrapy_filter), ("IRIDupeFilter", iri_filter)):
            elapsed, d = run(make, urls)
            best[name] = min(best[name], elapsed)
            dups[name] = d
    print(f"request_seen throughput, {len(urls):,} URLs of {CORPUS.name}, best of {repeat}:")
    for name, elapsed in best.items():
        print(f"  {name:<22} {len(urls) / elapsed:>10,.0f} requests/s"
              f"  ({elapsed / len(urls) * 1e6:.2f} us/request, {dups[name]:,} duplicates)")
    ratio = best["scrapy RFPDupeFilter"] / best["IRIDupeFilter"]
    print(f"  ratio IRIDupeFilter / RFPDupeFilter: {ratio:.2f}x (target >= 1.5x)")


def _fp(i: int) -> bytes:
    return hashlib.sha1(i.to_bytes(8, "little")).digest()  # noqa: S324


def memory(n: int) -> None:
    """Bytes per fingerprint held by each store: tracemalloc, stores filled inside."""
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    scrapy_set: set[bytes] = set()
    for i in range(n):
        scrapy_set.add(_fp(i))
    scrapy_bytes = tracemalloc.get_traced_memory()[0] - base
    del scrapy_set
    gc.collect()
    base = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    ours = FingerprintSet()
    for i in range(n):
        ours.add(int.from_bytes(fp64(_fp(i)), "big"))
    ours_bytes = tracemalloc.get_traced_memory()[0] - base
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    del ours
    values = [int.from_bytes(fp64(_fp(i)), "big") for i in range(n)]
    ours = FingerprintSet()
    add = ours.add
    start = time.perf_counter()
    for v in values:
        add(v)
    elapsed = time.perf_counter() - start
    print(f"memory per seen URL at {n:,} fingerprints (tracemalloc):")
    print(f"  Scrapy set of bytes     {scrapy_bytes / n:6.1f} B/URL ({scrapy_bytes / 1e6:,.0f} MB)")
    print(f"  FingerprintSet          {ours_bytes / n:6.1f} B/URL ({ours_bytes / 1e6:,.0f} MB, "
          f"{ours.slots:,} slots, load {len(ours) / ours.slots:.2f}; peak while growing "
          f"{peak / n:.1f} B/URL)")
    print(f"  FingerprintSet.add      {elapsed / n * 1e6:6.2f} us/add, growth included")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--big", action="store_true", help="also measure 10M fingerprints")
    args = parser.parse_args(argv)
    warnings.simplefilter("error")
    if not CORPUS.exists():
        print(f"SKIP: corpus not found at {CORPUS}")
        return 0
    urls = load_urls(CORPUS)
    throughput(urls, args.repeat)
    memory(1_000_000)
    if args.big:
        memory(10_000_000)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    raise SystemExit(main())
