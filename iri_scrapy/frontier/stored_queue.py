"""The ``JOBDIR`` frontier's waiting requests: stored rows read in batches, and memory-only ones.

:class:`StoredQueue` holds the lanes (:mod:`.lanes`) of the stored requests and of
the memory-only (unserializable) ones, and the count of requests waiting.  It reads
pending rows from the store (:mod:`.sqlite_store`) as data through the codec
(:mod:`.codec`), in crawl order, at most ``BATCH`` per lane at a time, and hands
requests out in Scrapy's order: memory-only ones first, as Scrapy pops its memory
queue first.  A row that cannot be read back is refused through a callback, and
damaged pages are reported through another: the scheduler decides what they mean
for the crawl.  Design: docs/jobdir.md, "Ordering".
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from iri_scrapy.frontier.codec import RefusedRecord, RequestCodec
from iri_scrapy.frontier.lanes import (
    BATCH,
    BUFFER_MAX,
    EVERYTHING_READ,
    NOTHING_READ,
    PER_SLOT,
    Lane,
    Lanes,
)
from iri_scrapy.frontier.ledger import Ledger
from iri_scrapy.frontier.sqlite_store import FrontierStore
from iri_scrapy.plugin import compat  # noqa: F401 - checks the installed Scrapy first
from iri_scrapy.store.frontier_file import order_key

if TYPE_CHECKING:
    from logging import Logger

    from scrapy import Request

#: Request meta key: the store row of a request the scheduler handed out.
META_FRONTIER_ID = "iri_frontier_id"


class StoredQueue:
    """The requests waiting in the frontier, by lane, and their count (``len()``)."""

    def __init__(
        self,
        *,
        store: Callable[[], FrontierStore | None],
        codec: Callable[[], RequestCodec | None],
        ledger: Ledger[int],
        lane: Callable[[Request], str],
        active: Callable[[str], int],
        lanes_mode: str | None,
        start_stored: bool,
        start_memory: bool,
        memory_lifo: bool,
        start_memory_lifo: bool,
        readable: Callable[[], bool],
        refused: Callable[[RefusedRecord, int], None],
        damaged: Callable[[sqlite3.DatabaseError], None],
        log: Logger,
    ) -> None:
        self._store = store
        self._codec = codec
        self._ledger = ledger
        self._lane = lane
        self._active = active
        self.lanes_mode = lanes_mode
        self._start_stored = start_stored
        self._start_memory = start_memory
        self._memory_lifo = memory_lifo
        self._start_memory_lifo = start_memory_lifo
        self._readable = readable
        self._refused = refused
        self._damaged = damaged
        self._log = log
        #: Requests waiting (stored or memory-only, not handed out).
        self.queued = 0
        #: The stored requests waiting, by lane (see :mod:`.lanes`).
        self.stored = Lanes(stored=True)
        #: The memory-only (unserializable) requests waiting, by lane: handed out
        #: before any stored one, as Scrapy pops its memory queue first.
        self.memory = Lanes(stored=False)

    def __len__(self) -> int:
        return self.queued

    def load(self, *, adopt: Callable[[], None]) -> int:
        """Place the pending rows in lanes, count them, run *adopt* (a stock queue),
        read the first batch; the requests recovered (before refusals).  Damaged pages
        raise :class:`sqlite3.DatabaseError`."""
        store = self._store()
        assert store is not None
        self.relane()
        for name, count in store.lane_counts().items():
            self.stored.lanes[name] = Lane(count)
        recovered = self.queued = sum(lane.count for lane in self.stored.lanes.values())
        adopt()
        for name, lane in list(self.stored.lanes.items())[:1]:
            self.refill(name, lane, at_open=True)
        return recovered

    def add_memory(self, lane: str, rowid: int, request: Request) -> None:
        self.memory.add(lane, self.memory_key(rowid, request), rowid, request)
        self.queued += 1

    def add_stored(self, lane: str, key: tuple[int, int, int], rowid: int,
                   request: Request) -> None:
        self.stored.add(lane, key, rowid, request)
        self.queued += 1

    def is_start(self, request: Request, *, stored: bool) -> bool:
        """Whether *request* goes in the start queue (stored, or memory-only)."""
        wanted = self._start_stored if stored else self._start_memory
        return wanted and bool(request.meta.get("is_start_request"))

    def memory_key(self, rowid: int, request: Request) -> tuple[int, int, int]:
        """The place of a memory-only request (its id is negative) in the memory queue."""
        return order_key(-rowid, request.priority, self.is_start(request, stored=False),
                         lifo=self._memory_lifo, start_lifo=self._start_memory_lifo)

    def relane(self) -> None:
        """Place the stored rows in the lanes of this crawl's priority queue, when the
        store's were written under another one (or not known: a salvaged
        store).  Records are read as data; one that cannot be read stays in lane ``""``
        and is refused when its turn comes."""
        store, codec = self._store(), self._codec()
        assert store is not None and codec is not None
        if store.stored_lanes == self.lanes_mode:
            return
        pairs: list[tuple[str, int]] = []
        for rowid, data in store.pending_rows():
            lane = ""
            if self.lanes_mode == PER_SLOT:
                with contextlib.suppress(RefusedRecord):
                    lane = self._lane(codec.decode(data))
            pairs.append((lane, rowid))
        store.relane(pairs)

    def pop(self) -> Request | None:
        """The next request in Scrapy's order: memory-only ones first, then stored."""
        memory = self.memory
        if memory:
            name, lane = memory.pick(self._active, round_robin=compat.SLOT_ROUND_ROBIN)
            request = memory.take(name, lane)
        else:
            request = self.pop_stored()
            if request is None:
                return None
        self.queued -= 1
        return request

    def pop_stored(self) -> Request | None:
        stored = self.stored
        while stored:
            name, lane = stored.pick(self._active, round_robin=compat.SLOT_ROUND_ROBIN)
            if not lane.buf:
                self.refill(name, lane)
            if lane.buf:
                return cast("Request", stored.take(name, lane))
            if not self._readable():
                return None  # cannot be read now
            lost = stored.drop(name, lane)
            if lost:
                # counted but not in the store: the count must say so, or the spider
                # would never go idle
                self._log.warning("IRIFrontierScheduler: %d requests counted as pending but "
                                  "none left in the store; count reset", lost)
                self.queued -= lost
        return None

    def unpop(self, request: Request) -> None:
        """Put back a request :meth:`pop` returned (it was not handed out)."""
        store = self._store()
        assert store is not None
        rowid = request.meta[META_FRONTIER_ID]
        lane = self._lane(request)
        if rowid < 0:
            self.add_memory(lane, rowid, request)
        else:
            start = self.is_start(request, stored=True)
            self.add_stored(lane, store.key(rowid, request.priority, start), rowid, request)

    def refill(self, name: str, lane: Lane, *, at_open: bool = False) -> None:
        """Read the next stored requests of *lane* in crawl order (at most ``BATCH``,
        fewer when many lanes wait) into memory.  Never while the store is failing:
        the rows written since the last commit are not on disk then."""
        store = self._store()
        codec = self._codec()
        if store is None or codec is None or store.failed is not None:
            return
        ledger = self._ledger
        stored = self.stored
        limit = max(1, min(BATCH, BUFFER_MAX // len(stored.lanes)))
        if stored.held + limit > BUFFER_MAX:
            stored.shed()
        while not lane.buf and lane.edge != EVERYTHING_READ:
            edge = lane.edge
            try:
                rows = store.pending_after(
                    name, None if edge == NOTHING_READ else cast(tuple[int, int, int], edge),
                    limit)
            except sqlite3.DatabaseError as exc:
                if at_open:
                    raise
                self._damaged(exc)
                return
            for rowid, data, np_, kind, ord_ in rows:
                if rowid in ledger:
                    continue  # handed out, not answered yet
                try:
                    request = codec.decode(data)
                except RefusedRecord as exc:  # never executed: kept aside, counted, loud
                    self.queued -= 1
                    lane.count -= 1
                    self._refused(exc, rowid)
                    continue
                request.meta[META_FRONTIER_ID] = rowid
                lane.buf.append(((np_, kind, ord_), rowid, request))
                stored.held += 1
            if len(rows) < limit:
                lane.edge = EVERYTHING_READ
            else:
                last = rows[-1]
                lane.edge = (last[2], last[3], last[4])

    def exhaust(self) -> None:
        """Read no more rows (the store is damaged)."""
        for lane in self.stored.lanes.values():
            lane.edge = EVERYTHING_READ
