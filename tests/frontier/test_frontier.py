"""The crash-tolerant frontier: its SQLite store, its scheduler, and real ``kill -9`` crawls.

The crawl tests run ``scrapy crawl`` (a generated Scrapy project, the add-on,
``JOBDIR``) as a subprocess against a 1,500-page aliased site served with
latency, kill it with SIGKILL after a seeded number of server hits, and run
the same command again until it finishes by itself.  The server's hit log is
the oracle.
"""

from __future__ import annotations

import gc
import logging
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from scrapy import Request, Spider, signals
from scrapy.core.scheduler import Scheduler
from scrapy.http import Response
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler
from twisted.python.failure import Failure

from iri_scrapy import CANONICALIZATION_VERSION, Addon
from iri_scrapy.addon import FRONTIER_SCHEDULER
from iri_scrapy.frontier.jobdir import IRIFrontierScheduler
from iri_scrapy.frontier.lock import LOCK_FILENAME
from iri_scrapy.frontier.options import fsync_setting
from iri_scrapy.frontier.sqlite_store import FrontierStore
from iri_scrapy.frontier.stored_queue import META_FRONTIER_ID
from iri_scrapy.store.fpstore import FILENAME as FP_FILENAME
from iri_scrapy.store.fpstore import (
    FingerprintFile,
    FingerprintFileError,
    FingerprintFileMismatch,
)
from iri_scrapy.store.frontier_file import FILENAME
from tests.support.bigsite import LARGE_HOST, SlowSiteServer, large_site
from tests.support.server import HitLog
from tests.support.site import Resource, Site
from tests.support.watch import CEILING, STALL, cpu_of, size_of, wait_until

ROOT = Path(__file__).resolve().parents[2]

# --------------------------------------------------------------------------- the store

