"""JOBDIR faults: a second crawl on a JOBDIR in use, and a store that cannot be written.

Both must be loud: a second crawl is refused at start (``iri_jobdir_locked``,
exit status 1, nothing fetched); a full disk closes the crawl with
``iri_frontier_write_failed`` (exit status 1) within a bounded time, and the
same command run again once there is space fetches every page (none lost).
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from scrapy import Request
from scrapy.exceptions import DontCloseSpider

from iri_scrapy.frontier.jobdir import (
    FILENAME,
    LOCK_FILENAME,
    FrontierStore,
    JobdirLocked,
    lock_jobdir,
)
from iri_scrapy.plugin.refusal import (
    CLOSESPIDER_AT_OPEN,
    REASON_FRONTIER_WRITE_FAILED,
    REASON_JOBDIR_LOCKED,
)
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
