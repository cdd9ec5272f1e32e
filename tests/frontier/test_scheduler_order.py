"""The ``JOBDIR`` frontier hands requests out in exactly the order Scrapy's scheduler does.

A differential test: the same random sequence of operations drives stock
:class:`scrapy.core.scheduler.Scheduler` with ``JOBDIR`` (its disk queues), stock
``Scheduler`` without ``JOBDIR``, and :class:`IRIFrontierScheduler`: requests of
random priorities and hosts, start requests (``meta["is_start_request"]``),
duplicates and ``dont_filter`` copies, requests that cannot be serialized (a
lambda callback: Scrapy's memory queue), ``next_request`` calls in between,
download slots made busy (``DownloaderAwarePriorityQueue``), a close and resume;
under LIFO (the default), FIFO, mixed disk/memory queue classes, no start queues,
``ScrapyPriorityQueue`` and ``DownloaderAwarePriorityQueue``.  The frontier's
read-ahead limits are shrunk so that a few dozen operations cross them.  The
URLs handed out must be the same, in the same order, as stock with ``JOBDIR``; and
as stock without it, when every request can be serialized and the memory queue
classes order as the disk ones.  Then: any other priority queue is refused.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st
from scrapy import Request, Spider
from scrapy.core.downloader import Downloader
from scrapy.core.scheduler import Scheduler
from scrapy.utils.test import get_crawler

from iri_scrapy.frontier import jobdir, lanes, stored_queue
from iri_scrapy.frontier.jobdir import IRIFrontierScheduler
from iri_scrapy.frontier.jobdir_start import REASON_FRONTIER_PRIORITY_QUEUE

SCRAPY_PQ = "scrapy.pqueues.ScrapyPriorityQueue"
AWARE_PQ = "scrapy.pqueues.DownloaderAwarePriorityQueue"
FIFO = {"SCHEDULER_DISK_QUEUE": "scrapy.squeues.PickleFifoDiskQueue",
        "SCHEDULER_MEMORY_QUEUE": "scrapy.squeues.FifoMemoryQueue"}
LIFO_START = {"SCHEDULER_START_DISK_QUEUE": "scrapy.squeues.PickleLifoDiskQueue",
              "SCHEDULER_START_MEMORY_QUEUE": "scrapy.squeues.LifoMemoryQueue"}
NO_START = {"SCHEDULER_START_DISK_QUEUE": "", "SCHEDULER_START_MEMORY_QUEUE": ""}
MIXED = {"SCHEDULER_DISK_QUEUE": "scrapy.squeues.PickleFifoDiskQueue"}  # memory: LIFO
MIXED_START = {"SCHEDULER_START_MEMORY_QUEUE": "scrapy.squeues.LifoMemoryQueue"}  # disk: FIFO
#: (settings, True if the memory queue classes order as the disk ones)
VARIANTS: list[tuple[dict[str, Any], bool]] = [
    (variant | {"SCHEDULER_PRIORITY_QUEUE": pq}, same)
    for pq in (SCRAPY_PQ, AWARE_PQ)
    for variant, same in (({}, True), (FIFO, True), (LIFO_START, True), (NO_START, True),
                          (MIXED, False), (MIXED_START, False))
]


class _Spider(Spider):
    name = "order"

    def parse(self, response: Any) -> None:
        return None


class _Downloader:
    """What ``DownloaderAwarePriorityQueue`` reads of Scrapy's downloader: Scrapy's own
    ``get_slot_key``, and slots whose active downloads the test sets."""

    DOWNLOAD_SLOT = Downloader.DOWNLOAD_SLOT
    ip_concurrency = 0
    get_slot_key = Downloader.get_slot_key

    def __init__(self) -> None:
        self.slots: dict[str, Any] = {}

    def busy(self, slot: str, delta: int) -> None:
        active = self.slots.setdefault(slot, SimpleNamespace(active=set())).active
        if delta > 0:
            active.add(object())
        elif active:
            active.pop()


class Trio:
    """The three schedulers, fed the same operations."""

    def __init__(self, tmp: Path, extra: dict[str, Any]) -> None:
        self.tmp = tmp
        self.extra = extra
        self.downloader = _Downloader()
        self.serializable: list[str] = []
        self.unserializable = False
        #: The URLs stock Scrapy handed out so far (shown when the frontier differs).
        self.out: list[str | None] = []
        self.got: list[str | None] = []
        self.quirk = False
        self.pushed = 0
        self.disk, self.ours = self._open(True), self._open(False)
        self.memory = self._scheduler(Scheduler, None)

    def _scheduler(self, cls: type[Scheduler], folder: Path | None) -> Any:
        base = {"ADDONS": {"iri_scrapy.Addon": 0}, "IRI_FRONTIER_MAX_INFLIGHT": 0}
        if folder is not None:
            base["JOBDIR"] = str(folder)
        crawler = get_crawler(_Spider, {**base, **self.extra})
        crawler.spider = spider = _Spider.from_crawler(crawler)
        crawler.engine = SimpleNamespace(downloader=self.downloader)  # type: ignore[assignment]
        scheduler = cls.from_crawler(crawler)
        scheduler.open(spider)
        return scheduler

    def _open(self, stock: bool) -> Any:
        folder = self.tmp / ("stock" if stock else "ours")
        return self._scheduler(Scheduler if stock else IRIFrontierScheduler, folder)

    def push(self, host: int, number: int, priority: int, start: bool, kind: str) -> None:
        url = f"http://h{host}.test/{number}"
        if kind == "lambda":
            # each its own URL: the frontier stores the fingerprint of a memory-only
            # request only once it is answered (a crash must not make it seen but
            # lost), so after a resume it takes again one that stock Scrapy lost
            url = f"http://h{host}.test/memory/{len(self.out)}-{number}-{self.pushed}"
        elif kind in ("dup", "dont_filter") and self.serializable:
            url = self.serializable[number % len(self.serializable)]
        for scheduler in (self.disk, self.ours, self.memory):
            meta = {"is_start_request": True} if start else {}
            callback = (lambda response: None) if kind == "lambda" else None
            scheduler.enqueue_request(Request(url, priority=priority, meta=meta,
                                              callback=callback,
                                              dont_filter=kind == "dont_filter"))
        self.pushed += 1
        if kind == "lambda":
            self.unserializable = True
        else:
            self.serializable.append(url)

    def pop(self, same_without_jobdir: bool) -> bool:
        want, got = self.disk.next_request(), self.ours.next_request()
        while want is None and len(self.disk):
            # Scrapy's DownloaderAwarePriorityQueue keeps the empty slot queue that a
            # failed (unserializable) disk push created and may pick it: a None,
            # then that slot is gone (the engine asks again).  Picking it moved the
            # round robin: from then on only the requests handed out are compared.
            self.quirk = True
            want = self.disk.next_request()
        self.out.append(None if want is None else want.url)
        self.got.append(None if got is None else got.url)
        if self.quirk:
            assert (got is None) == (want is None)
        else:
            assert self.got == self.out, self.out
        if got is not None:
            self.ours.answered(got)
            self.ours._commit()
        plain = self.memory.next_request()
        if same_without_jobdir and not self.unserializable:
            assert (None if plain is None else plain.url) == self.out[-1], self.out
        return got is not None

    def resume(self) -> None:
        """Close both ``JOBDIR`` schedulers and open them again (memory-only requests
        are lost with both)."""
        self.disk.close("shutdown")
        self.ours.close("shutdown")
        self.disk, self.ours = self._open(True), self._open(False)
        self.unserializable = True  # the stock scheduler without JOBDIR kept its queue

    def close(self) -> None:
        for scheduler in (self.disk, self.ours, self.memory):
            scheduler.close("finished")


@contextlib.contextmanager
def small_read_ahead(batch: int = 3, buffer_max: int = 8) -> Iterator[None]:
    """The frontier's read-ahead shrunk, so that a few operations cross its limits."""
    with mock.patch.object(stored_queue, "BATCH", batch), \
            mock.patch.object(stored_queue, "BUFFER_MAX", buffer_max), \
            mock.patch.object(lanes, "BUFFER_MAX", buffer_max):
        yield


