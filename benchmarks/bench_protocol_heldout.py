"""Server hits per resource on generated messy sites: stock Scrapy, level scheme, level protocol.

Each seed of :mod:`tests.support.gen_site` is a site no one tuned the protocol
level on (the held-out seeds and noise kinds; ``--tuning`` runs the tuning ones
instead).  Each crawl (a subprocess, :func:`tests.support.crawl.run_crawl`,
``ROBOTSTXT_OBEY``) runs against a fresh server, which knows which URL is which
resource: printed per seed and setting are the server hits (robots.txt apart),
the hits per reachable resource, the resources missed (per family of pages that
must never merge: gallery, names, part numbers, order numbers, UUIDs, times,
dates), the fetches of a URL already fetched (calibration included), and the
protocol level's calibration and content counts.

With ``--workers N`` the add-on's crawls are N workers at once on one fresh
``redis-server`` (a Redis fleet; stock Scrapy stays one process).

With ``--families``, each seed's server hits per family of pages (host and first
path segment) beside its resources.

Run: ``python benchmarks/bench_protocol_heldout.py [--seeds 101 102 ...] [--tuning]
[--settings stock scheme protocol] [--workers 2] [--families]``.  Bounded: every crawl
has a timeout.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.crawl import run_crawl  # noqa: E402
from tests.support.gen_site import (  # noqa: E402
    HELDOUT_NOISE,
    HELDOUT_SEEDS,
    TUNING_NOISE,
    TUNING_SEEDS,
    GenSite,
)
from tests.support.redis_support import RedisServer  # noqa: E402

ADDON: dict[str, Any] = {"ADDONS": {"iri_scrapy.Addon": 0}}
SETTINGS: dict[str, dict[str, Any]] = {
    "stock": {"ROBOTSTXT_OBEY": True},
    "scheme": {**ADDON, "ROBOTSTXT_OBEY": True},
    "protocol": {**ADDON, "ROBOTSTXT_OBEY": True, "IRI_LEVEL": "protocol"},
}
_SHOWN = ("calibration/fetched", "content/nominated", "content/learned", "counterexamples",
          "canonical/learned", "clean-param/learned", "redirect/learned")


def crawl(seed: int, setting: str, timeout: float,
          workers: int = 0) -> tuple[GenSite, dict[str, Any]]:
    """One crawl of *seed*'s site; with *workers*, that many at once on one fresh
    redis-server (a fleet: ``IRI_REDIS_URL``), their stats summed."""
    with GenSite(seed) as site:
        if not workers:
            result = run_crawl(SETTINGS[setting], site.start_urls, site.proxy_url,
                               timeout=timeout)
            site.reachable()
            return site, result.stats
        with tempfile.TemporaryDirectory() as tmp, RedisServer(Path(tmp)) as redis:
            settings = {**SETTINGS[setting], "IRI_REDIS_URL": redis.url}
            with ThreadPoolExecutor(workers) as pool:
                results = list(pool.map(lambda _: run_crawl(
                    settings, site.start_urls, site.proxy_url, timeout=timeout),
                    range(workers)))
        stats: Counter[str] = Counter()
        for result in results:
            stats.update({k: v for k, v in result.stats.items() if isinstance(v, int)})
        site.reachable()
        return site, dict(stats)


def families(site: GenSite) -> str:
    """Server hits per family of pages (``host/first-segment``, a ``www.`` mirror
    with its site, 3xx and 404 under the URL's), and the family's resources:
    where the extra fetches are."""
    def family(where: str) -> str:
        host, _, path = where.split("://", 1)[-1].removeprefix("www.").partition("/")
        return f"{host.split('.')[0]}/{path.split('/')[0].split('?')[0]}"

    hits = Counter(family(h.resource or h.url) for h in site.log() if not h.robots)
    resources = Counter(family(r) for r in site.reachable())
    return " ".join(f"{f} {hits[f]}/{resources[f]}" for f in sorted(hits | resources))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+")
    parser.add_argument("--tuning", action="store_true", help="the tuning seeds and noise")
    parser.add_argument("--settings", nargs="+", choices=list(SETTINGS), default=list(SETTINGS))
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--families", action="store_true",
                        help="print each seed's server hits per family of pages (host and "
                             "first path segment) beside its resources")
    parser.add_argument("--workers", type=int, default=0,
                        help="crawl each site with N workers on one redis-server (the add-on "
                             "settings only)")
    args = parser.parse_args(argv)
    seeds = args.seeds or (TUNING_SEEDS if args.tuning else HELDOUT_SEEDS)
    print(f"noise held out: {', '.join(HELDOUT_NOISE)}; tuning noise: {', '.join(TUNING_NOISE)}")
    totals: dict[str, list[int]] = {s: [0, 0, 0] for s in args.settings}
    for seed in seeds:
        for setting in args.settings:
            site, stats = crawl(seed, setting, args.timeout,
                                args.workers if setting != "stock" else 0)
            hits, resources, missed = site.total_hits(), len(site.reachable()), len(site.missed())
            for i, n in enumerate((hits, resources, missed)):
                totals[setting][i] += n
            shown = " ".join(f"{k}={stats.get(f'iri/protocol/{k}', 0)}" for k in _SHOWN
                             if setting == "protocol")
            urls = Counter(h.url for h in site.log() if not h.robots)
            again = sum(n - 1 for n in urls.values() if n > 1)
            print(f"seed {seed:4d} {setting:8s} hits {hits:5d} / {resources:4d} resources = "
                  f"{hits / resources:.2f}  missed {missed} {site.family_missed() or ''} "
                  f"same-URL refetches {again} {shown}"
                  f"  [{','.join(site.noise)}]", flush=True)
            if args.families:
                print("    " + families(site), flush=True)
    print("all seeds:")
    for setting, (hits, resources, missed) in totals.items():
        print(f"  {setting:8s} {hits:6d} hits / {resources:5d} resources = "
              f"{hits / max(1, resources):.3f} per resource, missed {missed}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
