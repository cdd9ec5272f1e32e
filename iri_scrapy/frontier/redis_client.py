"""The Redis client of :class:`~iri_scrapy.RedisIRIDupeFilter` and
:class:`~iri_scrapy.RedisIRIScheduler`, and their one retry policy.

:func:`new_client` builds a redis-py client with no retries of its own;
:class:`RetryPolicy` retries a call through an outage: backoff 50 ms doubling to
1 s until ``IRI_REDIS_RETRY_SECONDS`` have passed, one WARNING line when Redis
stops answering (or refuses writes: out of memory under ``maxmemory`` with
``noeviction``, when the user adds :func:`oom_errors` to the retried errors) and one
when it answers again, then :class:`RedisRetryExhausted`.
Each user keeps what differs: the errors it retries, its stats, what it does at
the deadline.  No Scrapy here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from iri_scrapy.frontier.errors import FrontierError
from iri_scrapy.plugin.config import class_of, setting

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings


DEFAULT_RETRY_SECONDS = 60.0
DEFAULT_SOCKET_TIMEOUT = 5.0
#: The first pause of a retry, doubled after each failed retry up to BACKOFF_MAX.
BACKOFF_FIRST = 0.05
BACKOFF_MAX = 1.0

_T = TypeVar("_T")


class IRIRedisError(FrontierError):
    """Redis cannot be used by the dupefilter (unreachable, wrong data, bad settings)."""


class RedisRetryExhausted(IRIRedisError):
    """Redis did not answer within the retry deadline (``IRI_REDIS_RETRY_SECONDS``).

    ``last`` is the last connection error, ``waited`` the seconds since the outage began.
    """

    def __init__(self, safe_url: str, last: BaseException, waited: float) -> None:
        super().__init__(f"Redis at {safe_url} unusable: {last}")
        self.last = last
        self.waited = waited


def mask_url(url: str) -> str:
    """*url* with its password replaced by ``***`` (for logs and errors)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable Redis URL>"
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def redis_url_from_settings(settings: BaseSettings) -> str:
    """``IRI_REDIS_URL``, else scrapy-redis's ``REDIS_URL``, else ``REDIS_HOST``/``REDIS_PORT``."""
    url = setting(settings, "IRI_REDIS_URL") or settings.get("REDIS_URL")
    if url:
        return str(url)
    host = settings.get("REDIS_HOST") or "localhost"
    port = settings.getint("REDIS_PORT", 6379)
    db = settings.getint("REDIS_DB", 0)
    return f"redis://{host}:{port}/{db}"


def is_scrapy_redis_scheduler(value: Any) -> bool:
    """True if ``SCHEDULER`` names scrapy-redis's scheduler (or a subclass), not importing it."""
    cls = class_of(value)
    return cls is not None and any(
        f"{k.__module__}.{k.__qualname__}" == "scrapy_redis.scheduler.Scheduler"
        for k in cls.__mro__
    )


def scrapy_redis_url(settings: BaseSettings) -> str:
    """The server scrapy-redis's scheduler connects to: ``REDIS_URL``, else
    ``REDIS_HOST``/``REDIS_PORT`` (its defaults, localhost:6379), as its
    ``connection.from_settings`` reads them (it never reads ``IRI_REDIS_URL``)."""
    url = settings.get("REDIS_URL")
    if url:
        return str(url)
    host = settings.get("REDIS_HOST") or "localhost"
    port = settings.getint("REDIS_PORT", 6379)
    return f"redis://{host}:{port}"


def same_server(a: str, b: str) -> bool:
    """True if the Redis URLs *a* and *b* name one server and database (host, port,
    database number; ``redis://h`` is port 6379, database 0)."""
    def where(url: str) -> tuple[str, int, int, str]:
        parts = urlsplit(url)
        try:
            port = parts.port or 6379
        except ValueError:
            port = -1
        db = parts.path.strip("/") or "0"
        return ((parts.hostname or "localhost").lower(), port,
                int(db) if db.isdigit() else -1, parts.scheme)
    return where(a) == where(b)


