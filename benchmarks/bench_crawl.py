"""Crawl of the local alias web: the plugin (``ADDONS``) vs stock Scrapy settings.

Each crawl runs in its own subprocess (:func:`iri_scrapy.testing.crawl.run_crawl`)
against the same in-process alias-web server.  Pages/second is
``response_received_count / elapsed_time_seconds`` from the crawl's own stats
(engine time only: interpreter start-up and imports are excluded).  The runs
alternate (stock, plugin, stock, ...) to spread drift evenly; medians are
reported, with the ratio of the medians (plugin / stock).

Run: ``python benchmarks/bench_crawl.py [--runs N] [--site demo|big]``.  ``big``
is the demo web plus ``--pages`` extra pages on one host, each linking to
several aliases of its neighbours, so that the crawl lasts long enough to time.
Bounded: every crawl has a timeout, ``--runs`` is capped at 15.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from iri_scrapy.testing.crawl import run_crawl  # noqa: E402
from iri_scrapy.testing.server import serve_site  # noqa: E402
from iri_scrapy.testing.site import DEMO_SITE, Host, Link, Resource, Site  # noqa: E402

SETTINGS = {
    "stock": {},
    "plugin": {"ADDONS": {"iri_scrapy.Addon": 0}},
}


def big_site(pages: int) -> Site:
    """The demo web plus *pages* pages on ``bench.example``, linked with alias spellings."""
    host = Host("bench.example", "en")
    extra = []
    for i in range(pages):
        links = tuple(
            Link(href, f"b{(i + d) % pages}")
            for d in (1, 2, 3)
            for href in (
                f"/p/{(i + d) % pages}",
                f"HTTP://BENCH.example:80/p/./{(i + d) % pages}#x",
                f"/p/%{ord(str((i + d) % pages)[0]):02x}{str((i + d) % pages)[1:]}",
            )
        )
        extra.append(Resource(f"b{i}", host, f"/p/{i}", None, f"Page {i}", "Bench.", links))
    home = Resource("bench-home", host, "/", None, "Bench", "", (Link("/p/0", "b0"),))
    return Site(
        hosts=(*DEMO_SITE.hosts, host),
        resources=(*DEMO_SITE.resources, home, *extra),
        start_urls=(*DEMO_SITE.start_urls, "http://bench.example/"),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--site", choices=["demo", "big"], default="big")
    parser.add_argument("--pages", type=int, default=400)
    parser.add_argument("--timeout", type=float, default=120)
    args = parser.parse_args(argv)
    runs = max(1, min(args.runs, 15))
    site = DEMO_SITE if args.site == "demo" else big_site(args.pages)
    rates: dict[str, list[float]] = {name: [] for name in SETTINGS}
    fetched: dict[str, int] = {}
    with serve_site(site) as srv:
        for _ in range(runs):
            for name, settings in SETTINGS.items():
                srv.reset()
                t0 = time.perf_counter()
                result = run_crawl(settings, list(site.start_urls), srv.proxy_url,
                                   timeout=args.timeout)
                wall = time.perf_counter() - t0
                if result.finish_reason != "finished":
                    print(f"{name}: crawl did not finish ({result.finish_reason})",
                          file=sys.stderr)
                    return 1
                pages = int(result.stats.get("response_received_count", 0))
                elapsed = float(result.stats.get("elapsed_time_seconds") or wall)
                rates[name].append(pages / elapsed)
                fetched[name] = sum(srv.hits.counts().values())
    med = {name: statistics.median(r) for name, r in rates.items()}
    print(f"site={args.site} resources={len(site.keys)} runs={runs}")
    for name in SETTINGS:
        print(f"{name:>6}: median {med[name]:8.1f} pages/s  "
              f"(runs: {', '.join(f'{r:.1f}' for r in rates[name])}; "
              f"requests to the server in the last run: {fetched[name]})")
    print(f"ratio plugin/stock (pages/s, medians): {med['plugin'] / med['stock']:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
