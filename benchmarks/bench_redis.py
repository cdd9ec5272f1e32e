"""RedisIRIDupeFilter vs scrapy-redis's RFPDupeFilter on one local redis-server.

    python benchmarks/bench_redis.py [--urls PATH] [--limit N] [--rounds R]
                                     [--synthetic N]

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

Rows for our filter: the default settings (the self-sizing trie of key format 4:
the headline) and the optional size hint ``IRI_REDIS_EXPECTED_URLS`` = the corpus
size (more root buckets).

``--synthetic N`` adds a storage-only run over N random 20-byte fingerprints
(no Request, no fingerprinting): ``seen_add`` with default settings (format 4,
local cache off) against ``SADD`` of the 40-hex digest through scrapy-redis's
client (what its ``request_seen`` sends); at 100,000, 1,000,000, 3,000,000 ...
up to N: bytes per URL (``MEMORY USAGE``, and the ``used_memory`` delta of each
filter's own load) and the server time per call of 5,000 new and 5,000
duplicate fingerprints for each (``INFO commandstats``).

Ratios are ours / theirs, for requests per second and for memory.

Then (``--no-scale`` skips them):

* **server time**: ``INFO commandstats`` (``usec`` summed over every command,
  divided by the ``request_seen`` calls that reached Redis) over the same URLs,
  first pass (new) and second pass (duplicates), the local cache off:
  scrapy-redis's ``RFPDupeFilter`` (one ``SADD`` of the 40-hex digest: the SADD
  baseline), ours, and a bare ``SADD`` of the same 8-byte integer member into 256
  intset buckets (the floor for a plain command); with ``MEMORY USAGE`` per stored
  URL.  Our rare split script (``EVAL``) is counted whole, and the commands it
  runs once more in their own rows;
* **fleet**: 1, 2 and 4 client processes against the one Redis, each replaying
  the first ``--fleet-limit`` URLs of the corpus (fresh Requests, its own order)
  twice (a crawl finds its links again), started together; requests per second
  of the whole fleet (all calls / the slowest process's time), for
  scrapy-redis's filter and ours (local cache on: the default), run alternately
  for each fleet size; and the share of calls answered from the local cache, per
  pass.  The
  machine's cores are shared: past its core count, processes compete for CPU.

``--scheduler N`` runs only the fleet queue's part: ``RedisIRIScheduler``'s
server time per request over N requests (enqueue with its intent write, lease,
ack; the dupefilter left out: it is measured above), from ``INFO commandstats``
(``usec_per_call`` of each command, summed per request), next to scrapy-redis's
``PriorityQueue`` (push and pop, no lease: what its scheduler does) and to one
``SADD`` (the SADD baseline of the dupefilter rows).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from hashlib import blake2b
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from scrapy import Request  # noqa: E402

from iri_scrapy.frontier.redis_dupefilter import RedisIRIDupeFilter  # noqa: E402
from iri_scrapy.frontier.redis_seen import FORMAT_VERSION  # noqa: E402
from tests.support.redis_support import RedisServer  # noqa: E402

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
               expected: int | None = None) -> dict[str, float]:
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
        out = {
            "stored": stored,
            "dups_first": dups1,
            "dups_second": dups2,
            "memory_usage": df.memory_usage(),
            "used_memory_delta": mem_delta,
            "buckets": len(df.bucket_keys()),
        }
        df.close()
    out["rps_first"] = len(urls) / best1
    out["rps_second"] = len(urls) / best2
    return out


def _fingerprints(n: int, salt: bytes = b"") -> list[bytes]:
    return [blake2b(salt + b"%d" % i, digest_size=20).digest() for i in range(n)]


def _probe_usec(admin: Any, call: Callable[[bytes], bool], fps: Sequence[bytes],
                want: bool) -> float:
    """Server microseconds per call (``INFO commandstats``) of *call* over *fps*."""
    admin.config_resetstat()
    for fp in fps:
        assert call(fp) is want
    usec, _ = _server_usec(admin)
    return usec / len(fps)


def bench_synthetic(server: RedisServer, n: int) -> None:
    """Storage only: seen_add (default settings) vs scrapy-redis's SADD of 40-hex.

    At each size up to *n*: bytes per URL (``MEMORY USAGE`` and the ``used_memory``
    delta of each filter's own load), and the server time per call of 5,000 new and
    5,000 duplicate fingerprints (local cache off: every call reaches Redis).
    """
    from scrapy.settings import Settings
    from scrapy_redis.connection import get_redis_from_settings

    admin = server.client()
    admin.flushall()
    fps = _fingerprints(n)
    sizes = [s for s in (100_000, 1_000_000, 3_000_000, 10_000_000) if s < n] + [n]
    df = RedisIRIDupeFilter(redis_url=server.url, key="synthetic", local_cache=0)
    df.connect()
    theirs = get_redis_from_settings(Settings({"REDIS_URL": server.url}))
    key = "synthetic:dupefilter"

    def their_call(fp: bytes) -> bool:
        return theirs.sadd(key, fp.hex()) == 0

    print(f"\nsynthetic: up to {n:,} random fingerprints, default settings (format 4), "
          "local cache off; server us/call over 5,000 new + 5,000 duplicates")
    print(f"{'URLs':>10} {'B/URL mem':>9} {'B/URL used':>10} {'theirs mem':>10} "
          f"{'us new':>7} {'us dup':>7} {'SADD new':>8} {'SADD dup':>8} {'x SADD':>7} "
          f"{'levels':>10}")
    done = ours_used = theirs_used = 0
    t0 = time.perf_counter()
    for size in sizes:
        before = used_memory(admin)
        for fp in fps[done:size]:
            df.seen_add(fp)
        ours_used += used_memory(admin) - before
        before = used_memory(admin)
        for i in range(done, size, 10_000):
            pipe = theirs.pipeline(transaction=False)
            for fp in fps[i : min(size, i + 10_000)]:
                pipe.sadd(key, fp.hex())
            pipe.execute()
        theirs_used += used_memory(admin) - before
        done = size
        stored = len(df)
        ours_b = df.memory_usage() / stored
        theirs_b = int(admin.memory_usage(key, samples=0)) / int(admin.scard(key))
        salt = b"new%d" % size
        new = _fingerprints(5_000, salt)
        dup = fps[: size : max(1, size // 5_000)][:5_000]
        o_new = _probe_usec(admin, df.seen_add, new, False)
        o_dup = _probe_usec(admin, df.seen_add, dup, True)
        new2 = _fingerprints(5_000, salt + b"t")
        t_new = _probe_usec(admin, their_call, new2, False)
        t_dup = _probe_usec(admin, their_call, dup, True)
        levels = ",".join(f"{d}:{b}" for d, (b, _) in df.level_counts().items())
        print(f"{size:>10,} {ours_b:>9.1f} {ours_used / size:>10.1f} {theirs_b:>10.1f} "
              f"{o_new:>7.2f} {o_dup:>7.2f} {t_new:>8.2f} {t_dup:>8.2f} "
              f"{(o_new + o_dup) / (t_new + t_dup):>7.2f} {levels:>10}", flush=True)
    load = time.perf_counter() - t0
    print(f"(loaded in {load:.0f} s; {len(df):,} stored, every bucket "
          f"{sorted(set(_encodings(admin, df)) - {'embstr'})}; levels depth:buckets)")
    df.close()
    theirs.close()


def _encodings(admin: Any, df: RedisIRIDupeFilter) -> list[str]:
    keys = df.bucket_keys()  # buckets (intset), and split markers (embstr)
    found: list[str] = []
    for i in range(0, len(keys), 2000):
        pipe = admin.pipeline(transaction=False)
        for k in keys[i : i + 2000]:
            pipe.object("encoding", k)
        found += [e.decode() for e in pipe.execute() if e is not None]
    return found


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


def _server_usec(admin: Any) -> tuple[float, int]:
    """(usec, calls) since the last reset, over every command but CONFIG/INFO.

    The commands our rare split script (``EVAL``) runs are counted in its time and
    once more in their own rows.
    """
    stats = admin.info("commandstats")
    usec = calls = 0
    for name, v in stats.items():
        cmd = name.removeprefix("cmdstat_")
        if cmd.startswith(("config", "info")):
            continue
        usec += float(v["usec"])
        calls += int(v["calls"])
    return usec, calls


def server_time(server: RedisServer, urls: Sequence[str]) -> None:
    """Server microseconds per request_seen, per contender, same URLs."""
    from scrapy.settings import Settings
    from scrapy_redis.connection import get_redis_from_settings
    from scrapy_redis.dupefilter import RFPDupeFilter

    admin = server.client()
    rows = []

    def measure(name: str, make: Callable[[], tuple[Callable[[Request], bool], Any]],
                keys: Callable[[], list[Any]] | None = None) -> None:
        admin.flushall()
        seen, closer = make()
        per = []
        for _ in range(2):
            reqs = requests_for(urls)
            admin.config_resetstat()
            timed(seen, reqs)
            usec, _ = _server_usec(admin)
            per.append(usec / len(reqs))
        stored_keys = keys() if keys else []
        mem = memory_usage(admin, stored_keys) if stored_keys else 0
        rows.append((name, per[0], per[1], mem))
        closer()

    def theirs() -> tuple[Callable[[Request], bool], Any]:
        client = get_redis_from_settings(Settings({"REDIS_URL": server.url}))
        df = RFPDupeFilter(client, key="st:dupefilter")
        return df.request_seen, client.close

    def ours() -> tuple[Callable[[Request], bool], Any]:
        df = RedisIRIDupeFilter(redis_url=server.url, key="st", local_cache=0)
        df.connect()
        holder["df"] = df
        return df.request_seen, df.close

    holder: dict[str, RedisIRIDupeFilter] = {}

    def bare_sadd() -> tuple[Callable[[Request], bool], Any]:
        df = RedisIRIDupeFilter(redis_url=server.url, key="bare", local_cache=0)
        df.connect()
        client = df.seen_set.client

        def seen(request: Request) -> bool:
            fp = df.fingerprint(request)
            member = int.from_bytes(fp[:8], "big", signed=True)
            key = b"bare:%x" % (int.from_bytes(fp[8:12], "big") % 256)
            return client.execute_command("SADD", key, member) == 0
        return seen, df.close

    measure("scrapy-redis RFPDupeFilter (SADD 40-hex)", theirs,
            lambda: ["st:dupefilter"])
    measure(f"RedisIRIDupeFilter format {FORMAT_VERSION}", ours,
            lambda: [*holder["df"].bucket_keys(), holder["df"].meta_key])
    measure("bare SADD int into 256 intset buckets", bare_sadd,
            lambda: [k for k in admin.keys("bare:*")])
    stored = len(set(urls))
    base = rows[0]
    print(f"\nserver time per request_seen (INFO commandstats), {len(urls):,} URLs, "
          "local cache off")
    print(f"{'contender':<42} {'us new':>7} {'us dup':>7} {'x SADD':>7} {'B/URL':>7}")
    for name, new, dup, mem in rows:
        ratio = (new + dup) / (base[1] + base[2])
        print(f"{name:<42} {new:7.2f} {dup:7.2f} {ratio:7.2f} {mem / stored:7.1f}")


def _fleet_worker(args: tuple[str, str, list[str], int, Any, Any]) -> None:
    kind, url, urls, seed, barrier, out = args
    import random

    from scrapy.settings import Settings

    rng = random.Random(seed)
    order = list(urls)
    rng.shuffle(order)
    passes = [requests_for(order), requests_for(order)]
    if kind == "theirs":
        from scrapy_redis.connection import get_redis_from_settings
        from scrapy_redis.dupefilter import RFPDupeFilter

        client = get_redis_from_settings(Settings({"REDIS_URL": url}))
        seen = RFPDupeFilter(client, key="fleet:dupefilter").request_seen
        df = None
    else:
        df = RedisIRIDupeFilter(redis_url=url, key="fleet")
        df.connect()
        seen = df.request_seen
    barrier.wait()
    t0 = time.perf_counter()
    local = []
    for reqs in passes:
        before = df.local_hits if df is not None else 0
        timed(seen, reqs)
        local.append(((df.local_hits if df is not None else 0) - before) / len(reqs))
    out.put((time.perf_counter() - t0, 2 * len(order), local))


def fleet(server: RedisServer, urls: Sequence[str]) -> None:
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    admin = server.client()
    kinds = ("theirs", "ours")
    names = {"theirs": "scrapy-redis RFPDupeFilter", "ours": "ours, with the local cache"}
    results: dict[tuple[str, int], tuple[float, list[float], float]] = {}
    for procs in (1, 2, 4):
        for kind in kinds:
            admin.flushall()
            admin.config_resetstat()
            barrier = ctx.Barrier(procs)
            out = ctx.Queue()
            workers = [ctx.Process(target=_fleet_worker,
                                   args=((kind, server.url, list(urls), k, barrier, out),))
                       for k in range(procs)]
            for w in workers:
                w.start()
            got = [out.get(timeout=1800) for _ in workers]
            for w in workers:
                w.join()
            usec, _ = _server_usec(admin)
            calls = sum(n for _, n, _ in got)
            wall = max(t for t, _, _ in got)
            local = [sum(g[2][i] for g in got) / procs for i in range(2)]
            results[(kind, procs)] = (calls / wall, local, usec / calls)
    print(f"\nfleet: 1, 2, 4 processes, each replaying {len(urls):,} URLs twice "
          "(own order); requests/s of the whole fleet")
    print(f"{'filter':<36} {'procs':>5} {'fleet req/s':>11} {'vs theirs':>9} "
          f"{'local 1st':>9} {'local 2nd':>9} {'server us/call':>14}")
    for procs in (1, 2, 4):
        for kind in kinds:
            rate, local, us = results[(kind, procs)]
            ratio = rate / results[("theirs", procs)][0]
            print(f"{names[kind]:<36} {procs:>5} {rate:>11,.0f} {ratio:>9.2f} "
                  f"{local[0]:>9.1%} {local[1]:>9.1%} {us:>14.2f}")


def _commandstats(admin: Any) -> dict[str, tuple[int, float]]:
    """command -> (calls, usec) since the last reset (CONFIG/INFO left out)."""
    out = {}
    for name, v in admin.info("commandstats").items():
        cmd = name.removeprefix("cmdstat_")
        if not cmd.startswith(("config", "info")):
            out[cmd] = (int(v["calls"]), float(v["usec"]))
    return out


def scheduler_time(server: RedisServer, n: int) -> None:
    """Server microseconds per request of the fleet queue (see the module doc)."""
    from scrapy import Spider
    from scrapy.dupefilters import BaseDupeFilter
    from scrapy_redis.queue import PriorityQueue

    from iri_scrapy.frontier.redis_scheduler import RedisIRIScheduler

    admin = server.client()
    spider = Spider(name="bench")
    urls = [f"http://bench.example/p/{i}?q={i * 7919}" for i in range(n)]
    rows: list[tuple[str, dict[str, tuple[int, float]], float]] = []

    def record(name: str, wall: float) -> None:
        stats = _commandstats(admin)
        rows.append((name, stats, wall))

    admin.flushall()
    scheduler = RedisIRIScheduler(BaseDupeFilter(), redis_url=server.url, lease_seconds=60,
                                  max_inflight=0)
    scheduler.open(spider)
    if scheduler._ticker is not None and scheduler._ticker.running:
        scheduler._ticker.stop()  # no reactor runs here: ticks are not counted
    requests = [Request(u) for u in urls]
    admin.config_resetstat()
    start = time.perf_counter()
    for request in requests:
        scheduler.enqueue_request(request)
    held = []
    while (request := scheduler.next_request()) is not None:
        held.append(request)
    for request in held:
        scheduler.answered(request)
    record("RedisIRIScheduler (intent+enqueue, lease, ack)", time.perf_counter() - start)
    assert len(held) == n, len(held)
    scheduler.close("finished")

    admin.flushall()
    from scrapy_redis import picklecompat

    queue = PriorityQueue(server.client(), spider, "bench:requests", picklecompat)
    requests = [Request(u) for u in urls]
    admin.config_resetstat()
    start = time.perf_counter()
    for request in requests:
        queue.push(request)
    popped = 0
    while queue.pop() is not None:
        popped += 1
    record("scrapy-redis PriorityQueue (push, pop)", time.perf_counter() - start)
    assert popped == n, popped

    admin.flushall()
    client = server.client()
    digests = [blake2b(u.encode(), digest_size=20).hexdigest() for u in urls]
    admin.config_resetstat()
    start = time.perf_counter()
    for digest in digests:
        client.sadd("bench:dupefilter", digest)
    record("one SADD (the dupefilter baseline)", time.perf_counter() - start)

    print(f"\nserver time per request of the queue (INFO commandstats), {n:,} requests")
    print("(a command a script runs is counted in the script's EVALSHA time and in its own "
          "row: only top-level commands are summed)")
    totals = {}
    for name, stats, wall in rows:
        scripted = "evalsha" in stats
        usec = 0.0
        parts = []
        for cmd, (calls, u) in sorted(stats.items()):
            if not calls or cmd in ("hello", "script|load", "ping"):
                continue
            if scripted and cmd != "evalsha":
                if cmd != "hset":
                    continue
                # top-level HSET: the intent, one a request; the others ran in scripts
                u, calls = u / calls * n, n
            usec += u
            parts.append(f"{cmd} {calls / n:.0f} x {u / calls:.2f} us")
        totals[name] = usec / n
        print(f"{name:<48} {usec / n:6.2f} us/request  [{', '.join(parts)}]  "
              f"client {wall / n * 1e6:.0f} us/request")
    sadd = totals[rows[-1][0]]
    print("ratios to one SADD: " + ", ".join(
        f"{name.split(' (')[0]} {per / sadd:.1f}x" for name, per in totals.items()))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--urls", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-scale", action="store_true",
                        help="skip the server-time and fleet parts")
    parser.add_argument("--only-scale", action="store_true",
                        help="only the server-time and fleet parts")
    parser.add_argument("--fleet-limit", type=int, default=30_000,
                        help="URLs each fleet process replays (default 30,000)")
    parser.add_argument("--synthetic", type=int, default=0,
                        help="also a storage-only run over this many random fingerprints")
    parser.add_argument("--only-synthetic", action="store_true",
                        help="only the storage-only run (--synthetic N)")
    parser.add_argument("--scheduler", type=int, default=0,
                        help="only the fleet queue's server time, over this many requests")
    args = parser.parse_args(argv)

    if args.scheduler:
        with tempfile.TemporaryDirectory(prefix="bench-redis-") as tmp, \
                RedisServer(Path(tmp)) as server:
            version = server.client().info("server")["redis_version"]
            print(f"redis-server {version} on {server.url}")
            scheduler_time(server, args.scheduler)
        return 0
    urls = load_urls(args.urls, args.limit)
    n = len(urls)
    print(f"corpus: {args.urls} ({n} URLs accepted by scrapy.Request)")
    with tempfile.TemporaryDirectory(prefix="bench-redis-") as tmp, \
            RedisServer(Path(tmp)) as server:
        version = server.client().info("server")["redis_version"]
        print(f"redis-server {version} on {server.url}, rounds={args.rounds} (best of)")
        if args.only_synthetic:
            bench_synthetic(server, args.synthetic)
            return 0
        if not args.no_scale:
            server_time(server, urls)
            fleet(server, urls[: args.fleet_limit])
        if args.only_scale:
            return 0
        theirs = bench_theirs(server, urls, args.rounds)
        ours = bench_ours(server, urls, args.rounds)
        hinted = bench_ours(server, urls, 1, expected=n)

        def row(name: str, r: dict[str, float]) -> str:
            per = r["memory_usage"] / r["stored"]
            per_used = r["used_memory_delta"] / r["stored"]
            return (f"{name:<44} {r['rps_first']:>10,.0f} {r['rps_second']:>10,.0f} "
                    f"{int(r['stored']):>8} {per:>9.1f} {per_used:>9.1f}")

        def mem(r: dict[str, float]) -> float:
            return (r["memory_usage"] / r["stored"]) / (
                theirs["memory_usage"] / theirs["stored"])

        print()
        print(f"{'filter':<44} {'req/s new':>10} {'req/s dup':>10} {'stored':>8} "
              f"{'B/URL mem':>9} {'B/URL used':>9}")
        print(row("scrapy-redis RFPDupeFilter (SET hex)", theirs))
        print(row(f"RedisIRIDupeFilter default (format {FORMAT_VERSION})", ours))
        print(row(f"  hint EXPECTED_URLS={n}", hinted))
        print()
        speed1 = ours["rps_first"] / theirs["rps_first"]
        speed2 = ours["rps_second"] / theirs["rps_second"]
        print(f"default settings, ours/theirs: speed new URLs {speed1:.2f}x, duplicates "
              f"{speed2:.2f}x (target >= 1); memory {mem(ours):.3f} (target <= 0.5)")
        print(f"memory ratio: hint {mem(hinted):.3f}")
        print(f"stored distinct keys: ours {int(ours['stored'])} (canonical IRIs), "
              f"theirs {int(theirs['stored'])} (w3lib canonicalize_url)")
        if args.synthetic:
            bench_synthetic(server, args.synthetic)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
