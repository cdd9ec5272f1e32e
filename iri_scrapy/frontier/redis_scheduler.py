"""``RedisIRIScheduler``: a crash-tolerant shared frontier for a fleet of crawlers.

``SCHEDULER = "iri_scrapy.RedisIRIScheduler"`` (the add-on selects it, with
:class:`~iri_scrapy.RedisIRIDupeFilter`, when ``IRI_REDIS_URL`` is set).  Every
worker takes requests from one queue in Redis; a request handed out is *leased*
to one worker (``IRI_REDIS_LEASE_SECONDS``) and removed only when it is answered,
as for :class:`~iri_scrapy.frontier.jobdir.IRIFrontierScheduler`.  A dead
worker's leases go back to the queue, a request being deduplicated is first
written as the worker's *intent*, each change is one Lua script, and a Redis
that lost or evicted the crawl's keys, or went back to older data (the crawl's
clock behind what a worker saw), stops the crawl (``iri_frontier_lost``)
instead of losing pages silently.  At ``IRI_LEVEL = "protocol"`` the rules the
fleet learned and the requests they skipped are kept beside the queue
(:mod:`iri_scrapy.protocol.redis_store`).

Design: docs/redis-fleet.md (keys, scripts, intents); Redis configuration and
loss detection: docs/redis.md; stored records: docs/frontier.md.
"""

from __future__ import annotations

import logging
import uuid
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from scrapy import signals
from scrapy.core.scheduler import BaseScheduler

from iri_scrapy.core.extras import install_hint
from iri_scrapy.core.ladder import CANONICALIZATION_VERSION
from iri_scrapy.frontier.codec import (
    RefusalLog,
    RefusedRecord,
    RequestCodec,
    frontier_secret,
)
from iri_scrapy.frontier.ledger import Ledger
from iri_scrapy.frontier.middlewares import FrontierSpiderMiddleware
from iri_scrapy.frontier.options import max_inflight_setting
from iri_scrapy.frontier.redis_client import (
    DEFAULT_RETRY_SECONDS,
    DEFAULT_SOCKET_TIMEOUT,
    IRIRedisError,
    RedisRetry,
    client_kwargs_from_settings,
    mask_url,
    new_client,
)
from iri_scrapy.frontier.redis_dupefilter import RedisIRIDupeFilter
from iri_scrapy.frontier.redis_heartbeat import REASON_IDLE_TIMEOUT as REASON_IDLE_TIMEOUT
from iri_scrapy.frontier.redis_heartbeat import Heartbeat
from iri_scrapy.frontier.redis_loss import (
    REASON_FRONTIER_LOST,
    REASON_REDIS_EVICTION,
    EvictionPolicy,
    FrontierLost,
    LossWatch,
    lost_at_start,
)
from iri_scrapy.frontier.redis_queue import ProtocolStateLost, RedisQueue
from iri_scrapy.plugin import compat  # noqa: F401 - checks the installed Scrapy first
from iri_scrapy.plugin.config import load_object, setting
from iri_scrapy.plugin.context import CrawlContext
from iri_scrapy.plugin.entry import enter
from iri_scrapy.plugin.middleware import Canonicalizer
from iri_scrapy.plugin.refusal import (
    REASON_REDIS_NOT_INSTALLED,
    REASON_REDIS_UNAVAILABLE,
    refuse_start,
    stop_crawl,
)

if TYPE_CHECKING:

    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.dupefilters import BaseDupeFilter
    from scrapy.http import Response
    from scrapy.statscollectors import StatsCollector
    from twisted.internet.task import LoopingCall
    from typing_extensions import Self

__all__ = ["RedisSchedulerSpiderMiddleware"]

logger = logging.getLogger(__name__)

#: ``%(project)s`` is ``BOT_NAME``: two projects with one spider name never share a queue.
DEFAULT_KEY = "iri:{%(project)s:%(spider)s}:sched"
DEFAULT_LEASE_SECONDS = 30.0
DEFAULT_IDLE_TIMEOUT = 300.0
#: Request meta key: the queue member of a request this worker holds a lease on.
META_LEASE = "iri_redis_lease"

_PREFIX = "iri/redis_scheduler/"

_T = TypeVar("_T")


def _positive_seconds(settings: Any, name: str, default: float, *, zero_ok: bool) -> float:
    value = settings.get(name)
    if value is None:
        return default
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = -1.0
    if isinstance(value, bool) or number < 0 or (number == 0 and not zero_ok):
        raise ValueError(f"{name} must be a number of seconds > 0, got {value!r}")
    return number


