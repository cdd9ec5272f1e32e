"""JOBDIR faults: a second crawl on a JOBDIR in use, and a store that cannot be written.

Both must be loud: a second crawl is refused at start (``iri_jobdir_locked``,
exit status 1, nothing fetched); a full disk closes the crawl with
``iri_frontier_write_failed`` (exit status 1) within a bounded time, and the
same command run again once there is space fetches every page (none lost).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from scrapy import Request
from scrapy.exceptions import DontCloseSpider

import iri_scrapy.frontier.scheduler as scheduler_module
from iri_scrapy.frontier.jobdir_start import REASON_FRONTIER_READ_ONLY
from iri_scrapy.frontier.lock import LOCK_FILENAME, JobdirLocked, lock_jobdir
from iri_scrapy.frontier.sqlite_schema import DAMAGED
from iri_scrapy.frontier.sqlite_store import FrontierStore, FrontierStoreUnreadable
from iri_scrapy.frontier.store_writer import REASON_FRONTIER_UNREADABLE
from iri_scrapy.plugin.refusal import (
    CLOSESPIDER_AT_OPEN,
    REASON_FRONTIER_WRITE_FAILED,
    REASON_JOBDIR_LOCKED,
)
from iri_scrapy.store.frontier_file import FILENAME
from tests.frontier.test_frontier import (
    child_env,
    crawl_command,
    drain,
    log_tail,
    make_project,
    open_scheduler,
    run_until,
    stat_of,
)
from tests.support.bigsite import SlowSiteServer, large_site
from tests.support.watch import size_of, wait_exit, wait_until

# --------------------------------------------------------------------------- in-process


def test_lock_is_exclusive_and_released_on_close(tmp_path: Path) -> None:
    fd = lock_jobdir(tmp_path)
    assert (tmp_path / LOCK_FILENAME).read_text().strip() == str(os.getpid())
    with pytest.raises(JobdirLocked, match=rf"JOBDIR {tmp_path} is in use .*pid {os.getpid()}"):
        lock_jobdir(tmp_path)
    os.close(fd)
    os.close(lock_jobdir(tmp_path))  # released


def _fill(store: FrontierStore, start: int, count: int) -> list[int]:
    return [store.add(start + i, b"x" * 2000) for i in range(count)]


def test_failed_write_is_rolled_back_kept_and_replayed(tmp_path: Path) -> None:
    """SQLITE_FULL (``max_page_count``): SQLite rolls the transaction back; the store
    knows it (no "cannot commit - no transaction is active"), keeps the changes,
    and commits them all once there is room."""
    path = tmp_path / FILENAME
    store = FrontierStore(path)
    parent = _fill(store, 0, 1)[0]
    assert store.commit()
    pages = int(store._conn.execute("PRAGMA page_count").fetchone()[0])
    store._conn.execute(f"PRAGMA max_page_count={pages + 2}")
    children = _fill(store, 1000, 50)  # do not fit
    store.done(parent)  # answered in the same transaction as its children
    assert isinstance(store.failed, sqlite3.OperationalError)
    assert "full" in str(store.failed)
    assert not store._conn.in_transaction  # rolled back...
    assert store.in_transaction  # ...and the changes wait
    assert not store.commit()  # still full: replayed and rolled back again
    assert store.failed is not None
    # nothing of the failed transaction is on disk: the parent is still pending
    other = sqlite3.connect(path)
    assert [r[0] for r in other.execute("SELECT id FROM pending")] == [parent]
    other.close()
    store._conn.execute("PRAGMA max_page_count=1000000")  # space again
    assert store.commit()
    assert store.failed is None
    store.close()
    again = FrontierStore(path)
    assert [rowid for rowid, _ in again.pending_rows()] == children
    assert again.seen_count() == 51
    # ids are never reused, even those of a rolled-back transaction
    assert again.add(None, b"y") == children[-1] + 1
    again.close()


# --------------------------------------------------------------------------- real crawls

PAGES = 400


@pytest.fixture(scope="module")
def slow_site() -> Iterator[SlowSiteServer]:
    with SlowSiteServer(large_site(PAGES), latency=0.03) as srv:
        yield srv


def _start(project: Path, run: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(crawl_command(project, run), cwd=project, env=child_env(project),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)


@pytest.mark.slow
def test_second_crawl_on_a_jobdir_in_use_is_refused(slow_site: SlowSiteServer,
                                                    tmp_path: Path) -> None:
    srv = slow_site
    srv.reset()
    project = make_project(tmp_path, srv.proxy_url, extra="CONCURRENT_REQUESTS = 2")
    first = _start(project, 1)
    try:
        wait_until(lambda: len(srv.hits.hits) >= 20 or first.poll() is not None,
                   size_of(project / "log1.txt"), what="first crawl",
                   detail=lambda: log_tail(project, 1))
        assert first.poll() is None, log_tail(project, 1)
        second = _start(project, 2)
        code = wait_exit(second, size_of(project / "log2.txt"), what="second crawl",
                         detail=lambda: log_tail(project, 2))
        stderr = second.stderr.read().decode() if second.stderr else ""
        assert code == 1, log_tail(project, 2)
        log2 = (project / "log2.txt").read_text()
        assert stat_of(project, 2, "downloader/request_count") is None  # fetched nothing
        errors = [line for line in log2.splitlines()
                  if "[iri_scrapy" in line and "] ERROR:" in line]
        assert len(errors) == 1, errors
        assert f"JOBDIR {project / 'job'} is in use by another crawl (pid {first.pid})" in (
            errors[0])
        if CLOSESPIDER_AT_OPEN:  # Scrapy 2.18+; on 2.17 the error is raised, with its traceback
            assert f"'finish_reason': '{REASON_JOBDIR_LOCKED}'" in log2
            assert "Traceback" not in log2 and "Traceback" not in stderr
        assert first.poll() is None  # the first crawl goes on
        os.kill(first.pid, signal.SIGKILL)  # the kernel drops its lock
    finally:
        if first.poll() is None:
            first.kill()
        first.wait()
    _, killed = run_until(project, srv, 3, None)  # resumes: exit status 0
    assert not killed
    assert stat_of(project, 3, "iri/frontier/unclean_shutdown") == 1
    assert (stat_of(project, 3, "iri/frontier/recovered") or 0) > 0
    assert "'finish_reason': 'finished'" in (project / "log3.txt").read_text()
    assert set(srv.hits.counts()) == srv.site.keys  # every page, none lost


@contextmanager
def _tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A tmpfs of *size* at *where* (the crawl's JOBDIR), unmounted after."""
    where.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 160 KiB tmpfs at ``tmp_path/job``: full after a few dozen pages."""
    with _tmpfs(tmp_path / "job", "160k") as where:
        yield where


@pytest.mark.slow
def test_store_that_cannot_be_written_at_start_is_refused(
        slow_site: SlowSiteServer, tmp_path: Path) -> None:
    srv = slow_site
    srv.reset()
    project = make_project(tmp_path, srv.proxy_url)
    with _tmpfs(tmp_path / "job", "40k"):  # the store does not fit
        proc = _start(project, 1)
        code = wait_exit(proc, size_of(project / "log1.txt"), what="crawl on a full disk",
                         detail=lambda: log_tail(project, 1))
    log1 = (project / "log1.txt").read_text()
    assert code == 1, log_tail(project, 1)
    assert stat_of(project, 1, "downloader/request_count") is None
    errors = [line for line in log1.splitlines() if "[iri_scrapy" in line and "] ERROR:" in line]
    assert len(errors) == 1, errors
    assert "cannot be written" in errors[0] and "free space" in errors[0]
    if CLOSESPIDER_AT_OPEN:  # Scrapy 2.18+; on 2.17 the error is raised, with its traceback
        assert f"'finish_reason': '{REASON_FRONTIER_WRITE_FAILED}'" in log1, log_tail(project, 1)
        assert "iri_scrapy/frontier" not in log1  # no traceback of ours


@pytest.mark.slow
def test_disk_full_closes_the_crawl_and_a_rerun_loses_nothing(
        slow_site: SlowSiteServer, tmp_path: Path, small_disk: Path) -> None:
    srv = slow_site
    srv.reset()
    project = make_project(tmp_path, srv.proxy_url, extra="IRI_FRONTIER_WRITE_RETRY = 2")
    started = time.monotonic()
    proc = _start(project, 1)
    code = wait_exit(proc, size_of(project / "log1.txt"), what="crawl on a full disk",
                     stall=60, ceiling=120, detail=lambda: log_tail(project, 1))
    took = time.monotonic() - started
    log1 = (project / "log1.txt").read_text()
    assert code == 1, log_tail(project, 1)
    assert f"'finish_reason': '{REASON_FRONTIER_WRITE_FAILED}'" in log1, log_tail(project, 1)
    assert "cannot commit" not in log1
    # ours: one line (Scrapy's SpiderState extension, which writes spider.state into
    # the same full JOBDIR at close, logs its own OSError traceback)
    errors = [line for line in log1.splitlines() if "[iri_scrapy" in line and "] ERROR:" in line]
    assert len(errors) == 1, errors
    assert "writes failed for 2 s" in errors[0] and "Free space" in errors[0]
    assert "same JOBDIR" in errors[0]
    assert stat_of(project, 1, "iri/frontier/write_failures") == 1
    assert took < 60
    first_run = set(srv.hits.counts())
    assert first_run < srv.site.keys  # it stopped before the end
    # space again: the same command fetches every page
    subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True)
    _, killed = run_until(project, srv, 2, None)
    assert not killed
    assert "'finish_reason': 'finished'" in (project / "log2.txt").read_text()
    assert set(srv.hits.counts()) == srv.site.keys  # 0 lost
    print(f"first run fetched {len(first_run)} of {len(srv.site.keys)} pages, "
          f"stopped after {took:.1f} s")


def test_lock_file_is_left_and_reusable(tmp_path: Path) -> None:
    """The lock file stays (removing it would race another crawl taking it)."""
    os.close(lock_jobdir(tmp_path))
    assert (tmp_path / LOCK_FILENAME).exists()
    os.close(lock_jobdir(tmp_path))


def test_scheduler_holds_requests_while_failing_and_resumes(tmp_path: Path,
                                                            caplog: Any) -> None:
    """In-process: while the store cannot be written nothing goes out and the spider
    is kept open; once it can, the held changes are committed and the crawl goes on."""
    crawler, scheduler = open_scheduler(tmp_path, IRI_FRONTIER_MAX_INFLIGHT=0)
    store = scheduler.store
    assert scheduler.enqueue_request(Request("http://e.com/0"))
    parent = scheduler.next_request()
    assert parent is not None
    pages = int(store._conn.execute("PRAGMA page_count").fetchone()[0])
    store._conn.execute(f"PRAGMA max_page_count={pages + 1}")
    for i in range(1, 40):  # the parent's children: do not fit
        assert scheduler.enqueue_request(Request(f"http://e.com/{i}", body=b"x" * 2000))
    scheduler.answered(parent)
    scheduler._commit()
    assert store.failed is not None
    assert crawler.stats.get_value("iri/frontier/write_failures") == 1
    assert scheduler.next_request() is None  # nothing goes out
    assert scheduler.has_pending_requests()
    with pytest.raises(DontCloseSpider):
        scheduler._on_idle()  # not "finished" while changes wait
    other = sqlite3.connect(tmp_path / FILENAME)  # the parent is still pending on disk
    assert other.execute("SELECT count(*) FROM pending").fetchone()[0] == 1
    store._conn.execute("PRAGMA max_page_count=1000000")  # space again
    scheduler._commit()
    assert store.failed is None
    assert "writing works again" in caplog.text
    assert other.execute("SELECT count(*) FROM pending").fetchone()[0] == 39
    other.close()
    assert len(drain(scheduler)) == 39
    scheduler.close("shutdown")


# --------------------------------------------------------------------------- damaged, read-only


def _store_with_pending(tmp_path: Path, count: int = 1500) -> Path:
    _, scheduler = open_scheduler(tmp_path)
    for i in range(count):
        scheduler.enqueue_request(Request(f"http://e.com/{i}", priority=i % 3, body=b"x" * 200))
    scheduler.close("shutdown")
    return tmp_path / FILENAME


def _damage_middle(path: Path, pages: int = 3) -> None:
    size = path.stat().st_size
    with path.open("r+b") as f:
        f.seek(size // 2 - (size // 2) % 4096)
        f.write(bytes(range(256)) * 16 * pages)


@pytest.mark.parametrize("damage", ["truncated", "garbage", "header"])
def test_damaged_store_is_refused_with_the_salvage_line(tmp_path: Path, damage: str) -> None:
    path = _store_with_pending(tmp_path, 300)
    if damage == "truncated":
        with path.open("r+b") as f:
            f.truncate(path.stat().st_size // 2)
    elif damage == "garbage":
        path.write_bytes(b"not a database at all" * 200)
    else:
        with path.open("r+b") as f:
            f.write(b"\0" * 100)
    with pytest.raises(FrontierStoreUnreadable) as info:
        FrontierStore(path, tag="t")
    assert info.value.kind == DAMAGED
    message = str(info.value)
    assert f"iri-scrapy frontier salvage {tmp_path}" in message and "\n" not in message
    assert "read-only" not in message


def test_damage_found_mid_crawl_closes_with_its_reason(tmp_path: Path, caplog: Any,
                                                       monkeypatch: Any) -> None:
    """Damage in a page the start does not read (SQLite checks a page when it reads
    it; a full check of a 1,000,000-request store takes 2 to 13 s, too long for each
    start): found when the scheduler reads the batch that holds it; nothing more
    goes out, one ERROR line, finish_reason iri_frontier_unreadable."""
    path = _store_with_pending(tmp_path)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        # the table's first leaf: the oldest rows, read after the first batch
        page = conn.execute("SELECT pageno FROM dbstat WHERE name = 'pending' AND "
                            "pagetype = 'leaf' ORDER BY path LIMIT 1").fetchone()[0]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
    with path.open("r+b") as f:
        f.seek((page - 1) * size)
        f.write(b"\xff" * size)
    crawler, scheduler = open_scheduler(tmp_path, IRI_FRONTIER_MAX_INFLIGHT=0)
    closed: list[str] = []
    monkeypatch.setattr(scheduler_module, "stop_crawl",  # no engine in this test
                        lambda crawler, reason, component: closed.append(reason))
    out = drain(scheduler)
    assert 0 < len(out) < 1500 and closed == [REASON_FRONTIER_UNREADABLE]
    errors = [r for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and "iri-scrapy frontier salvage" in errors[0].getMessage()
    assert scheduler.next_request() is None
    scheduler.close("shutdown")


def _salvage(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "iri_scrapy", "frontier", "salvage", *args],
                          capture_output=True, text=True, check=False, timeout=120)


def test_salvage_saves_every_readable_row_and_counts_the_rest(tmp_path: Path) -> None:
    path = _store_with_pending(tmp_path)
    _damage_middle(path)
    done = _salvage(str(tmp_path))
    assert done.returncode == 1, done.stderr  # some ids could not be read: loud
    saved = int(re.search(r"pending requests: (\d+) saved", done.stdout).group(1))
    unreadable = int(re.search(r"(\d+) ids unreadable", done.stdout).group(1))
    assert unreadable > 0 and saved + unreadable >= 1500 - 10 and saved < 1500
    kept = list(tmp_path.glob(f"{FILENAME}.damaged-*"))
    assert len(kept) == 1 and f"damaged store kept as {kept[0]}" in done.stdout
    crawler, scheduler = open_scheduler(tmp_path, IRI_FRONTIER_MAX_INFLIGHT=0)
    assert crawler.stats.get_value("iri/frontier/recovered") == saved
    got = drain(scheduler)
    assert len(got) == saved and len({r.url for r in got}) == saved
    assert [r.priority for r in got] == sorted((r.priority for r in got), reverse=True)
    assert not scheduler.enqueue_request(Request("http://e.com/0", body=b"x" * 200))  # seen
    scheduler.close("finished")
    # nothing to salvage / a crawl running: one line, exit status 2
    assert "does not exist" in _salvage(str(tmp_path / "nowhere")).stderr
    fd = lock_jobdir(tmp_path)
    try:
        busy = _salvage(str(tmp_path))
    finally:
        os.close(fd)
    assert busy.returncode == 2 and "in use by a crawl" in busy.stderr


def test_salvage_of_an_intact_store_loses_nothing_and_out_keeps_the_source(
        tmp_path: Path) -> None:
    job = tmp_path / "job"
    job.mkdir()
    path = _store_with_pending(job, 500)
    before = path.read_bytes()
    out = tmp_path / "out"
    done = _salvage(str(job), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "pending requests: 500 saved, 0 ids unreadable" in done.stdout
    assert "seen fingerprints: 500 saved, 0 rows unreadable" in done.stdout
    assert path.read_bytes() == before  # only read
    assert _salvage(str(job), "--out", str(out)).returncode == 2  # never overwrites


@pytest.mark.slow
def test_read_only_store_is_refused_without_remove_and_resumes_once_writable(
        slow_site: SlowSiteServer, tmp_path: Path) -> None:
    srv = slow_site
    srv.reset()
    project = make_project(tmp_path, srv.proxy_url, extra="CONCURRENT_REQUESTS = 4")
    with _tmpfs(tmp_path / "job", "64m") as job:
        _, killed = run_until(project, srv, 1, 40)
        assert killed
        subprocess.run(["mount", "-o", "remount,ro", str(job)], check=True)
        proc = _start(project, 2)
        code = wait_exit(proc, size_of(project / "log2.txt"), what="crawl on a read-only JOBDIR",
                         detail=lambda: log_tail(project, 2))
        stderr = proc.stderr.read().decode() if proc.stderr else ""
        log2 = (project / "log2.txt").read_text()
        assert code == 1, log_tail(project, 2)
        # nothing fetched by this crawl (a request the killed one had in flight may still
        # reach the server: its own stats say it)
        assert "downloader/request_count" not in log2, log_tail(project, 2)
        errors = [line for line in log2.splitlines()
                  if "[iri_scrapy" in line and "] ERROR:" in line]
        assert len(errors) == 1, errors
        assert "read-only" in errors[0] and "make JOBDIR writable" in errors[0]
        assert "remove" not in errors[0] and "salvage" not in errors[0]
        if CLOSESPIDER_AT_OPEN:
            assert f"'finish_reason': '{REASON_FRONTIER_READ_ONLY}'" in log2
            # no traceback of ours (Scrapy's SpiderState extension, which writes
            # spider.state into the read-only JOBDIR at close, logs its own)
            assert "iri_scrapy/frontier" not in log2 and "iri_scrapy/frontier" not in stderr
        subprocess.run(["mount", "-o", "remount,rw", str(job)], check=True)
        _, killed = run_until(project, srv, 3, None)
        assert not killed
        assert "'finish_reason': 'finished'" in (project / "log3.txt").read_text()
    assert set(srv.hits.counts()) == srv.site.keys  # 0 lost


@pytest.mark.slow
def test_truncated_store_refused_then_salvaged_and_resumed(
        slow_site: SlowSiteServer, tmp_path: Path) -> None:
    srv = slow_site
    srv.reset()
    project = make_project(tmp_path, srv.proxy_url, extra="CONCURRENT_REQUESTS = 4")
    _, killed = run_until(project, srv, 1, 60)
    assert killed
    path = project / "job" / FILENAME
    with contextlib.closing(sqlite3.connect(path)) as conn:  # the log into the file
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    with path.open("r+b") as f:
        f.truncate(path.stat().st_size * 3 // 4)
    hits = len(srv.hits.hits)
    proc = _start(project, 2)
    code = wait_exit(proc, size_of(project / "log2.txt"), what="crawl on a truncated store",
                     detail=lambda: log_tail(project, 2))
    stderr = proc.stderr.read().decode() if proc.stderr else ""
    log2 = (project / "log2.txt").read_text()
    # Nothing sent by this crawl (the server's hit count may still grow by a request the
    # killed crawl had in flight, so the crawl's own stats say it).
    assert code == 1 and "downloader/request_count" not in log2, log_tail(project, 2)
    errors = [line for line in log2.splitlines() if "[iri_scrapy" in line and "] ERROR:" in line]
    assert len(errors) == 1 and "iri-scrapy frontier salvage" in errors[0], errors
    if CLOSESPIDER_AT_OPEN:
        assert f"'finish_reason': '{REASON_FRONTIER_UNREADABLE}'" in log2
        assert "Traceback" not in log2 and "Traceback" not in stderr
    done = _salvage(str(project / "job"))
    assert done.returncode in (0, 1), done.stderr
    saved = int(re.search(r"pending requests: (\d+) saved", done.stdout).group(1))
    _, killed = run_until(project, srv, 3, None)
    assert not killed
    assert "'finish_reason': 'finished'" in (project / "log3.txt").read_text()
    assert (stat_of(project, 3, "iri/frontier/recovered") or 0) == saved
    print(f"truncated store: {done.stdout.strip()}; run 3 fetched "
          f"{len(srv.hits.hits) - hits} pages")
