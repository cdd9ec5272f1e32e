"""Cost of the crash-safe frontier: a crawl of the local 1,500-page site, side by side.

Three (or four) settings, each crawl in its own subprocess
(:func:`tests.support.crawl.run_crawl`) against the same in-process server
(:func:`tests.support.bigsite.large_site`, every link under three alias
spellings), in alternating order, each with a fresh ``JOBDIR``:

* ``frontier``: the add-on with ``JOBDIR`` -- the crash-safe default
  (``IRI_FRONTIER_FSYNC`` = 250 ms);
* ``plain``: the add-on with ``JOBDIR`` and ``IRI_FRONTIER = False`` (Scrapy's
  own ``JOBDIR`` queue, not crash-safe);
* ``nojobdir``: the add-on without ``JOBDIR`` (nothing on disk);
* ``always`` (with ``--always``): the frontier with ``IRI_FRONTIER_FSYNC = "always"``.

Reported per setting (medians over ``--runs``): pages/second while crawling
(server hits over the time from the first request to the last, start-up and
the idle wait before closing excluded, as in ``bench_crawl.py``), Scrapy's
``elapsed_time_seconds``, and CPU time (user + system, of the crawl process,
from ``getrusage(RUSAGE_CHILDREN)``) per request; then the ratios to
``plain`` and to ``nojobdir``.

Then the scheduler alone, in this process (``--requests``, default 20,000):
enqueue (fingerprint and dedup included), hand out and answer each request, in
turns of 20 as a crawl does, with the frontier (one commit per turn), Scrapy's
``JOBDIR`` disk queue, and no ``JOBDIR``: microseconds of CPU per request.

Then enqueue alone, side by side in this process (``--requests``, best of
``--repeat`` rounds in alternating order), under ``ScrapyPriorityQueue`` and under
``DownloaderAwarePriorityQueue`` (Scrapy's default): the frontier, ``plain``
(Scrapy's ``JOBDIR`` queue with the add-on's dupefilter) and ``stock`` (Scrapy
alone with ``JOBDIR``: its own dupefilter): microseconds of CPU per
``enqueue_request``, a commit every 20 requests (a reactor turn).

Run: ``python benchmarks/bench_frontier.py [--runs N] [--pages N] [--latency S] [--always]
[--requests N] [--repeat N] [--scheduler-only]``.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.bigsite import SlowSiteServer, large_site  # noqa: E402
from tests.support.crawl import run_crawl  # noqa: E402

ADDON: dict[str, Any] = {"ADDONS": {"iri_scrapy.Addon": 0}, "CLOSESPIDER_TIMEOUT": 0}
SETTINGS: dict[str, tuple[dict[str, Any], bool]] = {
    "frontier": (ADDON, True),
    "plain": ({**ADDON, "IRI_FRONTIER": False}, True),
    "nojobdir": (ADDON, False),
}


def crawl_rate(hits: list[Any]) -> float:
    """Pages per second while crawling (first request to last)."""
    if len(hits) < 2:
        return 0.0
    span = hits[-1].at - hits[0].at
    return (len(hits) - 1) / span if span > 0 else 0.0


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def scheduler_cost(requests: int) -> dict[str, float]:
    """CPU microseconds per request through the scheduler alone, per setting."""
    from scrapy import Request, Spider
    from scrapy.utils.misc import load_object
    from scrapy.utils.test import get_crawler

    class _Spider(Spider):
        name = "bench"

        def parse(self, response: Any) -> None:
            return None

    out = {}
    for name, (extra, jobdir) in SETTINGS.items():
        with tempfile.TemporaryDirectory(prefix="bench-frontier-") as tmp:
            settings = {**extra, "IRI_FRONTIER_MAX_INFLIGHT": 0,
                        "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.ScrapyPriorityQueue"}
            if jobdir:
                settings["JOBDIR"] = tmp
            crawler = get_crawler(_Spider, settings)
            crawler._apply_settings()
            spider = _Spider.from_crawler(crawler)
            crawler.spider = spider
            scheduler = load_object(crawler.settings["SCHEDULER"]).from_crawler(crawler)
            scheduler.open(spider)
            reqs = [Request(f"http://h{i % 50}.example/p/{i}?q={i}", callback=spider.parse)
                    for i in range(requests)]
            commit = getattr(scheduler, "_commit", None)
            answered = getattr(scheduler, "answered", None)
            cpu0 = time.process_time()
            for i in range(0, requests, 20):
                for request in reqs[i:i + 20]:
                    scheduler.enqueue_request(request)
                if commit is not None:
                    commit()  # the end of the reactor turn
                for _ in range(20):
                    request = scheduler.next_request()
                    if answered is not None and request is not None:
                        answered(request)
            if commit is not None:
                commit()
            out[name] = (time.process_time() - cpu0) / requests * 1e6
            scheduler.close("finished")
    return out


class _SlotKeys:
    """What ``DownloaderAwarePriorityQueue`` reads of Scrapy's downloader (no download
    runs here): Scrapy's own ``get_slot_key``, no active download."""

    def __init__(self) -> None:
        from scrapy.core.downloader import Downloader

        self.DOWNLOAD_SLOT = Downloader.DOWNLOAD_SLOT
        self.ip_concurrency = 0
        self.slots: dict[str, Any] = {}
        self.get_slot_key = Downloader.get_slot_key.__get__(self)