def client_kwargs_from_settings(settings: BaseSettings) -> dict[str, Any]:
    """The Redis connection arguments both Redis components take, from *settings*:
    ``redis_url`` (:func:`redis_url_from_settings`), ``retry_seconds``,
    ``socket_timeout``, ``redis_params`` (a copy) and ``cluster`` (``IRI_REDIS_*``)."""
    return {
        "redis_url": redis_url_from_settings(settings),
        "retry_seconds": setting(settings, "IRI_REDIS_RETRY_SECONDS"),
        "socket_timeout": setting(settings, "IRI_REDIS_SOCKET_TIMEOUT"),
        "redis_params": dict(setting(settings, "IRI_REDIS_PARAMS")),
        "cluster": setting(settings, "IRI_REDIS_CLUSTER"),
    }


def new_client(url: str, socket_timeout: float, redis_params: dict[str, Any],
               cluster: bool) -> Any:
    """A redis-py client for *url* with no retries of its own (the filter and the fleet
    queue retry with their own deadline: a ``SADD`` re-sent after a lost reply would
    answer "seen" for a request nobody fetched).  ``RedisCluster`` when *cluster*,
    otherwise one ``Redis`` socket (no pool lock per command).  *redis_params*
    (``IRI_REDIS_PARAMS``) override the defaults."""
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    if cluster:
        from redis.cluster import RedisCluster

        cluster_params: dict[str, Any] = {
            "socket_timeout": socket_timeout,
            "socket_connect_timeout": min(socket_timeout, 2.0),
        }
        cluster_params.update(redis_params)
        client = RedisCluster.from_url(url, **cluster_params)
        if not {"retry", "cluster_error_retry_attempts"} & set(redis_params):
            client.cluster_error_retry_attempts = 0  # type: ignore[attr-defined]  # redis-py 5
            client.retry = Retry(NoBackoff(), 0)  # redis-py 6+
        return client
    params: dict[str, Any] = {
        "socket_timeout": socket_timeout,
        "socket_connect_timeout": min(socket_timeout, 2.0),
        "retry": Retry(NoBackoff(), 0),
        "single_connection_client": True,
    }
    params.update(redis_params)
    return redis.Redis.from_url(url, **params)


def connection_errors() -> tuple[type[BaseException], ...]:
    """A lost or timed-out connection (BusyLoadingError, a restarted server still
    loading its AOF/RDB, is a ConnectionError)."""
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    return (RedisConnectionError, RedisTimeoutError, OSError)


def retryable_errors() -> tuple[type[BaseException], ...]:
    """:func:`connection_errors`, a replica answering READONLY, and a cluster that lost a
    master (or every node): CLUSTERDOWN, TRYAGAIN, cannot be connected."""
    from redis.exceptions import (
        ClusterDownError,
        ReadOnlyError,
        RedisClusterException,
        TryAgainError,
    )

    return (*connection_errors(), ReadOnlyError, ClusterDownError, TryAgainError,
            RedisClusterException)


def oom_errors() -> tuple[type[BaseException], ...]:
    """Redis out of memory: ``maxmemory`` reached under ``maxmemory-policy noeviction``
    (``OOM command not allowed``, also from a script's first write): a write refused,
    not applied, that succeeds once memory is freed or ``maxmemory`` raised."""
    from redis.exceptions import OutOfMemoryError

    return (OutOfMemoryError,)


def retried_errors() -> tuple[type[BaseException], ...]:
    """What a :class:`RetryPolicy` of a Redis component retries: an outage or a cluster
    in failover (:func:`retryable_errors`), and a Redis out of memory
    (:func:`oom_errors`): the write was refused, it is sent again."""
    return (*retryable_errors(), *oom_errors())


def is_oom(exc: BaseException) -> bool:
    """True if *exc* is Redis's ``OOM command not allowed`` error (:func:`oom_errors`)."""
    try:
        return isinstance(exc, oom_errors())
    except ImportError:  # pragma: no cover - no redis package
        return False


def give_up_reason(exc: BaseException) -> str:
    """The ``finish_reason`` of a worker that gives up on Redis after *exc*: out of
    memory, or a command refused that no retry fixes, is a write failure
    (``iri_frontier_write_failed``); an outage past the deadline is
    ``iri_redis_unavailable``."""
    # here, not at the top: plugin.refusal imports Scrapy, which redis_seen does not need
    from iri_scrapy.plugin.refusal import REASON_FRONTIER_WRITE_FAILED, REASON_REDIS_UNAVAILABLE

    if is_oom(exc) or not isinstance(exc, retryable_errors()):
        return REASON_FRONTIER_WRITE_FAILED
    return REASON_REDIS_UNAVAILABLE


