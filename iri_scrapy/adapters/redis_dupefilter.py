"""``RedisIRIDupeFilter``: IRI deduplication shared by many crawlers through one Redis.

``DUPEFILTER_CLASS = "iri_scrapy.RedisIRIDupeFilter"`` with ``IRI_REDIS_URL`` (or
scrapy-redis's ``REDIS_URL``).  Works under Scrapy's own scheduler and under
``SCHEDULER = "scrapy_redis.scheduler.Scheduler"`` (scrapy-redis 0.9.1), which builds
dupefilters through :meth:`from_spider`.

It is :class:`~iri_scrapy.IRIDupeFilter` with the storage hook
(:meth:`IRIDupeFilter.seen_add`) moved to Redis: fingerprints come from the same
fingerprinter, and the redirect-same-key and renormalized passes, the per-rung
stats (``iri/dupefilter/rung/...``, ``dupefilter/filtered``), ``DUPEFILTER_DEBUG``
logging, ``dont_filter`` and ``meta["dont_normalize_iri"]`` behave exactly as in
the local filter.  ``JOBDIR`` is not used for fingerprints (Redis holds them; the
scheduler may still keep its queue there).

Key layout
==========

``<base>`` is ``IRI_REDIS_KEY % {"spider": spider.name}`` (default
``"%(spider)s:iri-dupefilter"``) followed by ``:v<CANONICALIZATION_VERSION>:<tag>``,
where ``<tag>`` is the first 8 hex digits of the SHA-1 of
:meth:`IRIDupeFilter.options_tag` (IRI level, fragments, NFC, heuristics,
fingerprinter class).  A new ladder version or other options therefore use other
keys: keys of different canonicalizations are never mixed.

``<base>:meta`` (HASH)
    ``format`` (1), ``canonicalization_version``, ``options_tag`` (full text),
    ``buckets``, ``field_bytes`` (8).  Written once (``HSETNX``) by the first
    crawler; later crawlers adopt its bucket count and refuse a different format.
``<base>:<i>`` for ``i`` in ``0 .. buckets-1`` in lowercase hex (HASH)
    One field per seen request: 8 raw bytes of its fingerprint (the same 64 bits
    :func:`~iri_scrapy.adapters.fpstore.fp64` keeps locally), value ``""``.  The
    bucket ``i`` comes from 4 *other* bytes of the fingerprint, so about
    ``64 + log2(buckets)`` bits are compared.

``request_seen`` is one ``HSETNX <bucket> <field> ""``: atomic, one round trip,
1 when new.  Small HASHes are stored by Redis as a listpack (about 14 bytes per
entry instead of about 88 for scrapy-redis's SET of 40-character hex), as long as
a bucket holds at most ``hash-max-listpack-entries`` (default 512) fields, so
the bucket count is sized from ``IRI_REDIS_EXPECTED_URLS`` (default 10 million):
the smallest power of two giving at most 200 fields per bucket (65536 buckets for
10 million).  Up to about twice the expected count the buckets stay compact;
beyond, buckets convert one by one to hashtables (about 70 bytes per entry).  A
count far above the real crawl wastes about 100 bytes per empty bucket key.

Faults
======

* Redis unreachable when the crawl starts: :class:`IRIRedisError` naming the URL
  (password masked), raised from :meth:`from_crawler`/:meth:`from_spider`, so
  the crawl does not start.
* Redis lost mid-crawl: ``request_seen`` retries with exponential backoff (50 ms
  doubling to 1 s) for up to ``IRI_REDIS_RETRY_SECONDS`` (default 60).  It runs
  in the Twisted reactor thread, so **the whole crawl is stalled meanwhile**
  (downloads in flight wait too); when Redis answers again the crawl continues.
  No request gets a "not seen" answer while Redis is down.  After the deadline
  the spider is closed with reason ``iri_redis_unavailable`` and an error is
  logged; requests scheduled after that are enqueued unchecked (counted in
  ``iri/redis/unchecked``): they survive only in a persistent queue (``JOBDIR``,
  or scrapy-redis's queue if Redis comes back).
* A command whose reply was lost (connection cut after sending) may or may not
  have been applied; if the retry then says "seen", that request is fetched
  anyway (``iri/redis/ambiguous_refetch``): one possible duplicate per outage
  rather than a lost request.
* Redis restarted *without* its data (no persistence) forgets every seen
  request: they are fetched again (duplicates, never losses).

Stats: ``iri/redis/outages``, ``iri/redis/retries``, ``iri/redis/outage_seconds``
(longest), ``iri/redis/ambiguous_refetch``, ``iri/redis/unchecked``.

Start URLs
==========

Scrapy's ``Spider.start()`` and scrapy-redis's ``RedisSpider.make_request_from_data``
make start requests with ``dont_filter=True``: the scheduler never asks the
dupefilter about them, so every crawler (and every resumed run) would fetch them
again.  The add-on's ``IRISpiderMiddleware`` clears ``dont_filter`` on
``start()`` requests (``IRI_DEDUPE_START_REQUESTS``, default ``True``).  URLs
pushed to a scrapy-redis ``RedisSpider`` never pass spider middlewares: use
:class:`IRIRedisSpiderMixin`, :class:`IRIRedisSpider` or
:class:`IRIRedisCrawlSpider`, which honour the same setting.
"""