ENQUEUE: dict[str, dict[str, Any]] = {
    "frontier": ADDON,
    "plain": {**ADDON, "IRI_FRONTIER": False},
    "stock": {},
}


def enqueue_cost(requests: int, pq: str, repeat: int) -> list[dict[str, float]]:
    """CPU microseconds per ``enqueue_request`` (fingerprint, dedup, store), per round
    (*repeat* of them) and per setting of :data:`ENQUEUE`, under the priority queue
    *pq*.  Each timed window starts on a collected heap (``gc.collect()``), so that
    the garbage of the contender before is not collected on the next one's time."""
    import gc
    from types import SimpleNamespace

    from scrapy import Request, Spider
    from scrapy.utils.misc import load_object
    from scrapy.utils.test import get_crawler

    class _Spider(Spider):
        name = "bench"

        def parse(self, response: Any) -> None:
            return None

    rounds: list[dict[str, float]] = []
    for round_ in range(repeat):
        rounds.append({})
        names = list(ENQUEUE) if round_ % 2 == 0 else list(reversed(ENQUEUE))
        for name in names:
            with tempfile.TemporaryDirectory(prefix="bench-enqueue-") as tmp:
                crawler = get_crawler(_Spider, {**ENQUEUE[name], "JOBDIR": tmp,
                                                "SCHEDULER_PRIORITY_QUEUE": pq})
                crawler._apply_settings()
                spider = _Spider.from_crawler(crawler)
                crawler.spider = spider
                crawler.engine = SimpleNamespace(  # type: ignore[assignment]
                    downloader=_SlotKeys())
                scheduler = load_object(crawler.settings["SCHEDULER"]).from_crawler(crawler)
                scheduler.open(spider)
                reqs = [Request(f"http://h{i % 50}.example/p/{i}?q={i}", callback=spider.parse,
                                priority=i % 3) for i in range(requests)]
                commit = getattr(scheduler, "_commit", None)
                gc.collect()
                cpu0 = time.process_time()
                for i in range(0, requests, 20):
                    for request in reqs[i:i + 20]:
                        scheduler.enqueue_request(request)
                    if commit is not None:
                        commit()  # the end of the reactor turn
                rounds[-1][name] = (time.process_time() - cpu0) / requests * 1e6
                scheduler.close("shutdown")
    return rounds


