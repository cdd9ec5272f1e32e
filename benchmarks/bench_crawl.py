"""Crawls side by side: the plugin (``ADDONS``) vs stock Scrapy settings, same spider.

Each crawl runs in its own subprocess (:func:`tests.support.crawl.run_crawl`)
against the same in-process server, following every link of the site.  The
two crawls run in rounds, the first of each round alternating (stock, plugin;
plugin, stock; ...), so that drift on a shared machine weighs on both alike.

Run: ``python benchmarks/bench_crawl.py [--runs N] [--site all|plain|big|demo|DIR]
[--pages N] [--pin] [--idiom follow|urljoin] [--protocol]
[--instructions [--instr-pages N] [--settings stock|plugin]]``.
``big`` is the demo web plus ``--pages`` extra pages on one host, each linking
to several aliases of its neighbours; ``plain`` is the same pages linked by
their canonical URIs only, so that both crawls fetch the same pages and the
ratio is the plugin's own cost.  ``DIR``, any directory, is the real-site
mode: the HTML tree is served as ``http://docs.example/`` by a static file
server (:class:`tests.support.dirsite.DirServer`) and crawled within that
host (``allowed_domains``), e.g. Debian's ``python3-doc``:
``--site /usr/share/doc/python3/html``.  ``--idiom urljoin``: the spider follows
``response.follow(response.urljoin(href))`` (a common idiom) instead of
``response.follow(href)``.  ``--protocol``: the add-on at ``IRI_LEVEL =
"protocol"`` against the add-on at its default level (the learned level's own
cost; printed under the names plugin and stock).

The main figure is the CPU time of the crawl process (user + system, from
``spider_opened`` to ``spider_closed``: start-up excluded) per request the
server answered, and the median over rounds of each round's plugin/stock
ratio (timings on a busy machine are noisy; paired ratios cancel most of the
drift).  Also printed: pages fetched (and distinct resources answered 200),
``request_seen`` calls (requests enqueued plus duplicates dropped), CPU per
``request_seen`` call, pages/second while crawling (server hits over the time
from the first request to the last) and Scrapy's ``elapsed_time_seconds``.
Each round checks that the plugin fetched every resource stock fetched.
Bounded: every crawl has a timeout, ``--runs`` is capped at 15.

``--pin`` puts the server (this process and its threads) on one CPU and every
crawl process on another (``os.sched_setaffinity``; the first two CPUs this
process may use), so that the two do not compete for a core nor migrate.

``--instructions`` (needs ``valgrind``) adds a
deterministic figure: the instructions the crawl process executes per page,
counted by callgrind, for each setting.  Start-up (interpreter, imports,
Scrapy's set-up) is the same whatever the site's size, so it cancels out of
``(I(crawl of 2N pages) - I(crawl of N pages)) / N``, N = ``--instr-pages``.
Those crawls run one request at a time (``CONCURRENT_REQUESTS = 1``): with
several in flight, how many responses one event-loop turn handles depends on
timing, and the count varies by about 1 % between identical crawls; with one,
by about 0.05 %.  Under valgrind a crawl runs about 50 times slower; the
default N = 300 takes about 5 minutes for both settings.  Caveat: a full
(generation 2) garbage collection costs about 65 ms, and comes about once
every 250 pages; whether one falls between the N-page and the 2N-page mark
moves the figure by several per cent (plain site, same code: 1.000 from 100
to 300 pages, 1.052 from 200 to 400), so compare settings at one N, and
prefer a large one.  On a real site (``--site DIR``) the crawls are cut after N
and 2N responses (``CLOSESPIDER_PAGECOUNT``); ``--settings plugin`` measures one
side only (e.g. before and after a change: stock's figure does not move).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.crawl import run_crawl  # noqa: E402
from tests.support.dirsite import DirServer  # noqa: E402
from tests.support.server import serve_site  # noqa: E402
from tests.support.site import DEMO_SITE, Host, Link, Resource, Site  # noqa: E402

#: The host a ``--site DIR`` tree is served as.
DIR_HOST = "docs.example"

SETTINGS: dict[str, dict[str, Any]] = {
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


def seen_calls(stats: dict[str, Any]) -> int:
    """The scheduler's ``request_seen`` calls: requests enqueued plus those it dropped
    (start requests with ``dont_filter=True`` are enqueued without a call; few)."""
    return int(stats.get("scheduler/enqueued") or 0) + int(stats.get("dupefilter/filtered") or 0)


class Sample:
    """One crawl's figures."""

    def __init__(self, result: Any, hits: list[Any]) -> None:
        self.hits = len(hits)
        self.keys = frozenset(h.key for h in hits if h.key is not None and h.status == 200)
        self.rate = crawl_rate(hits)
        self.wall = float(result.stats.get("elapsed_time_seconds") or 0)
        self.cpu = float(result.cpu_seconds or 0)
        self.seen = seen_calls(result.stats)
        self.per_request = self.cpu / self.hits if self.hits else 0.0
        self.per_seen = self.cpu / self.seen if self.seen else 0.0