PUSH = st.tuples(st.just("push"), st.integers(0, 3), st.integers(0, 10_000),
                 st.sampled_from((-2, -1, 0, 0, 0, 1, 2)), st.booleans(),
                 st.sampled_from(("plain", "plain", "plain", "dup", "dont_filter", "lambda")))
OPS = st.lists(st.one_of(
    PUSH, PUSH, PUSH,
    st.just(("pop",)), st.just(("pop",)),
    st.tuples(st.just("busy"), st.integers(0, 3), st.sampled_from((1, -1))),
    st.just(("resume",)),
), max_size=60)


def run(tmp: Path, variant: int, ops: list[tuple[Any, ...]]) -> None:
    extra, same = VARIANTS[variant]
    logging.getLogger("scrapy").setLevel(logging.ERROR)
    with small_read_ahead():
        trio = Trio(tmp, extra)
        try:
            for op in ops:
                if op[0] == "push":
                    trio.push(*op[1:])
                elif op[0] == "pop":
                    trio.pop(same)
                elif op[0] == "busy":
                    trio.downloader.busy(f"h{op[1]}.test", op[2])
                else:
                    trio.resume()
            while trio.pop(same):
                pass
            assert len(trio.ours) == len(trio.disk) == 0
            assert sorted(map(str, trio.got)) == sorted(map(str, trio.out))
        finally:
            trio.close()


# memory-only (unserializable) requests go out before every stored one, whatever
# their priority (Scrapy pops its memory queue first); failed before the fix
MEMORY_FIRST = [("push", 0, 1, 2, False, "plain"), ("push", 0, 2, -2, False, "lambda"),
                ("pop",)]
