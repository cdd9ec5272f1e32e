"""``RedisIRIDupeFilter``: IRI deduplication shared by many crawlers through one Redis.

``DUPEFILTER_CLASS = "iri_scrapy.RedisIRIDupeFilter"`` with ``IRI_REDIS_URL`` (or
scrapy-redis's ``REDIS_URL``); works under Scrapy's scheduler, ours and
scrapy-redis 0.9.1's (through :meth:`from_spider`).  It is
:class:`~iri_scrapy.IRIDupeFilter` with :meth:`IRIDupeFilter.seen_add` moved to
Redis: each new fingerprint is one plain ``SADD`` of its first 8 bytes, as an
integer, into an intset bucket of a self-splitting trie (format 4), with a
bounded local cache of answers.  Keys carry the canonicalization version and an
options hash, so different canonicalizations never mix.  A lost Redis stalls the
crawl and never yields a "not seen"; start requests are deduplicated
(:class:`IRIRedisSpiderMixin` for URLs pushed to a ``RedisSpider``).

Design: docs/redis.md (keys, memory, Redis Cluster, local cache, faults).
"""

from __future__ import annotations

import hashlib
import logging
from hashlib import blake2b
from typing import TYPE_CHECKING, Any

from scrapy import Request

from iri_scrapy.core.extras import install_hint
from iri_scrapy.core.ladder import CANONICALIZATION_VERSION
from iri_scrapy.frontier.redis_client import (
    DEFAULT_RETRY_SECONDS,
    DEFAULT_SOCKET_TIMEOUT,
    IRIRedisError,
    RedisRetryExhausted,
    RetryPolicy,
    give_up_line,
    give_up_reason,
    is_oom,
    mask_url,
    new_client,
    oom_errors,
    redis_url_from_settings,
    retryable_errors,
)
from iri_scrapy.plugin import compat  # noqa: F401 - checks the installed Scrapy first
from iri_scrapy.plugin.config import setting
from iri_scrapy.plugin.dupefilter import IRIDupeFilter
from iri_scrapy.plugin.fingerprinter import IRIRequestFingerprinter
from iri_scrapy.plugin.refusal import (
    REASON_REDIS_NOT_INSTALLED,
    REASON_REDIS_UNAVAILABLE,
    refuse_start,
    stop_crawl,
)
from iri_scrapy.store.fpstore import FingerprintSet, fp64

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
#: Version of the key layout (stored in ``<base>:meta``): a trie of intset SET buckets,
#: one plain ``SADD`` per request.  A meta of any other format is refused.
FORMAT_VERSION = 4
#: Bytes of the fingerprint stored per request (the bucket member).
FIELD_BYTES = 8
#: A bucket reaching this many members is split (intsets hold
#: ``set-max-intset-entries``, 512 by default).
BUCKET_CAP = 440
#: Root buckets (a power of two); each is a Redis Cluster hash tag.
DEFAULT_ROOTS = 1024
_MAX_ROOTS = 1 << 20
#: With a size hint, roots for at most this many hinted URLs each (:func:`roots_for`).
_HINT_URLS_PER_ROOT = 200
#: A full bucket is split into this many children (by one decimal digit).
SPLIT_FANOUT = 10
#: One call in ``_CHECK_EVERY`` also sends ``SCARD`` (same round trip) to notice a
#: full bucket; chosen by fingerprint bits that pick neither bucket nor digit.
_CHECK_EVERY = 8
#: The deepest bucket (19 decimal digits in a 64-bit member).
_MAX_DEPTH = 19
#: Fingerprints a process remembers as seen (``IRI_REDIS_LOCAL_CACHE``), about 13 MB.
DEFAULT_LOCAL_CACHE = 1_000_000
#: ``%(project)s`` is ``BOT_NAME``: two projects with one spider name never share a seen-set.
DEFAULT_KEY = "%(project)s:%(spider)s:iri-dupefilter"

