"""Pending requests live on disk, not in memory, and keep Scrapy's order.

``IRIFrontierScheduler`` reads its pending rows from the SQLite store a batch at a
time, in Scrapy's order (highest priority first; LIFO within a priority for
regular requests, FIFO for start requests, as ``ScrapyPriorityQueue`` over
``LifoMemoryQueue``/``FifoMemoryQueue``).  These tests drive the scheduler and a
stock Scrapy priority queue with the same pushes and pops and compare the
orders; then they measure the memory per pending request with ``tracemalloc``.
The 1,000,000-request figures are in ``benchmarks/bench_pending.py``.
"""

from __future__ import annotations

import gc
import random
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from scrapy import Request
from scrapy.utils.misc import build_from_crawler

from iri_scrapy.frontier.lanes import BUFFER_MAX
from iri_scrapy.frontier.sqlite_store import FrontierStore
from iri_scrapy.store.fpstore import FingerprintFileError
from iri_scrapy.store.frontier_file import FILENAME, FORMAT_VERSION, order_key
from tests.frontier.test_frontier import drain, open_scheduler

NO_CAP = {"IRI_FRONTIER_MAX_INFLIGHT": 0}


def _reference(scheduler: Any) -> Any:
    """A stock Scrapy priority queue with the scheduler's memory queue classes."""
    return build_from_crawler(
        scheduler.pqclass, scheduler.crawler, downstream_queue_cls=scheduler.mqclass,
        key="", start_queue_cls=scheduler._smqclass)


def _request(i: int, priority: int, start: bool) -> Request:
    meta = {"is_start_request": True} if start else {}
    return Request(f"http://e.com/{i}", priority=priority, meta=meta)


def test_order_key_is_scrapys() -> None:
    assert order_key(5, 2, False) < order_key(1, 1, False)  # higher priority first
    assert order_key(5, 0, False) < order_key(4, 0, False)  # LIFO within a priority
    assert order_key(4, 0, False, lifo=False) < order_key(5, 0, False, lifo=False)
    assert order_key(4, 0, True) < order_key(5, 0, True)  # start requests: FIFO
    assert order_key(9, 0, False) < order_key(1, 0, True)  # regular before start


