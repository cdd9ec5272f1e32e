"""The heartbeat and reaper of :class:`~iri_scrapy.RedisIRIScheduler` (its Redis back-end).

Every ``IRI_REDIS_LEASE_SECONDS / 3`` a worker runs the *tick* script: it extends
the worker's liveness and its leases, puts expired leases (of any worker) back in
the queue, and hands this worker the *intents* of dead workers (a request written
before the dupefilter recorded its URL), which it enqueues.  The tick's reply also
carries the crawl's epoch marker and clock, checked by :mod:`.redis_loss`.  A
worker leaving runs the same script with its leases put back at once.
Design: docs/redis-fleet.md (*tick*, *Intents*).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from scrapy.exceptions import CloseSpider, DontCloseSpider

from iri_scrapy.frontier.codec import REASON_REFUSED_RECORDS, RefusedRecord
from iri_scrapy.frontier.redis_client import IRIRedisError, RedisRetry
from iri_scrapy.frontier.redis_loss import REASON_FRONTIER_LOST
from iri_scrapy.frontier.redis_queue import text
from iri_scrapy.plugin import compat  # noqa: F401 - checks the installed Scrapy first

if TYPE_CHECKING:
    from scrapy import Request
    from twisted.internet.task import LoopingCall

    from iri_scrapy.frontier.codec import RefusalLog
    from iri_scrapy.frontier.ledger import Ledger
    from iri_scrapy.frontier.redis_loss import LossWatch
    from iri_scrapy.frontier.redis_queue import RedisQueue

#: The scheduler's log lines (one logger for the scheduler and its parts).
logger = logging.getLogger("iri_scrapy.frontier.redis_scheduler")

#: ``finish_reason`` when other workers' leases outlasted ``IRI_REDIS_IDLE_TIMEOUT``.
REASON_IDLE_TIMEOUT = "iri_redis_idle_timeout"


_T = TypeVar("_T")


class Ticked(Protocol):
    """What :class:`Heartbeat` uses of its back-end (:class:`~.redis_backend.RedisBackend`;
    described here: :mod:`.redis_backend` imports this module, and the architecture
    test forbids import circles, even under ``TYPE_CHECKING``)."""

    worker: str
    lease_ms: int
    idle_timeout: float
    _joined: bool
    _intent_stale: bool
    _counts: dict[str, int]

    @property
    def df(self) -> Any: ...
    @property
    def stats(self) -> Any: ...
    @property
    def spider(self) -> Any: ...

    @property
    def queue(self) -> RedisQueue: ...
    @property
    def loss(self) -> LossWatch: ...
    @property
    def ledger(self) -> Ledger[str]: ...
    @property
    def refusals(self) -> RefusalLog: ...
    @property
    def connected(self) -> bool: ...
    @property
    def lost(self) -> str | None: ...
    @property
    def epoch(self) -> str: ...
    @property
    def base(self) -> str: ...
    @property
    def retry(self) -> RedisRetry: ...

    def heartbeat(self) -> None: ...
    def _run(self, name: str, keys: list[str], args: list[Any]) -> Any: ...
    def _retrying(self, call: Callable[[], _T]) -> _T: ...
    def _inc(self, name: str, count: int = 1) -> None: ...
    def _ack(self, members: list[str]) -> None: ...
    def _push(self, data: bytes, priority: int, intent: str) -> None: ...
    def _decode(self, data: Any) -> Request: ...
    def _keep_refused(self, field: str, data: bytes) -> None: ...
    def _refused(self, exc: RefusedRecord, record: str) -> None: ...


class Heartbeat:
    """The ticks of one :class:`~iri_scrapy.RedisIRIScheduler` (module doc)."""

    def __init__(self, scheduler: Ticked) -> None:
        self.scheduler = scheduler
        #: Runs :meth:`beat` while the crawl runs (started at open).
        self.ticker: LoopingCall | None = None
        self._failing = False
        #: When this worker found nothing to fetch while others held leases, or None.
        self.idle_since: float | None = None
        #: The "crawl had finished" line was logged (once per run).
        self.said_finished = False

    def start(self, interval: float) -> None:
        from twisted.internet.task import LoopingCall

        self.ticker = LoopingCall(self.scheduler.heartbeat)
        self.ticker.start(interval, now=False)

    def stop(self) -> None:
        if self.ticker is not None and self.ticker.running:
            self.ticker.stop()
        self.ticker = None

    def tick(self, alive: bool = True,
             members: list[str] | None = None) -> tuple[int, list[Any], int, int]:
        """One tick (*alive*: a heartbeat, else leaving and putting *members* back):
        (requeued, recovered intents, ready, leased)."""
        s = self.scheduler
        held = s.ledger.keys() if members is None else members
        reply = s._run(
            "tick", s.queue.key_list("ready", "leases", "bodies", "workers", "intents", "epoch",
                                     "clock"),
            [s.worker, s.lease_ms, "1" if alive else "0", *held],
        )
        requeued, recovered, ready, leased = int(reply[0]), list(reply[1]), int(reply[2]), \
            int(reply[3])
        if alive and s.epoch and not s.loss.check(
                "at a heartbeat", text(reply[4]), int(reply[5]), ready, leased,
                int(reply[6]), advanced=True):
            raise IRIRedisError(f"the frontier is lost: {s.lost}")
        if requeued:
            s._inc("requeued_expired", requeued)
            logger.info("RedisIRIScheduler: %d expired leases put back in the queue", requeued,
                        extra={"spider": s.spider})
        for i in range(0, len(recovered) - 1, 2):
            field = recovered[i].decode() if isinstance(recovered[i], bytes) else recovered[i]
            self.recover_intent(field, recovered[i + 1])
        return requeued, recovered, ready, leased

    def leave(self, reason: str) -> None:
        """Acknowledge (``finished``: the engine is idle, every request out was
        answered) or put back the leases of this worker, and deregister it."""
        s = self.scheduler
        ledger = s.ledger
        ledger.reap()
        held = ledger.keys()
        try:
            if reason == "finished":
                s._ack(held)
                held = []
            _, _, ready, leased = self.tick(alive=False, members=held)
            s._inc("released_on_close", len(held))
            logger.info(
                "RedisIRIScheduler: closing (%s): %d requests queued, %d leased to other "
                "workers, %d of ours put back", reason, ready, leased, len(held),
                extra={"spider": s.spider})
        except Exception as exc:  # noqa: BLE001 - leases expire by themselves
            logger.warning("RedisIRIScheduler: could not leave cleanly (%s): the leases "
                           "of this worker expire in %.1f s", exc, s.lease_ms / 1000)

    def deregister(self) -> None:
        """Deregister this worker when its frontier was found lost (no lease put back
        or checked), so that ``IRI_REDIS_FLUSH_ON_START`` is not held up by it."""
        s = self.scheduler
        try:
            s.queue.call("tick", s.queue.key_list("ready", "leases", "bodies", "workers",
                                                  "intents", "epoch", "clock"),
                         [s.worker, s.lease_ms, "0"])
        except Exception:  # noqa: BLE001 - it expires by itself
            logger.debug("RedisIRIScheduler: could not deregister", exc_info=True)

    def recover_intent(self, field: str, data: bytes) -> None:
        """A dead worker's intent: enqueue it (after the dupefilter, whose answer is ambiguous)."""
        s = self.scheduler
        try:
            request = s._decode(data)
        except RefusedRecord as exc:  # never executed: kept aside, counted, loud
            s._keep_refused(f"intent:{field}", data)
            s._retrying(lambda: s.queue.client.execute_command(
                "HDEL", s.queue.keys["intents"], field))
            s._refused(exc, f"intent {field!r}")
            return
        if not request.dont_filter:
            s.df.request_seen(request)  # record it; "seen" may be its own earlier write
        s._push(data, request.priority, field)
        s._inc("intents_recovered")
        logger.info("RedisIRIScheduler: enqueued %s, left pending by a worker that died",
                    request, extra={"spider": s.spider})

    def beat(self) -> None:
        """One heartbeat: a tick while connected.

        Extends this worker's liveness and its leases, puts expired leases (of any
        worker) back in the queue and enqueues the intents of dead workers (module
        doc).  A failure is logged once and retried at the next heartbeat.
        """
        s = self.scheduler
        if not s.connected:
            return
        s.ledger.sweep()
        try:
            self.tick()
        except Exception as exc:  # noqa: BLE001 - retried at the next tick
            if s.lost is not None or s.retry.gave_up:  # said once, closing
                return
            if not self._failing:
                logger.warning("RedisIRIScheduler: heartbeat failed (%s)", exc)
            self._failing = True
            return
        self._failing = False

    def idle(self, held: list[str]) -> None:
        """Nothing in the downloader or the scraper: ours are answered (*held*, drained
        from the ledger, acknowledged already); wait for others (``DontCloseSpider``),
        up to ``IRI_REDIS_IDLE_TIMEOUT``."""
        s = self.scheduler
        if not held and s._intent_stale:
            s._ack([])
        counts: tuple[int, int] | None = None
        if s.connected:
            try:
                _requeued, _recovered, ready, leased = self.tick()
                counts = (ready, leased)
            except IRIRedisError:
                counts = None
        if s.lost is not None:  # never "finished" with the frontier lost
            raise CloseSpider(REASON_FRONTIER_LOST)
        if s.retry.gave_up:
            raise CloseSpider(s.retry.reason)
        if counts is None:
            return
        ready, leased = counts
        if not ready and not leased:
            if s.refusals.count:  # loud: never "finished" with records refused
                s.refusals.closing(s.spider)
                raise CloseSpider(REASON_REFUSED_RECORDS)
            self._say_if_finished_before()
            return  # the crawl is over: "finished"
        now = time.monotonic()
        if self.idle_since is None:
            self.idle_since = now
            logger.info(
                "RedisIRIScheduler: nothing to fetch here; waiting for the %d requests leased "
                "to other workers (and %d queued) to be answered or to expire",
                leased, ready, extra={"spider": s.spider})
        if s.idle_timeout and now - self.idle_since > s.idle_timeout:
            logger.warning(
                "RedisIRIScheduler: %d requests still leased to other workers after %.0f s "
                "(IRI_REDIS_IDLE_TIMEOUT): closing this worker (%s); they carry on",
                leased, s.idle_timeout, REASON_IDLE_TIMEOUT, extra={"spider": s.spider})
            raise CloseSpider(REASON_IDLE_TIMEOUT)
        raise DontCloseSpider

    def _say_if_finished_before(self) -> None:
        """A run that queued and leased nothing because every request it made was seen
        before: the fleet's crawl had finished.  One line says so, and how to start over
        (it ended ``finished`` after 0 requests, in silence)."""
        s = self.scheduler
        if self.said_finished or s._joined or s._counts.get("enqueued") or s._counts.get(
                "leased"):
            return
        stats = s.stats
        filtered = stats.get_value("dupefilter/filtered", 0) if stats is not None else 0
        if not filtered:
            return
        self.said_finished = True
        logger.warning(
            "RedisIRIScheduler: the crawl in %s:* had finished: the %d requests of this run "
            "were all seen before, so nothing was fetched. To crawl again from the start, "
            "set IRI_REDIS_FLUSH_ON_START = True (or another IRI_REDIS_SCHEDULER_KEY)",
            s.base, filtered, extra={"spider": s.spider})
