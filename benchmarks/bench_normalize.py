#!/usr/bin/env python3
"""Throughput of ``iri_scrapy.normalize(url, keep_fragment=False)`` against Scrapy's
default canonicalization, ``w3lib.url.canonicalize_url``, measured side by side.

Corpora are read from ``../shared/corpus/`` (relative to the repository root).
Each round clears iri_scrapy's host caches, then times, over the same URL list:
w3lib; iri_scrapy with cold caches (first pass); iri_scrapy with warm caches
(second pass: hosts seen before, as in a crawl, where every host has many URLs);
and, if the ``ada-url`` package is installed, ada's C++ WHATWG parser (``href``)
as a reference point.  Rounds alternate the contenders so machine load affects
all alike; short corpora get more rounds.  With the native fast path built
(iri_scrapy.core.native, with its IRI path), a cold pass with the pure-Python reference
is timed too.  Times are the process's CPU time (``time.process_time``, as issue 32's
figures: on a shared machine wall time also counts the time other jobs hold the CPU);
``--wall`` times wall time instead.  Printed: the median rate and its spread (the lowest
and highest round), the median of each round's ratio to that round's w3lib pass and,
with ada-url, to that round's ada-url ``normalize_url`` pass.

    python benchmarks/bench_normalize.py [--rounds 5] [--wall] [CORPUS ...]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"
DEFAULT_FILES = ("urls_real.txt", "iris_dev.txt")
ADA = "ada_url normalize_url"


def load(path: Path) -> list[str]:
    with path.open(encoding="utf-8") as f:
        return [line.strip().lstrip("\ufeff") for line in f if line.strip()]


#: The clock the passes are timed with (``--wall``: time.perf_counter).
clock = time.process_time


def clear_caches() -> None:
    from iri_scrapy.core import hosts, ladder, mapping

    for module in (hosts, ladder, mapping):
        module.clear_caches()


def timed(fn: Callable[[str], object], urls: Sequence[str]) -> tuple[float, int]:
    errors = 0
    start = clock()
    for u in urls:
        try:
            fn(u)
        except ValueError:
            errors += 1
    return clock() - start, errors


def timed_key(fn: Callable[..., object], urls: Sequence[str]) -> tuple[float, int]:
    """:func:`timed` for ``fn(u, keep_fragment=False)``, called as a user calls it (no
    wrapper function: the loop is the same as the other contenders')."""
    errors = 0
    start = clock()
    for u in urls:
        try:
            fn(u, keep_fragment=False)
        except ValueError:
            errors += 1
    return clock() - start, errors


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpus", nargs="*", help="corpus files (default: urls_real.txt iris_dev.txt)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--wall", action="store_true", help="wall time instead of CPU time")
    args = ap.parse_args(argv)
    global clock
    clock = time.perf_counter if args.wall else time.process_time
    from w3lib.url import canonicalize_url

    from iri_scrapy import normalize
    from iri_scrapy.core import ladder

    native_fast_path = ladder.fast_path  # the native one when it is built
    native_iri_path = ladder.iri_path

    contenders: list[tuple[str, Callable[[str], object]]] = [("w3lib", canonicalize_url)]
    try:
        import ada_url

        def ada(u: str) -> str:
            return ada_url.URL(u).href

        contenders.append(("ada_url (C++)", ada))
        contenders.append((ADA, ada_url.normalize_url))
    except ImportError:
        pass

    paths = [Path(p) for p in args.corpus] or [CORPUS / f for f in DEFAULT_FILES]
    missing = [p for p in paths if not p.exists()]
    if missing:
        print(f"corpus not found: {', '.join(map(str, missing))}", file=sys.stderr)
        return 2
    print(f"{'corpus':<16}{'contender':<26}{'URLs/s':>12}{'spread (min-max)':>24}"
          f"{'vs w3lib':>10}{'vs ada':>8}{'errors':>8}")
    for path in paths:
        urls = load(path)
        # Short corpora pass in milliseconds: repeat so that each round lasts ~1 s.
        rounds = args.rounds * max(1, 20_000 // max(len(urls), 1))
        rates: dict[str, list[float]] = {}
        ratios: dict[str, list[float]] = {}
        ada_ratios: dict[str, list[float]] = {}
        errors: dict[str, int] = {}
        for _ in range(rounds):
            clear_caches()
            measured: dict[str, float] = {}
            for name, fn in contenders[:1]:
                dt, errors[name] = timed(fn, urls)
                measured[name] = len(urls) / dt
            for label in ("iri_scrapy (cold caches)", "iri_scrapy (warm caches)"):
                dt, errors[label] = timed_key(normalize, urls)
                measured[label] = len(urls) / dt
            if native_fast_path is not ladder.reference_fast_path:
                # the same, with the pure-Python fast path (a build without a compiler)
                clear_caches()
                ladder.fast_path = ladder.reference_fast_path
                ladder.iri_path = ladder.reference_iri_path
                try:
                    label = "iri_scrapy pure Python"
                    dt, errors[label] = timed_key(ladder.normalize_reference, urls)
                    measured[label] = len(urls) / dt
                finally:
                    ladder.fast_path = native_fast_path
                    ladder.iri_path = native_iri_path
            for name, fn in contenders[1:]:
                dt, errors[name] = timed(fn, urls)
                measured[name] = len(urls) / dt
            for name, rate in measured.items():
                rates.setdefault(name, []).append(rate)
                # Paired with the w3lib pass of the same round: robust to drifts
                # of the machine's speed between rounds.
                ratios.setdefault(name, []).append(rate / measured["w3lib"])
                if ADA in measured:
                    ada_ratios.setdefault(name, []).append(rate / measured[ADA])
        for name, values in rates.items():
            rate = statistics.median(values)
            ratio = statistics.median(ratios[name])
            spread = f"{min(values):,.0f}-{max(values):,.0f}"
            vs_ada = f"{statistics.median(ada_ratios[name]):.2f}x" if name in ada_ratios else "-"
            print(f"{path.name:<16}{name:<26}{rate:>12,.0f}{spread:>24}{ratio:>9.2f}x{vs_ada:>8}"
                  f"{errors[name]:>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