class RedisIRIScheduler(BaseScheduler):
    """A Scrapy scheduler whose queue is shared through Redis, with leases (module doc).

    Built by Scrapy through :meth:`from_crawler`.  The dupefilter is
    ``DUPEFILTER_CLASS`` (the add-on: :class:`~iri_scrapy.RedisIRIDupeFilter`);
    with one whose seen-set is not in Redis the fleet does not share it (warned).
    """

    def __init__(
        self,
        dupefilter: BaseDupeFilter,
        *,
        crawler: Crawler | None = None,
        stats: StatsCollector | None = None,
        redis_url: str = "redis://localhost:6379/0",
        key: str = DEFAULT_KEY,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        retry_seconds: float = DEFAULT_RETRY_SECONDS,
        socket_timeout: float = DEFAULT_SOCKET_TIMEOUT,
        redis_params: dict[str, Any] | None = None,
        max_inflight: int = 16,
        flush_on_start: bool = False,
        stall_seconds: float = 360.0,
        cluster: bool = False,
        project: str = "scrapybot",
    ) -> None:
        self.df = dupefilter
        #: ``BOT_NAME``: ``%(project)s`` in the key template.
        self.project = project
        #: Talk to a Redis Cluster (``redis.cluster.RedisCluster``): every key of one
        #: crawl's queue has the same hash tag, so each script runs on one master.
        self.cluster = cluster
        self.crawler = crawler
        self.stats = stats
        self.redis_url = redis_url
        self.key_template = key
        self.lease_ms = max(1, int(lease_seconds * 1000))
        self.idle_timeout = idle_timeout
        self.retry_seconds = max(0.0, retry_seconds)
        self.socket_timeout = socket_timeout
        self.redis_params = dict(redis_params or {})
        self.max_inflight = max_inflight
        self.flush_on_start = flush_on_start
        self.stall_seconds = stall_seconds
        #: This process's name in Redis (unique per run).
        self.worker = uuid.uuid4().hex[:16]
        self.spider: Spider | None = None
        #: The crawl's keys, the client and the scripts (:mod:`.redis_queue`).
        self.queue = RedisQueue(key, project)
        #: The requests leased by this worker and not answered, by lease (see
        #: :mod:`.ledger`); an answer acknowledges the lease.
        self.ledger: Ledger[str] = Ledger(self._ack, on_reaped=self._reaped)
        #: requests that cannot be serialized: kept here, lost with the process.
        self._memory: deque[Request] = deque()
        self._intent_stale = False
        self._joined = False
        #: The heartbeat and reaper (:mod:`.redis_heartbeat`).
        self.heart = Heartbeat(self)
        self._counts: dict[str, int] = {}
        self._connected = False  # to the crawler's signals
        self.codec: RequestCodec | None = None
        #: The records refused (see docs/frontier.md, "A refused record").
        self.refusals = RefusalLog("RedisIRIScheduler", "Redis")
        #: Retried Redis calls; giving up closes the crawl (:class:`.RedisRetry`).
        self.retry = RedisRetry("RedisIRIScheduler", redis_url, retry_seconds, log=logger,
                                usable=lambda: self.connected, count=self._inc,
                                stop=self._close_spider, after_outage=self._after_outage,
                                extra=lambda: {"spider": self.spider})
        #: The epoch marker, the crawl's clock, why the frontier is lost (:mod:`.redis_loss`).
        self.loss = LossWatch(self.queue, self.worker, redis_url, run=self._run,
                              on_lost=lambda: self._close_spider(REASON_FRONTIER_LOST),
                              count=self._inc, extra=lambda: {"spider": self.spider})
        #: At level protocol: the learned rules' keys (see :mod:`iri_scrapy.protocol.redis_store`).
        self.protocol: Any = None

    # --- construction ------------------------------------------------------------

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        kwargs: dict[str, Any] = dict(  # settings checked before the dupefilter is built
            crawler=crawler,
            stats=crawler.stats,
            **client_kwargs_from_settings(settings),
            key=str(setting(settings, "IRI_REDIS_SCHEDULER_KEY") or DEFAULT_KEY),
            lease_seconds=_positive_seconds(
                settings, "IRI_REDIS_LEASE_SECONDS", DEFAULT_LEASE_SECONDS, zero_ok=False),
            idle_timeout=_positive_seconds(
                settings, "IRI_REDIS_IDLE_TIMEOUT", DEFAULT_IDLE_TIMEOUT, zero_ok=True),
            max_inflight=max_inflight_setting(settings),
            flush_on_start=setting(settings, "IRI_REDIS_FLUSH_ON_START"),
            stall_seconds=max(60.0, 2 * settings.getfloat("DOWNLOAD_TIMEOUT", 180)),
            project=str(settings.get("BOT_NAME") or "scrapybot"),
        )
        df_cls = load_object(settings["DUPEFILTER_CLASS"])
        from_crawler = getattr(df_cls, "from_crawler", None)
        dupefilter = from_crawler(crawler) if from_crawler is not None else df_cls()
        return cls(dupefilter, **kwargs)

    # --- Redis plumbing ------------------------------------------------------------

    def _new_client(self) -> Any:
        return new_client(self.redis_url, self.socket_timeout, self.redis_params, self.cluster)

    def _set_base(self, spider_name: str) -> None:
        df = self.df
        # the queue goes with its seen-set: other canonicalization options, other keys
        tag = (f"c{CANONICALIZATION_VERSION}:{df.tag_hash()}"
               if isinstance(df, RedisIRIDupeFilter) else "")
        self.queue.set_base(spider_name, tag)

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

    def _close_spider(self, reason: str) -> None:
        """Every stop of this scheduler is loud: exit status 1 (pages may be left)."""
        stop_crawl(self.crawler, reason, "RedisIRIScheduler")

    # --- loss: the epoch marker and the counts that must agree --------------------

    def verify(self, when: str) -> bool:
        """Check that Redis still holds this crawl's frontier; False (and the crawl
        closing with ``iri_frontier_lost``) if not.  Run after every outage and at
        each heartbeat (module doc, *Loss*)."""
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
        """Why the crawl's frontier is known to be lost (module doc, *Loss*), or None."""
        return self.loss.lost

    @property
    def base(self) -> str:
        """Every key's prefix (``<base>:*``; :mod:`.redis_queue`)."""
        return self.queue.base

    # --- life cycle ------------------------------------------------------------------

    def open(self, spider: Spider) -> Any:
        self.spider = spider
        settings = self.crawler.settings if self.crawler is not None else None
        self.codec = RequestCodec(spider, frontier_secret(settings))
        if not self._open_redis(spider.name):
            return None
        result = self.df.open()
        requeued, _, ready, leased = self.heart.tick()
        self._joined = bool(ready or leased)
        learned = getattr(self.df, "learned", None)
        if learned is not None:  # level protocol: the fleet's learned rules, what they skipped
            again = self._open_protocol(learned)
            if again is None:
                return None
            for request in again:
                self.enqueue_request(request)
        if self._joined:
            self._set("joined", 1)
            logger.info(
                "RedisIRIScheduler: joining the crawl under way in %s:* (%d requests queued, "
                "%d leased to other workers; %d expired leases put back)",
                self.base, ready, leased, requeued, extra={"spider": spider},
            )
        else:
            logger.info("RedisIRIScheduler: Redis %s, keys %s:* (lease %.1f s)",
                        mask_url(self.redis_url), self.base, self.lease_ms / 1000,
                        extra={"spider": spider})
        crawler = self.crawler
        if crawler is not None:
            CrawlContext.of(crawler).register_frontier(self)
            self._connected = True
            crawler.signals.connect(self._on_response, signal=signals.response_received)
            crawler.signals.connect(self._on_idle, signal=signals.spider_idle)
        self.heart.start(self.lease_ms / 3000.0)
        return result

    def _open_redis(self, spider_name: str) -> bool:
        """Connect, check the server, flush if asked, adopt or create the crawl's epoch
        marker; False if the start is refused (said, the crawl closing)."""
        try:
            self._set_base(spider_name)
            self._connect()
            self.loss.check_server(self.cluster)
        except ImportError as exc:
            message = (
                f"RedisIRIScheduler needs the redis package, which cannot be imported "
                f"({exc}): {install_hint('redis')}"
            )
            refuse_start(self.crawler, REASON_REDIS_NOT_INSTALLED, message, exc)
            return False
        except EvictionPolicy as exc:
            self._close_client()
            refuse_start(self.crawler, REASON_REDIS_EVICTION, str(exc), exc)
            return False
        except IRIRedisError as exc:
            self._close_client()
            refuse_start(self.crawler, REASON_REDIS_UNAVAILABLE, str(exc), exc)
            return False
        if not isinstance(self.df, RedisIRIDupeFilter):
            logger.warning(
                "RedisIRIScheduler: DUPEFILTER_CLASS %s does not keep its seen-set in Redis: "
                "the workers share the queue but not the seen-set, and a restarted worker "
                "forgets it (use iri_scrapy.RedisIRIDupeFilter)", type(self.df).__qualname__,
            )
        if self.flush_on_start:
            self._flush()
        try:
            df = self.df
            self.loss.start(isinstance(df, RedisIRIDupeFilter) and bool(
                self.queue.client.execute_command("EXISTS", df.meta_key)))
        except FrontierLost as exc:
            self._close_client()
            message = lost_at_start("RedisIRIScheduler", self.redis_url, self.base,
                                    "frontier", exc)
            refuse_start(self.crawler, REASON_FRONTIER_LOST, message, exc)
            return False
        return True

    def _open_protocol(self, learned: Any) -> list[Request] | None:
        """Open the learned rules' keys; the requests to schedule again, or None if the
        start is refused (their state lost, or Redis unusable)."""
        contains = getattr(self.df, "__contains__", None)  # no side effect (IRIDupeFilter)
        self.protocol = CrawlContext.of(self.crawler).protocol.redis_store(
            rules_key=self.queue.keys["rules"], skipped_key=self.queue.keys["skipped"],
            refused_key=self.queue.keys["refused"], codec=self.codec,
            learned=learned, call=lambda fn: self._retrying(lambda: fn(self.queue.client)),
            lost=self._frontier_lost, schedule=self._schedule_again,
            seen=None if contains is None else lambda request: bool(contains(request)),
            drop_meta=(META_LEASE,))
        try:
            return self.protocol.open()
        except IRIRedisError as exc:
            self.protocol = None
            lost = isinstance(exc, ProtocolStateLost)
            if lost:
                message = lost_at_start("RedisIRIScheduler", self.redis_url, self.base,
                                        "state", exc)
            else:
                message = f"RedisIRIScheduler: Redis at {mask_url(self.redis_url)}: {exc}"
            if self.connected:
                try:  # deregister (the first heartbeat registered this worker)
                    self.heart.tick(alive=False, members=[])
                except Exception:  # noqa: BLE001 - it expires by itself
                    logger.debug("RedisIRIScheduler: could not deregister", exc_info=True)
            self._close_client()
            refuse_start(self.crawler, REASON_FRONTIER_LOST if lost else REASON_REDIS_UNAVAILABLE,
                         message, exc)
            return None

    def _schedule_again(self, request: Request) -> None:
        """A request a revoked rule had skipped, while the crawl runs: to the engine."""
        engine = compat.running_engine(self.crawler)
        if engine is not None and getattr(engine, "running", False):
            engine.crawl(request)
        else:
            self.enqueue_request(request)

    def _connect(self) -> None:
        from redis.exceptions import RedisError

        try:
            self.queue.connect(self._new_client())
        except (RedisError, ValueError) as exc:
            self._close_client()
            raise IRIRedisError(
                f"RedisIRIScheduler cannot use Redis at {mask_url(self.redis_url)}: {exc} "
                "(set IRI_REDIS_URL to a running server)"
            ) from exc

    def _flush(self) -> None:
        """``IRI_REDIS_FLUSH_ON_START``: forget the crawl (this queue and its seen-set)."""
        now_workers = self.queue.flush()
        if now_workers:
            logger.warning(
                "RedisIRIScheduler: IRI_REDIS_FLUSH_ON_START ignored: %d other worker(s) "
                "are registered on %s:* (wait until their leases expire)",
                now_workers, self.base)
            return
        clear = getattr(self.df, "clear", None)
        if clear is not None:
            clear()
        logger.info("RedisIRIScheduler: IRI_REDIS_FLUSH_ON_START: %s:* and the seen-set "
                    "deleted (learned protocol rules kept: %s)", self.base,
                    self.queue.keys["rules"])

    def close(self, reason: str) -> Any:
        self.heart.stop()
        if self.protocol is not None:  # its last write, while Redis is still ours
            self.protocol.close()
            if self.protocol.requeued:
                self._set("protocol_requeued", self.protocol.requeued)
            self.protocol = None
        crawler = self.crawler
        if crawler is not None and self._connected:
            self._connected = False
            crawler.signals.disconnect(self._on_response, signal=signals.response_received)
            crawler.signals.disconnect(self._on_idle, signal=signals.spider_idle)
            CrawlContext.of(crawler).unregister_frontier(self)
        if self.connected:
            self.ledger.reap()
            held = self.ledger.keys()
            try:
                if reason == "finished":
                    # the engine is idle: every request handed out was answered
                    self._ack(held)
                    held = []
                requeued, _, ready, leased = self.heart.tick(alive=False, members=held)
                self._inc("released_on_close", len(held))
                logger.info(
                    "RedisIRIScheduler: closing (%s): %d requests queued, %d leased to other "
                    "workers, %d of ours put back", reason, ready, leased, len(held),
                    extra={"spider": self.spider})
            except Exception as exc:  # noqa: BLE001 - leases expire by themselves
                logger.warning("RedisIRIScheduler: could not leave cleanly (%s): the leases "
                               "of this worker expire in %.1f s", exc, self.lease_ms / 1000)
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
        self.ledger.forget()
        if self.stats is not None:
            for name, value in self._counts.items():
                self.stats.set_value(_PREFIX + name, value)
        self._close_client()
        return self.df.close(reason)

    def abandon(self) -> None:
        """Stop at once, as a killed worker does (for fault-injection tests of a fleet).

        No more heartbeats and the Redis connection dropped, with nothing acknowledged,
        put back or deregistered: this worker's leases expire after
        ``IRI_REDIS_LEASE_SECONDS`` and go back to the queue, and its intent is
        enqueued by the next worker that ticks (module doc).  :meth:`close` afterwards
        only closes the dupefilter.
        """
        self.heart.stop()
        if self.protocol is not None:
            self.protocol.stop()
        self._close_client()

    def _close_client(self) -> None:
        self.queue.close()

    # --- the queue -----------------------------------------------------------------

    def has_pending_requests(self) -> bool:
        if self._memory:
            return True
        if not self.connected:
            return False
        try:
            ready = self._retrying(lambda: self.queue.client.execute_command(
                "ZCARD", self.queue.keys["ready"]))
        except IRIRedisError:
            return False
        return bool(ready)

    def __len__(self) -> int:
        """Requests queued in Redis (for every worker) plus unserializable ones here."""
        if not self.connected:
            return len(self._memory)
        try:
            ready = self._retrying(
                lambda: self.queue.client.execute_command("ZCARD", self.queue.keys["ready"]))
        except IRIRedisError:
            return len(self._memory)
        return int(ready) + len(self._memory)

    def enqueue_request(self, request: Request) -> bool:
        request = enter(request, Canonicalizer.for_crawler(self.crawler))
        if self.connected:
            try:
                return self._enqueue(request)
            except IRIRedisError:  # gave up after retries (logged; the spider closes)
                pass
        self._memory.append(request)
        return True

    def _enqueue(self, request: Request) -> bool:
        meta = request.meta
        parent: str = meta.get(META_LEASE) or ""
        replacing = bool(parent) and self.ledger.downloading(parent)
        if self._joined and request.dont_filter and meta.get("is_start_request"):
            self._inc("start_skipped")
            return False
        data = self._serialize(request)
        intent = ""
        if not request.dont_filter:
            df = self.df
            known = False
            if isinstance(df, RedisIRIDupeFilter):
                known = df.known_seen(df.fingerprint(request))
            if not known and data is not None:
                # written before the dupefilter records the URL: see "Intents"
                self._retrying(lambda: self.queue.client.execute_command(
                    "HSET", self.queue.keys["intents"], self.worker, data))
                self._intent_stale = True
                intent = self.worker
            if df.request_seen(request):
                df.log(request, self.spider)  # type: ignore[arg-type]
                if replacing:
                    self.ledger.answered(parent)
                return False
        if data is None:
            self._memory.append(request)
            if self.stats is not None:
                self.stats.inc_value("scheduler/enqueued/memory")
                self.stats.inc_value("scheduler/enqueued")
        else:
            self._push(data, request.priority, intent)
            if intent:
                self._intent_stale = False
        if replacing:
            self.ledger.answered(parent)
        return True

    def _push(self, data: bytes, priority: int, intent: str) -> None:
        member, rid, score = self.queue.new_entry(self.worker, priority)
        # the same member and id if retried after a lost reply: idempotent
        clock = self._retrying(lambda: self.queue.push(member, rid, score, data, intent))
        if not self.loss.clock_ok(clock, "when enqueuing"):
            raise IRIRedisError(f"the frontier is lost: {self.lost}")
        self._inc("enqueued")
        if self.stats is not None:
            self.stats.inc_value("scheduler/enqueued/redis")
            self.stats.inc_value("scheduler/enqueued")

    def next_request(self) -> Request | None:
        ledger = self.ledger
        ledger.reap()
        if self._memory:
            return self._memory.popleft()
        if not self.connected:
            return None
        if ledger.at_cap(self.max_inflight):
            if not ledger.stalled(self.stall_seconds):
                return None
            logger.warning(
                "%(n)d leased requests have not been answered for %(s).0f s (does the "
                "spider keep references to its requests?): lifting the in-flight cap",
                {"n": len(ledger), "s": self.stall_seconds},
                extra={"spider": self.spider})
            self.max_inflight = 0
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
            request.meta[META_LEASE] = member
            ledger.hand_out(member, request)
            self.heart.idle_since = None
            self._inc("leased")
            if self.stats is not None:
                self.stats.inc_value("scheduler/dequeued/redis")
                self.stats.inc_value("scheduler/dequeued")
            return request
        return None

    # --- answers -------------------------------------------------------------------

    def answered(self, request: Request) -> None:
        """The callback's output of *request* was consumed (the spider middleware).

        :class:`RedisSchedulerSpiderMiddleware` has scheduled every request of
        that output by then, so the lease is acknowledged now.
        """
        self.ledger.answered(request.meta.get(META_LEASE))

    def failed(self, request: Request) -> None:
        """The download of *request* failed for good (no downloader middleware handled it)."""
        self.ledger.failed(request.meta.get(META_LEASE), errback=request.errback is not None)

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
        self._inc("acked", len(members))

    def _on_response(self, response: Response, request: Request, **_: Any) -> None:
        self.ledger.responded(request.meta.get(META_LEASE))

    def _on_idle(self, **_: Any) -> None:
        """Nothing in the downloader or the scraper: see :meth:`.Heartbeat.idle`."""
        self.heart.idle()

    def _reaped(self, member: str) -> None:
        self._inc("answered_on_release")

    # --- heartbeat, reaper -------------------------------------------------------------

    def heartbeat(self) -> None:
        """One heartbeat now (the ticker runs one every ``IRI_REDIS_LEASE_SECONDS / 3``):
        see :meth:`.Heartbeat.beat`."""
        self.heart.beat()

    @property
    def _ticker(self) -> LoopingCall | None:
        return self.heart.ticker

    # --- helpers ---------------------------------------------------------------------

    def _decode(self, data: Any) -> Request:
        codec = self.codec
        assert codec is not None
        return codec.decode(data)

    def _keep_refused(self, field: str, data: bytes) -> None:
        self._retrying(lambda: self.queue.client.execute_command(
            "HSET", self.queue.keys["refused"], field, data))

    def _refused(self, exc: RefusedRecord, record: str) -> None:
        self.refusals.refused(exc, f"{record} (kept in {self.queue.keys['refused']})", self.spider,
                              crawler=self.crawler, count=self._inc)

    def _serialize(self, request: Request) -> bytes | None:
        codec = self.codec
        assert codec is not None
        return codec.record_or_none(
            request, drop_meta=(META_LEASE,), count=lambda: self._inc("unserializable"), log=logger,
            store="Redis", stat="iri/redis_scheduler/unserializable",
            kept="kept in this worker's memory, lost if it dies",
        )

    def _inc(self, name: str, count: int = 1) -> None:
        self._counts[name] = self._counts.get(name, 0) + count

    def _set(self, name: str, value: int) -> None:
        self._counts[name] = value

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

    @property
    def connected(self) -> bool:
        """True while this scheduler holds a usable Redis connection: opened, not
        closed or abandoned, not given up after ``IRI_REDIS_RETRY_SECONDS``, and the
        crawl's frontier not found lost."""
        return self.queue.client is not None and not self._gave_up and self.lost is None


class RedisSchedulerSpiderMiddleware(FrontierSpiderMiddleware):
    """Outermost spider middleware for :class:`RedisIRIScheduler` (the add-on adds it).

    The frontier's middleware: it schedules each request of a callback's output
    itself (``crawler.engine.crawl``) as soon as it comes out of the other
    middlewares, so the lease is acknowledged (when the output ends) only after
    every request in it is in Redis (see :class:`FrontierSpiderMiddleware`).
    """