@pytest.mark.slow
def test_interleaved_pushes_and_pops_match_scrapys_queue(tmp_path: Path) -> None:
    """20,000 requests, random priorities, start and regular, pops interleaved:
    the scheduler hands them out in exactly the stock queue's order (past the
    in-memory buffer's size, so rows are dropped from memory and read again)."""
    rng = random.Random(20)
    crawler, scheduler = open_scheduler(tmp_path, **NO_CAP)
    ref = _reference(scheduler)
    got: list[str] = []
    want: list[str] = []

    def pop() -> None:
        out = scheduler.next_request()
        expected = ref.pop()
        assert (out is None) == (expected is None)
        if out is not None:
            got.append(out.url)
            want.append(expected.url)
            scheduler.answered(out)

    total = 20_000
    for i in range(total):
        priority, start = rng.choice((-1, 0, 0, 0, 1, 2)), rng.random() < 0.1
        assert scheduler.enqueue_request(_request(i, priority, start))
        ref.push(_request(i, priority, start))
        # bursts of pushes (the buffer overflows) and of pops
        if rng.random() < (0.2 if (i // 3000) % 2 else 0.7):
            pop()
        if i % 997 == 0:
            scheduler._commit()  # a reactor turn
    assert len(scheduler) == len(ref) > BUFFER_MAX
    while len(ref):
        pop()
    assert scheduler.next_request() is None and not scheduler.has_pending_requests()
    assert got == want and len(got) == total
    scheduler.close("finished")


def test_resume_keeps_the_order_and_reads_lazily(tmp_path: Path) -> None:
    crawler, scheduler = open_scheduler(tmp_path, **NO_CAP)
    ref = _reference(scheduler)
    for i in range(3000):
        priority, start = i % 3, i % 7 == 0
        scheduler.enqueue_request(_request(i, priority, start))
        ref.push(_request(i, priority, start))
    first = scheduler.next_request()
    assert first is not None and first.url == ref.pop().url
    scheduler.close("shutdown")  # first stays pending: it was not answered
    ref.push(first)

    crawler2, again = open_scheduler(tmp_path, **NO_CAP)
    assert len(again) == 3000 and again.has_pending_requests()
    assert crawler2.stats.get_value("iri/frontier/recovered") == 3000
    assert again._stored.held <= BUFFER_MAX  # not all of them in memory
    got = [r.url for r in drain(again)]
    want = []
    while (r := ref.pop()) is not None:
        want.append(r.url)
    assert got == want
    again.close("finished")


def test_fifo_disk_queue_setting_is_followed_and_switching_reorders(tmp_path: Path) -> None:
    """Stored requests follow ``SCHEDULER_DISK_QUEUE``, as Scrapy's disk queue does."""
    fifo = {"SCHEDULER_DISK_QUEUE": "scrapy.squeues.PickleFifoDiskQueue", **NO_CAP}
    _, scheduler = open_scheduler(tmp_path, **fifo)
    for i in range(5):
        scheduler.enqueue_request(_request(i, 0, False))
    first = scheduler.next_request()
    assert first is not None and first.url == "http://e.com/0"
    scheduler.answered(first)
    scheduler.close("shutdown")
    _, lifo = open_scheduler(tmp_path, **NO_CAP)  # the default again: LIFO
    assert [r.url for r in drain(lifo)] == [f"http://e.com/{i}" for i in (4, 3, 2, 1)]
    lifo.close("finished")


@pytest.mark.parametrize("old", ["1", "2"])
def test_a_store_of_an_unreleased_format_is_refused(tmp_path: Path, old: str) -> None:
    """Formats 1 and 2 were never released: such a store is refused in one line naming
    both formats (``iri-scrapy frontier salvage`` still reads it), never rewritten."""
    _, scheduler = open_scheduler(tmp_path, **NO_CAP)
    scheduler.enqueue_request(_request(0, 0, False))
    tag = scheduler.df.options_tag()
    scheduler.close("shutdown")
    import sqlite3

    with sqlite3.connect(tmp_path / FILENAME) as conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'format'", (old,))
    before = (tmp_path / FILENAME).read_bytes()
    with pytest.raises(FingerprintFileError, match=f"format {old}; this iri_scrapy reads "
                       f"format {FORMAT_VERSION}"):
        FrontierStore(tmp_path / FILENAME, tag=tag)
    assert (tmp_path / FILENAME).read_bytes() == before


@pytest.mark.scale
@pytest.mark.slow
def test_memory_per_pending_request_is_bounded(tmp_path: Path) -> None:
    """50,000 pending requests: the Python memory each more pending request costs
    is at most 100 bytes, the dupefilter's seen-set apart (traced over the last
    10,260, whose place is in the in-memory buffer: it overflows and is trimmed
    20 times, so the buffer holds as many requests at both ends of the window,
    all allocated while traced;
    SQLite's page cache, outside Python's allocator, is bounded by its
    ``cache_size``: 2 MB); a resume reads none of them but the first batch."""
    crawler, scheduler = open_scheduler(tmp_path, **NO_CAP)
    traced = 20 * (BUFFER_MAX // 2 + 1)  # a trim every BUFFER_MAX // 2 + 1 pushes
    count = 50_000

    def push(start: int, stop: int, priority: int | None = None) -> None:
        for i in range(start, stop):
            scheduler.enqueue_request(Request(
                f"http://example.com/page/{i}?q={i}",
                priority=i % 4 if priority is None else priority))
            if i % 1000 == 999:
                scheduler._commit()
        scheduler._commit()

    warm = BUFFER_MAX + 1  # while traced: every request buffered at `before` is traced
    push(0, count - traced - warm)
    tracemalloc.start()
    try:
        push(count - traced - warm, count - traced, priority=4)
        buffered = scheduler._stored.held
        gc.collect()
        before = tracemalloc.take_snapshot()
        push(count - traced, count, priority=4)  # the highest: their place is in memory
        gc.collect()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    diff = after.compare_to(before, "filename")
    total = sum(stat.size_diff for stat in diff)
    seen = sum(stat.size_diff for stat in diff
               if stat.traceback[0].filename.endswith("fpstore.py"))
    per, per_seen = (total - seen) / traced, seen / traced
    print(f"{count} pending: {per:.1f} B of Python memory per more pending request, "
          f"+ {per_seen:.1f} B for the seen-set")
    assert len(scheduler) == count and scheduler._stored.held == buffered
    assert per <= 100, f"{per:.1f} bytes per pending request"
    scheduler.close("shutdown")
    started = time.monotonic()
    crawler2, again = open_scheduler(tmp_path, **NO_CAP)
    resumed = time.monotonic() - started
    assert len(again) == count and resumed < 5
    assert again._stored.held <= BUFFER_MAX
    first = again.next_request()
    assert first is not None and first.priority == 4 and first.url.endswith(f"={count - 1}")
    again.close("shutdown")
