"""``RedisIRIDupeFilter``: IRI deduplication shared by many crawlers through one Redis.

``DUPEFILTER_CLASS = "iri_scrapy.RedisIRIDupeFilter"`` with ``IRI_REDIS_URL`` (or
scrapy-redis's ``REDIS_URL``); works under Scrapy's scheduler, ours and
scrapy-redis 0.9.1's (through :meth:`from_spider`).  It is
:class:`~iri_scrapy.IRIDupeFilter` with :meth:`IRIDupeFilter.seen_add` moved to
Redis: each new fingerprint is one plain ``SADD`` of its first 8 bytes, as an
integer, into an intset bucket of a self-splitting trie (format 4, kept by
:class:`~.redis_seen.RedisSeenSet`), with a bounded local cache of answers.  Keys
carry the canonicalization version and an options hash, so different
canonicalizations never mix.  This module is the Scrapy component: settings, the
retries through an outage and their stats, the loud stop.  A lost Redis stalls the
crawl and never yields a "not seen"; start requests are deduplicated
(:class:`IRIRedisSpiderMixin` for URLs pushed to a ``RedisSpider``).

Design: docs/redis.md (keys, memory, Redis Cluster, local cache, faults).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy import Request

from iri_scrapy.core.extras import install_hint
from iri_scrapy.frontier.redis_client import (
    DEFAULT_RETRY_SECONDS,
    DEFAULT_SOCKET_TIMEOUT,
    IRIRedisError,
    RedisRetryExhausted,
    RetryPolicy,
    client_kwargs_from_settings,
    give_up_line,
    give_up_reason,
    is_oom,
    is_scrapy_redis_scheduler,
    mask_url,
    new_client,
    retried_errors,
    same_server,
    scrapy_redis_url,
)
from iri_scrapy.frontier.redis_seen import (
    BUCKET_CAP,
    DEFAULT_LOCAL_CACHE,
    RedisSeenSet,
    tag_hash,
)
from iri_scrapy.plugin import compat  # noqa: F401 - checks the installed Scrapy first
from iri_scrapy.plugin.config import setting
from iri_scrapy.plugin.dupefilter import IRIDupeFilter
from iri_scrapy.plugin.fingerprinter import IRIRequestFingerprinter
from iri_scrapy.plugin.refusal import (
    REASON_BAD_SETTING,
    REASON_REDIS_NOT_INSTALLED,
    REASON_REDIS_UNAVAILABLE,
    refuse_start,
    stop_crawl,
)

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings
    from typing_extensions import Self

# IRIRedisSpider and IRIRedisCrawlSpider are built by __getattr__ below (they import scrapy_redis)
__all__ = ["IRIRedisSpiderMixin", "IRIRedisSpider", "IRIRedisCrawlSpider"]  # noqa: F822

logger = logging.getLogger(__name__)

#: ``finish_reason`` when Redis stayed unreachable past ``IRI_REDIS_RETRY_SECONDS``.
CLOSE_REASON = REASON_REDIS_UNAVAILABLE
#: ``%(project)s`` is ``BOT_NAME``: two projects with one spider name never share a seen-set.
DEFAULT_KEY = "%(project)s:%(spider)s:iri-dupefilter"

STAT_OUTAGES = "iri/redis/outages"
STAT_RETRIES = "iri/redis/retries"
STAT_OUTAGE_SECONDS = "iri/redis/outage_seconds"
STAT_AMBIGUOUS = "iri/redis/ambiguous_refetch"
STAT_UNCHECKED = "iri/redis/unchecked"
#: request_seen answered by the process-local cache / by a Redis call (set at close).
STAT_LOCAL_HITS = "iri/redis/local_hits"
STAT_REMOTE_CALLS = "iri/redis/remote_calls"
STAT_START_REDIS = "iri/redis/start_deduplicated"
#: Shared with IRISpiderMiddleware (``Spider.start()`` requests).
SETTING_DEDUPE_START = "IRI_DEDUPE_START_REQUESTS"


def _key_from_settings(crawler: Crawler) -> str:
    """``IRI_REDIS_KEY`` (default :data:`DEFAULT_KEY`) with the project and spider names."""
    settings = crawler.settings
    template = str(setting(settings, "IRI_REDIS_KEY") or DEFAULT_KEY)
    spider = crawler.spider
    try:
        key = template % {"spider": spider.name if spider is not None else None,
                          "project": str(settings.get("BOT_NAME") or "scrapybot")}
    except (KeyError, TypeError, ValueError) as exc:
        raise IRIRedisError(
            f"IRI_REDIS_KEY {template!r} must be a string using only %(project)s and "
            f"%(spider)s: {exc}"
        ) from exc
    if spider is None and "%(spider)s" in template:
        raise IRIRedisError("IRI_REDIS_KEY names the spider, but the crawler has none yet")
    return key


class RedisIRIDupeFilter(IRIDupeFilter):
    """:class:`~iri_scrapy.IRIDupeFilter` whose seen set lives in Redis (see module doc).

    Built by Scrapy through :meth:`from_crawler` / :meth:`from_spider`.  For direct
    use (tests, benchmarks): ``RedisIRIDupeFilter(redis_url=..., key="name")``, then
    :meth:`connect` (or :meth:`open`); *key* is the base before
    ``:v<version>:<tag>``.  *base_buckets* (the root count; default: :func:`roots_for`
    of the optional size hint *expected_urls*) and *bucket_cap* shape a key set
    this filter creates (tests use tiny values to split buckets quickly); an
    existing meta wins over both.  Other keyword arguments are those of
    :class:`~iri_scrapy.IRIDupeFilter` (``jobdir`` is not supported).
    """

    def __init__(
        self,
        *,
        redis_url: str = "redis://localhost:6379/0",
        key: str = "iri-dupefilter",
        expected_urls: int | None = None,
        base_buckets: int | None = None,
        bucket_cap: int = BUCKET_CAP,
        local_cache: int = DEFAULT_LOCAL_CACHE,
        cluster: bool = False,
        retry_seconds: float = DEFAULT_RETRY_SECONDS,
        socket_timeout: float = DEFAULT_SOCKET_TIMEOUT,
        redis_params: dict[str, Any] | None = None,
        crawler: Crawler | None = None,
        **kwargs: Any,
    ) -> None:
        if kwargs.get("jobdir"):
            raise IRIRedisError("RedisIRIDupeFilter keeps fingerprints in Redis, not in JOBDIR")
        super().__init__(**kwargs)
        self.redis_url = redis_url
        self.retry_seconds = max(0.0, float(retry_seconds))
        self.socket_timeout = float(socket_timeout)
        self.redis_params = dict(redis_params or {})
        #: Talk to a Redis Cluster (``redis.cluster.RedisCluster``).
        self.cluster = bool(cluster)
        self.crawler = crawler
        self.expected_urls = expected_urls  # an optional hint (roots_for)
        #: The fingerprints in Redis, and the local cache (:mod:`.redis_seen`).
        self.seen_set = RedisSeenSet(
            self._new_client, key=key, options_tag=self.options_tag(),
            expected_urls=expected_urls, base_buckets=base_buckets, bucket_cap=bucket_cap,
            local_cache=local_cache, cluster=self.cluster, safe_url=self.safe_url, log=logger,
        )
        #: ``<key>:v<canonicalization version>:<tag>``, the meta key, the local cache's bound.
        self.base_key = self.seen_set.base_key
        self.meta_key = self.seen_set.meta_key
        self.local_cache = self.seen_set.local_cache
        #: request_seen answered from the local cache / by Redis.
        self.local_hits = 0
        self.remote_calls = 0
        self._failed = False
        try:
            retried = retried_errors()
        except ImportError:  # no redis package: open() refuses to start, saying so
            retried = (OSError,)
        #: request_seen's retries through an outage, or past an out-of-memory Redis
        #: (noeviction) that refused the SADD: sent again until memory is freed or the
        #: deadline (stats iri/redis/*).
        self._retry = RetryPolicy(
            mask_url(redis_url), self.retry_seconds, retryable=retried,
            log=logger, action="request_seen retries", on_count=self._count_outage,
        )
        self._close_deferred: Any = None

    # --- construction --------------------------------------------------------

    @classmethod
    def kwargs_from_crawler(cls, crawler: Crawler) -> dict[str, Any]:
        from scrapy.utils.request import RequestFingerprinter

        kwargs = super().kwargs_from_crawler(crawler)
        settings = crawler.settings
        kwargs["jobdir"] = None  # Redis holds the fingerprints
        kwargs["allow_reset"] = False
        if type(kwargs["fingerprinter"]) is RequestFingerprinter:
            # Only Scrapy's stock fingerprinter is replaced; a custom one is honoured.
            logger.info(
                "RedisIRIDupeFilter: REQUEST_FINGERPRINTER_CLASS is Scrapy's default; "
                "deduplicating with IRIRequestFingerprinter instead (set "
                "REQUEST_FINGERPRINTER_CLASS = 'iri_scrapy.IRIRequestFingerprinter' to "
                "share it with the HTTP cache and other components)"
            )
            kwargs["fingerprinter"] = IRIRequestFingerprinter(crawler)
        key = _key_from_settings(crawler)
        expected = setting(settings, "IRI_REDIS_EXPECTED_URLS")
        kwargs["local_cache"] = setting(settings, "IRI_REDIS_LOCAL_CACHE")
        kwargs.update(
            client_kwargs_from_settings(settings),
            key=key,
            expected_urls=None if expected is None else settings.getint("IRI_REDIS_EXPECTED_URLS"),
            crawler=crawler,
        )
        return kwargs

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        """Build (Scrapy's scheduler); :meth:`open` connects.

        Not connecting here is deliberate: Scrapy 2.19 builds the scheduler (and
        so the dupefilter) before the engine has a slot, and an exception raised
        then is replaced by ``RuntimeError: Engine slot not assigned`` from the
        engine's clean-up; raised from ``open()`` it reaches the crawl's result.
        """
        df = super().from_crawler(crawler)
        from scrapy import signals

        crawler.signals.connect(df._spider_closed, signal=signals.spider_closed)
        return df

    @classmethod
    def from_spider(cls, spider: Spider) -> Self:
        """Build and connect (scrapy-redis's ``Scheduler.open``, which never calls ``open``)."""
        df = super().from_spider(spider)
        crawler = getattr(spider, "crawler", None)
        settings = getattr(crawler, "settings", None)
        if settings is not None and is_scrapy_redis_scheduler(settings.get("SCHEDULER")):
            queue = scrapy_redis_url(settings)
            if not same_server(queue, df.redis_url):
                error = ValueError(
                    f"scrapy-redis's scheduler would keep the queue at {mask_url(queue)} "
                    f"(REDIS_URL, REDIS_HOST/REDIS_PORT) and RedisIRIDupeFilter the seen-set "
                    f"at {mask_url(df.redis_url)} (IRI_REDIS_URL): name one server, or leave "
                    "REDIS_URL unset and the add-on sets it from IRI_REDIS_URL")
                refuse_start(crawler, REASON_BAD_SETTING, str(error), error)
                return df
        df.connect()
        return df

    def tag_hash(self) -> str:
        """8 hex digits naming :meth:`options_tag` in the key."""
        return tag_hash(self.options_tag())

    # --- connection ------------------------------------------------------------

    @property
    def safe_url(self) -> str:
        return mask_url(self.redis_url)

    def _new_client(self) -> Any:
        return new_client(self.redis_url, self.socket_timeout, self.redis_params, self.cluster)

    def connect(self) -> None:
        """Open the client, check Redis answers and agree on the key layout.

        Raises :class:`IRIRedisError` naming the (password-masked) URL.
        """
        self.seen_set.connect()

    def _disconnect(self) -> None:
        self.seen_set.disconnect()

    # --- the storage hook --------------------------------------------------------

    def seen_add(self, fingerprint: bytes) -> bool:
        """Record *fingerprint* in Redis; True if it was there already.

        A fingerprint this process already got an answer for is answered from the
        local cache (no round trip): Redis never forgets a stored fingerprint
        (short of losing its data or a :meth:`clear`), so that "seen" is true.
        """
        store = self.seen_set
        if store.cached(fingerprint):
            self.local_hits += 1
            return True
        if self._failed:
            self._inc(STAT_UNCHECKED)
            return False
        if not store.connected:
            self.connect()
        self.remote_calls += 1
        try:
            seen = not store.add(fingerprint)
        except store.retryable as exc:
            seen = self._seen_add_retrying(fingerprint, exc)
        except Exception as exc:
            if not is_oom(exc):  # a RedisError that retrying cannot fix (auth, ...)
                self._give_up(exc, 0.0)
                return False
            seen = self._seen_add_retrying(fingerprint, exc)
        if not self._failed:  # Redis holds it now
            store.remember(fingerprint)
        return seen

    def known_seen(self, fingerprint: bytes) -> bool:
        """True if this process knows *fingerprint* is stored (its local cache).

        :meth:`seen_add` would then answer "seen" without a round trip.
        :class:`~iri_scrapy.RedisIRIScheduler` uses it to skip writing an intent.
        """
        return self.seen_set.cached(fingerprint)

    def _count_outage(self, name: str, value: float) -> None:
        if name == "outage_seconds":
            if self.stats is not None:
                self.stats.max_value(STAT_OUTAGE_SECONDS, round(value, 3))
        else:
            self._inc(STAT_OUTAGES if name == "outages" else STAT_RETRIES)

    def _seen_add_retrying(self, fingerprint: bytes, first: BaseException) -> bool:
        """Retry (blocking, bounded by ``retry_seconds``) after a connection failure."""

        def again() -> bool:
            # A Redis restarted without its data has no split buckets: learn them again.
            self.seen_set.forget_splits()
            return self.seen_set.add(fingerprint)

        try:
            added = self._retry.retry(again, first)
        except RedisRetryExhausted as exc:
            self._give_up(exc.last, exc.waited)
            return False
        except Exception as exc:  # a RedisError that retrying cannot fix (auth, ...)
            self._give_up(exc, self._retry.waited)
            return False
        if not added:
            # The first attempt may have been applied before the connection broke:
            # fetching once more is better than dropping a request nobody fetched.
            self._inc(STAT_AMBIGUOUS)
            logger.warning(
                "A request whose Redis write was interrupted is now reported as seen; "
                "it is fetched anyway (at most one possible duplicate per outage)"
            )
        return False

    def _give_up(self, exc: BaseException, waited: float) -> None:
        """Stop deduplicating and close the spider loudly."""
        self._failed = True
        self._inc(STAT_UNCHECKED)
        if self.stats is not None:
            self.stats.max_value(STAT_OUTAGE_SECONDS, round(waited, 3))
        reason = give_up_reason(exc)
        logger.error(
            "%s Requests scheduled from now on are not deduplicated (%s) and survive only "
            "in a persistent queue (JOBDIR, or scrapy-redis's queue).",
            give_up_line("RedisIRIDupeFilter", self.safe_url, exc, waited, reason),
            STAT_UNCHECKED)
        if compat.running_engine(self.crawler) is None:
            raise IRIRedisError(f"Redis at {self.safe_url} unusable: {exc}") from exc
        self._close_deferred = stop_crawl(self.crawler, reason, "RedisIRIDupeFilter")

    # --- life cycle and inspection ---------------------------------------------

    def open(self) -> None:
        """Scrapy's scheduler calls this at start (scrapy-redis's never does).

        If Redis cannot be used, or the ``redis`` package is missing, the crawl
        does not start: one ERROR line, ``finish_reason`` ``iri_redis_unavailable``
        or ``iri_redis_not_installed``, exit code 1 (:mod:`~iri_scrapy.plugin.refusal`).
        """
        if self.seen_set.connected:
            return
        try:
            self.connect()
        except IRIRedisError as exc:  # connect() has logged it
            refuse_start(self.crawler, REASON_REDIS_UNAVAILABLE, str(exc), exc, log=False)
        except ImportError as exc:
            message = (
                f"RedisIRIDupeFilter needs the redis package, which cannot be imported "
                f"({exc}): {install_hint('redis')}"
            )
            refuse_start(self.crawler, REASON_REDIS_NOT_INSTALLED, message, exc)

    def close(self, reason: str = "") -> None:
        """Scrapy's scheduler calls this at the end; the Redis keys are kept."""
        if self.stats is not None:
            self.stats.set_value(STAT_LOCAL_HITS, self.local_hits)
            self.stats.set_value(STAT_REMOTE_CALLS, self.remote_calls)
        super().close(reason)
        self._disconnect()

    def _spider_closed(self, spider: Spider | None = None, reason: str = "") -> None:
        self._disconnect()

    def clear(self) -> None:
        """Delete every key of this filter (scrapy-redis's flush calls it).

        scrapy-redis flushes when ``SCHEDULER_PERSIST`` is false (at close) or
        ``SCHEDULER_FLUSH_ON_START`` is true: that forgets what *every* crawler
        sharing these keys has seen.
        """
        super().clear()
        deleted = self.seen_set.clear()
        logger.warning(
            "RedisIRIDupeFilter: cleared %s:* at %s (%d keys; scrapy-redis flush: "
            "SCHEDULER_PERSIST=False or SCHEDULER_FLUSH_ON_START=True); crawlers sharing "
            "these keys will fetch everything again",
            self.base_key, self.safe_url, deleted,
        )

    def __len__(self) -> int:
        """Fingerprints stored in Redis: ``SCARD`` of every existing bucket, pipelined."""
        return len(self.seen_set)

    def __contains__(self, request: object) -> bool:
        """True if *request*'s fingerprint is stored (no side effect)."""
        if not isinstance(request, Request):
            return False
        return self.has_fingerprint(self.fingerprint(request))

    def has_fingerprint(self, fingerprint: bytes) -> bool:
        """True if *fingerprint* is stored in Redis (one round trip, no side effect).

        Unlike :meth:`seen_add` it stores nothing, and it always asks Redis (the
        local cache is neither read nor filled).
        """
        return self.seen_set.has(fingerprint)

    # --- the seen-set's layout (:class:`~.redis_seen.RedisSeenSet`) -----------------

    @property
    def base_buckets(self) -> int:
        """The root count (the meta's, once connected)."""
        return self.seen_set.base_buckets

    @property
    def bucket_cap(self) -> int:
        """The bucket cap (the meta's, once connected)."""
        return self.seen_set.bucket_cap

    @property
    def local_cached(self) -> int:
        """Fingerprints in this process's local cache now: at most ``local_cache``,
        0 without one (``local_cache=0``)."""
        return self.seen_set.local_cached

    @property
    def known_splits(self) -> frozenset[bytes]:
        """The bucket keys this process knows are split (learned from a ``WRONGTYPE``
        reply, or split by it); empty after :meth:`clear`."""
        return self.seen_set.known_splits

    def level_counts(self) -> dict[int, tuple[int, int]]:
        """``{depth: (buckets, members)}`` over the existing buckets (0: roots)."""
        return self.seen_set.level_counts()

    def bucket_keys(self) -> list[bytes]:
        """The names of the buckets and split markers that exist (``SCAN``)."""
        return self.seen_set.bucket_keys()

    def memory_usage(self) -> int:
        """``MEMORY USAGE`` (exact, ``SAMPLES 0``) of all existing keys, in bytes."""
        return self.seen_set.memory_usage()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.safe_url} {self.base_key} {self.seen_set.layout}>"


# --------------------------------------------------------------------------- start URLs


def _dedupe_start_requests(settings: BaseSettings | None) -> bool:
    # the same setting (and default) as IRISpiderMiddleware uses for Spider.start()
    return settings is not None and settings.getbool(SETTING_DEDUPE_START, True)


class IRIRedisSpiderMixin:
    """Mixin for scrapy-redis spiders: URLs pushed to Redis are deduplicated too.

    ``class MySpider(IRIRedisSpiderMixin, RedisSpider)`` (or use
    :class:`IRIRedisSpider`).  scrapy-redis's ``make_request_from_data`` gives them
    ``dont_filter=True`` and hands them to ``engine.crawl()`` from the
    ``spider_idle`` signal, bypassing spider middlewares (so the add-on's
    ``IRISpiderMiddleware`` never sees them).  With ``IRI_DEDUPE_START_REQUESTS``
    (default ``True``, the setting that middleware uses for ``start()``) they get
    ``dont_filter=False`` and ``meta["allow_offsite"] = True``: deduplicated like
    any request, still exempt from offsite filtering.  Counted in
    ``iri/redis/start_deduplicated``.
    """

    def make_request_from_data(self, data: bytes | str) -> Any:
        request = super().make_request_from_data(data)  # type: ignore[misc]
        settings = getattr(self, "settings", None)
        if (
            isinstance(request, Request)
            and request.dont_filter
            and _dedupe_start_requests(settings)
        ):
            request.dont_filter = False
            request.meta.setdefault("allow_offsite", True)  # as dont_filter allowed before
            crawler = getattr(self, "crawler", None)
            if crawler is not None and crawler.stats is not None:
                crawler.stats.inc_value(STAT_START_REDIS)
        return request


def __getattr__(name: str) -> Any:
    """``IRIRedisSpider`` / ``IRIRedisCrawlSpider``, built on first use (imports scrapy_redis)."""
    if name in ("IRIRedisSpider", "IRIRedisCrawlSpider"):
        from scrapy_redis.spiders import RedisCrawlSpider, RedisSpider

        base = RedisSpider if name == "IRIRedisSpider" else RedisCrawlSpider
        doc = (
            f"scrapy-redis ``{base.__name__}`` whose Redis-fed start URLs are deduplicated "
            "unless IRI_DEDUPE_START_REQUESTS is false (see IRIRedisSpiderMixin)."
        )
        cls = type(name, (IRIRedisSpiderMixin, base), {"__module__": __name__, "__doc__": doc})
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