from __future__ import annotations

import hashlib
import logging
import time
from hashlib import blake2b
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from scrapy import Request

from .. import CANONICALIZATION_VERSION
from .dupefilter import IRIDupeFilter
from .fingerprinter import IRIRequestFingerprinter

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings
    from typing_extensions import Self

__all__ = [
    "RedisIRIDupeFilter",
    "IRIRedisError",
    "IRIRedisSpiderMixin",
    "CLOSE_REASON",
    "FORMAT_VERSION",
    "FIELD_BYTES",
    "DEFAULT_KEY",
    "DEFAULT_EXPECTED_URLS",
    "DEFAULT_RETRY_SECONDS",
    "MAX_BUCKET_MEAN",
    "bucket_count",
    "redis_url_from_settings",
    "mask_url",
]

logger = logging.getLogger(__name__)

#: ``finish_reason`` when Redis stayed unreachable past ``IRI_REDIS_RETRY_SECONDS``.
CLOSE_REASON = "iri_redis_unavailable"
#: Version of the key layout (stored in ``<base>:meta``).
FORMAT_VERSION = 1
#: Bytes of the fingerprint stored per request (the HASH field).
FIELD_BYTES = 8
DEFAULT_KEY = "%(spider)s:iri-dupefilter"
DEFAULT_EXPECTED_URLS = 10_000_000
DEFAULT_RETRY_SECONDS = 60.0
DEFAULT_SOCKET_TIMEOUT = 5.0
#: Buckets are sized so that the expected URL count gives at most this many fields each.
MAX_BUCKET_MEAN = 200
_MAX_BUCKETS = 1 << 24
_BACKOFF_FIRST = 0.05
_BACKOFF_MAX = 1.0

STAT_OUTAGES = "iri/redis/outages"
STAT_RETRIES = "iri/redis/retries"
STAT_OUTAGE_SECONDS = "iri/redis/outage_seconds"
STAT_AMBIGUOUS = "iri/redis/ambiguous_refetch"
STAT_UNCHECKED = "iri/redis/unchecked"
STAT_START_REDIS = "iri/redis/start_deduplicated"
#: Shared with IRISpiderMiddleware (``Spider.start()`` requests).
SETTING_DEDUPE_START = "IRI_DEDUPE_START_REQUESTS"


class IRIRedisError(RuntimeError):
    """Redis cannot be used by the dupefilter (unreachable, wrong data, bad settings)."""


def bucket_count(expected_urls: int) -> int:
    """Buckets for *expected_urls*: the least power of two with at most 200 URLs each."""
    buckets = 1
    need = max(1, int(expected_urls))
    while buckets * MAX_BUCKET_MEAN < need and buckets < _MAX_BUCKETS:
        buckets <<= 1
    return buckets


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
    url = settings.get("IRI_REDIS_URL") or settings.get("REDIS_URL")
    if url:
        return str(url)
    host = settings.get("REDIS_HOST") or "localhost"
    port = settings.getint("REDIS_PORT", 6379)
    db = settings.getint("REDIS_DB", 0)
    return f"redis://{host}:{port}/{db}"


def _retryable() -> tuple[type[BaseException], ...]:
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import ReadOnlyError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    # BusyLoadingError (a restarted server still loading its AOF/RDB) is a ConnectionError.
    return (RedisConnectionError, RedisTimeoutError, ReadOnlyError, OSError)


