"""The add-on switched on for a ``JOBDIR`` that stock Scrapy started: adopted, not refetched.

A real stock Scrapy crawl (no add-on, ``RFPDupeFilter``, pickled disk queues)
stops midway (``CLOSESPIDER_PAGECOUNT``); the same command with the add-on on the
same ``JOBDIR`` adopts its queue (read by a data-only unpickler) and its seen
fingerprints: together the two runs fetch every page, and no page stock fetched
is fetched again (the start URL aside: Scrapy yields start requests with
``dont_filter``).  Planted pickles in a stock queue are refused, never run.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from scrapy import Request

from iri_scrapy.frontier.stock_jobdir import load_data, read_queue
from iri_scrapy.store.frontier_file import FILENAME
from tests.frontier.test_frontier import child_env, drain, log_tail, open_scheduler, stat_of
from tests.support.bigsite import SlowSiteServer, large_site
from tests.support.watch import size_of, wait_exit

PAGES = 300

SETTINGS = '''
import os

BOT_NAME = "sproj"
SPIDER_MODULES = ["sproj.spiders"]
ADDONS = {{"iri_scrapy.Addon": 0}} if os.environ.get("WITH_ADDON") == "1" else {{}}
ROBOTSTXT_OBEY = False
TELNETCONSOLE_ENABLED = False
CONCURRENT_REQUESTS = 4
RETRY_ENABLED = False
LOG_LEVEL = "INFO"
IRI_SCRAPY_TEST_PROXY = "{proxy}"
DOWNLOADER_MIDDLEWARES = {{"tests.support.crawl.ForceProxyMiddleware": 50}}
'''

SPIDER = '''
from tests.support.spider import AliasSpider


class StockSpider(AliasSpider):
    name = "stock"

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("start_urls", ["http://frontier.example/"])
        super().__init__(*args, **kwargs)
'''


@pytest.fixture(scope="module")
def site_server() -> Iterator[SlowSiteServer]:
    with SlowSiteServer(large_site(PAGES, aliases=False), latency=0.01) as srv:
        yield srv


def _project(where: Path, proxy: str) -> Path:
    pkg = where / "sproj"
    (pkg / "spiders").mkdir(parents=True)
    (where / "scrapy.cfg").write_text("[settings]\ndefault = sproj.settings\n")
    (pkg / "__init__.py").write_text("")
    (pkg / "spiders" / "__init__.py").write_text("")
    (pkg / "spiders" / "stock.py").write_text(SPIDER)
    (pkg / "settings.py").write_text(SETTINGS.format(proxy=proxy))
    return where


def _crawl(project: Path, run: int, *, addon: bool, extra: tuple[str, ...] = ()) -> int:
    env = child_env(project)
    env["WITH_ADDON"] = "1" if addon else "0"
    proc = subprocess.Popen(
        [sys.executable, "-m", "scrapy", "crawl", "stock", "-s", f"JOBDIR={project / 'job'}",
         "-s", f"LOG_FILE={project / f'log{run}.txt'}", *extra],
        cwd=project, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    return wait_exit(proc, size_of(project / f"log{run}.txt"), what=f"crawl {run}",
                     detail=lambda: log_tail(project, run))


@pytest.mark.slow
def test_stock_jobdir_adopted_nothing_refetched_nothing_lost(
        site_server: SlowSiteServer, tmp_path: Path) -> None:
    srv = site_server
    srv.reset()
    project = _project(tmp_path, srv.proxy_url)
    job = project / "job"
    assert _crawl(project, 1, addon=False, extra=("-s", "CLOSESPIDER_PAGECOUNT=60")) == 0
    assert "'finish_reason': 'closespider_pagecount'" in (project / "log1.txt").read_text()
    assert (job / "requests.seen").is_file() and (job / "requests.queue").is_dir()
    assert not (job / FILENAME).exists()
    stock_pending = [load_data(r.data)["url"] for r in read_queue(job)]
    assert stock_pending  # it stopped midway
    first = srv.hits.counts()
    stock_fetched = set(first)
    srv.reset()

    assert _crawl(project, 2, addon=True) == 0, log_tail(project, 2)
    log2 = (project / "log2.txt").read_text()
    assert "'finish_reason': 'finished'" in log2, log_tail(project, 2)
    assert "was started by stock Scrapy: adopted the" in log2
    second = srv.hits.counts()
    start = next(k for k in srv.site.keys if k.path == "/")  # dont_filter: fetched again
    refetched = {k for k in second if k in stock_fetched and k != start}
    union = stock_fetched | set(second)
    missing = srv.site.keys - union
    adopted = stat_of(project, 2, "iri/frontier/stock_adopted") or 0
    dropped = stat_of(project, 2, "iri/frontier/stock_seen_dropped") or 0
    print(f"stock fetched {len(stock_fetched)} pages and left {len(stock_pending)} pending; "
          f"the add-on adopted {adopted}, dropped {dropped} requests stock had seen, fetched "
          f"{len(second)} pages; refetched {len(refetched)}; missing {len(missing)}")
    assert adopted == len(stock_pending)
    assert dropped > 0
    assert not refetched, sorted(map(str, refetched))[:10]
    assert not missing, sorted(map(str, missing))[:10]
    # a third run: the store has adopted the queue; the stock queue is not read again
    srv.reset()
    assert _crawl(project, 3, addon=True) == 0
    assert not stat_of(project, 3, "iri/frontier/stock_adopted")
    assert not ({k for k in srv.hits.counts() if k != start})


class _Planted:
    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, ("touch planted-by-pickle",))


def _lifo_file(path: Path, records: list[bytes]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        f.write(len(records).to_bytes(4, "big"))
        for data in records:
            f.write(data)
            f.write(len(data).to_bytes(4, "big"))


def test_stock_queue_read_as_data_planted_pickles_refused(
        tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    job = tmp_path / "job"

    def record(url: str, priority: int = 0, **extra: Any) -> bytes:
        d = Request(url, priority=priority).to_dict()
        d.update(extra)
        return pickle.dumps(d, protocol=4)

    planted = pickle.dumps({**Request("http://e.com/x").to_dict(), "meta": {"a": _Planted()}},
                           protocol=4)
    _lifo_file(job / "requests.queue" / "0", [record("http://e.com/a"), planted,
                                              record("http://e.com/b")])
    _lifo_file(job / "requests.queue" / "-3", [record("http://e.com/hi", 3)])
    (job / "requests.seen").write_text("")
    with pytest.raises(pickle.UnpicklingError, match="posix.system|os.system"):
        load_data(planted)
    crawler, scheduler = open_scheduler(job, IRI_FRONTIER_MAX_INFLIGHT=0)
    assert not (tmp_path / "planted-by-pickle").exists()
    assert crawler.stats.get_value("iri/frontier/stock_adopted") == 3
    assert crawler.stats.get_value("iri/frontier/refused_records/pickle") == 1
    # Scrapy's order: priority 3 first, then LIFO: b before a
    assert [r.url for r in drain(scheduler)] == ["http://e.com/hi", "http://e.com/b",
                                                 "http://e.com/a"]
    scheduler.close("shutdown")
    assert not (tmp_path / "planted-by-pickle").exists()