def _killed_after(path: Path, work: Callable[[FrontierStore], object]) -> None:
    """Open the store at *path* in a forked child, call *work* with it there, then
    SIGKILL the child: a process killed mid-run (nothing committed or closed after)."""
    pid = os.fork()
    if pid == 0:  # the child: never returns
        try:
            work(FrontierStore(path, tag="t"))
        except BaseException:
            os._exit(1)
        os.kill(os.getpid(), signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, status


def _pragma(path: Path, name: str) -> Any:
    """``PRAGMA name`` read through a connection of our own to the store's file."""
    conn = sqlite3.connect(path)
    try:
        return conn.execute(f"PRAGMA {name}").fetchone()[0]
    finally:
        conn.close()


def test_pending_survives_reopen_and_done_rows_go(tmp_path: Path) -> None:
    path = tmp_path / FILENAME
    store = FrontierStore(path, tag="t")
    big = 2**64 - 5  # a record with the top bit set round-trips through SQLite's int64
    ids = [store.add(record, f"req{record}".encode()) for record in (1, 2, 3, big)]
    store.add_seen(7)
    store.done(ids[1])
    store.close()
    again = FrontierStore(path, tag="t")
    assert not again.unclean
    assert [data for _, data in again.pending_rows()] == [b"req1", b"req3", f"req{big}".encode()]
    assert sorted(again.seen_records()) == [1, 2, 3, 7, big]
    again.close()


def test_uncommitted_changes_vanish_together(tmp_path: Path) -> None:
    """A crash before the commit loses the seen record and the pending row together."""
    path = tmp_path / FILENAME

    def work(store: FrontierStore) -> None:
        store.add(1, b"one")
        store.commit()
        store.add(2, b"two")

    _killed_after(path, work)  # the process dies: no commit
    again = FrontierStore(path, tag="t")
    assert again.unclean
    assert sorted(again.seen_records()) == [1]
    assert [data for _, data in again.pending_rows()] == [b"one"]
    again.close()


def test_clean_flag(tmp_path: Path) -> None:
    path = tmp_path / FILENAME
    FrontierStore(path, tag="t").close()
    store = FrontierStore(path, tag="t")
    assert not store.unclean
    store.close()
    _killed_after(path, lambda store: None)  # killed
    store = FrontierStore(path, tag="t")
    assert store.unclean
    store.close()


@pytest.mark.parametrize(("value", "expected"), [
    (None, 250), (250, 250), ("100", 100), (" always ", None), ("ALWAYS", None), (0, None),
])
def test_fsync_setting(value: Any, expected: int | None) -> None:
    assert fsync_setting(value) == expected


@pytest.mark.parametrize("value", [-1, "soon", True, 1.5, "1.5"])
def test_fsync_setting_rejects(value: Any) -> None:
    with pytest.raises(ValueError, match="IRI_FRONTIER_FSYNC"):
        fsync_setting(value)


def test_fsync_setting_honoured(tmp_path: Path) -> None:
    always = FrontierStore(tmp_path / "a.sqlite3", tag="t", fsync_ms=None)
    assert always.synchronous == "FULL"
    assert _pragma(always.path, "journal_mode") == "wal"  # kept in the file
    always.add(1, b"x")
    always.commit()
    assert not always.sync()  # every commit was synced already
    always.close()
    interval = FrontierStore(tmp_path / "b.sqlite3", tag="t", fsync_ms=250)
    assert interval.synchronous == "NORMAL"
    syncs = interval.syncs
    assert not interval.sync()  # nothing committed since the last sync
    interval.add(1, b"x")  # sync() commits the open transaction first
    assert interval.sync() and interval.syncs == syncs + 1
    assert not interval.in_transaction
    interval.close()


def test_other_options_refused_or_reset(tmp_path: Path) -> None:
    path = tmp_path / FILENAME
    store = FrontierStore(path, tag="level=scheme")
    store.add(1, b"x")
    store.close()
    with pytest.raises(FingerprintFileMismatch, match="refusing to mix keys"):
        FrontierStore(path, tag="level=simple")
    with pytest.raises(FingerprintFileMismatch):
        FrontierStore(path, tag="level=scheme", canonicalization_version=CANONICALIZATION_VERSION + 1)
    fresh = FrontierStore(path, tag="level=simple", allow_reset=True)
    assert fresh.reset_from is not None and fresh.reset_from.exists()
    assert fresh.pending_rows() == [] and list(fresh.seen_records()) == []
    fresh.close()


def test_foreign_file_refused(tmp_path: Path) -> None:
    path = tmp_path / FILENAME
    path.write_bytes(b"not a database at all" * 100)
    with pytest.raises(FingerprintFileError, match="not an iri_scrapy frontier store"):
        FrontierStore(path, tag="t")
    other = tmp_path / "other.sqlite3"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (x)")
    conn.close()
    with pytest.raises(FingerprintFileError, match="no meta table"):
        FrontierStore(other, tag="t")


WRITER = textwrap.dedent(
    """
    import sqlite3, sys
    sys.path.insert(0, {root!r})
    from iri_scrapy.frontier.sqlite_store import FrontierStore
    store = FrontierStore({path!r}, tag="t", fsync_ms=250)
    checkpoints = {checkpoints!r}
    if not checkpoints:  # the log only grows: its last frame is the last commit
        # a reader holding its snapshot: no checkpoint gets past it, the log never restarts
        reader = sqlite3.connect({path!r}, isolation_level=None)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM pending").fetchone()
    rows = {{}}
    k = 0
    while True:
        # one "turn": a parent answered, with the 20 children its callback scheduled
        for _ in range(20):
            k += 1
            rows[k] = store.add(k, b"x" * 200 + str(k).encode())
            if k - 100 in rows:
                store.done(rows.pop(k - 100))
        store.commit()
        if checkpoints and k % 2000 == 0:
            store.sync()
        print(k, flush=True)
    """
)


def _store_state(path: Path) -> tuple[set[int], set[int]]:
    store = FrontierStore(path, tag="t")
    assert store.unclean
    assert _pragma(path, "integrity_check") == "ok"
    seen = set(store.seen_records())
    pending = {int(data[200:]) for _, data in store.pending_rows()}
    store.close()
    return seen, pending


def _write_and_kill(path: Path, checkpoints: bool, at_least: int = 6000) -> int:
    """Run the writer, SIGKILL it after *at_least* reported commits; the last reported."""
    script = WRITER.format(root=str(ROOT), path=str(path), checkpoints=checkpoints)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    reported = 0
    try:
        for line in child.stdout:
            reported = int(line)
            if reported >= at_least:
                break
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    assert reported >= at_least
    return reported


def _consistent(seen: set[int], pending: set[int]) -> int:
    """Check that whole turns are there and pending agrees with seen; the last record."""
    top = max(seen)
    assert seen == set(range(1, top + 1))
    assert pending == set(range(max(1, top - 100 + 1), top + 1))
    return top


def test_kill_9_during_heavy_writes(tmp_path: Path) -> None:
    """SIGKILL mid-stream (commits and checkpoints going on): every reported commit
    is there, and the seen records and the pending rows agree."""
    path = tmp_path / FILENAME
    reported = _write_and_kill(path, checkpoints=True)
    seen, pending = _store_state(path)
    assert _consistent(seen, pending) >= reported


@pytest.mark.parametrize("damage", ["truncate", "garbage"])
def test_torn_log_end_is_ignored(tmp_path: Path, damage: str) -> None:
    """The last frame of the log cut short or overwritten (a torn write after a kill):
    SQLite's checksums make it ignore that last commit, and nothing else."""
    path = tmp_path / FILENAME
    reported = _write_and_kill(path, checkpoints=False, at_least=3000)
    log = Path(str(path) + "-wal")
    size = log.stat().st_size
    assert size > 0  # killed with a live log
    whole = tmp_path / "whole"
    whole.mkdir()
    shutil.copy(path, whole / FILENAME)
    shutil.copy(log, whole / (FILENAME + "-wal"))
    last = _consistent(*_store_state(whole / FILENAME))
    assert last >= reported
    if damage == "truncate":
        os.truncate(log, size - 100)
    else:
        with log.open("r+b") as f:
            f.seek(size - 50)
            f.write(b"\xff" * 50)
    seen, pending = _store_state(path)
    # the damaged last commit (one turn of 20) is ignored, and nothing before it; when
    # the kill itself left a torn frame at the end of the log, the cut may land in that
    # frame only (already ignored), and nothing more is lost
    assert _consistent(seen, pending) in (last - 20, last)


# --------------------------------------------------------------------------- the scheduler


class _Spider(Spider):
    name = "frontier-test"

    def parse(self, response: Any, **kwargs: Any) -> Any:
        return None

    def failed(self, failure: Any) -> None:
        return None


@pytest.fixture(autouse=True, scope="module")
def _reactor() -> None:
    """Scrapy 2.13's ``get_crawler`` needs an installed reactor (2.19's does not)."""
    from scrapy.utils.reactor import install_reactor, is_reactor_installed

    if not is_reactor_installed():
        install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")


BASE = {
    "ADDONS": {"iri_scrapy.Addon": 0},
    "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.ScrapyPriorityQueue",
}


def open_scheduler(tmp_path: Path, **extra: Any) -> tuple[Any, Scheduler]:
    crawler = get_crawler(_Spider, {**BASE, "JOBDIR": str(tmp_path), **extra})  # add-ons applied
    spider = _Spider.from_crawler(crawler)
    crawler.spider = spider
    scheduler_cls = crawler.settings["SCHEDULER"]
    assert scheduler_cls == FRONTIER_SCHEDULER
    scheduler = IRIFrontierScheduler.from_crawler(crawler)
    scheduler.open(spider)
    return crawler, scheduler


def drain(scheduler: Scheduler) -> list[Request]:
    out = []
    while (request := scheduler.next_request()) is not None:
        out.append(request)
    return out


def test_addon_sets_the_scheduler_only_with_jobdir(tmp_path: Path) -> None:
    crawler = get_crawler(_Spider, {"ADDONS": {"iri_scrapy.Addon": 0}})  # add-ons applied
    assert crawler.settings["SCHEDULER"] != FRONTIER_SCHEDULER
    crawler = get_crawler(_Spider, {**BASE, "JOBDIR": str(tmp_path)})
    assert crawler.settings["SCHEDULER"] == FRONTIER_SCHEDULER
    assert "iri_scrapy.frontier.middlewares.FrontierSpiderMiddleware" in str(
        crawler.settings.getdict("SPIDER_MIDDLEWARES"))
    crawler = get_crawler(_Spider, {**BASE, "JOBDIR": str(tmp_path), "IRI_FRONTIER": False})
    assert crawler.settings["SCHEDULER"] != FRONTIER_SCHEDULER
    mine = "scrapy.core.scheduler.Scheduler"
    crawler = get_crawler(_Spider, {**BASE, "JOBDIR": str(tmp_path), "SCHEDULER": mine})
    assert crawler.settings["SCHEDULER"] == mine  # the user's own wins


def test_addon_rejects_a_bad_fsync_value() -> None:
    with pytest.raises(ValueError, match="IRI_FRONTIER_FSYNC"):
        Addon().update_settings(Settings({"IRI_FRONTIER_FSYNC": "sometimes"}))


def test_pending_and_in_flight_survive_seen_kept(tmp_path: Path) -> None:
    crawler, scheduler = open_scheduler(tmp_path)
    for i in range(5):
        assert scheduler.enqueue_request(Request(f"http://e.com/{i}", priority=i))
    assert not scheduler.enqueue_request(Request("HTTP://E.COM:80/3"))  # an alias
    first, second = scheduler.next_request(), scheduler.next_request()
    assert first is not None and second is not None
    assert first.url == "http://e.com/4"  # Scrapy's order: highest priority first
    scheduler.answered(first)  # second stays in flight
    scheduler.close("shutdown")
    assert crawler.stats.get_value("iri/frontier/pending_at_close") == 4
    assert {p.name for p in tmp_path.iterdir()} <= {
        FILENAME, FILENAME + "-wal", FILENAME + "-shm", LOCK_FILENAME,
        "iri_report.json", "iri_report_stock.bin"}  # the crawl's report (report_extension)

    crawler2, again = open_scheduler(tmp_path)
    assert crawler2.stats.get_value("iri/frontier/recovered") == 4
    assert crawler2.stats.get_value("iri/dupefilter/loaded") == 5
    assert not crawler2.stats.get_value("iri/frontier/unclean_shutdown")
    assert not again.enqueue_request(Request("http://e.com/4"))  # answered: still seen
    assert not again.enqueue_request(Request("http://e.com/%30"))  # alias of a pending one
    got = drain(again)
    assert [r.url for r in got] == [f"http://e.com/{i}" for i in (3, 2, 1, 0)]
    assert all(r.priority == int(r.url[-1]) for r in got)
    again.close("finished")


def test_request_attributes_round_trip(tmp_path: Path) -> None:
    crawler, scheduler = open_scheduler(tmp_path)
    spider = crawler.spider
    request = Request("http://e.com/a", callback=spider.parse, errback=spider.failed,
                      meta={"depth": 3, "x": [1, 2]}, cb_kwargs={"k": "v"},
                      dont_filter=True, priority=-2, headers={"X-A": "b"})
    assert scheduler.enqueue_request(request)
    scheduler.close("shutdown")
    crawler2, again = open_scheduler(tmp_path)
    (back,) = drain(again)
    assert back.callback == crawler2.spider.parse and back.errback == crawler2.spider.failed
    assert back.meta["depth"] == 3 and back.meta["x"] == [1, 2]
    assert back.cb_kwargs == {"k": "v"}
    assert back.dont_filter and back.priority == -2 and back.headers[b"X-A"] == b"b"
    again.close("shutdown")


def test_unserializable_kept_in_memory_counted_and_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    crawler, scheduler = open_scheduler(tmp_path)
    with caplog.at_level(logging.WARNING, logger="iri_scrapy.frontier.jobdir"):
        for i in range(3):
            assert scheduler.enqueue_request(Request(f"http://e.com/l{i}", callback=lambda r: None))
    warned = [r for r in caplog.records if "cannot be stored in the frontier" in r.getMessage()]
    assert len(warned) == 1
    stats = crawler.stats
    assert stats.get_value("iri/frontier/unserializable") == 3
    assert stats.get_value("scheduler/enqueued/memory") == 3
    got = drain(scheduler)
    assert len(got) == 3  # nothing lost while the process lives
    scheduler.answered(got[0])  # answered: its fingerprint is stored now
    scheduler.close("shutdown")
    _, again = open_scheduler(tmp_path)
    assert drain(again) == []
    assert not again.enqueue_request(Request(got[0].url))  # answered: seen
    assert again.enqueue_request(Request(got[1].url))  # not answered: not "seen"
    again.close("finished")


def test_replacement_answers_its_parent(tmp_path: Path) -> None:
    """A redirect or retry (a copy of the request) answers the request it replaces,
    in the same transaction; a child of an answered response does not."""
    crawler, scheduler = open_scheduler(tmp_path)
    scheduler.enqueue_request(Request("http://e.com/old"))
    scheduler.enqueue_request(Request("http://e.com/page"))
    page, old = scheduler.next_request(), scheduler.next_request()
    assert page is not None and old is not None
    redirected = old.replace(url="http://e.com/new")  # meta (and the frontier id) copied
    assert redirected.meta[META_FRONTIER_ID] == old.meta[META_FRONTIER_ID]
    assert scheduler.enqueue_request(redirected)
    assert crawler.stats.get_value("iri/frontier/replaced") == 1
    # the response of "page" reached the spider: a child carrying its meta is a child
    crawler.signals.send_catch_log(signals.response_received, request=page,
                                   response=Response(page.url, request=page), spider=crawler.spider)
    assert scheduler.enqueue_request(Request("http://e.com/child", meta=dict(page.meta)))
    assert crawler.stats.get_value("iri/frontier/replaced") == 1
    scheduler.close("shutdown")
    _, again = open_scheduler(tmp_path)
    assert sorted(r.url for r in drain(again)) == [
        "http://e.com/child", "http://e.com/new", "http://e.com/page"]
    again.close("finished")


def test_failed_download(tmp_path: Path) -> None:
    crawler, scheduler = open_scheduler(tmp_path)
    spider = crawler.spider
    scheduler.enqueue_request(Request("http://e.com/plain"))
    scheduler.enqueue_request(Request("http://e.com/errback", errback=spider.failed))
    errback, plain = scheduler.next_request(), scheduler.next_request()
    assert errback is not None and plain is not None
    scheduler.failed(plain)  # no errback: answered now
    scheduler.failed(errback)  # the errback's output is not observable: pending until idle
    scheduler.close("shutdown")
    crawler2, again = open_scheduler(tmp_path)
    assert [r.url for r in drain(again)] == ["http://e.com/errback"]
    # the engine is idle: every request out was answered (the errback's too)
    results = crawler2.signals.send_catch_log(signals.spider_idle, spider=crawler2.spider)
    assert results and not [result for _, result in results if isinstance(result, Failure)]
    again.close("finished")
    _, third = open_scheduler(tmp_path)
    assert drain(third) == []
    third.close("finished")


def test_in_flight_cap(tmp_path: Path) -> None:
    """At most IRI_FRONTIER_MAX_INFLIGHT (default CONCURRENT_REQUESTS) unanswered
    requests out: the refetch bound after a kill."""
    crawler, scheduler = open_scheduler(tmp_path, CONCURRENT_REQUESTS=2)
    for i in range(4):
        scheduler.enqueue_request(Request(f"http://e.com/{i}"))
    first, second = scheduler.next_request(), scheduler.next_request()
    assert first is not None and second is not None
    assert scheduler.next_request() is None and scheduler.has_pending_requests()
    scheduler.answered(first)
    third = scheduler.next_request()
    assert third is not None
    scheduler.failed(third.replace(errback=crawler.spider.failed))  # errback running...
    assert scheduler.next_request() is not None  # ...does not count against the cap
    scheduler.close("shutdown")
    _, unlimited = open_scheduler(tmp_path, IRI_FRONTIER_MAX_INFLIGHT=0)
    assert len(drain(unlimited)) == 3  # second, third and the fourth: not answered
    unlimited.close("shutdown")


def test_in_flight_cap_lifted_when_nothing_is_answered(tmp_path: Path, caplog: Any) -> None:
    crawler, scheduler = open_scheduler(tmp_path, IRI_FRONTIER_MAX_INFLIGHT=1)
    scheduler.enqueue_request(Request("http://e.com/1"))
    scheduler.enqueue_request(Request("http://e.com/2"))
    held = scheduler.next_request()
    assert scheduler.next_request() is None
    scheduler.stall_seconds = 0.0
    with caplog.at_level(logging.WARNING):
        assert scheduler.next_request() is not None
    assert crawler.stats.get_value("iri/frontier/cap_lifted") == 1
    assert any("lifting the in-flight cap" in r.getMessage() for r in caplog.records)
    assert held is not None
    scheduler.close("shutdown")


def test_released_request_is_answered(tmp_path: Path) -> None:
    """A request Scrapy has let go of (no signal seen) is answered: the engine holds
    every request it took until it has finished with it."""
    crawler, scheduler = open_scheduler(tmp_path)
    scheduler.enqueue_request(Request("http://e.com/gone"))
    scheduler.enqueue_request(Request("http://e.com/kept"))
    kept = scheduler.next_request()
    gone = scheduler.next_request()
    assert gone is not None and gone.url.endswith("gone")
    del gone
    gc.collect()
    assert scheduler.next_request() is None  # reaps on the way
    assert crawler.stats.get_value("iri/frontier/answered_on_release") == 1
    scheduler.close("shutdown")
    _, again = open_scheduler(tmp_path)
    assert [r.url for r in drain(again)] == ["http://e.com/kept"]
    assert kept is not None
    again.close("finished")


def test_falls_back_on_a_jobdir_started_without_it(tmp_path: Path, caplog: Any) -> None:
    _, probe = open_scheduler(tmp_path / "probe")
    tag = probe.df.options_tag()
    probe.close("finished")
    # the add-on without the frontier: its fingerprint file and Scrapy's queue (a JOBDIR
    # of stock Scrapy alone is adopted: tests/frontier/test_stock_jobdir.py)
    (tmp_path / "requests.queue").mkdir()
    FingerprintFile(tmp_path / FP_FILENAME, canonicalization_version=CANONICALIZATION_VERSION,
                    tag=tag).close()
    with caplog.at_level(logging.WARNING):
        crawler, scheduler = open_scheduler(tmp_path)
    assert scheduler.store is None
    assert any("started without the crash-safe frontier" in r.getMessage()
               for r in caplog.records)
    scheduler.enqueue_request(Request("http://e.com/"))
    scheduler.close("shutdown")
    assert not (tmp_path / FILENAME).exists()


def test_falls_back_with_a_dupefilter_of_its_own(tmp_path: Path, caplog: Any) -> None:
    with caplog.at_level(logging.WARNING):
        _, scheduler = open_scheduler(
            tmp_path, DUPEFILTER_CLASS="scrapy.dupefilters.RFPDupeFilter")
    assert scheduler.store is None
    assert any("keeps its seen-set outside" in r.getMessage() for r in caplog.records)
    scheduler.close("shutdown")


# --------------------------------------------------------------------------- real crawls, kill -9

# The kills come after 171, 4 and 134 hits (SEED): 1,000 pages leave the last run most
# of the site, and the plain JOBDIR's loss (200 hits, then nothing) is still over 500.
PAGES = 1000
CONCURRENCY = 8
LATENCY = 0.005
SEED = 3987


SPIDER = '''
from tests.support.spider import AliasSpider


class FrontierSpider(AliasSpider):
    name = "frontier"

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("start_urls", ["http://frontier.example/"])
        super().__init__(*args, **kwargs)
'''

SETTINGS = '''
import warnings

from scrapy.exceptions import ScrapyDeprecationWarning

warnings.filterwarnings("error", category=ScrapyDeprecationWarning)

BOT_NAME = "fproj"
SPIDER_MODULES = ["fproj.spiders"]
ADDONS = {{"iri_scrapy.Addon": 0}}
ROBOTSTXT_OBEY = False
TELNETCONSOLE_ENABLED = False
CONCURRENT_REQUESTS = {concurrency}
CONCURRENT_REQUESTS_PER_DOMAIN = {concurrency}
RETRY_ENABLED = False
DOWNLOAD_TIMEOUT = 120
LOG_LEVEL = "INFO"
IRI_SCRAPY_TEST_PROXY = "{proxy}"
DOWNLOADER_MIDDLEWARES = {{"tests.support.crawl.ForceProxyMiddleware": 50}}
{extra}
'''


def make_project(where: Path, proxy: str, extra: str = "", spider: str = SPIDER) -> Path:
    """A Scrapy project crawling the large site through *proxy* with the add-on."""
    pkg = where / "fproj"
    (pkg / "spiders").mkdir(parents=True)
    (where / "scrapy.cfg").write_text("[settings]\ndefault = fproj.settings\n")
    (pkg / "__init__.py").write_text("")
    (pkg / "spiders" / "__init__.py").write_text("")
    (pkg / "spiders" / "frontier.py").write_text(spider)
    (pkg / "settings.py").write_text(
        SETTINGS.format(concurrency=CONCURRENCY, proxy=proxy, extra=extra))
    return where


def crawl_command(project: Path, run: int) -> list[str]:
    """The same command every time (only the log file differs, for debugging)."""
    return [sys.executable, "-m", "scrapy", "crawl", "frontier",
            "-s", f"JOBDIR={project / 'job'}", "-s", f"LOG_FILE={project / f'log{run}.txt'}"]


def child_env(project: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k.lower() not in {"no_proxy", "http_proxy", "https_proxy", "all_proxy"}
           and k != "SCRAPY_SETTINGS_MODULE"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(project)])
    return env