def print_enqueue(requests: int, repeat: int) -> None:
    print(f"\nenqueue alone, {requests} requests over 50 hosts, {repeat} rounds: CPU "
          "microseconds per request (best), and the median of the rounds' paired ratios")
    for pq in ("scrapy.pqueues.ScrapyPriorityQueue",
               "scrapy.pqueues.DownloaderAwarePriorityQueue"):
        rounds = enqueue_cost(requests, pq, repeat)
        print(f"  {pq.rsplit('.', 1)[1]}:")
        for name in ENQUEUE:
            best = min(r[name] for r in rounds)
            vs_plain = statistics.median(r[name] / r["plain"] for r in rounds)
            vs_stock = statistics.median(r[name] / r["stock"] for r in rounds)
            print(f"{name:>9} {best:8.1f}   vs plain {vs_plain:.3f}   vs stock {vs_stock:.3f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pages", type=int, default=1500)
    parser.add_argument("--latency", type=float, default=0.0,
                        help="seconds the server waits before each answer (default 0)")
    parser.add_argument("--always", action="store_true",
                        help='also measure IRI_FRONTIER_FSYNC = "always"')
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--requests", type=int, default=20000,
                        help="requests through the scheduler alone (0: skip)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="rounds of the enqueue measure (the best is kept)")
    parser.add_argument("--scheduler-only", action="store_true",
                        help="only the scheduler measures (no crawl)")
    args = parser.parse_args(argv)
    if args.scheduler_only:
        print_enqueue(args.requests, max(1, args.repeat))
        return 0
    runs = max(1, min(args.runs, 15))
    settings = dict(SETTINGS)
    if args.always:
        settings["always"] = ({**ADDON, "IRI_FRONTIER_FSYNC": "always"}, True)
    site = large_site(args.pages)
    rates: dict[str, list[float]] = {name: [] for name in settings}
    walls: dict[str, list[float]] = {name: [] for name in settings}
    cpus: dict[str, list[float]] = {name: [] for name in settings}
    with SlowSiteServer(site, latency=args.latency) as srv, \
            tempfile.TemporaryDirectory(prefix="bench-frontier-") as tmp:
        for run in range(runs):
            order = list(settings)
            if run % 2:
                order.reverse()
            for name in order:
                extra, jobdir = settings[name]
                srv.reset()
                cpu0 = children_cpu()
                result = run_crawl(
                    extra, list(site.start_urls), srv.proxy_url, timeout=args.timeout,
                    jobdir=Path(tmp, f"{name}-{run}") if jobdir else None,
                )
                cpu = children_cpu() - cpu0
                hits = srv.hits.hits
                if result.finish_reason != "finished" or len(hits) != len(site.keys):
                    print(f"{name}: crawl did not finish cleanly ({result.finish_reason}, "
                          f"{len(hits)} hits of {len(site.keys)})\n{result.stderr[-2000:]}",
                          file=sys.stderr)
                    return 1
                if jobdir and name != "plain" and not result.stats.get("iri/frontier/commits"):
                    print(f"{name}: the frontier was not used", file=sys.stderr)
                    return 1
                rates[name].append(crawl_rate(hits))
                walls[name].append(float(result.stats.get("elapsed_time_seconds") or 0))
                cpus[name].append(cpu / len(hits) * 1000)
                print(f"  run {run + 1} {name:>8}: {rates[name][-1]:7.1f} pages/s, "
                      f"{walls[name][-1]:6.2f} s, {cpus[name][-1]:5.2f} ms CPU/request",
                      flush=True)
    med = {name: statistics.median(v) for name, v in rates.items()}
    wall = {name: statistics.median(v) for name, v in walls.items()}
    cpu_med = {name: statistics.median(v) for name, v in cpus.items()}
    print(f"\nsite: {len(site.keys)} pages, latency {args.latency * 1000:.0f} ms, "
          f"runs: {runs} (medians)")
    print(f"{'setting':>9} {'pages/s':>9} {'crawl s':>8} {'CPU ms/req':>11} "
          f"{'pages/s vs plain':>17} {'vs nojobdir':>12} {'CPU vs plain':>13}")
    for name in settings:
        print(f"{name:>9} {med[name]:9.1f} {wall[name]:8.2f} {cpu_med[name]:11.2f} "
              f"{med[name] / med['plain']:17.3f} {med[name] / med['nojobdir']:12.3f} "
              f"{cpu_med[name] / cpu_med['plain']:13.3f}")
    if args.requests > 0:
        cost = scheduler_cost(args.requests)
        print(f"\nscheduler alone, {args.requests} requests (enqueue with fingerprint and "
              "dedup, hand out, answer): CPU microseconds per request")
        for name, us in cost.items():
            print(f"{name:>9} {us:8.1f}   vs plain {us / cost['plain']:.3f}")
        print_enqueue(args.requests, max(1, args.repeat))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
