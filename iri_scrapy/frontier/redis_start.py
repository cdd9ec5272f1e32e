"""Opening the Redis fleet queue at start, or refusing to start.

:func:`open_redis` is the refusal ladder of :class:`~iri_scrapy.RedisIRIScheduler`'s
back-end (:mod:`.redis_backend`): it connects, checks the server (no eviction
policy, data kept across a restart: :mod:`.redis_loss`), forgets the crawl when
``IRI_REDIS_FLUSH_ON_START`` asks, and adopts or creates the crawl's epoch
marker; when any of it cannot be done (the ``redis`` package missing, Redis
unreachable, an evicting server, a crawl whose keys were lost) it closes the
client and refuses the start with that fault's own finish_reason, as one ERROR
line saying what to do (:func:`~iri_scrapy.plugin.refusal.refuse_start`, exit
status 1).  :func:`open_protocol` does the same for the learned rules' keys at
``IRI_LEVEL = "protocol"`` (:mod:`iri_scrapy.protocol.redis_store`).  Design: docs/redis.md.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from iri_scrapy.core.extras import install_hint
from iri_scrapy.core.ladder import CANONICALIZATION_VERSION
from iri_scrapy.frontier.redis_client import IRIRedisError, mask_url, new_client
from iri_scrapy.frontier.redis_dupefilter import RedisIRIDupeFilter
from iri_scrapy.frontier.redis_loss import (
    REASON_FRONTIER_LOST,
    REASON_REDIS_EVICTION,
    EvictionPolicy,
    FrontierLost,
    lost_at_start,
)
from iri_scrapy.frontier.redis_queue import ProtocolStateLost
from iri_scrapy.plugin import compat  # noqa: F401 - checks the installed Scrapy first
from iri_scrapy.plugin.context import CrawlContext
from iri_scrapy.plugin.refusal import (
    REASON_REDIS_NOT_INSTALLED,
    REASON_REDIS_UNAVAILABLE,
    refuse_start,
)

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

    from iri_scrapy.frontier.codec import RefusedRecord, RequestCodec
    from iri_scrapy.frontier.redis_heartbeat import Heartbeat
    from iri_scrapy.frontier.redis_loss import LossWatch
    from iri_scrapy.frontier.redis_queue import RedisQueue

#: The scheduler's log lines (one logger for the scheduler and its parts).
logger = logging.getLogger("iri_scrapy.frontier.redis_scheduler")

_T = TypeVar("_T")


class Opening(Protocol):
    """What the opening uses of the back-end (:class:`~.redis_backend.RedisBackend`;
    described here: :mod:`.redis_backend` imports this module, and the architecture
    test forbids import circles, even under ``TYPE_CHECKING``)."""

    name: str
    redis_url: str
    socket_timeout: float
    redis_params: dict[str, Any]
    cluster: bool
    flush_on_start: bool
    worker: str
    meta_key: str

    @property
    def df(self) -> Any: ...
    @property
    def crawler(self) -> Crawler | None: ...
    @property
    def codec(self) -> RequestCodec | None: ...
    @property
    def queue(self) -> RedisQueue: ...
    @property
    def loss(self) -> LossWatch: ...
    @property
    def heart(self) -> Heartbeat: ...
    @property
    def connected(self) -> bool: ...
    @property
    def base(self) -> str: ...

    def _retrying(self, call: Callable[[], _T]) -> _T: ...
    def _frontier_lost(self, what: str) -> None: ...
    def _close_client(self) -> None: ...
    def enqueue_request(self, request: Request) -> bool: ...
    def claim_held(self, field: str, request: Request) -> bool: ...
    def _refused(self, exc: RefusedRecord, record: str) -> None: ...


def open_redis(b: Opening, spider_name: str) -> bool:
    """Connect, check the server, flush if asked, adopt or create the crawl's epoch
    marker; False if the start is refused (said, the crawl closing)."""
    crawler = b.crawler
    try:
        df = b.df
        # the queue goes with its seen-set: other canonicalization options, other keys
        tag = (f"c{CANONICALIZATION_VERSION}:{df.tag_hash()}"
               if isinstance(df, RedisIRIDupeFilter) else "")
        b.queue.set_base(spider_name, tag)
        _connect(b)
        b.loss.check_server(b.cluster)
    except ImportError as exc:
        message = (
            f"{b.name} needs the redis package, which cannot be imported "
            f"({exc}): {install_hint('redis')}"
        )
        refuse_start(crawler, REASON_REDIS_NOT_INSTALLED, message, exc)
        return False
    except EvictionPolicy as exc:
        b._close_client()
        refuse_start(crawler, REASON_REDIS_EVICTION, str(exc), exc)
        return False
    except IRIRedisError as exc:
        b._close_client()
        refuse_start(crawler, REASON_REDIS_UNAVAILABLE, str(exc), exc)
        return False
    if not isinstance(b.df, RedisIRIDupeFilter):
        logger.warning(
            "%s: DUPEFILTER_CLASS %s does not keep its seen-set in Redis: the workers "
            "share the queue but not the seen-set, and a restarted worker forgets it "
            "(use iri_scrapy.RedisIRIDupeFilter)", b.name, type(b.df).__qualname__,
        )
    if b.flush_on_start:
        _flush(b)
    try:
        df = b.df
        b.loss.start(isinstance(df, RedisIRIDupeFilter) and bool(
            b.queue.client.execute_command("EXISTS", df.meta_key)))
    except FrontierLost as exc:
        b._close_client()
        message = lost_at_start(b.name, b.redis_url, b.base, "frontier", exc)
        refuse_start(crawler, REASON_FRONTIER_LOST, message, exc)
        return False
    return True


def _connect(b: Opening) -> None:
    from redis.exceptions import RedisError

    try:
        b.queue.connect(new_client(b.redis_url, b.socket_timeout, b.redis_params, b.cluster))
    except (RedisError, ValueError) as exc:
        b._close_client()
        raise IRIRedisError(
            f"{b.name} cannot use Redis at {mask_url(b.redis_url)}: {exc} "
            "(set IRI_REDIS_URL to a running server)"
        ) from exc


def _flush(b: Opening) -> None:
    """``IRI_REDIS_FLUSH_ON_START``: forget the crawl (this queue and its seen-set)."""
    now_workers = b.queue.flush()
    if now_workers:
        logger.warning(
            "%s: IRI_REDIS_FLUSH_ON_START ignored: %d other worker(s) are registered on "
            "%s:* (wait until their leases expire)", b.name, now_workers, b.base)
        return
    clear = getattr(b.df, "clear", None)
    if clear is not None:
        clear()
    logger.info("%s: IRI_REDIS_FLUSH_ON_START: %s:* and the seen-set deleted (learned "
                "protocol rules kept: %s)", b.name, b.base, b.queue.keys["rules"])


def open_protocol(b: Opening, learned: Any) -> tuple[Any, list[Request]] | None:
    """Open the learned rules' keys: the store and the requests to schedule again, or
    None if the start is refused (their state lost, or Redis unusable)."""
    contains = getattr(b.df, "__contains__", None)  # no side effect (IRIDupeFilter)
    crawler = b.crawler
    assert crawler is not None
    keys = b.queue.keys
    protocol = CrawlContext.of(crawler).protocol.redis_store(
        rules_key=keys["rules"], skipped_key=keys["skipped"], refused_key=keys["refused"],
        pages_key=keys["pages"], holders_key=keys["holders"], worker=b.worker,
        codec=b.codec, learned=learned,
        call=lambda fn: b._retrying(lambda: fn(b.queue.client)),
        lost=b._frontier_lost, schedule=lambda request: _schedule_again(b, request),
        claim=b.claim_held, refused=b._refused,
        seen=None if contains is None else lambda request: bool(contains(request)),
        filtered=lambda request: bool(b.df.request_seen(request)),
        drop_meta=(b.meta_key,))
    try:
        return protocol, protocol.open()
    except IRIRedisError as exc:
        lost = isinstance(exc, ProtocolStateLost)
        if lost:
            message = lost_at_start(b.name, b.redis_url, b.base, "state", exc)
        else:
            message = f"{b.name}: Redis at {mask_url(b.redis_url)}: {exc}"
        if b.connected:
            try:  # deregister (the first heartbeat registered this worker)
                b.heart.tick(alive=False, members=[])
            except Exception:  # noqa: BLE001 - it expires by itself
                logger.debug("%s: could not deregister", b.name, exc_info=True)
        b._close_client()
        refuse_start(b.crawler, REASON_FRONTIER_LOST if lost else REASON_REDIS_UNAVAILABLE,
                     message, exc)
        return None


def _schedule_again(b: Opening, request: Request) -> None:
    """A request a revoked rule had skipped, while the crawl runs: to the engine."""
    engine = compat.running_engine(b.crawler)
    if engine is not None and getattr(engine, "running", False):
        engine.crawl(request)
    else:
        b.enqueue_request(request)