def give_up_line(component: str, url: str, exc: BaseException, waited: float,
                 reason: str) -> str:
    """The one ERROR line of a worker that gives up on Redis: what happened, the
    ``finish_reason`` (exit status 1) and what to do.  One wording for every
    component (the dupefilter, the fleet scheduler)."""
    from iri_scrapy.plugin.refusal import REASON_FRONTIER_WRITE_FAILED

    if is_oom(exc):
        what = f"is out of memory ({exc}) after {waited:.0f} s of retries"
        todo = "Free memory in Redis or raise its maxmemory (the crawl's keys take it)"
    elif reason == REASON_FRONTIER_WRITE_FAILED:
        what = f"refused a command ({type(exc).__name__}: {exc})"
        todo = "Fix the cause"
    else:
        what = f"unusable ({type(exc).__name__}: {exc}) after {waited:.0f} s of retries"
        todo = "Make Redis reachable again"
    return (f"{component}: Redis at {mask_url(url)} {what} (IRI_REDIS_RETRY_SECONDS): "
            f"closing the crawl with finish_reason {reason} (exit status 1); what was not "
            f"acknowledged stays in Redis. {todo}, then run the same command to resume: "
            "nothing is lost")


@dataclass
class RetryPolicy:
    """Retry a Redis call through an outage, blocking, until a deadline.

    :meth:`call` runs *fn*; if it raises one of *retryable*, that is an outage:
    one WARNING (``<label>Redis at <url> unreachable (<error>): <action> for up to
    N s ...``), then *fn* again after 50 ms, 100 ms, ... doubling to 1 s, until it
    returns (one WARNING ``... answers again after S s ...``; its result is
    returned) or ``retry_seconds`` have passed since the first failure (the last
    pause is cut to end at the deadline, where *fn* runs once more):
    :class:`RedisRetryExhausted`.  Any other exception propagates at once.

    Counts ``outages``, ``retries`` and ``longest_outage`` (seconds, outages that
    ended, by success or deadline); *on_count* (name, value) hears each:
    ``("outages", 1)``, ``("retries", 1)``, ``("outage_seconds", seconds)``.
    *clock* and *sleep* are :func:`time.monotonic` and :func:`time.sleep` unless a
    test gives others.
    """

    safe_url: str
    retry_seconds: float
    _: KW_ONLY
    retryable: tuple[type[BaseException], ...]
    log: logging.Logger
    label: str = ""
    action: str = "retrying"
    say_retries: bool = True
    on_count: Callable[[str, float], None] | None = None
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    outages: int = field(default=0, init=False)
    retries: int = field(default=0, init=False)
    longest_outage: float = field(default=0.0, init=False)
    #: Seconds the last outage lasted (up to an error that ended it, if one did).
    waited: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        self.retry_seconds = max(0.0, float(self.retry_seconds))

    def _count(self, name: str, value: float = 1) -> None:
        if self.on_count is not None:
            self.on_count(name, value)

    def call(self, fn: Callable[[], _T]) -> _T:
        """*fn()*, retried through an outage (class doc)."""
        try:
            return fn()
        except self.retryable as exc:
            return self.retry(fn, exc)

    def retry(self, fn: Callable[[], _T], first: BaseException) -> _T:
        """The outage that *first* (raised by a call the caller made) began: retry *fn*."""
        start = self.clock()
        deadline = start + self.retry_seconds
        self.waited = 0.0
        self.outages += 1
        self._count("outages")
        if is_oom(first):
            self.log.warning(
                "%sRedis at %s is out of memory and refuses writes (OOM: %s): %s for up "
                "to %.0f s (IRI_REDIS_RETRY_SECONDS); the crawl is stalled meanwhile: free "
                "memory in Redis or raise its maxmemory",
                self.label, self.safe_url, first, self.action, self.retry_seconds,
            )
        else:
            self.log.warning(
                "%sRedis at %s unreachable (%s): %s for up to %.0f s "
                "(IRI_REDIS_RETRY_SECONDS); the crawl is stalled meanwhile",
                self.label, self.safe_url, first, self.action, self.retry_seconds,
            )
        delay = BACKOFF_FIRST
        last = first
        attempts = 0
        while (now := self.clock()) < deadline:
            self.sleep(min(delay, deadline - now))
            delay = min(delay * 2, BACKOFF_MAX)
            attempts += 1
            self.retries += 1
            self._count("retries")
            try:
                result = fn()
            except self.retryable as exc:
                last = exc
                continue
            except BaseException:  # not an outage: the caller decides
                self.waited = self.clock() - start
                raise
            self._ended(start)
            retries = f" ({attempts} retries)" if self.say_retries else ""
            self.log.warning("%sRedis at %s answers again after %.2f s%s: crawl continues",
                             self.label, self.safe_url, self.waited, retries)
            return result
        self._ended(start)
        raise RedisRetryExhausted(self.safe_url, last, self.waited) from last

    def _ended(self, start: float) -> None:
        self.waited = self.clock() - start
        self.longest_outage = max(self.longest_outage, self.waited)
        self._count("outage_seconds", self.waited)


