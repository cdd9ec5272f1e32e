"""The Redis queue back-end of :class:`~.scheduler.FrontierScheduler`: a fleet's frontier.

Every worker takes requests from one queue in Redis; a request handed out is
*leased* to one worker (``IRI_REDIS_LEASE_SECONDS``) and removed only when it is
answered.  A dead worker's leases go back to the queue (:mod:`.redis_heartbeat`),
a request being deduplicated is first written as the worker's *intent*, each
change is one Lua script (:mod:`.redis_queue`), and a Redis that lost or evicted
the crawl's keys, or went back to older data, stops the crawl
(``iri_frontier_lost``, :mod:`.redis_loss`) instead of losing pages silently.
A request that cannot be stored as data, or scheduled once Redis could not take
it, waits in this worker's memory.  Opening, or refusing to start:
:mod:`.redis_start`.  Design: docs/redis-fleet.md; configuration: docs/redis.md.
"""

from __future__ import annotations

import logging
import uuid
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from iri_scrapy.frontier.codec import RefusalLog, RefusedRecord
from iri_scrapy.frontier.redis_client import (
    DEFAULT_RETRY_SECONDS,
    DEFAULT_SOCKET_TIMEOUT,
    IRIRedisError,
    RedisRetry,
    mask_url,
)
from iri_scrapy.frontier.redis_dupefilter import RedisIRIDupeFilter
from iri_scrapy.frontier.redis_heartbeat import Heartbeat
from iri_scrapy.frontier.redis_loss import REASON_FRONTIER_LOST, LossWatch
from iri_scrapy.frontier.redis_queue import RedisQueue
from iri_scrapy.frontier.redis_start import open_protocol, open_redis
from iri_scrapy.plugin import compat  # noqa: F401 - checks the installed Scrapy first

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler

    from iri_scrapy.frontier.codec import RequestCodec
    from iri_scrapy.frontier.ledger import Ledger
    from iri_scrapy.frontier.scheduler import FrontierScheduler

#: The scheduler's log lines (one logger for the scheduler and its parts).
logger = logging.getLogger("iri_scrapy.frontier.redis_scheduler")

#: ``%(project)s`` is ``BOT_NAME``: two projects with one spider name never share a queue.
DEFAULT_KEY = "iri:{%(project)s:%(spider)s}:sched"
DEFAULT_LEASE_SECONDS = 30.0
DEFAULT_IDLE_TIMEOUT = 300.0
#: Request meta key: the queue member of a request this worker holds a lease on.
META_LEASE = "iri_redis_lease"

_PREFIX = "iri/redis_scheduler/"

_T = TypeVar("_T")


