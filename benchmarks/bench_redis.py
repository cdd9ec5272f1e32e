"""RedisIRIDupeFilter vs scrapy-redis's RFPDupeFilter on one local redis-server.

    python benchmarks/bench_redis.py [--urls PATH] [--limit N] [--rounds R]

Starts its own ``redis-server`` (``tests/redis_support.RedisServer``, persistence
off), reads the corpus (default ``../shared/corpus/urls_real.txt``), builds one
``scrapy.Request`` per URL (URLs Scrapy rejects are skipped) and, for each
filter:

* **speed**: ``request_seen`` over every request (first pass: mostly new URLs),
  then over fresh requests for the same URLs (second pass: all duplicates).
  Requests are built before the clock starts; each filter gets its own Request
  objects (the IRI fingerprinter caches per Request object).  Best of
  ``--rounds`` (the keys are deleted between rounds);
* **memory**: ``MEMORY USAGE key SAMPLES 0`` summed over the filter's keys after
  the first pass, divided by the number of distinct stored fingerprints, and the
  ``used_memory`` delta of the server.

Our filter is sized for the corpus (``IRI_REDIS_EXPECTED_URLS`` = URL count); the
figure with the default sizing (10 million) is printed too.  Ratios are
ours / theirs for memory and ours / theirs for requests per second.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from scrapy import Request  # noqa: E402

from iri_scrapy.adapters.redis_dupefilter import (  # noqa: E402
    DEFAULT_EXPECTED_URLS,
    RedisIRIDupeFilter,
)
from tests.redis_support import RedisServer  # noqa: E402

DEFAULT_CORPUS = REPO.parent / "shared" / "corpus" / "urls_real.txt"


def load_urls(path: Path, limit: int | None) -> list[str]:
    urls: list[str] = []
    with path.open(encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            url = line.strip()
            if not url:
                continue
            try:
                Request(url)
            except (ValueError, TypeError, UnicodeError):
                continue
            urls.append(url)
            if limit is not None and len(urls) >= limit:
                break
    return urls


def requests_for(urls: Sequence[str]) -> list[Request]:
    return [Request(u) for u in urls]


def timed(seen: Callable[[Request], bool], requests: Sequence[Request]) -> tuple[float, int]:
    """(seconds, duplicates) for request_seen over *requests*."""
    dups = 0
    t0 = time.perf_counter()
    for r in requests:
        if seen(r):
            dups += 1
    return time.perf_counter() - t0, dups


def used_memory(client: Any) -> int:
    return int(client.info("memory")["used_memory"])


def memory_usage(client: Any, keys: Sequence[bytes | str]) -> int:
    pipe = client.pipeline(transaction=False)
    for k in keys:
        pipe.execute_command("MEMORY USAGE", k, "SAMPLES", 0)
    return sum(int(n) for n in pipe.execute() if n is not None)


def bench_ours(server: RedisServer, urls: Sequence[str], rounds: int,
               expected: int) -> dict[str, float]:
    admin = server.client()
    best1 = best2 = float("inf")
    out: dict[str, float] = {}
    for _ in range(rounds):
        admin.flushall()
        base_mem = used_memory(admin)
        df = RedisIRIDupeFilter(redis_url=server.url, key="bench", expected_urls=expected)
        df.connect()
        first, second = requests_for(urls), requests_for(urls)
        t1, dups1 = timed(df.request_seen, first)
        mem_delta = used_memory(admin) - base_mem
        t2, dups2 = timed(df.request_seen, second)
        stored = len(df)
        best1, best2 = min(best1, t1), min(best2, t2)
        keys = [*df.bucket_keys(), df.meta_key.encode()]
        out = {
            "stored": stored,
            "dups_first": dups1,
            "dups_second": dups2,
            "memory_usage": memory_usage(admin, keys),
            "used_memory_delta": mem_delta,
            "buckets": df.buckets,
        }
        df.close()
    out["rps_first"] = len(urls) / best1
    out["rps_second"] = len(urls) / best2
    return out


def bench_theirs(server: RedisServer, urls: Sequence[str], rounds: int) -> dict[str, float]:
    from scrapy.settings import Settings
    from scrapy_redis.connection import get_redis_from_settings
    from scrapy_redis.dupefilter import RFPDupeFilter

    admin = server.client()
    best1 = best2 = float("inf")
    out: dict[str, float] = {}
    for _ in range(rounds):
        admin.flushall()
        base_mem = used_memory(admin)
        # the client scrapy-redis itself builds from REDIS_URL (its default REDIS_PARAMS)
        client = get_redis_from_settings(Settings({"REDIS_URL": server.url}))
        df = RFPDupeFilter(client, key="bench:dupefilter")
        first, second = requests_for(urls), requests_for(urls)
        t1, dups1 = timed(df.request_seen, first)
        mem_delta = used_memory(admin) - base_mem
        t2, dups2 = timed(df.request_seen, second)
        best1, best2 = min(best1, t1), min(best2, t2)
        out = {
            "stored": int(admin.scard("bench:dupefilter")),
            "dups_first": dups1,
            "dups_second": dups2,
            "memory_usage": memory_usage(admin, ["bench:dupefilter"]),
            "used_memory_delta": mem_delta,
        }
        client.close()
    out["rps_first"] = len(urls) / best1
    out["rps_second"] = len(urls) / best2
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--urls", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)

    urls = load_urls(args.urls, args.limit)
    n = len(urls)
    print(f"corpus: {args.urls} ({n} URLs accepted by scrapy.Request)")
    with tempfile.TemporaryDirectory(prefix="bench-redis-") as tmp, \
            RedisServer(Path(tmp)) as server:
        version = server.client().info("server")["redis_version"]
        print(f"redis-server {version} on {server.url}, rounds={args.rounds} (best of)")
        theirs = bench_theirs(server, urls, args.rounds)
        ours = bench_ours(server, urls, args.rounds, expected=n)
        default = bench_ours(server, urls, 1, expected=DEFAULT_EXPECTED_URLS)

    def row(name: str, r: dict[str, float]) -> str:
        per = r["memory_usage"] / r["stored"]
        per_used = r["used_memory_delta"] / r["stored"]
        return (f"{name:<38} {r['rps_first']:>10,.0f} {r['rps_second']:>10,.0f} "
                f"{int(r['stored']):>8} {per:>9.1f} {per_used:>9.1f}")

    print()
    print(f"{'filter':<38} {'req/s new':>10} {'req/s dup':>10} {'stored':>8} "
          f"{'B/URL mem':>9} {'B/URL used':>9}")
    print(row("scrapy-redis RFPDupeFilter (SET hex)", theirs))
    print(row(f"RedisIRIDupeFilter ({int(ours['buckets'])} buckets)", ours))
    print(row(f"RedisIRIDupeFilter default ({int(default['buckets'])} b.)", default))
    print()
    speed1 = ours["rps_first"] / theirs["rps_first"]
    speed2 = ours["rps_second"] / theirs["rps_second"]
    mem = (ours["memory_usage"] / ours["stored"]) / (theirs["memory_usage"] / theirs["stored"])
    mem_default = (default["memory_usage"] / default["stored"]) / (
        theirs["memory_usage"] / theirs["stored"])
    print(f"speed ratio ours/theirs: new URLs {speed1:.2f}x, duplicates {speed2:.2f}x "
          "(target >= 1)")
    print(f"memory ratio ours/theirs (MEMORY USAGE per stored URL): {mem:.3f} sized, "
          f"{mem_default:.3f} with the default IRI_REDIS_EXPECTED_URLS (target <= 0.5)")
    print(f"stored distinct keys: ours {int(ours['stored'])} (canonical IRIs), "
          f"theirs {int(theirs['stored'])} (w3lib canonicalize_url)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