class RedisRetry:
    """A component's retried Redis calls, and its giving up (once) at the deadline.

    :meth:`call` runs *fn* through a :class:`RetryPolicy` (built on first use: it
    imports redis) retrying :func:`retried_errors`; at the deadline, or on another
    Redis error, :meth:`give_up` logs the one ERROR line (:func:`give_up_line`),
    calls *stop* with the ``finish_reason`` and :class:`IRIRedisError` is raised.
    *usable* says whether the component may still use Redis; *after_outage* runs
    when a call succeeded after an outage (Redis may have come back empty).
    """

    def __init__(self, component: str, url: str, retry_seconds: float, *,
                 log: logging.Logger, usable: Callable[[], bool],
                 count: Callable[[str], None], stop: Callable[[str], None],
                 after_outage: Callable[[], None], extra: Callable[[], dict[str, Any]]) -> None:
        from iri_scrapy.plugin.refusal import REASON_REDIS_UNAVAILABLE

        self.component = component
        self.url = url
        self.retry_seconds = max(0.0, retry_seconds)
        self.log = log
        self._usable = usable
        self._count = count
        self._stop = stop
        self._after_outage = after_outage
        self._extra = extra
        self.policy: RetryPolicy | None = None
        #: Given up: Redis is not used any more.
        self.gave_up = False
        #: The ``finish_reason`` of giving up.
        self.reason = REASON_REDIS_UNAVAILABLE

    def call(self, fn: Callable[[], _T]) -> _T:
        """*fn()*, retried through an outage or an out-of-memory Redis (class doc)."""
        if not self._usable():
            raise IRIRedisError(f"Redis at {mask_url(self.url)} unusable")
        if self.policy is None:
            # a cluster in failover (CLUSTERDOWN, TRYAGAIN, a replica answering
            # READONLY) is waited for, as a lost connection is; and a Redis out of
            # memory (noeviction): the write was refused, it is sent again
            self.policy = RetryPolicy(
                mask_url(self.url), self.retry_seconds, retryable=retried_errors(),
                log=self.log, label=f"{self.component}: ", say_retries=False,
                on_count=self._count_outage,
            )
        from redis.exceptions import RedisError

        outages = self.policy.outages
        try:
            result = self.policy.call(fn)
        except RedisRetryExhausted as exc:
            self.give_up(exc.last)
            raise
        except RedisError as exc:  # an error retrying cannot fix: loud, nothing acked
            self.give_up(exc)
            raise IRIRedisError(f"Redis at {mask_url(self.url)}: {exc}") from exc
        if self.policy.outages != outages:
            self._after_outage()
        return result

    def _count_outage(self, name: str, value: float) -> None:
        if name != "outage_seconds":  # outages, retries
            self._count(name)

    def give_up(self, exc: BaseException) -> None:
        """Redis cannot be used: the ERROR line, then *stop* (once)."""
        if not self._usable():
            return
        self.gave_up = True
        reason = self.reason = give_up_reason(exc)
        self.log.error("%s", give_up_line(self.component, self.url, exc, self.retry_seconds,
                                          reason), extra=self._extra())
        self._stop(reason)