class RedisBackend:
    """The crawl's queue in Redis, with leases, as a :class:`~.scheduler.QueueBackend`."""

    name = "RedisIRIScheduler"
    meta_key = META_LEASE
    kind = "redis"
    prefix = _PREFIX
    store_label = "Redis"
    kept_label = "kept in this worker's memory, lost if it dies"
    intents = True
    cap_downloading = False
    stock_after_refusal = False
    log = logger

    def __init__(
        self,
        host: FrontierScheduler,
        *,
        redis_url: str = "redis://localhost:6379/0",
        key: str = DEFAULT_KEY,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        retry_seconds: float = DEFAULT_RETRY_SECONDS,
        socket_timeout: float = DEFAULT_SOCKET_TIMEOUT,
        redis_params: dict[str, Any] | None = None,
        flush_on_start: bool = False,
        cluster: bool = False,
        project: str = "scrapybot",
    ) -> None:
        self.host = host
        #: ``BOT_NAME``: ``%(project)s`` in the key template.
        self.project = project
        #: Talk to a Redis Cluster (``redis.cluster.RedisCluster``): every key of one
        #: crawl's queue has the same hash tag, so each script runs on one master.
        self.cluster = cluster
        self.redis_url = redis_url
        self.key_template = key
        self.lease_ms = max(1, int(lease_seconds * 1000))
        self.idle_timeout = idle_timeout
        self.retry_seconds = max(0.0, retry_seconds)
        self.socket_timeout = socket_timeout
        self.redis_params = dict(redis_params or {})
        self.flush_on_start = flush_on_start
        self.opened = False
        #: This process's name in Redis (unique per run).
        self.worker = uuid.uuid4().hex[:16]
        #: The crawl's keys, the client and the scripts (:mod:`.redis_queue`).
        self.queue = RedisQueue(key, project)
        #: requests that cannot be serialized: kept here, lost with the process.
        self._memory: deque[Request] = deque()
        self._intent_stale = False
        self._joined = False
        #: The heartbeat and reaper (:mod:`.redis_heartbeat`).
        self.heart = Heartbeat(self)
        self._counts: dict[str, int] = {}
        #: The records refused (see docs/frontier.md, "A refused record").
        self.refusals = RefusalLog(self.name, "Redis")
        #: Retried Redis calls; giving up closes the crawl (:class:`.RedisRetry`).
        self.retry = RedisRetry(self.name, redis_url, retry_seconds, log=logger,
                                usable=lambda: self.connected, count=self.inc,
                                stop=host.stop, after_outage=self._after_outage,
                                extra=lambda: {"spider": host.spider})
        #: The epoch marker, the crawl's clock, why the frontier is lost (:mod:`.redis_loss`).
        self.loss = LossWatch(self.queue, self.worker, redis_url, run=self._run,
                              on_lost=lambda: host.stop(REASON_FRONTIER_LOST),
                              count=self.inc, extra=lambda: {"spider": host.spider})

    # --- the scheduler's parts ---------------------------------------------------

    @property
    def df(self) -> Any:
        return self.host.df

    @property
    def stats(self) -> Any:
        return self.host.stats

    @property
    def spider(self) -> Spider | None:
        return self.host.spider

    @property
    def crawler(self) -> Crawler | None:
        return self.host.crawler

    @property
    def codec(self) -> RequestCodec | None:
        return self.host.codec

    @property
    def ledger(self) -> Ledger[str]:
        return self.host.ledger

    def enqueue_request(self, request: Request) -> bool:
        return self.host.enqueue_request(request)

    # --- Redis plumbing ------------------------------------------------------------

    def _run(self, name: str, keys: list[str], args: list[Any]) -> Any:
        """One script call, retried on connection errors (bounded by ``retry_seconds``)."""
        return self._retrying(lambda: self.queue.call(name, keys, args))

    def _retrying(self, call: Callable[[], _T]) -> _T:
        """*call()*, retried through an outage (:class:`.RedisRetry`): at the deadline
        the spider is closed and :class:`IRIRedisError` raised."""
        return self.retry.call(call)

    def _after_outage(self) -> None:
        """Redis answered again: it may have come back empty (:meth:`verify`)."""
        if not self.loss.checking:
            self.verify("after Redis answered again")

    @property
    def _gave_up(self) -> bool:
        return self.retry.gave_up

    @property
    def _give_up_reason(self) -> str:
        return self.retry.reason

    # --- loss: the epoch marker and the counts that must agree --------------------

    def verify(self, when: str) -> bool:
        """Check that Redis still holds this crawl's frontier; False (and the crawl
        closing with ``iri_frontier_lost``) if not.  Run after every outage and at
        each heartbeat (module doc)."""
        if not self.connected or not self.epoch:
            return self.lost is None
        return self.loss.verify(when)

    def _frontier_lost(self, what: str) -> None:
        self.loss.frontier_lost(what)

    @property
    def epoch(self) -> str:
        """This crawl's epoch marker (``<base>:epoch``): a token and its creation time."""
        return self.loss.epoch

    @property
    def lost(self) -> str | None:
        """Why the crawl's frontier is known to be lost (module doc), or None."""
        return self.loss.lost

    @property
    def base(self) -> str:
        """Every key's prefix (``<base>:*``; :mod:`.redis_queue`)."""
        return self.queue.base

    @property
    def connected(self) -> bool:
        """True while this worker holds a usable Redis connection: opened, not
        closed or abandoned, not given up after ``IRI_REDIS_RETRY_SECONDS``, and the
        crawl's frontier not found lost."""
        return self.queue.client is not None and not self._gave_up and self.lost is None

    @property
    def usable(self) -> bool:
        return self.connected

    @property
    def counts(self) -> dict[str, int]:
        """The ``iri/redis_scheduler/*`` counters so far (without the prefix)."""
        return dict(self._counts)

    @property
    def redis_keys(self) -> dict[str, str]:
        """The Redis keys of this crawl's queue by name (``meta``, ``ready``,
        ``bodies``, ``leases``, ``workers``, ``intents``, ``refused``, ``epoch``,
        ``clock``; ``rules`` and ``skipped`` at level protocol: docs/redis-fleet.md,
        *Keys*); empty before :meth:`open`."""
        return dict(self.queue.keys)

    # --- life cycle ------------------------------------------------------------------

    def open(self, spider: Spider) -> Any:
        if not open_redis(self, spider.name):
            return None
        self.opened = True
        result = self.df.open()
        requeued, _, ready, leased = self.heart.tick()
        self._joined = bool(ready or leased)
        if self._joined:
            self._counts["joined"] = 1
            logger.info(
                "RedisIRIScheduler: joining the crawl under way in %s:* (%d requests queued, "
                "%d leased to other workers; %d expired leases put back)",
                self.base, ready, leased, requeued, extra={"spider": spider},
            )
        else:
            logger.info("RedisIRIScheduler: Redis %s, keys %s:* (lease %.1f s)",
                        mask_url(self.redis_url), self.base, self.lease_ms / 1000,
                        extra={"spider": spider})
        return result

    def open_protocol(self, learned: Any) -> tuple[Any, list[Request]] | None:
        return open_protocol(self, learned)

    def start(self) -> None:
        self.heart.start(self.lease_ms / 3000.0)

    def stop(self) -> None:
        self.heart.stop()

    def close(self, reason: str, protocol: Any) -> None:
        if protocol is not None:  # its last write, while Redis is still ours
            protocol.close()
            if protocol.requeued:
                self._counts["protocol_requeued"] = protocol.requeued
        if self.connected:
            self._leave(reason)
        elif self.lost is not None and self.queue.client is not None:
            try:  # deregister, so that IRI_REDIS_FLUSH_ON_START is not held up by us
                self.queue.call(
                    "tick", self.queue.key_list("ready", "leases", "bodies", "workers",
                                                "intents", "epoch", "clock"),
                    [self.worker, self.lease_ms, "0"])
            except Exception:  # noqa: BLE001 - it expires by itself
                logger.debug("RedisIRIScheduler: could not deregister", exc_info=True)
        if self._memory:
            logger.warning("RedisIRIScheduler: %d requests held in this worker's memory "
                           "(unserializable, or scheduled once Redis could not take them) "
                           "were never fetched", len(self._memory))
        stats = self.stats
        if stats is not None:
            for name, value in self._counts.items():
                stats.set_value(_PREFIX + name, value)
        self._close_client()

    def _leave(self, reason: str) -> None:
        """Acknowledge (``finished``: the engine is idle, every request out was
        answered) or put back the leases of this worker, and deregister it."""
        ledger = self.ledger
        ledger.reap()
        held = ledger.keys()
        try:
            if reason == "finished":
                self._ack(held)
                held = []
            requeued, _, ready, leased = self.heart.tick(alive=False, members=held)
            self.inc("released_on_close", len(held))
            logger.info(
                "RedisIRIScheduler: closing (%s): %d requests queued, %d leased to other "
                "workers, %d of ours put back", reason, ready, leased, len(held),
                extra={"spider": self.spider})
        except Exception as exc:  # noqa: BLE001 - leases expire by themselves
            logger.warning("RedisIRIScheduler: could not leave cleanly (%s): the leases "
                           "of this worker expire in %.1f s", exc, self.lease_ms / 1000)

    def abandon(self) -> None:
        """Stop at once, as a killed worker does (module doc of :mod:`.redis_scheduler`)."""
        self.heart.stop()
        protocol = self.host.protocol
        if protocol is not None:
            protocol.stop()
        self._close_client()

    def _close_client(self) -> None:
        self.queue.close()

    # --- the queue -----------------------------------------------------------------

    def _ready(self) -> int | None:
        """Requests queued in Redis (for every worker), or None when Redis cannot say."""
        if not self.connected:
            return None
        try:
            return int(self._retrying(lambda: self.queue.client.execute_command(
                "ZCARD", self.queue.keys["ready"])))
        except IRIRedisError:
            return None

    def has_pending(self) -> bool:
        return bool(self._memory) or bool(self._ready())

    def __len__(self) -> int:
        """Requests queued in Redis (for every worker) plus unserializable ones here."""
        return (self._ready() or 0) + len(self._memory)

    def admits(self, request: Request) -> bool:
        if self._joined and request.dont_filter and request.meta.get("is_start_request"):
            self.inc("start_skipped")
            return False
        return True

    def intent(self, request: Request, data: bytes | None) -> str:
        """Written before the dupefilter records the URL (docs/redis-fleet.md, "Intents")."""
        df = self.df
        if data is None or (isinstance(df, RedisIRIDupeFilter)
                            and df.known_seen(df.fingerprint(request))):
            return ""
        self._retrying(lambda: self.queue.client.execute_command(
            "HSET", self.queue.keys["intents"], self.worker, data))
        self._intent_stale = True
        return self.worker

    def push(self, request: Request, data: bytes, intent: str) -> None:
        self._write(data, request.priority, intent)
        if intent:
            self._intent_stale = False

    def _push(self, data: bytes, priority: int, intent: str) -> None:
        """A dead worker's intent enqueued (:mod:`.redis_heartbeat`), counted."""
        self._write(data, priority, intent)
        if self.stats is not None:
            self.stats.inc_value("scheduler/enqueued/redis")
            self.stats.inc_value("scheduler/enqueued")

    def _write(self, data: bytes, priority: int, intent: str) -> None:
        member, rid, score = self.queue.new_entry(self.worker, priority)
        # the same member and id if retried after a lost reply: idempotent
        clock = self._retrying(lambda: self.queue.push(member, rid, score, data, intent))
        if not self.loss.clock_ok(clock, "when enqueuing"):
            raise IRIRedisError(f"the frontier is lost: {self.lost}")
        self.inc("enqueued")

    def claim_held(self, field: str, request: Request) -> bool:
        """Give back *request*, held by a learned rule as *field* of ``<base>:skipped``:
        its record deleted and the request queued in one script (:mod:`.redis_queue`,
        *claim*); False if another worker claimed it first.  Queued as it is: the
        caller had the dupefilter decide first (:mod:`iri_scrapy.protocol.redis_store`)."""
        codec = self.codec
        assert codec is not None
        data = codec.encode(request, drop_meta=(self.meta_key,))
        member, rid, score = self.queue.new_entry(self.worker, request.priority)
        claimed, clock = self._retrying(
            lambda: self.queue.claim(field, member, rid, score, data))
        if not claimed:
            return False
        if not self.loss.clock_ok(clock, "when giving back a held request"):
            raise IRIRedisError(f"the frontier is lost: {self.lost}")
        self.inc("enqueued")
        if self.stats is not None:
            self.stats.inc_value("scheduler/enqueued/redis")
            self.stats.inc_value("scheduler/enqueued")
        return True

    def keep(self, request: Request) -> None:
        self._memory.append(request)

    def held(self) -> Request | None:
        return self._memory.popleft() if self._memory else None

    def pop(self) -> tuple[Request, Any, str] | None:
        for _ in range(100):
            try:
                member, data, missing = self._retrying(
                    lambda: self.queue.lease(self.worker, self.lease_ms))
            except IRIRedisError:
                return None
            if missing:  # queue entries whose request is gone: never silent
                self._frontier_lost(
                    f"{missing} queue entries had no stored request (evicted or "
                    "deleted), found when leasing")
                return None
            if not member:
                return None
            try:
                request = self._decode(data)
            except RefusedRecord as exc:  # never executed: kept aside, counted, loud
                queued = member.split(" ", 2)[-1]
                try:
                    self._keep_refused(f"queue:{queued}", data)
                except IRIRedisError:
                    return None
                self._ack([member])
                self._refused(exc, f"queue entry {queued!r}")
                continue
            self.heart.idle_since = None
            self.inc("leased")
            return request, member, "redis"
        return None

    # --- answers -------------------------------------------------------------------

    def settle(self, members: list[str]) -> None:
        self._ack(members)

    def _ack(self, members: list[str]) -> None:
        if not self.connected:
            return
        if not members and not self._intent_stale:
            return
        intent = self.worker if self._intent_stale else ""
        try:
            self._retrying(lambda: self.queue.ack(intent, members))
        except IRIRedisError:
            return  # the lease expires: fetched again, not lost
        self._intent_stale = False
        self.inc("acked", len(members))

    def idle(self, held: list[Any]) -> None:
        """Nothing in the downloader or the scraper: see :meth:`.Heartbeat.idle`."""
        self.heart.idle(held)

    def touch(self) -> None:
        """Each change is its own script: nothing to commit."""

    def heartbeat(self) -> None:
        """One heartbeat now: see :meth:`.Heartbeat.beat`."""
        self.heart.beat()

    # --- helpers ---------------------------------------------------------------------

    def _decode(self, data: Any) -> Request:
        codec = self.codec
        assert codec is not None
        return codec.decode(data)

    def _keep_refused(self, field: str, data: bytes) -> None:
        self._retrying(lambda: self.queue.client.execute_command(
            "HSET", self.queue.keys["refused"], field, data))

    def _refused(self, exc: RefusedRecord, record: str) -> None:
        self.refusals.refused(exc, f"{record} (kept in {self.queue.keys['refused']})",
                              self.spider, crawler=self.crawler, count=self.inc)

    def inc(self, name: str, count: int = 1) -> None:
        self._counts[name] = self._counts.get(name, 0) + count

    _inc = inc  # the name :mod:`.redis_heartbeat` and :mod:`.redis_loss` call
