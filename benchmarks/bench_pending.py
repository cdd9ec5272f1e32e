"""Memory per pending request and resume time of a large ``JOBDIR``, side by side.

For each size (``--sizes``, default 100,000 and 1,000,000) and each scheduler:

* ``frontier``: the add-on with ``JOBDIR`` (``IRIFrontierScheduler``: pending
  requests in SQLite, read 256 at a time in Scrapy's order);
* ``stock`` (unless ``--no-stock``): Scrapy's own scheduler and ``RFPDupeFilter``
  with ``JOBDIR`` (pickled disk queues, ``requests.seen``), no add-on;

a child process enqueues that many distinct requests (priorities 0-4, through
the dupefilter, as a crawl would) and closes with ``shutdown``; a second child
process opens the same ``JOBDIR`` again (the resume) and hands out 1,000
requests.  Reported: enqueue microseconds per request; the resident memory
(``VmRSS``) the resume added over the same process before opening, per pending
request (everything: the seen-set, the queue, SQLite's page cache); the resume
time (``Scheduler.open``) and the first request's time; the JOBDIR's size on disk
per request.  Each child is a fresh interpreter, so earlier runs do not blur the
figures.

Run: ``python benchmarks/bench_pending.py [--sizes 100000,1000000] [--no-stock]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

CHILD = r'''
import gc, json, sys, time
from pathlib import Path
from scrapy import Request, Spider
from scrapy.utils.misc import load_object
from scrapy.utils.test import get_crawler

def rss():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0

class _Spider(Spider):
    name = "bench"
    def parse(self, response):
        return None

mode, kind, jobdir, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
settings = {"JOBDIR": jobdir, "LOG_LEVEL": "ERROR",
            "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.ScrapyPriorityQueue"}
if kind == "frontier":
    settings.update({"ADDONS": {"iri_scrapy.Addon": 0}, "IRI_FRONTIER_MAX_INFLIGHT": 0})
crawler = get_crawler(_Spider, settings)
crawler._apply_settings()
spider = _Spider.from_crawler(crawler)
crawler.spider = spider
cls = load_object(crawler.settings["SCHEDULER"])
gc.collect()
before = rss()
t0 = time.perf_counter()
scheduler = cls.from_crawler(crawler)
scheduler.open(spider)
opened = time.perf_counter() - t0
out = {"open_s": opened}
if mode == "build":
    commit = getattr(scheduler, "_commit", None)
    t0 = time.perf_counter()
    for i in range(count):
        scheduler.enqueue_request(Request(f"http://h{i % 50}.example/p/{i}?q={i}",
                                          callback=spider.parse, priority=i % 5))
        if commit is not None and i % 100 == 99:
            commit()
    if commit is not None:
        commit()
    out["enqueue_us"] = (time.perf_counter() - t0) / count * 1e6
    gc.collect()
    out["build_rss_per"] = (rss() - before) / count
else:
    t0 = time.perf_counter()
    first = scheduler.next_request()
    out["first_s"] = time.perf_counter() - t0
    assert first is not None and first.priority == 4, first
    answered = getattr(scheduler, "answered", None)
    for _ in range(999):
        request = scheduler.next_request()
        if answered is not None and request is not None:
            answered(request)
    gc.collect()
    out["resume_rss_per"] = (rss() - before) / count
    out["pending"] = len(scheduler)
scheduler.close("shutdown")
print(json.dumps(out))
'''


def child(mode: str, kind: str, jobdir: Path, count: int) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", CHILD, mode, kind, str(jobdir), str(count)],
                          cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{kind} {mode} {count} failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def disk_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--no-stock", action="store_true")
    parser.add_argument("--tmp", default=None, help="where the JOBDIRs go (default: /tmp)")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    kinds = ["frontier"] + ([] if args.no_stock else ["stock"])
    print(f"{'size':>9} {'scheduler':>9} {'enqueue':>10} {'RSS/pending':>12} {'resume':>8} "
          f"{'1st req':>8} {'disk/req':>9}")
    for size in sizes:
        for kind in kinds:
            with tempfile.TemporaryDirectory(prefix="bench-pending-", dir=args.tmp) as tmp:
                jobdir = Path(tmp, "job")
                built = child("build", kind, jobdir, size)
                resumed = child("resume", kind, jobdir, size)
                print(f"{size:>9} {kind:>9} {built['enqueue_us']:>8.1f}us "
                      f"{resumed['resume_rss_per']:>10.1f} B {resumed['open_s']:>7.2f}s "
                      f"{resumed['first_s']:>7.3f}s {disk_size(jobdir) / size:>7.0f} B",
                      flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