#: Split a full bucket (the only script; run about once per 400 new URLs).
#: KEYS[1] the bucket; ARGV: the cap, the bucket's depth (0 for a root).  Unless it is
#: no longer a SET (already split) or holds fewer than cap members, its members move to
#: ``KEYS[1] .. digit`` (the member's decimal digit at depth + 1, from the right, on its
#: absolute value, "0" past the last digit; a child that is itself already split passes
#: them one level down), and KEYS[1] becomes an empty STRING: a marker on which a
#: client's ``SADD`` fails with ``WRONGTYPE``, so that it learns of the split and goes
#: one level down.  Every key it touches shares KEYS[1]'s hash tag (one cluster slot).
#: A bucket at depth 19 (every digit used: only m and -m can share it) is never split.
#: Returns 1 if it split, 0 if not.
SPLIT_SCRIPT = """
local function digit(m, d)
  local s = string.gsub(m, '^-', '')
  local c = #s - d + 1
  if c < 1 then return '0' end
  return string.sub(s, c, c)
end
local function place(key, depth, members)
  local t = redis.call('TYPE', key)['ok']
  if t == 'set' or t == 'none' then
    for i = 1, #members, 4000 do
      redis.call('SADD', key, unpack(members, i, math.min(i + 3999, #members)))
    end
  elseif t == 'string' and depth < 19 then
    local groups = {}
    for _, m in ipairs(members) do
      local k = key .. digit(m, depth + 1)
      if not groups[k] then groups[k] = {} end
      table.insert(groups[k], m)
    end
    for k, ms in pairs(groups) do place(k, depth + 1, ms) end
  else
    error('iri-dupefilter: cannot store into ' .. key .. ' (a ' .. t .. ')')
  end
end
if tonumber(ARGV[2]) >= 19 then return 0 end
if redis.call('TYPE', KEYS[1])['ok'] ~= 'set' then return 0 end
if redis.call('SCARD', KEYS[1]) < tonumber(ARGV[1]) then return 0 end
local members = redis.call('SMEMBERS', KEYS[1])
redis.call('DEL', KEYS[1])
redis.call('SET', KEYS[1], '')
place(KEYS[1], tonumber(ARGV[2]), members)
return 1
"""

#: Create the meta (ARGV: field, value, ...) unless it exists; return it (HGETALL).
_INIT_SCRIPT = """
if redis.call('EXISTS', KEYS[1]) == 0 then redis.call('HSET', KEYS[1], unpack(ARGV)) end
return redis.call('HGETALL', KEYS[1])
"""

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


def roots_for(expected_urls: int | None) -> int:
    """Root buckets: 1024, or, with a size hint, the least power of two with at most 200
    hinted URLs a root if that is more (at most 2**20).

    More roots mean fewer splits (a member moves once per level) and a finer spread
    over a cluster's nodes, at the price of about 100 bytes per root key in use.
    """
    if not expected_urls or expected_urls <= 0:
        return DEFAULT_ROOTS
    roots = DEFAULT_ROOTS
    while roots * _HINT_URLS_PER_ROOT < int(expected_urls) and roots < _MAX_ROOTS:
        roots <<= 1
    return roots


def _glob_escape(text: bytes) -> bytes:
    """*text* as a literal in a Redis ``MATCH`` pattern."""
    out = bytearray()
    for byte in text:
        if byte in b"*?[]\\":
            out += b"\\"
        out.append(byte)
    return bytes(out)