def pin_cpus() -> tuple[int, int] | None:
    """Pin this process (the server) to one CPU; the CPU for the crawls, or None.

    The first two CPUs this process may use: the server gets the first, the
    crawl processes the second.  None (nothing pinned) with fewer than two.
    """
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return None
    os.sched_setaffinity(0, {cpus[0]})  # before the server starts its threads: they inherit it
    return cpus[0], cpus[1]


def run_site(name: str, server: Any, start_urls: list[str], runs: int, timeout: float,
             spider_kwargs: dict[str, Any] | None = None,
             crawl_cpu: int | None = None) -> int:
    """Crawl with each of :data:`SETTINGS` in interleaved rounds; print the figures."""
    samples: dict[str, list[Sample]] = {k: [] for k in SETTINGS}
    ratios: list[float] = []
    seen_ratios: list[float] = []
    with server as srv:
        for r in range(runs):
            # alternate which goes first, so that drift weighs on both alike
            order = list(SETTINGS) if r % 2 == 0 else list(reversed(SETTINGS))
            for setting in order:
                srv.reset()
                settings = {**SETTINGS[setting], "CLOSESPIDER_TIMEOUT": timeout}
                result = run_crawl(settings, start_urls, srv.proxy_url,
                                   timeout=timeout, spider_kwargs=spider_kwargs,
                                   cpus=None if crawl_cpu is None else [crawl_cpu])
                if result.finish_reason != "finished":
                    print(f"{setting}: crawl did not finish ({result.finish_reason})",
                          file=sys.stderr)
                    return 1
                samples[setting].append(Sample(result, srv.hits.hits))
            stock, plugin = samples["stock"][-1], samples["plugin"][-1]
            lost = stock.keys - plugin.keys
            if lost:
                print(f"the plugin did not fetch {len(lost)} resource(s) stock fetched, "
                      f"e.g. {sorted(map(str, lost))[:3]}", file=sys.stderr)
                return 1
            ratios.append(plugin.per_request / stock.per_request)
            seen_ratios.append(plugin.per_seen / stock.per_seen if stock.per_seen else 0.0)
            print(f"  round {r + 1}: CPU per request stock {stock.per_request * 1e3:.3f} ms, "
                  f"plugin {plugin.per_request * 1e3:.3f} ms, ratio {ratios[-1]:.3f}",
                  file=sys.stderr, flush=True)
    print(f"site={name} runs={runs}")
    for setting, got in samples.items():
        last = got[-1]
        med = statistics.median(s.per_request for s in got)
        print(f"{setting:>6}: pages fetched {last.hits} (distinct 200: {len(last.keys)}); "
              f"request_seen calls {last.seen}; CPU per request median {med * 1e3:.3f} ms "
              f"(runs: {', '.join(f'{s.per_request * 1e3:.3f}' for s in got)}); "
              f"CPU {statistics.median(s.cpu for s in got):.2f} s; "
              f"{statistics.median(s.rate for s in got):.1f} pages/s while crawling; "
              f"crawl time {statistics.median(s.wall for s in got):.2f} s")
    print(f"  CPU per request plugin/stock, median of paired ratios: "
          f"{statistics.median(ratios):.3f} (rounds: {', '.join(f'{x:.3f}' for x in ratios)})")
    print(f"  CPU per request_seen call plugin/stock, median of paired ratios: "
          f"{statistics.median(seen_ratios):.3f}")
    return 0


#: Settings of the ``--instructions`` crawls (see the module docstring), over
#: :data:`SETTINGS`; the timeouts allow for valgrind's slowdown.
INSTR_SETTINGS: dict[str, Any] = {
    "CONCURRENT_REQUESTS": 1,
    "DOWNLOAD_TIMEOUT": 600,
}


def warm_env() -> dict[str, str]:
    """The environment of the ``--instructions`` crawls: a fixed hash seed, and
    bytecode written and read (``PYTHONDONTWRITEBYTECODE`` emptied).  A warm-up
    crawl of 2N pages without valgrind comes first: otherwise the N-page and the
    2N-page crawls compile the modules they import lazily, and what only the
    second imports counts as cost per page (tens of millions of instructions)."""
    return {"PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": ""}


