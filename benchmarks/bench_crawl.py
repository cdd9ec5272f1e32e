"""Crawl of the local alias web: the plugin (``ADDONS``) vs stock Scrapy settings.

Each crawl runs in its own subprocess (:func:`iri_scrapy.testing.crawl.run_crawl`)
against the same in-process alias-web server.  The runs
alternate (stock, plugin, stock, ...) to spread drift evenly; medians are
reported, with the ratio of the medians (plugin / stock).

Run: ``python benchmarks/bench_crawl.py [--runs N] [--site all|plain|big|demo]``.
``big`` is the demo web plus ``--pages`` extra pages on one host, each linking
to several aliases of its neighbours, so that the crawl lasts long enough to
time; ``plain`` is the same pages linked by their canonical URIs only, so that
both crawls fetch the same pages and the ratio is the plugin's own cost.
Pages/second is measured on the server: hits over the time from the first
request to the last (Scrapy's start-up and its idle wait before closing, a
fixed cost that weighs more on the shorter plugin crawl, are excluded); the
crawl time from Scrapy's ``elapsed_time_seconds`` is printed too.
Bounded: every crawl has a timeout, ``--runs`` is capped at 15.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from iri_scrapy.testing.crawl import run_crawl  # noqa: E402
from iri_scrapy.testing.server import serve_site  # noqa: E402
from iri_scrapy.testing.site import DEMO_SITE, Host, Link, Resource, Site  # noqa: E402

SETTINGS = {
    "stock": {},
    "plugin": {"ADDONS": {"iri_scrapy.Addon": 0}},
}


def big_site(pages: int, aliases: bool = True) -> Site:
    """The demo web plus *pages* pages on ``bench.example``.

    With *aliases* each page links to its three neighbours under three alias
    spellings; without, under their canonical URI only (both crawls then fetch
    the same pages, which isolates the plugin's per-page cost).
    """
    host = Host("bench.example", "en")
    extra = []
    for i in range(pages):
        hrefs = []
        for d in (1, 2, 3):
            n = (i + d) % pages
            hrefs.append((f"/p/{n}", f"b{n}"))
            if aliases:
                hrefs.append((f"HTTP://BENCH.example:80/p/./{n}#x", f"b{n}"))
                hrefs.append((f"/p/%{ord(str(n)[0]):02x}{str(n)[1:]}", f"b{n}"))
        links = tuple(Link(href, name) for href, name in hrefs)
        extra.append(Resource(f"b{i}", host, f"/p/{i}", None, f"Page {i}", "Bench.", links))
    home = Resource("bench-home", host, "/", None, "Bench", "", (Link("/p/0", "b0"),))
    if not aliases:
        return Site(hosts=(host,), resources=(home, *extra), start_urls=("http://bench.example/",))
    return Site(
        hosts=(*DEMO_SITE.hosts, host),
        resources=(*DEMO_SITE.resources, home, *extra),
        start_urls=(*DEMO_SITE.start_urls, "http://bench.example/"),
    )


def crawl_rate(hits: list[Any]) -> float:
    """Pages per second while crawling: server hits over the time from the first
    request to the last (start-up and the idle wait before closing excluded)."""
    if len(hits) < 2:
        return 0.0
    span = hits[-1].at - hits[0].at
    return (len(hits) - 1) / span if span > 0 else 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--site", choices=["demo", "big", "plain", "all"], default="all")
    parser.add_argument("--pages", type=int, default=400)
    parser.add_argument("--timeout", type=float, default=120)
    args = parser.parse_args(argv)
    runs = max(1, min(args.runs, 15))
    sites = ["plain", "big"] if args.site == "all" else [args.site]
    for site_name in sites:
        if site_name == "demo":
            site = DEMO_SITE
        else:
            site = big_site(args.pages, aliases=site_name == "big")
        rates: dict[str, list[float]] = {name: [] for name in SETTINGS}
        walls: dict[str, list[float]] = {name: [] for name in SETTINGS}
        fetched: dict[str, int] = {}
        with serve_site(site) as srv:
            for _ in range(runs):
                for name, settings in SETTINGS.items():
                    srv.reset()
                    result = run_crawl(settings, list(site.start_urls), srv.proxy_url,
                                       timeout=args.timeout)
                    if result.finish_reason != "finished":
                        print(f"{name}: crawl did not finish ({result.finish_reason})",
                              file=sys.stderr)
                        return 1
                    hits = srv.hits.hits
                    rates[name].append(crawl_rate(hits))
                    walls[name].append(float(result.stats.get("elapsed_time_seconds") or 0))
                    fetched[name] = len(hits)
        med = {name: statistics.median(r) for name, r in rates.items()}
        wall = {name: statistics.median(r) for name, r in walls.items()}
        print(f"site={site_name} resources={len(site.keys)} runs={runs}")
        for name in SETTINGS:
            print(f"{name:>6}: median {med[name]:8.1f} pages/s while crawling  "
                  f"(runs: {', '.join(f'{r:.1f}' for r in rates[name])}); "
                  f"requests to the server: {fetched[name]}; crawl time {wall[name]:.2f} s")
        print(f"  ratio plugin/stock, pages/s (medians): {med['plugin'] / med['stock']:.3f}; "
              f"crawl time plugin/stock: {wall['plugin'] / wall['stock']:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