def _is_power_of_two(n: int) -> bool:
    return n >= 1 and not n & (n - 1)


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
        if base_buckets is None:
            base_buckets = roots_for(expected_urls)
        if not _is_power_of_two(int(base_buckets)) or int(base_buckets) > _MAX_ROOTS:
            raise IRIRedisError(f"base_buckets must be a power of two <= {_MAX_ROOTS}")
        if not 1 <= int(bucket_cap) <= 512:
            raise IRIRedisError("bucket_cap must be between 1 and 512 (intsets hold 512)")
        super().__init__(**kwargs)
        self.redis_url = redis_url
        self.retry_seconds = max(0.0, float(retry_seconds))
        self.socket_timeout = float(socket_timeout)
        self.redis_params = dict(redis_params or {})
        #: Talk to a Redis Cluster (``redis.cluster.RedisCluster``).
        self.cluster = bool(cluster)
        self.crawler = crawler
        self.expected_urls = expected_urls  # an optional hint (roots_for)
        self.base_key = f"{key}:v{CANONICALIZATION_VERSION}:{self.tag_hash()}"
        if self.cluster and ("{" in self.base_key or "}" in self.base_key):
            raise IRIRedisError(
                f"IRI_REDIS_KEY {key!r} has braces: on a Redis Cluster they would be the "
                "hash tag of every key (all on one node); remove them"
            )
        self.meta_key = f"{self.base_key}:meta"
        #: The root count and the bucket cap (the meta's, once connected).
        self.base_buckets = int(base_buckets)
        self.bucket_cap = int(bucket_cap)
        #: Root bucket keys (``<base>:{<root>}``), and the buckets this process
        #: knows are split (learned from WRONGTYPE, or split by it).
        self._root_keys: list[bytes] = []
        self._split: set[bytes] = set()
        self._conn: Any = None
        #: Cluster: this filter's own connection to each master, by node name.
        self._node_conns: dict[str, Any] = {}
        self._via_cluster = False
        #: Fingerprints this process knows are stored in Redis (None: no local cache).
        self.local_cache = max(0, int(local_cache))
        self._local: FingerprintSet | None = FingerprintSet() if self.local_cache else None
        #: request_seen answered from the local cache / by Redis.
        self.local_hits = 0
        self.remote_calls = 0
        self._client: Any = None
        self._meta_ok = False
        self._failed = False
        try:
            self._retryable = retryable_errors()
        except ImportError:  # no redis package: open() refuses to start, saying so
            self._retryable = (OSError,)
        #: request_seen's retries through an outage (stats iri/redis/*).
        try:
            oom: tuple[type[BaseException], ...] = oom_errors()
        except ImportError:
            oom = ()
        # an out-of-memory Redis (noeviction) refused the SADD: sent again, as after an
        # outage, until memory is freed or the deadline
        self._retry = RetryPolicy(
            mask_url(redis_url), self.retry_seconds, retryable=(*self._retryable, *oom),
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
        expected = setting(settings, "IRI_REDIS_EXPECTED_URLS")
        params = setting(settings, "IRI_REDIS_PARAMS")
        kwargs["local_cache"] = setting(settings, "IRI_REDIS_LOCAL_CACHE")
        kwargs["cluster"] = setting(settings, "IRI_REDIS_CLUSTER")
        kwargs.update(
            redis_url=redis_url_from_settings(settings),
            key=key,
            expected_urls=None if expected is None else settings.getint("IRI_REDIS_EXPECTED_URLS"),
            retry_seconds=setting(settings, "IRI_REDIS_RETRY_SECONDS"),
            socket_timeout=setting(settings, "IRI_REDIS_SOCKET_TIMEOUT"),
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
        return new_client(self.redis_url, self.socket_timeout, self.redis_params, self.cluster)

    def connect(self) -> None:
        """Open the client, check Redis answers and agree on the key layout.

        Raises :class:`IRIRedisError` naming the (password-masked) URL.
        """
        from redis.exceptions import RedisClusterException, RedisError

        try:
            if self._client is None:
                self._client = self._new_client()  # connects at once (single connection)
                self._conn = getattr(self._client, "connection", None)
            self._client.ping()
            self._ensure_meta()
        except (RedisError, RedisClusterException, ValueError) as exc:
            self._disconnect()
            error = IRIRedisError(
                f"RedisIRIDupeFilter cannot use Redis at {self.safe_url}: {exc} "
                "(set IRI_REDIS_URL, or scrapy-redis's REDIS_URL, to a running server)"
            )
            logger.error("%s", error)
            raise error from exc
        except IRIRedisError as exc:  # keys this crawler must not use (_refuse): say so
            logger.error("%s", exc)
            raise
        self._check_intset_limit()
        logger.info(
            "RedisIRIDupeFilter: Redis%s %s, keys %s:* (format 4, %d root buckets)",
            " Cluster" if self.cluster else "", self.safe_url, self.base_key,
            self.base_buckets,
        )

    def _ensure_meta(self) -> None:
        """Create ``<base>:meta`` if absent (atomically) and check/adopt what is there."""
        wanted: dict[str, str | int] = {
            "format": FORMAT_VERSION,
            "canonicalization_version": CANONICALIZATION_VERSION,
            "options_tag": self.options_tag(),
            "field_bytes": FIELD_BYTES,
            "roots": self.base_buckets,
            "cap": self.bucket_cap,
            "fanout": SPLIT_FANOUT,
        }
        flat: list[str | int] = []
        for name, value in wanted.items():
            flat += [name, value]
        reply = self._client.execute_command("EVAL", _INIT_SCRIPT, 1, self.meta_key, *flat)
        stored = {
            reply[i].decode(): reply[i + 1].decode() for i in range(0, len(reply) - 1, 2)
        }
        for name in ("canonicalization_version", "options_tag", "field_bytes"):
            if stored.get(name) != str(wanted[name]):
                self._refuse(name, stored.get(name), wanted[name])
        if stored.get("format") != str(FORMAT_VERSION):
            self._refuse("format", stored.get("format"), FORMAT_VERSION)
        self._adopt_trie(stored)
        self._meta_ok = True

    def _refuse(self, name: str, found: str | None, needed: object) -> None:
        raise IRIRedisError(
            f"{self.meta_key} at {self.safe_url} has {name}={found!r}, this crawler needs "
            f"{needed!r}: refusing to mix keys (use another IRI_REDIS_KEY or delete the "
            "old keys)"
        )

    def _adopt_trie(self, stored: dict[str, str]) -> None:
        try:
            roots, cap, fanout = int(stored["roots"]), int(stored["cap"]), int(stored["fanout"])
        except (KeyError, ValueError) as exc:
            raise IRIRedisError(f"{self.meta_key} has a damaged format-4 layout") from exc
        if (fanout != SPLIT_FANOUT or not _is_power_of_two(roots) or roots > _MAX_ROOTS
                or not 1 <= cap <= 512):
            raise IRIRedisError(
                f"{self.meta_key} has a bad layout (fanout={fanout}, roots={roots}, cap={cap})"
            )
        if (roots, cap) != (self.base_buckets, self.bucket_cap):
            logger.info(
                "RedisIRIDupeFilter: %s was created with roots=%d, cap=%d: keeping them",
                self.base_key, roots, cap,
            )
        if roots != len(self._root_keys):
            self._split.clear()
        self.base_buckets, self.bucket_cap = roots, cap
        prefix = self.base_key.encode()
        self._root_keys = [prefix + b":{%x}" % r for r in range(roots)]

    def _check_intset_limit(self) -> None:
        """Warn when the server keeps fewer intset members than the bucket cap, and when
        its ``maxmemory-policy`` can evict the seen-set (``allkeys-*``: its URLs would be
        fetched again; under ``RedisIRIScheduler``, which holds the queue there too, such
        a server is refused before this filter connects)."""
        from redis.exceptions import RedisError

        def config(name: str) -> list[dict[Any, Any]]:
            if self.cluster:  # every master's own setting
                return [self._client.get_redis_connection(n).config_get(name)
                        for n in self._client.get_primaries()]
            return [self._client.config_get(name)]

        try:
            policies = sorted({str(r.get("maxmemory-policy", ""))
                               for r in config("maxmemory-policy")})
        except RedisError:  # CONFIG disabled (managed Redis): cannot tell
            policies = []
        evicting = [policy for policy in policies if policy.startswith("allkeys-")]
        if evicting:
            logger.warning(
                "RedisIRIDupeFilter: Redis at %s has maxmemory-policy %s: when its memory is "
                "full it evicts seen-set buckets, and their URLs are fetched again (set "
                "maxmemory-policy noeviction)", self.safe_url, evicting[0],
            )
        try:
            limit = min(int(r.get("set-max-intset-entries", 512))
                        for r in config("set-max-intset-entries"))
        except (RedisError, ValueError):  # CONFIG disabled (managed Redis): cannot tell
            return
        if limit < self.bucket_cap:
            logger.warning(
                "RedisIRIDupeFilter: Redis at %s has set-max-intset-entries=%d, below the "
                "bucket cap %d: full buckets become hashtables (about 7 times the memory; "
                "deduplication stays exact). Set it to 512 or more.",
                self.safe_url, limit, self.bucket_cap,
            )

    def _locate(self, fingerprint: bytes) -> tuple[bytes, int]:
        """(field, 32-bit bucket hash) of *fingerprint*."""
        if len(fingerprint) < 16:
            fingerprint = blake2b(fingerprint, digest_size=16).digest()
        return fingerprint[:FIELD_BYTES], int.from_bytes(fingerprint[8:12], "big")

    def _existing_trie_keys(self, set_only: bool = False) -> list[bytes]:
        """The buckets that exist, and (unless *set_only*) the split markers.

        ``SCAN`` (of every master, on a cluster).
        """
        pattern = _glob_escape(self.base_key.encode() + b":{") + b"*"
        kwargs: dict[str, Any] = {"match": pattern, "count": 1000}
        if set_only:
            kwargs["_type"] = "set"
        return sorted(set(self._client.scan_iter(**kwargs)))

    def level_counts(self) -> dict[int, tuple[int, int]]:
        """``{depth: (buckets, members)}`` over the existing buckets (0: roots)."""
        if not self._meta_ok:
            self.connect()
        keys = self._existing_trie_keys(set_only=True)
        out: dict[int, tuple[int, int]] = {}
        for key, n in zip(keys, self._each("SCARD", keys), strict=True):
            depth = len(key) - key.rindex(b"}") - 1
            buckets, members = out.get(depth, (0, 0))
            out[depth] = (buckets + 1, members + int(n))
        return dict(sorted(out.items()))

    def _each(self, command: str, keys: list[bytes], *args: Any) -> list[Any]:
        """``command key *args`` for every key (pipelined, 1000 at a time)."""
        replies: list[Any] = []
        for i in range(0, len(keys), 1000):
            pipe = self._client.pipeline(transaction=False)
            for key in keys[i : i + 1000]:
                pipe.execute_command(command, key, *args)
            replies += pipe.execute()
        return replies

    def bucket_keys(self) -> list[bytes]:
        """The names of the buckets and split markers that exist (``SCAN``)."""
        if not self._meta_ok:
            self.connect()
        return self._existing_trie_keys()

    # --- the storage hook --------------------------------------------------------

    def _apply(self, fingerprint: bytes, insert: bool = True) -> bool:
        """One ``SADD`` (one ``SISMEMBER`` to only look), one round trip: True if
        *fingerprint* was not stored (and, if *insert*, now is).

        The root bucket is ``bucket_hash`` modulo the root count; below a bucket this
        process knows is split, the child is the member's next decimal digit.  One call
        in eight (by bits of ``bucket_hash`` that pick neither) sends ``SCARD`` in the
        same round trip; a bucket found at the cap is split (:data:`SPLIT_SCRIPT`).
        ``WRONGTYPE`` means another process split the bucket: go one level down.
        """
        from redis.exceptions import ResponseError

        field, bucket_hash = self._locate(fingerprint)
        member = int.from_bytes(field, "big", signed=True)
        check = insert and (bucket_hash >> 24) % _CHECK_EVERY == 0
        split = self._split
        key = self._root_keys[bucket_hash % len(self._root_keys)]
        rest = abs(member)
        depth = 0
        for _ in range(_MAX_DEPTH + 2):
            while key in split and depth < _MAX_DEPTH:
                key += b"%d" % (rest % 10)
                rest //= 10
                depth += 1
            command = "SADD" if insert else "SISMEMBER"
            if check:
                reply, card = self._two(command, key, member)
            else:
                card = None
                try:
                    reply = self._one(command, key, member)
                except ResponseError as exc:
                    reply = exc
            if isinstance(reply, ResponseError):
                if not str(reply).startswith("WRONGTYPE") or depth >= _MAX_DEPTH:
                    raise reply
                split.add(key)  # split by another process: one level down
                continue
            if isinstance(card, int) and card >= self.bucket_cap and depth < _MAX_DEPTH:
                self._split_bucket(key, depth)
            return bool(reply) if insert else not reply
        raise IRIRedisError(f"{self.base_key}: no bucket takes {member}")

    def _conn_for(self, key: bytes) -> Any:
        """The raw connection for a command on *key*, or None: use the client.

        Single node: the client's one connection.  Cluster: a connection of this
        filter's own to the master that holds *key*'s slot (redis-py's slot map), made
        by that node's pool; None after a failure until the cluster client (which
        refreshes the slot map on errors and follows redirections) has answered once.
        """
        if not self.cluster:
            return self._conn
        if self._via_cluster:
            return None
        client = self._client
        node = client.get_node_from_key(key)
        conn = self._node_conns.get(node.name)
        if conn is None:
            conn = client.get_redis_connection(node).connection_pool.make_connection()
            self._node_conns[node.name] = conn
        return conn

    def _conn_failed(self, conn: Any) -> None:
        conn.disconnect()
        if self.cluster:  # the next calls go through RedisCluster until one succeeds
            self._via_cluster = True
            self._close_node_conns()

    def _close_node_conns(self) -> None:
        conns, self._node_conns = list(self._node_conns.values()), {}
        for conn in conns:
            conn.disconnect()

    def _one(self, *command: Any) -> Any:
        """One command, one round trip (error replies raised).

        On a cluster the command goes straight to the master that holds the key's
        slot; a redirection (MOVED/ASK: slots moved, or TRYAGAIN/CLUSTERDOWN: not run)
        is sent again through ``RedisCluster.execute_command``, which follows it and
        refreshes the slot map.  A connection error is raised (the caller's retries
        know a lost reply may have been applied).
        """
        from redis.exceptions import AskError, ClusterDownError, TryAgainError

        conn = self._conn_for(command[1])
        if conn is None:
            reply = self._client.execute_command(*command)
            self._via_cluster = False
            return reply
        try:
            conn.send_packed_command(conn.pack_command(*command), check_health=False)
            return conn.read_response()
        except (AskError, ClusterDownError, TryAgainError):
            if not self.cluster:
                raise
            self._close_node_conns()  # not run there (MovedError is an AskError)
            return self._client.execute_command(*command)
        except self._retryable:
            self._conn_failed(conn)
            raise

    def _two(self, command: str, key: bytes, member: int) -> tuple[Any, Any]:
        """*command* and ``SCARD`` of *key* in one round trip; error replies returned."""
        from redis.exceptions import AskError, ClusterDownError, ResponseError, TryAgainError

        conn = self._conn_for(key)
        replies: list[Any] = []
        if conn is not None:
            try:
                conn.send_packed_command(
                    conn.pack_commands([(command, key, member), ("SCARD", key)]),
                    check_health=False,
                )
                for _ in range(2):
                    try:
                        replies.append(conn.read_response())
                    except ResponseError as exc:
                        replies.append(exc)
            except self._retryable:
                self._conn_failed(conn)
                raise
            if not (self.cluster and isinstance(replies[0], (AskError, ClusterDownError,
                                                              TryAgainError))):
                return replies[0], replies[1]
            self._close_node_conns()  # not run there: through RedisCluster
        pipe = self._client.pipeline(transaction=False)
        pipe.execute_command(command, key, member)
        pipe.execute_command("SCARD", key)
        first, second = pipe.execute(raise_on_error=False)
        if not isinstance(first, Exception):
            self._via_cluster = False
        return first, second

    def _split_bucket(self, key: bytes, depth: int) -> None:
        """Split the full bucket *key* (atomic; a no-op if another process did)."""
        try:
            done = self._client.execute_command(
                "EVAL", SPLIT_SCRIPT, 1, key, self.bucket_cap, depth
            )
        except self._retryable:
            return  # the answer stands; a later check splits it
        if done == 1:  # else another process split it first: WRONGTYPE will say so
            self._split.add(key)

    def seen_add(self, fingerprint: bytes) -> bool:
        """Record *fingerprint* in Redis; True if it was there already.

        A fingerprint this process already got an answer for is answered from the
        local cache (no round trip): Redis never forgets a stored fingerprint
        (short of losing its data or a :meth:`clear`), so that "seen" is true.
        """
        local = self._local
        if local is not None:
            value = int.from_bytes(fp64(fingerprint), "big")
            if value in local:
                self.local_hits += 1
                return True
        if self._failed:
            self._inc(STAT_UNCHECKED)
            return False
        if not self._meta_ok:
            self.connect()
        self.remote_calls += 1
        try:
            seen = not self._apply(fingerprint)
        except self._retryable as exc:
            seen = self._seen_add_retrying(fingerprint, exc)
        except Exception as exc:
            if not is_oom(exc):  # a RedisError that retrying cannot fix (auth, ...)
                self._give_up(exc, 0.0)
                return False
            seen = self._seen_add_retrying(fingerprint, exc)
        if local is not None and not self._failed:  # Redis holds it now
            if len(local) >= self.local_cache:
                local.clear()
            local.add(value)
        return seen

    def known_seen(self, fingerprint: bytes) -> bool:
        """True if this process knows *fingerprint* is stored (its local cache).

        :meth:`seen_add` would then answer "seen" without a round trip.
        :class:`~iri_scrapy.RedisIRIScheduler` uses it to skip writing an intent.
        """
        local = self._local
        return local is not None and int.from_bytes(fp64(fingerprint), "big") in local

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
            self._split.clear()
            return self._apply(fingerprint)

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
        if self._meta_ok:
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

    def _disconnect(self) -> None:
        client, self._client = self._client, None
        self._conn = None
        self._close_node_conns()
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
        if self._local is not None:
            self._local.clear()
        if self._client is None:
            self.connect()
        keys = self.bucket_keys() if self._client.exists(self.meta_key) else []
        deleted = 0
        for i in range(0, len(keys), 1000):
            deleted += int(self._client.unlink(*keys[i : i + 1000]))
        deleted += int(self._client.unlink(self.meta_key))
        self._split.clear()
        self._meta_ok = False
        logger.warning(
            "RedisIRIDupeFilter: cleared %s:* at %s (%d keys; scrapy-redis flush: "
            "SCHEDULER_PERSIST=False or SCHEDULER_FLUSH_ON_START=True); crawlers sharing "
            "these keys will fetch everything again",
            self.base_key, self.safe_url, deleted,
        )

    def __len__(self) -> int:
        """Fingerprints stored in Redis: ``SCARD`` of every existing bucket, pipelined."""
        if not self._meta_ok:
            self.connect()
        return sum(int(n) for n in self._each("SCARD", self._existing_trie_keys(True)))

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
        if not self._meta_ok:
            self.connect()
        return not self._apply(fingerprint, insert=False)

    @property
    def known_splits(self) -> frozenset[bytes]:
        """The bucket keys this process knows are split (learned from a ``WRONGTYPE``
        reply, or split by it); empty after :meth:`clear`."""
        return frozenset(self._split)

    @property
    def local_cached(self) -> int:
        """Fingerprints in this process's local cache now: at most ``local_cache``,
        0 without one (``local_cache=0``)."""
        return 0 if self._local is None else len(self._local)

    def memory_usage(self) -> int:
        """``MEMORY USAGE`` (exact, ``SAMPLES 0``) of all existing keys, in bytes."""
        if not self._meta_ok:
            self.connect()
        keys = [*self.bucket_keys(), self.meta_key.encode()]
        if self.cluster:  # redis-py routes MEMORY USAGE by key through its own method
            return sum(int(self._client.memory_usage(k, samples=0) or 0) for k in keys)
        return sum(int(n) for n in self._each("MEMORY USAGE", keys, "SAMPLES", 0)
                   if n is not None)

    def __repr__(self) -> str:
        layout = f"format=4 roots={self.base_buckets} cap={self.bucket_cap}"
        if self.cluster:
            layout += " cluster"
        return f"<{type(self).__name__} {self.safe_url} {self.base_key} {layout}>"


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
