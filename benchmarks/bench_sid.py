#!/usr/bin/env python3
"""A real documentation site with session ids: server hits per resource, URLs fetched
twice and items per page, stock Scrapy beside the add-on's default and protocol levels,
in Scrapy's default order and breadth-first.

The site is an HTML tree (default Debian's ``python3-doc``, ``/usr/share/doc/python3/html``)
served as ``http://docs.example/`` (:class:`tests.support.dirsite.DirServer`). Every
relative link of a page is given ``sid=V``, ``V`` one of three values chosen per page (so
one resource is linked under up to four spellings), and the server ignores the query,
as a site with session ids in its links does. The crawl is what a user writes: Scrapy's
own ``CrawlSpider`` with ``LinkExtractor`` (``tests.support.wire_spiders``), one item per
page written to a JSON-lines feed, ``allowed_domains`` the site, 8 requests per domain.
Breadth-first is Scrapy's FAQ recipe: ``DEPTH_PRIORITY = 1`` with FIFO queues.

Printed per crawl, from the server's log and the feed file: server hits (2xx), distinct
resources, hits per resource, URLs whose exact spelling was fetched more than once,
items in the feed, pages with more than one item, pages stock reached that the crawl
did not (missed), and the protocol level's learned rules. Issue figures: <= 1.15 hits
per resource, no URL fetched twice, one item per page, nothing missed.

    python benchmarks/bench_sid.py [--site DIR] [--levels stock,default,protocol]
                                   [--orders default,bfs]
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.crawl import run_crawl  # noqa: E402
from tests.support.dirsite import DirServer  # noqa: E402

HOST = "docs.example"
SIDS = ("a81f3c", "b2277e", "c90d14")
SPIDER = "tests.support.wire_spiders.StockWireCrawlSpider"
LEVELS: dict[str, dict[str, Any]] = {
    "stock": {},
    "default": {"ADDONS": {"iri_scrapy.Addon": 0}},
    "protocol": {"ADDONS": {"iri_scrapy.Addon": 0}, "IRI_LEVEL": "protocol"},
}
ORDERS: dict[str, dict[str, Any]] = {
    "default": {},
    "bfs": {"DEPTH_PRIORITY": 1, "SCHEDULER_DISK_QUEUE": "scrapy.squeues.PickleFifoDiskQueue",
            "SCHEDULER_MEMORY_QUEUE": "scrapy.squeues.FifoMemoryQueue"},
}
_HREF = re.compile(rb'href="([^"#:]*)(#[^"]*)?"')


def with_sids(path: str, body: bytes) -> bytes:
    """Every relative link of the page at *path* given ``sid``, one of three per page."""
    sid = SIDS[hashlib.blake2b(path.encode(), digest_size=2).digest()[0] % len(SIDS)].encode()

    def one(m: re.Match[bytes]) -> bytes:
        ref, fragment = m.group(1), m.group(2) or b""
        if ref.startswith(b"//") or not ref:
            return m.group(0)
        sep = b"&" if b"?" in ref else b"?"
        return b'href="' + ref + sep + b"sid=" + sid + fragment + b'"'

    return _HREF.sub(one, body)


def crawl(site: Path, level: str, order: str, workdir: Path) -> dict[str, Any]:
    feed = workdir / f"{level}-{order}.jsonl"
    settings = {**LEVELS[level], **ORDERS[order],
                "FEEDS": {str(feed): {"format": "jsonlines"}}}
    with DirServer(site, host=HOST, rewrite=with_sids) as server:
        result = run_crawl(settings, [server.start_url], server.proxy_url, spider=SPIDER,
                           spider_kwargs={"allowed_domains": [HOST]}, ceiling=1800)
        hits = server.hits.hits
    ok = [h for h in hits if 200 <= h.status < 300 and h.key is not None]
    spellings = collections.Counter(h.target for h in ok)
    resources = {h.key.path for h in ok if h.key is not None}
    items = [json.loads(line) for line in feed.read_text(encoding="utf-8").splitlines() if line]
    per_page = collections.Counter(urlsplit(i["url"]).path for i in items)
    return {
        "hits": len(ok), "resources": resources,
        "twice": sum(1 for n in spellings.values() if n > 1),
        "items": len(items), "pages_many_items": sum(1 for n in per_page.values() if n > 1),
        "finish": result.finish_reason, "rc": result.returncode,
        "rules": {k: v for k, v in result.stats.items() if k.startswith("iri/protocol/")},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--site", default="/usr/share/doc/python3/html")
    ap.add_argument("--levels", default="stock,default,protocol")
    ap.add_argument("--orders", default="default,bfs")
    ap.add_argument("--stats", action="store_true", help="print the protocol level's stats")
    args = ap.parse_args(argv)
    site = Path(args.site)
    if not site.is_dir():
        print(f"not a directory: {site}", file=sys.stderr)
        return 2
    print(f"{'order':<9}{'crawl':<10}{'hits':>7}{'resources':>11}{'per res.':>10}"
          f"{'twice':>7}{'items':>7}{'pages>1 item':>14}{'missed':>8}  finish")
    with tempfile.TemporaryDirectory(prefix="iri-sid-") as tmp:
        for order in args.orders.split(","):
            stock: set[str] | None = None
            for level in args.levels.split(","):
                r = crawl(site, level, order, Path(tmp))
                if level == "stock":
                    stock = r["resources"]
                missed = len(stock - r["resources"]) if stock is not None else "-"
                n = len(r["resources"])
                print(f"{order:<9}{level:<10}{r['hits']:>7}{n:>11}{r['hits'] / max(n, 1):>10.2f}"
                      f"{r['twice']:>7}{r['items']:>7}{r['pages_many_items']:>14}{missed:>8}  "
                      f"{r['finish']} (exit {r['rc']})")
                if args.stats and r["rules"]:
                    for key, value in sorted(r["rules"].items()):
                        print(f"{'':<19}{key} = {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