# with DownloaderAwarePriorityQueue, slots take turns (failed: global priority order)
SLOTS_TAKE_TURNS = [("push", 0, 1, 1, False, "plain"), ("push", 0, 2, 1, False, "plain"),
                    ("push", 1, 3, 0, False, "plain"), ("pop",), ("pop",)]
# a busy slot waits for the idle ones
BUSY_SLOT = [("busy", 0, 1), ("push", 0, 1, 2, False, "plain"),
             ("push", 1, 2, 0, False, "plain"), ("pop",)]
# start requests follow SCHEDULER_START_DISK_QUEUE in the store (failed: the memory one)
START_DISK = [("push", 0, i, 0, True, "plain") for i in range(5)] + [("pop",)] * 5


@pytest.mark.slow
# no shrinking: each example opens three schedulers, shrinking one took minutes
@settings(max_examples=80, deadline=None, phases=(Phase.explicit, Phase.reuse, Phase.generate),
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@example(variant=0, ops=MEMORY_FIRST)
@example(variant=6, ops=SLOTS_TAKE_TURNS)
@example(variant=6, ops=BUSY_SLOT)
@example(variant=5, ops=START_DISK)
@example(variant=4, ops=[("push", 0, i, 0, False, "plain") for i in range(20)] + [("pop",)] * 3
         + [("push", 0, 50 + i, 1, False, "plain") for i in range(12)])
@given(variant=st.integers(0, len(VARIANTS) - 1), ops=OPS)
def test_the_frontier_hands_out_requests_in_scrapys_order(
        tmp_path_factory: pytest.TempPathFactory, variant: int, ops: list[tuple[Any, ...]]
) -> None:
    run(tmp_path_factory.mktemp("order"), variant, ops)


@pytest.mark.slow
@pytest.mark.parametrize("variant", range(len(VARIANTS)))
def test_long_runs_past_the_read_ahead_match(tmp_path: Path, variant: int) -> None:
    """3,000 operations at the real read-ahead sizes (256 rows a read, 1,024 held)."""
    import random

    rng = random.Random(variant)
    ops: list[tuple[Any, ...]] = []
    for i in range(3000):
        if rng.random() < (0.3 if (i // 500) % 2 else 0.7):
            ops.append(("push", rng.randrange(4), i, rng.choice((-1, 0, 0, 1, 2)),
                        rng.random() < 0.1, rng.choice(("plain",) * 8 + ("dup", "lambda"))))
        else:
            ops.append(("pop",))
    extra, same = VARIANTS[variant]
    trio = Trio(tmp_path, extra)
    try:
        for op in ops:
            if op[0] == "push":
                trio.push(*op[1:])
            else:
                trio.pop(same)
        while trio.pop(same):
            pass
    finally:
        trio.close()


def test_another_priority_queue_is_refused(tmp_path: Path,
                                           caplog: pytest.LogCaptureFixture) -> None:
    """A priority queue class whose order the frontier does not know (here a subclass
    of Scrapy's) refuses the start: one ERROR line naming the setting and what to do,
    its own finish_reason, nothing stored."""
    crawler = get_crawler(_Spider, {
        "ADDONS": {"iri_scrapy.Addon": 0}, "JOBDIR": str(tmp_path),
        "SCHEDULER_PRIORITY_QUEUE": f"{__name__}.OwnPriorityQueue"})
    crawler.spider = spider = _Spider.from_crawler(crawler)
    scheduler = IRIFrontierScheduler.from_crawler(crawler)
    with caplog.at_level(logging.ERROR):
        scheduler.open(spider)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1
    text = errors[0].getMessage()
    assert f"SCHEDULER_PRIORITY_QUEUE = {__name__}.OwnPriorityQueue" in text
    assert "IRI_FRONTIER = False" in text and "ScrapyPriorityQueue" in text
    assert scheduler.store is None and not (tmp_path / jobdir.FILENAME).exists()
    assert REASON_FRONTIER_PRIORITY_QUEUE == "iri_frontier_priority_queue"
    scheduler.close("shutdown")


def _own_priority_queue() -> type:
    from scrapy.pqueues import ScrapyPriorityQueue

    class OwnPriorityQueue(ScrapyPriorityQueue):
        def priority(self, request: Request) -> int:
            return request.priority  # lowest first

    OwnPriorityQueue.__module__ = __name__
    return OwnPriorityQueue


OwnPriorityQueue = _own_priority_queue()


def test_next_slot_is_scrapys_rule() -> None:
    """The fewest active downloads; a tie: the first name after the last one chosen
    (round robin, scrapy/scrapy#7351), else the first name; without round robin
    (older Scrapy) always the first name of the least busy."""
    stats = [(0, "b.test"), (1, "a.test"), (0, "d.test"), (0, "c.test")]
    assert lanes.next_slot(stats, None) == "b.test"
    assert lanes.next_slot(stats, "b.test") == "c.test"
    assert lanes.next_slot(stats, "d.test") == "b.test"
    assert lanes.next_slot(stats, "c.test", round_robin=False) == "b.test"
    assert lanes.next_slot([(2, "a.test"), (1, "z.test")], "z.test") == "z.test"
