"""The order the ``JOBDIR`` frontier hands requests out in: Scrapy's scheduler's, exactly.

Scrapy's :class:`~scrapy.core.scheduler.Scheduler` pops its memory queue (with
``JOBDIR``: only the requests that could not be serialized) before its disk
queue; each is a ``SCHEDULER_PRIORITY_QUEUE``.  ``ScrapyPriorityQueue``: the
highest priority first; within a priority, regular requests before start
requests; within those, the downstream queue's order, LIFO or FIFO
(:func:`~iri_scrapy.store.frontier_file.order_key`).  ``DownloaderAwarePriorityQueue``
(Scrapy's default since 2.13) keeps one such queue per download slot and pops
from the slot with the fewest active downloads, a tie going to the first slot
name after the slot chosen last, else to the first name (:func:`next_slot`).
Here a slot's queue is a *lane*; with ``ScrapyPriorityQueue`` there is one lane,
``""``.  A stored lane keeps the head of its rows in memory (:class:`Lane`:
every row whose key is at most ``edge`` is in ``buf`` or handed out), so a
request scheduled later whose place is before the edge is buffered at once:
nothing waits behind a read-ahead.  Any other priority queue class is refused
(:func:`lanes_mode`).  See docs/jobdir.md, "Ordering".
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Iterable
from typing import Any

#: Most rows read from the store into one lane at a time.
BATCH = 256
#: Most stored requests kept in memory at once (all lanes): past it, lanes drop the
#: last half of their buffer (those rows stay on disk and are read again in turn).
BUFFER_MAX = 1024
#: ``Lane.edge`` values: no row of the lane read yet; every row of the lane read.
NOTHING_READ: tuple[float, ...] = (-float("inf"),)
EVERYTHING_READ: tuple[float, ...] = (float("inf"),)

#: :func:`lanes_mode` values (stored in the store's meta ``lanes``).
ONE = "one"
PER_SLOT = "slot"
_HONOURED = {
    "scrapy.pqueues.ScrapyPriorityQueue": ONE,
    "scrapy.pqueues.DownloaderAwarePriorityQueue": PER_SLOT,
}

Key = tuple[int, int, int]
Entry = tuple[Key, int, Any]  # (key, row id, request)


def lanes_mode(pqclass: Any) -> str | None:
    """:data:`ONE` for ``ScrapyPriorityQueue``, :data:`PER_SLOT` for
    ``DownloaderAwarePriorityQueue``, None for any other class (its order is not
    known: the frontier refuses to start rather than hand requests out in
    another order than Scrapy would)."""
    path = f"{getattr(pqclass, '__module__', '')}.{getattr(pqclass, '__qualname__', '')}"
    return _HONOURED.get(path)


def next_slot(stats: Iterable[tuple[int, str]], last: str | None, *,
              round_robin: bool = True) -> str:
    """The slot ``DownloaderAwarePriorityQueue`` pops from, given ``(active
    downloads, slot)`` of every slot with requests waiting and the slot chosen
    *last*: the fewest active downloads; among those, the first name after
    *last* (*round_robin*, scrapy/scrapy#7351), else the first name."""
    pairs = list(stats)
    least = min(active for active, _ in pairs)
    names = [slot for active, slot in pairs if active == least]
    after = [slot for slot in names if round_robin and last is not None and slot > last]
    return min(after or names)


class Lane:
    """One slot's stored requests: how many wait, and the head of them in memory."""

    __slots__ = ("buf", "count", "edge")

    def __init__(self, count: int = 0) -> None:
        #: Requests of this lane waiting (in ``buf`` or only on disk).
        self.count = count
        #: The lane's head in crawl order, sorted: every row whose key is <= ``edge``
        #: is here or handed out.
        self.buf: list[Entry] = []
        self.edge: tuple[float, ...] = NOTHING_READ if count else EVERYTHING_READ


class Lanes:
    """The lanes of one queue (the stored one, or the memory-only one) and the
    round robin between them (:func:`next_slot`).  A memory-only lane's ``buf``
    holds all its requests (``edge`` is then :data:`EVERYTHING_READ`)."""

    def __init__(self, *, stored: bool) -> None:
        #: True for the stored queue (lanes may shed), False for the memory-only one.
        self.stored = stored
        self.lanes: dict[str, Lane] = {}
        self.last: str | None = None
        #: Requests held in the lanes' buffers.
        self.held = 0

    def __bool__(self) -> bool:
        return bool(self.lanes)

    def lane(self, name: str) -> Lane:
        lane = self.lanes.get(name)
        if lane is None:
            lane = self.lanes[name] = Lane()
        return lane

    def pick(self, active: Any, *, round_robin: bool = True) -> tuple[str, Lane]:
        """The lane to pop from next; *active(slot)*: that slot's active downloads."""
        lanes = self.lanes
        name = next(iter(lanes)) if len(lanes) == 1 else next_slot(
            ((active(slot), slot) for slot in lanes), self.last, round_robin=round_robin)
        self.last = name
        return name, lanes[name]

    def add(self, name: str, key: Key, rowid: int, request: Any) -> None:
        """A request waits in lane *name*; held in memory if its place is before the
        lane's edge (a new lane has no row on disk: its edge is past everything)."""
        lane = self.lane(name)
        lane.count += 1
        if key <= lane.edge:
            insort(lane.buf, (key, rowid, request))
            self.held += 1
            if self.stored and self.held > BUFFER_MAX:
                self.shed()

    def take(self, name: str, lane: Lane) -> Any:
        """Remove and return the head of *lane* (its buffer must not be empty)."""
        self.held -= 1
        lane.count -= 1
        request = lane.buf.pop(0)[2]
        if not lane.count:
            del self.lanes[name]
        return request

    def drop(self, name: str, lane: Lane) -> int:
        """Forget *lane* (none of its requests can be found): how many it counted."""
        del self.lanes[name]
        self.held -= len(lane.buf)
        return lane.count

    def shed(self) -> None:
        """Past :data:`BUFFER_MAX` held: lanes drop the last half of their buffers
        (a buffer of one is dropped) until half of that is held; the dropped rows
        stay on disk and each such lane's edge moves back to its last row kept."""
        for lane in self.lanes.values():
            buf = lane.buf
            if not buf:
                continue
            keep = len(buf) // 2
            self.held -= len(buf) - keep
            del buf[keep:]
            lane.edge = buf[-1][0] if buf else NOTHING_READ
            if self.held <= BUFFER_MAX // 2:
                break