def log_tail(project: Path, run: int | str) -> str:
    try:
        return (project / f"log{run}.txt").read_text(encoding="utf-8")[-3000:]
    except OSError:
        return "(no log)"


def run_until(project: Path, srv: SlowSiteServer, run: int, kill_after: int | None,
              stall: float = STALL, ceiling: float = CEILING) -> tuple[int, bool]:
    """Run the crawl; SIGKILL it once the server has seen *kill_after* more hits.

    Bounded by progress, not by a deadline: fails when for *stall* seconds the
    server has seen no hit, the crawl's log no line and the crawl used no CPU
    worth mentioning, or after *ceiling* seconds.  Returns (hits during this run,
    killed).
    """
    before = len(srv.hits.hits)
    proc = subprocess.Popen(crawl_command(project, run), cwd=project, env=child_env(project),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    killed = False

    def done() -> bool:
        nonlocal killed
        if proc.poll() is not None:
            return True
        if kill_after is not None and len(srv.hits.hits) - before >= kill_after:
            os.kill(proc.pid, signal.SIGKILL)
            killed = True
            return True
        return False

    try:
        wait_until(done, lambda: len(srv.hits.hits), size_of(project / f"log{run}.txt"),
                   cpu_of(proc.pid), what=f"run {run}", stall=stall, ceiling=ceiling,
                   poll=0.001, detail=lambda: log_tail(project, run))
    finally:
        if proc.poll() is None and not killed:
            proc.kill()
        proc.wait()
    if not killed:
        assert proc.returncode == 0, (project / f"log{run}.txt").read_text()[-3000:]
    return len(srv.hits.hits) - before, killed


def stat_of(project: Path, run: int, key: str) -> int | None:
    log = (project / f"log{run}.txt").read_text(encoding="utf-8")
    for line in log.splitlines():
        line = line.strip()
        if line.startswith(f"'{key}':"):
            return int(line.split(":", 1)[1].strip().rstrip(",}"))
    return None


@pytest.fixture(scope="module")
def big_site_server() -> Iterator[SlowSiteServer]:
    site = large_site(PAGES)
    with SlowSiteServer(site, latency=LATENCY) as srv:
        yield srv


@pytest.mark.slow
def test_kill_9_three_times_loses_nothing(big_site_server: SlowSiteServer,
                                          tmp_path: Path) -> None:
    srv = big_site_server
    site = srv.site
    srv.reset()
    project = make_project(tmp_path, srv.proxy_url)
    rng = random.Random(SEED)
    # the second kill comes right after the restart, while recovered requests go out
    kills = [rng.randrange(50, 400), rng.randrange(1, 20), rng.randrange(50, 400)]
    starts = len(site.start_urls)
    fetched_before: Counter[Any] = Counter()
    report = []
    run = 0
    for kill_after in [*kills, None]:
        run += 1
        mark = len(srv.hits.hits)
        hits, killed = run_until(project, srv, run, kill_after)
        assert killed == (kill_after is not None)
        this_run = HitLog()
        for hit in srv.hits.hits[mark:]:
            this_run.record(hit)
        counts = this_run.counts()
        again = sum(n for key, n in counts.items() if key in fetched_before)
        within = sum(n - 1 for n in counts.values())
        report.append((run, kill_after, hits, again, within))
        # nothing is fetched twice within one run: dedup kept, no alias fetched
        assert within == 0, report
        if run > 1 and not killed:
            assert stat_of(project, run, "iri/frontier/unclean_shutdown") == 1
        fetched_before.update(counts)
    print("runs (run, killed after N hits, hits, fetched in an earlier run, "
          "fetched twice in this run):", report)
    assert run == 4
    assert set(fetched_before) == site.keys  # every page, none lost
    # a kill costs the requests in the downloader (the cap: CONCURRENT_REQUESTS),
    # the responses still waiting for their callbacks (as many again, at most, with
    # this site's quick callbacks) and the start requests; a request in flight at one
    # kill may be fetched after a later one, so the bound is on the whole
    refetched = sum(n - 1 for n in fetched_before.values())
    assert refetched <= len(kills) * (2 * CONCURRENCY + starts), report
    assert max(fetched_before.values()) <= 1 + len(kills)
    assert stat_of(project, run, "iri/frontier/recovered") > 0
    assert stat_of(project, run, "iri/frontier/pending_at_close") == 0
    assert "finish_reason': 'finished'" in (project / f"log{run}.txt").read_text()


@pytest.mark.slow
def test_plain_jobdir_loses_the_queue_after_kill_9(big_site_server: SlowSiteServer,
                                                   tmp_path: Path) -> None:
    """The bug the frontier fixes, reproduced: Scrapy's JOBDIR queue (IRI_FRONTIER =
    False) after one kill -9: the resumed crawl finds every queued request seen."""
    srv = big_site_server
    srv.reset()
    project = make_project(tmp_path, srv.proxy_url, extra="IRI_FRONTIER = False")
    first, killed = run_until(project, srv, 1, 200)
    assert killed
    second, _ = run_until(project, srv, 2, None)
    fetched = set(srv.hits.counts())
    assert len(fetched) < len(srv.site.keys) - 500, (first, second, len(fetched))


# --------------------------------------------------------------------------- every answer path

PATHS_SPIDER = '''
import scrapy


class PathsSpider(scrapy.Spider):
    """Requests that end every way a request can end, in a real engine."""

    name = "frontier"
    start_urls = ["http://frontier.example/"]

    def parse(self, response):
        yield {"url": response.url}
        if response.url != "http://frontier.example/":
            return
        # 301 -> /new: answered by its replacement
        yield response.follow("/old", callback=self.parse)
        # 404 with an errback (HttpError, through the spider middlewares)
        yield response.follow("/missing", callback=self.parse, errback=self.failed)
        # download error with an errback whose output schedules a page
        yield response.follow("/refused", errback=self.failed,
                              meta={"proxy": "http://127.0.0.1:9"})
        # download error without errback
        yield response.follow("/refused-plain", meta={"proxy": "http://127.0.0.1:9"})
        # a callback that raises
        yield response.follow("/p/0", callback=self.broken)

    def failed(self, failure):
        yield scrapy.Request("http://frontier.example/p/1", callback=self.parse)

    def broken(self, response):
        raise ValueError("a callback that fails")
'''


@pytest.mark.slow
def test_every_answer_path_in_a_real_crawl(tmp_path: Path) -> None:
    """Redirect, 404 with errback, download errors with and without errback (whose
    output schedules a page), a callback that raises: all answered exactly once, the
    store left empty, and the same command run again fetches nothing."""
    site = Site(
        hosts=(LARGE_HOST,),
        resources=(
            Resource("home", LARGE_HOST, "/", None, "Home", "", ()),
            Resource("old", LARGE_HOST, "/old", redirect_to="new"),
            Resource("new", LARGE_HOST, "/new", None, "New", "", ()),
            Resource("p0", LARGE_HOST, "/p/0", None, "P0", "", ()),
            Resource("p1", LARGE_HOST, "/p/1", None, "P1", "", ()),
        ),
        start_urls=("http://frontier.example/",),
    )
    # with latency, the crawl goes on after the errbacks: long enough for the
    # periodic collection to release the failed request (answered_on_release)
    with SlowSiteServer(site, latency=0.4) as srv:
        project = make_project(tmp_path, srv.proxy_url, extra="RETRY_ENABLED = False",
                               spider=PATHS_SPIDER)
        run_until(project, srv, 1, None)
        fetched = srv.hits.counts()
        assert {k.path for k in fetched} == {"/", "/old", "/new", "/missing", "/p/0", "/p/1"}
        assert set(fetched.values()) == {1}
        stats = {k: stat_of(project, 1, k) for k in (
            "scheduler/dequeued", "iri/frontier/answered", "iri/frontier/replaced",
            "iri/frontier/answered_on_release", "iri/frontier/pending_at_close",
            "spider_exceptions/ValueError")}
        assert stats["iri/frontier/pending_at_close"] == 0, stats
        assert stats["iri/frontier/answered"] == stats["scheduler/dequeued"] == 8, stats
        assert stats["iri/frontier/replaced"] == 1, stats
        # /refused is answered when Scrapy releases it (a periodic collection) or, on a
        # loaded machine where the crawl idles first, at spider_idle: once either way
        assert stats["iri/frontier/answered_on_release"] in (None, 1), stats
        assert stats["spider_exceptions/ValueError"] == 1, stats
        srv.reset()
        run_until(project, srv, 2, None)
        assert srv.hits.hits == []  # nothing pending, everything seen


# --------------------------------------------------------------------------- planted records


def _plant(path: Path, *records: bytes) -> None:
    """Someone with write access to the JOBDIR adds rows to the store's pending table."""
    conn = sqlite3.connect(path)
    try:
        with conn:
            conn.executemany("INSERT INTO pending (request) VALUES (?)", [(r,) for r in records])
    finally:
        conn.close()


def _refused_kinds(path: Path) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return [row[0] for row in conn.execute("SELECT kind FROM refused ORDER BY id")]
    finally:
        conn.close()


def _idle(crawler: Any) -> BaseException | None:
    """Send ``spider_idle`` as Scrapy's engine does; the exception a handler raised."""
    from scrapy.exceptions import CloseSpider, DontCloseSpider

    results = crawler.signals.send_catch_log(
        signals.spider_idle, spider=crawler.spider, dont_log=(DontCloseSpider, CloseSpider))
    raised = [result.value for _, result in results if isinstance(result, Failure)]
    return raised[0] if raised else None


def _json_record(spider: Spider, url: str, callback: str | None) -> bytes:
    """A JSON record as the codec writes it, with the callback renamed to *callback*."""
    import json

    from iri_scrapy.frontier.codec import RequestCodec

    record = json.loads(RequestCodec(spider).encode(Request(url)))
    record["callback"] = callback
    return json.dumps(record).encode()


def test_planted_rows_refused_counted_logged_never_executed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from iri_scrapy.frontier.codec import REASON_REFUSED_RECORDS
    from tests.frontier.test_codec import Plant

    jobdir = tmp_path / "job"
    crawler, scheduler = open_scheduler(jobdir)
    assert scheduler.enqueue_request(Request("http://e.com/ok", callback=crawler.spider.parse))
    scheduler.close("shutdown")
    target = tmp_path / "pwned"
    import pickle

    _plant(jobdir / FILENAME, pickle.dumps(Plant(str(target))), b"garbage",
           _json_record(crawler.spider, "http://e.com/renamed", "gone"),
           _json_record(crawler.spider, "http://e.com/added", "parse"))
    with caplog.at_level(logging.ERROR):
        crawler2, again = open_scheduler(jobdir)
    assert not target.exists()  # never unpickled
    stats = crawler2.stats
    assert stats.get_value("iri/frontier/refused_records") == 3
    assert stats.get_value("iri/frontier/refused_records/pickle") == 1
    assert stats.get_value("iri/frontier/refused_records/garbage") == 1
    assert stats.get_value("iri/frontier/refused_records/callback") == 1
    assert stats.get_value("iri/frontier/recovered") == 2  # "ok" and the one added
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 3 and all(REASON_REFUSED_RECORDS in e for e in errors), errors
    assert _refused_kinds(jobdir / FILENAME) == ["pickle", "garbage", "callback"]
    got = drain(again)
    assert sorted(r.url for r in got) == ["http://e.com/added", "http://e.com/ok"]
    for request in got:
        again.answered(request)
    # the crawl would end now: it does not end "finished"
    closing = _idle(crawler2)
    assert isinstance(closing, Exception) and getattr(closing, "reason", None) == \
        REASON_REFUSED_RECORDS
    again.close(REASON_REFUSED_RECORDS)
    # kept aside, not refused again: the next run ends "finished"
    crawler3, third = open_scheduler(jobdir)
    assert not crawler3.stats.get_value("iri/frontier/refused_records")
    assert drain(third) == [] and _idle(crawler3) is None
    third.close("finished")
    assert len(_refused_kinds(jobdir / FILENAME)) == 3


def test_non_plain_meta_needs_the_secret(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import datetime

    monkeypatch.delenv("IRI_FRONTIER_SECRET", raising=False)
    when = datetime.date(2024, 5, 6)
    crawler, scheduler = open_scheduler(tmp_path / "a")
    with caplog.at_level(logging.WARNING, logger="iri_scrapy.frontier.jobdir"):
        assert scheduler.enqueue_request(Request("http://e.com/d", meta={"when": when}))
    assert crawler.stats.get_value("iri/frontier/unserializable") == 1
    assert "IRI_FRONTIER_SECRET" in caplog.text  # says what to do
    scheduler.close("shutdown")

    crawler, scheduler = open_scheduler(tmp_path / "b", IRI_FRONTIER_SECRET="s3cret")
    assert scheduler.enqueue_request(Request("http://e.com/d", meta={"when": when}))
    assert crawler.stats.get_value("scheduler/enqueued/disk") == 1
    scheduler.close("shutdown")
    crawler, scheduler = open_scheduler(tmp_path / "b", IRI_FRONTIER_SECRET="s3cret")
    (back,) = drain(scheduler)
    assert back.meta["when"] == when
    scheduler.close("shutdown")
    # another secret: refused, never unpickled
    crawler, scheduler = open_scheduler(tmp_path / "b", IRI_FRONTIER_SECRET="other")
    assert crawler.stats.get_value("iri/frontier/refused_records/signature") == 1
    assert drain(scheduler) == []
    scheduler.close("shutdown")


REFUSAL_SPIDER = '''
import scrapy


class RefusalSpider(scrapy.Spider):
    name = "frontier"
    start_urls = ["http://frontier.example/"]

    def parse(self, response):
        yield {"url": response.url}
'''


@pytest.mark.slow
def test_rows_planted_in_a_real_jobdir(tmp_path: Path) -> None:
    """A finished JOBDIR crawl; rows planted into its store (a pickle that would create
    a file, a record whose callback is gone, a record adding a page): the same command
    run again fetches the added page, executes nothing, exits 1 with finish_reason
    iri_frontier_refused_records; run once more, it ends finished."""
    import pickle

    from iri_scrapy.frontier.codec import REASON_REFUSED_RECORDS
    from tests.frontier.test_codec import Plant
    from tests.support import watch

    site = Site(
        hosts=(LARGE_HOST,),
        resources=(
            Resource("home", LARGE_HOST, "/", None, "Home", "", ()),
            Resource("p1", LARGE_HOST, "/p/1", None, "P1", "", ()),
            Resource("p2", LARGE_HOST, "/p/2", None, "P2", "", ()),
        ),
        start_urls=("http://frontier.example/",),
    )
    target = tmp_path / "pwned"
    with SlowSiteServer(site, latency=0.01) as srv:
        project = make_project(tmp_path / "p", srv.proxy_url, spider=REFUSAL_SPIDER)
        run_until(project, srv, 1, None)
        assert {k.path for k in srv.hits.counts()} == {"/"}
        spider = _Spider()
        _plant(project / "job" / FILENAME, pickle.dumps(Plant(str(target))),
               _json_record(spider, "http://frontier.example/p/2", "gone"),
               _json_record(spider, "http://frontier.example/p/1", "parse"))
        srv.reset()

        def run(number: int) -> tuple[int, str]:
            proc = subprocess.Popen(crawl_command(project, number), cwd=project,
                                    env=child_env(project), stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            code = watch.wait_exit(proc, lambda: len(srv.hits.hits),
                                   size_of(project / f"log{number}.txt"), what=f"run {number}",
                                   detail=lambda: log_tail(project, number))
            return code, (project / f"log{number}.txt").read_text(encoding="utf-8")

        code, log = run(2)
        assert not target.exists()
        assert code == 1, log[-3000:]
        assert f"'finish_reason': '{REASON_REFUSED_RECORDS}'" in log
        assert stat_of(project, 2, "iri/frontier/refused_records") == 2
        assert stat_of(project, 2, "iri/frontier/refused_records/pickle") == 1
        assert stat_of(project, 2, "iri/frontier/refused_records/callback") == 1
        errors = [line for line in log.splitlines() if "ERROR" in line and "refused" in line]
        assert len(errors) == 3, errors  # one per kind, and the closing line
        assert {k.path for k in srv.hits.counts()} == {"/p/1"}  # added: fetched
        assert _refused_kinds(project / "job" / FILENAME) == ["pickle", "callback"]
        srv.reset()
        code, log = run(3)
        assert code == 0 and "'finish_reason': 'finished'" in log, log[-3000:]
        assert srv.hits.hits == []
    assert not target.exists()