def instructions(site_name: str, pages: int, timeout: float,
                 crawl_cpu: int | None = None) -> int:
    """Print instructions per page for each setting: (I(2N) - I(N)) / N, N = *pages*."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        print("--instructions: valgrind not found", file=sys.stderr)
        return 1
    counts: dict[str, list[int]] = {k: [] for k in SETTINGS}
    warm_site = big_site(2 * pages, aliases=site_name == "big")
    with serve_site(warm_site) as srv:  # warm the bytecode cache: see warm_env()
        for setting in SETTINGS:
            run_crawl({**SETTINGS[setting], **INSTR_SETTINGS}, list(warm_site.start_urls),
                      srv.proxy_url, timeout=timeout, env=warm_env())
    with tempfile.TemporaryDirectory(prefix="iri-bench-cg-") as tmp:
        for n in (pages, 2 * pages):
            site = big_site(n, aliases=site_name == "big")
            with serve_site(site) as srv:
                for setting in SETTINGS:
                    srv.reset()
                    out = Path(tmp, f"callgrind-{setting}-{n}.out")
                    settings = {**SETTINGS[setting], **INSTR_SETTINGS,
                                "CLOSESPIDER_TIMEOUT": timeout}
                    result = run_crawl(
                        settings, list(site.start_urls), srv.proxy_url, timeout=timeout,
                        env=warm_env(),
                        cpus=None if crawl_cpu is None else [crawl_cpu],
                        wrapper=[valgrind, "--tool=callgrind", "--quiet",
                                 f"--callgrind-out-file={out}"],
                    )
                    if result.finish_reason != "finished":
                        print(f"{setting}: crawl did not finish ({result.finish_reason})",
                              file=sys.stderr)
                        return 1
                    counts[setting].append(_callgrind_total(out))
                    print(f"  {setting}, {n} pages ({len(srv.hits.hits)} fetched): "
                          f"{counts[setting][-1]:,} instructions", file=sys.stderr, flush=True)
    per_page = {k: (v[1] - v[0]) / pages for k, v in counts.items()}
    print(f"site={site_name} instructions per page, (I({2 * pages} pages) - I({pages} pages)) "
          f"/ {pages}, one request at a time:")
    for setting, value in per_page.items():
        print(f"{setting:>6}: {value / 1e6:.3f} M (start-up and the first {pages} pages: "
              f"{counts[setting][0] / 1e9:.3f} G)")
    print(f"  instructions per page plugin/stock: {per_page['plugin'] / per_page['stock']:.4f}")
    return 0


def dir_instructions(root: Path, pages: int, timeout: float, only: list[str],
                     crawl_cpu: int | None = None,
                     spider_kwargs: dict[str, Any] | None = None) -> int:
    """Instructions per page on a real site (``--site DIR --instructions``).

    The crawl is cut after N and 2N responses (``CLOSESPIDER_PAGECOUNT``; one
    request at a time, so the same pages in the same order each time), and the
    figure is ``(I(2N) - I(N)) / N`` as for the generated sites.
    """
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        print("--instructions: valgrind not found", file=sys.stderr)
        return 1
    counts: dict[str, list[int]] = {k: [] for k in only}
    for setting in only:  # warm the bytecode cache: see warm_env()
        with DirServer(root, host=DIR_HOST) as server:
            run_crawl({**SETTINGS[setting], **INSTR_SETTINGS, "CLOSESPIDER_PAGECOUNT": 2 * pages},
                      [server.start_url], server.proxy_url, timeout=timeout, env=warm_env(),
                      spider_kwargs={"allowed_domains": [DIR_HOST], **(spider_kwargs or {})})
    with tempfile.TemporaryDirectory(prefix="iri-bench-cg-") as tmp:
        for n in (pages, 2 * pages):
            for setting in only:
                with DirServer(root, host=DIR_HOST) as server:
                    out = Path(tmp, f"callgrind-{setting}-{n}.out")
                    settings = {**SETTINGS[setting], **INSTR_SETTINGS,
                                "CLOSESPIDER_PAGECOUNT": n, "CLOSESPIDER_TIMEOUT": timeout}
                    result = run_crawl(
                        settings, [server.start_url], server.proxy_url, timeout=timeout,
                        env=warm_env(),
                        spider_kwargs={"allowed_domains": [DIR_HOST], **(spider_kwargs or {})},
                        cpus=None if crawl_cpu is None else [crawl_cpu],
                        wrapper=[valgrind, "--tool=callgrind", "--quiet",
                                 f"--callgrind-out-file={out}"],
                    )
                    if result.finish_reason != "closespider_pagecount":
                        print(f"{setting}: crawl not cut at {n} pages ({result.finish_reason})",
                              file=sys.stderr)
                        return 1
                    counts[setting].append(_callgrind_total(out))
                    print(f"  {setting}, {n} pages: {counts[setting][-1]:,} instructions",
                          file=sys.stderr, flush=True)
    per_page = {k: (v[1] - v[0]) / pages for k, v in counts.items()}
    print(f"site={root} instructions per page, (I({2 * pages} pages) - I({pages} pages)) "
          f"/ {pages}, one request at a time:")
    for setting, value in per_page.items():
        print(f"{setting:>6}: {value / 1e6:.3f} M")
    if len(per_page) == 2:
        print(f"  instructions per page plugin/stock: "
              f"{per_page['plugin'] / per_page['stock']:.4f}")
    return 0


def _callgrind_total(path: Path) -> int:
    """The instruction count (``totals:``/``summary:`` line) of a callgrind output file."""
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith(("totals:", "summary:")):
            return int(line.split()[1])
    raise ValueError(f"no totals in {path}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--site", default="all",
                        help="demo, big, plain, all (plain and big), or a directory to serve")
    parser.add_argument("--pages", type=int, default=400)
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--pin", action="store_true",
                        help="server on one CPU, crawls on another (sched_setaffinity)")
    parser.add_argument("--instructions", action="store_true",
                        help="also instructions per page under callgrind (plain, big)")
    parser.add_argument("--instr-pages", type=int, default=300,
                        help="N of --instructions: crawls of N and 2N pages")
    parser.add_argument("--idiom", choices=("follow", "urljoin"), default="follow",
                        help="the spider's links: response.follow(href), or "
                             "response.follow(response.urljoin(href))")
    parser.add_argument("--protocol", action="store_true",
                        help="the protocol level (as 'plugin') against the default level "
                             "(as 'stock'): the learned level's own cost")
    parser.add_argument("--settings", nargs="+", choices=list(SETTINGS), default=list(SETTINGS),
                        help="--instructions on a DIR site: only these settings")
    args = parser.parse_args(argv)
    if args.protocol:
        SETTINGS["stock"] = dict(SETTINGS["plugin"])
        SETTINGS["plugin"] = {**SETTINGS["plugin"], "IRI_LEVEL": "protocol"}
        print("--protocol: 'stock' is the add-on at its default level, 'plugin' at level protocol")
    runs = max(0, min(args.runs, 15))
    idiom = {"join_first": True} if args.idiom == "urljoin" else {}
    if runs == 0 and not args.instructions:
        parser.error("--runs 0: only with --instructions")
    crawl_cpu = None
    if args.pin:
        pinned = pin_cpus()
        if pinned is None:
            print("--pin: fewer than two CPUs, nothing pinned", file=sys.stderr)
        else:
            crawl_cpu = pinned[1]
            print(f"pinned: server on CPU {pinned[0]}, crawls on CPU {pinned[1]}")
    if args.site not in ("demo", "big", "plain", "all"):
        root = Path(args.site)
        if not root.is_dir():
            parser.error(f"--site: not a directory: {args.site}")
        if args.instructions:
            code = dir_instructions(root, args.instr_pages, args.timeout, args.settings,
                                    crawl_cpu, idiom)
            if code or runs == 0:
                return code
        server = DirServer(root, host=DIR_HOST)
        return run_site(str(root), server, [server.start_url], runs, args.timeout,
                        spider_kwargs={"allowed_domains": [DIR_HOST], **idiom},
                        crawl_cpu=crawl_cpu)
    sites = ["plain", "big"] if args.site == "all" else [args.site]
    for site_name in sites:
        if site_name == "demo":
            site = DEMO_SITE
        else:
            site = big_site(args.pages, aliases=site_name == "big")
        label = f"{site_name} resources={len(site.keys)}"
        if runs:
            code = run_site(label, serve_site(site), list(site.start_urls), runs, args.timeout,
                            spider_kwargs=idiom or None, crawl_cpu=crawl_cpu)
            if code:
                return code
        if args.instructions and site_name != "demo":
            instr_timeout = max(args.timeout, 1200.0)
            code = instructions(site_name, max(1, args.instr_pages), instr_timeout, crawl_cpu)
            if code:
                return code
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