class RedisIRIDupeFilter(IRIDupeFilter):
    """:class:`~iri_scrapy.IRIDupeFilter` whose seen set lives in Redis (see module doc).

    Built by Scrapy through :meth:`from_crawler` / :meth:`from_spider`.  For direct
    use (tests, benchmarks): ``RedisIRIDupeFilter(redis_url=..., key="name")``, then
    :meth:`connect` (or :meth:`open`); *key* is the base before
    ``:v<version>:<tag>``.  Other keyword arguments are those of
    :class:`~iri_scrapy.IRIDupeFilter` (``jobdir`` is not supported).
    """

    def __init__(
        self,
        *,
        redis_url: str = "redis://localhost:6379/0",
        key: str = "iri-dupefilter",
        expected_urls: int = DEFAULT_EXPECTED_URLS,
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
        self.crawler = crawler
        self.base_key = f"{key}:v{CANONICALIZATION_VERSION}:{self.tag_hash()}"
        self.meta_key = f"{self.base_key}:meta"
        self.buckets = bucket_count(expected_urls)
        self._mask = self.buckets - 1
        self._bucket_prefix = (self.base_key + ":").encode()
        self._client: Any = None
        self._meta_ok = False
        self._failed = False
        self._retryable = _retryable()
        self._close_deferred: Any = None

    # --- construction --------------------------------------------------------

    @classmethod
    def _kwargs_from_crawler(cls, crawler: Crawler) -> dict[str, Any]:
        from scrapy.utils.request import RequestFingerprinter

        kwargs = super()._kwargs_from_crawler(crawler)
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
        template = str(settings.get("IRI_REDIS_KEY") or DEFAULT_KEY)
        spider = crawler.spider
        try:
            key = template % {"spider": spider.name if spider is not None else None}
        except (KeyError, TypeError, ValueError) as exc:
            raise IRIRedisError(
                f"IRI_REDIS_KEY {template!r} must be a string using only %(spider)s: {exc}"
            ) from exc
        if spider is None and "%(spider)s" in template:
            raise IRIRedisError("IRI_REDIS_KEY names the spider, but the crawler has none yet")
        params = settings.getdict("IRI_REDIS_PARAMS")
        kwargs.update(
            redis_url=redis_url_from_settings(settings),
            key=key,
            expected_urls=settings.getint("IRI_REDIS_EXPECTED_URLS", DEFAULT_EXPECTED_URLS),
            retry_seconds=settings.getfloat("IRI_REDIS_RETRY_SECONDS", DEFAULT_RETRY_SECONDS),
            socket_timeout=settings.getfloat("IRI_REDIS_SOCKET_TIMEOUT", DEFAULT_SOCKET_TIMEOUT),
            redis_params=dict(params),
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
        df.connect()
        return df

    def tag_hash(self) -> str:
        """8 hex digits naming :meth:`options_tag` in the key."""
        return hashlib.sha1(self.options_tag().encode()).hexdigest()[:8]  # noqa: S324

    # --- connection ------------------------------------------------------------

    @property
    def safe_url(self) -> str:
        return mask_url(self.redis_url)

    def _new_client(self) -> Any:
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        params: dict[str, Any] = {
            "socket_timeout": self.socket_timeout,
            "socket_connect_timeout": min(self.socket_timeout, 2.0),
            # no retries inside redis-py: request_seen retries with its own deadline
            "retry": Retry(NoBackoff(), 0),
            "single_connection_client": True,  # one socket; no pool lock per command
        }
        params.update(self.redis_params)
        return redis.Redis.from_url(self.redis_url, **params)

    def connect(self) -> None:
        """Open the client, check Redis answers and agree on the key layout.

        Raises :class:`IRIRedisError` naming the (password-masked) URL.
        """
        from redis.exceptions import RedisError

        try:
            if self._client is None:
                self._client = self._new_client()  # connects at once (single connection)
            self._client.ping()
            self._ensure_meta()
        except (RedisError, ValueError) as exc:
            self._disconnect()
            error = IRIRedisError(
                f"RedisIRIDupeFilter cannot use Redis at {self.safe_url}: {exc} "
                "(set IRI_REDIS_URL, or scrapy-redis's REDIS_URL, to a running server)"
            )
            logger.error("%s", error)
            raise error from exc
        logger.info(
            "RedisIRIDupeFilter: Redis %s, keys %s:* (%d buckets)",
            self.safe_url, self.base_key, self.buckets,
        )

    def _ensure_meta(self) -> None:
        """Write ``<base>:meta`` if absent (atomically) and check/adopt what is there."""
        wanted = {
            "format": FORMAT_VERSION,
            "canonicalization_version": CANONICALIZATION_VERSION,
            "options_tag": self.options_tag(),
            "field_bytes": FIELD_BYTES,
            "buckets": self.buckets,
        }
        pipe = self._client.pipeline(transaction=True)
        for name, value in wanted.items():
            pipe.hsetnx(self.meta_key, name, value)
        pipe.hgetall(self.meta_key)
        stored = {k.decode(): v.decode() for k, v in pipe.execute()[-1].items()}
        for name in ("format", "canonicalization_version", "options_tag", "field_bytes"):
            if stored.get(name) != str(wanted[name]):
                raise IRIRedisError(
                    f"{self.meta_key} at {self.safe_url} has {name}={stored.get(name)!r}, this "
                    f"crawler needs {wanted[name]!r}: refusing to mix keys (use another "
                    "IRI_REDIS_KEY or delete the old keys)"
                )
        try:
            buckets = int(stored["buckets"])
        except (KeyError, ValueError) as exc:
            raise IRIRedisError(f"{self.meta_key} has no valid bucket count") from exc
        if buckets < 1 or buckets & (buckets - 1):
            raise IRIRedisError(f"{self.meta_key} has a bad bucket count {buckets}")
        if buckets != self.buckets:
            logger.info(
                "RedisIRIDupeFilter: %s already uses %d buckets (IRI_REDIS_EXPECTED_URLS "
                "would give %d): keeping %d", self.base_key, buckets, self.buckets, buckets,
            )
            self.buckets = buckets
            self._mask = buckets - 1
        self._meta_ok = True

    def _locate(self, fingerprint: bytes) -> tuple[bytes, bytes]:
        """(bucket key, field) of *fingerprint*."""
        if len(fingerprint) < 16:
            fingerprint = blake2b(fingerprint, digest_size=16).digest()
        bucket = int.from_bytes(fingerprint[8:12], "big") & self._mask
        return self._bucket_prefix + b"%x" % bucket, fingerprint[:FIELD_BYTES]

    def bucket_keys(self) -> list[bytes]:
        """Every bucket key name (whether it exists or not)."""
        return [self._bucket_prefix + b"%x" % i for i in range(self.buckets)]

    # --- the storage hook --------------------------------------------------------

    def seen_add(self, fingerprint: bytes) -> bool:
        """``HSETNX``: record *fingerprint* in Redis; True if it was there already."""
        if self._failed:
            self._inc(STAT_UNCHECKED)
            return False
        if not self._meta_ok:
            self.connect()
        key, field = self._locate(fingerprint)
        try:
            return not self._client.execute_command("HSETNX", key, field, b"")
        except self._retryable as exc:
            return self._seen_add_retrying(key, field, exc)
        except Exception as exc:  # a RedisError that retrying cannot fix (OOM, auth, ...)
            self._give_up(exc, 0.0)
            return False

    def _seen_add_retrying(self, key: bytes, field: bytes, first: BaseException) -> bool:
        """Retry (blocking, bounded by ``retry_seconds``) after a connection failure."""
        start = time.monotonic()
        deadline = start + self.retry_seconds
        self._inc(STAT_OUTAGES)
        logger.warning(
            "Redis at %s unreachable (%s): request_seen retries for up to %.0f s "
            "(IRI_REDIS_RETRY_SECONDS); the crawl is stalled meanwhile",
            self.safe_url, first, self.retry_seconds,
        )
        delay = _BACKOFF_FIRST
        last: BaseException = first
        max_attempts = int(self.retry_seconds / _BACKOFF_FIRST) + 2  # bounded by time anyway
        for attempt in range(1, max_attempts + 1):
            now = time.monotonic()
            if now >= deadline:
                break
            time.sleep(min(delay, deadline - now))
            delay = min(delay * 2, _BACKOFF_MAX)
            self._inc(STAT_RETRIES)
            try:
                added = self._client.execute_command("HSETNX", key, field, b"")
            except self._retryable as exc:
                last = exc
                continue
            except Exception as exc:
                self._give_up(exc, time.monotonic() - start)
                return False
            elapsed = time.monotonic() - start
            if self.stats is not None:
                self.stats.max_value(STAT_OUTAGE_SECONDS, round(elapsed, 3))
            logger.warning(
                "Redis at %s answers again after %.2f s (%d retries): crawl continues",
                self.safe_url, elapsed, attempt,
            )
            if not added:
                # The first attempt may have been applied before the connection broke:
                # fetching once more is better than dropping a request nobody fetched.
                self._inc(STAT_AMBIGUOUS)
                logger.warning(
                    "A request whose Redis write was interrupted is now reported as seen; "
                    "it is fetched anyway (at most one possible duplicate per outage)"
                )
            return False
        self._give_up(last, time.monotonic() - start)
        return False

    def _give_up(self, exc: BaseException, waited: float) -> None:
        """Stop deduplicating and close the spider loudly."""
        self._failed = True
        self._inc(STAT_UNCHECKED)
        if self.stats is not None:
            self.stats.max_value(STAT_OUTAGE_SECONDS, round(waited, 3))
        logger.error(
            "RedisIRIDupeFilter: Redis at %s unusable (%s: %s) after %.1f s of retries "
            "(IRI_REDIS_RETRY_SECONDS=%s): closing the spider (%s). Requests scheduled "
            "from now on are not deduplicated (%s) and survive only in a persistent queue "
            "(JOBDIR, or scrapy-redis's queue).",
            self.safe_url, type(exc).__name__, exc, waited, self.retry_seconds,
            CLOSE_REASON, STAT_UNCHECKED,
        )
        engine = None
        if self.crawler is not None:
            try:
                engine = self.crawler.engine  # Scrapy 2.19 raises RuntimeError before the crawl
            except RuntimeError:
                engine = None
        if engine is None:
            raise IRIRedisError(f"Redis at {self.safe_url} unusable: {exc}") from exc
        from scrapy.utils.defer import deferred_from_coro

        d = deferred_from_coro(engine.close_spider_async(reason=CLOSE_REASON))
        d.addErrback(
            lambda f: logger.error("RedisIRIDupeFilter: closing the spider failed: %s", f.value)
        )
        self._close_deferred = d

    # --- life cycle and inspection ---------------------------------------------

    def open(self) -> None:
        """Scrapy's scheduler calls this at start (scrapy-redis's never does)."""
        if not self._meta_ok:
            self.connect()

    def close(self, reason: str = "") -> None:
        """Scrapy's scheduler calls this at the end; the Redis keys are kept."""
        super().close(reason)
        self._disconnect()

    def _spider_closed(self, spider: Spider | None = None, reason: str = "") -> None:
        self._disconnect()

    def _disconnect(self) -> None:
        client, self._client = self._client, None
        self._meta_ok = False
        if client is not None:
            try:
                client.close()
            except Exception:  # noqa: BLE001 - closing a broken socket is best effort
                logger.debug("RedisIRIDupeFilter: error closing the Redis client", exc_info=True)

    def clear(self) -> None:
        """Delete every key of this filter (scrapy-redis's flush calls it).

        scrapy-redis flushes when ``SCHEDULER_PERSIST`` is false (at close) or
        ``SCHEDULER_FLUSH_ON_START`` is true: that forgets what *every* crawler
        sharing these keys has seen.
        """
        super().clear()
        if self._client is None:
            self.connect()
        keys = self.bucket_keys()
        deleted = 0
        for i in range(0, len(keys), 1000):
            deleted += int(self._client.unlink(*keys[i : i + 1000]))
        deleted += int(self._client.unlink(self.meta_key))
        self._meta_ok = False
        logger.warning(
            "RedisIRIDupeFilter: cleared %s:* at %s (%d keys; scrapy-redis flush: "
            "SCHEDULER_PERSIST=False or SCHEDULER_FLUSH_ON_START=True); crawlers sharing "
            "these keys will fetch everything again",
            self.base_key, self.safe_url, deleted,
        )

    def __len__(self) -> int:
        """Fingerprints stored in Redis (``HLEN`` of every bucket, pipelined)."""
        if not self._meta_ok:
            self.connect()
        total = 0
        keys = self.bucket_keys()
        for i in range(0, len(keys), 1000):
            pipe = self._client.pipeline(transaction=False)
            for key in keys[i : i + 1000]:
                pipe.hlen(key)
            total += sum(int(n) for n in pipe.execute())
        return total

    def __contains__(self, request: object) -> bool:
        """True if *request*'s fingerprint is stored (``HEXISTS``, no side effect)."""
        if not isinstance(request, Request):
            return False
        if not self._meta_ok:
            self.connect()
        key, field = self._locate(self.fingerprint(request))
        return bool(self._client.hexists(key, field))

    def memory_usage(self) -> int:
        """``MEMORY USAGE`` (exact, ``SAMPLES 0``) of all existing keys, in bytes."""
        if not self._meta_ok:
            self.connect()
        total = 0
        keys = [*self.bucket_keys(), self.meta_key.encode()]
        for i in range(0, len(keys), 1000):
            pipe = self._client.pipeline(transaction=False)
            for key in keys[i : i + 1000]:
                pipe.execute_command("MEMORY USAGE", key, "SAMPLES", 0)
            total += sum(int(n) for n in pipe.execute() if n is not None)
        return total

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.safe_url} {self.base_key} buckets={self.buckets}>"


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
