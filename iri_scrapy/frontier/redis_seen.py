"""The Redis seen-set of :class:`~iri_scrapy.RedisIRIDupeFilter`: fingerprints in a trie of intsets.

Layout (format 4, ``<base>:meta`` says so): ``<base>`` is the key name, the
canonicalization version and 8 hex digits of the options tag, so that keys made
under other options never mix.  A fingerprint's first 8 bytes, as a signed
integer, are the member; 4 other bytes pick one of the ``roots`` root buckets
``<base>:{<root>}``, each a Redis Cluster hash tag.  Integer members keep a small
SET an *intset* (a sorted array, about 9.5 bytes a URL against about 85 for a
SET of hex digests), but only up to ``set-max-intset-entries`` (512): a bucket
reaching the cap (440) is therefore split by one short Lua script into ten
children, by the member's next decimal digit, and becomes an empty STRING marker
on which another process's ``SADD`` gets ``WRONGTYPE`` and goes one level down.
So every request that reaches Redis is one plain ``SADD`` (an atomic
test-and-set any number of crawlers can share), every bucket stays an intset at
any size, and nothing needs sizing.  A bounded local cache answers again what
this process already knows is stored.  No Scrapy here: the dupefilter
(:mod:`.redis_dupefilter`) owns settings, retries, stats and the crawl's stop.
Design: docs/redis.md (keys, memory, Redis Cluster, local cache).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from hashlib import blake2b
from typing import Any

from iri_scrapy.core.ladder import CANONICALIZATION_VERSION
from iri_scrapy.frontier.redis_client import IRIRedisError, retryable_errors
from iri_scrapy.store.fpstore import FingerprintSet, fp64

logger = logging.getLogger(__name__)

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



def tag_hash(options_tag: str) -> str:
    """8 hex digits naming *options_tag* in the key."""
    return hashlib.sha1(options_tag.encode()).hexdigest()[:8]  # noqa: S324



def check_server_config(client: Any, *, cluster: bool, bucket_cap: int, safe_url: str,
                        log: logging.Logger) -> None:
    """Warn when the server keeps fewer intset members than the bucket cap, and when
    its ``maxmemory-policy`` can evict the seen-set (``allkeys-*``: its URLs would be
    fetched again; under ``RedisIRIScheduler``, which holds the queue there too, such
    a server is refused before the dupefilter connects)."""
    from redis.exceptions import RedisError

    def config(name: str) -> list[dict[Any, Any]]:
        if cluster:  # every master's own setting
            return [client.get_redis_connection(n).config_get(name)
                    for n in client.get_primaries()]
        return [client.config_get(name)]

    try:
        policies = sorted({str(r.get("maxmemory-policy", ""))
                           for r in config("maxmemory-policy")})
    except RedisError:  # CONFIG disabled (managed Redis): cannot tell
        policies = []
    evicting = [policy for policy in policies if policy.startswith("allkeys-")]
    if evicting:
        log.warning(
            "RedisIRIDupeFilter: Redis at %s has maxmemory-policy %s: when its memory is "
            "full it evicts seen-set buckets, and their URLs are fetched again (set "
            "maxmemory-policy noeviction)", safe_url, evicting[0],
        )
    try:
        limit = min(int(r.get("set-max-intset-entries", 512))
                    for r in config("set-max-intset-entries"))
    except (RedisError, ValueError):  # CONFIG disabled (managed Redis): cannot tell
        return
    if limit < bucket_cap:
        log.warning(
            "RedisIRIDupeFilter: Redis at %s has set-max-intset-entries=%d, below the "
            "bucket cap %d: full buckets become hashtables (about 7 times the memory; "
            "deduplication stays exact). Set it to 512 or more.",
            safe_url, limit, bucket_cap,
        )


class KeyRouter:
    """Commands on one key of a :class:`RedisSeenSet`, one round trip each, over a
    raw connection (no pool lock, no redis-py retry of its own).

    Single node: *client*'s one connection.  Redis Cluster: a connection of the
    router's own to each master, found by the key's slot; a redirection, or a
    failure, goes through the ``RedisCluster`` *client* (which follows it and
    refreshes its slot map).  *retryable* are the errors of a lost connection.
    """

    def __init__(self, client: Any, cluster: bool,
                 retryable: tuple[type[BaseException], ...]) -> None:
        self.client = client
        self.cluster = cluster
        self.retryable = retryable
        self._conn: Any = getattr(client, "connection", None)
        #: Cluster: this router's own connection to each master, by node name.
        self._node_conns: dict[str, Any] = {}
        self._via_cluster = False

    def _conn_for(self, key: bytes) -> Any:
        """The raw connection for a command on *key*, or None: use the client.

        Single node: the client's one connection.  Cluster: a connection of this
        router's own to the master that holds *key*'s slot (redis-py's slot map), made
        by that node's pool; None after a failure until the cluster client (which
        refreshes the slot map on errors and follows redirections) has answered once.
        """
        if not self.cluster:
            return self._conn
        if self._via_cluster:
            return None
        client = self.client
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
            self.close()

    def close(self) -> None:
        """Close this router's own connections to the cluster's masters."""
        conns, self._node_conns = list(self._node_conns.values()), {}
        for conn in conns:
            conn.disconnect()

    def one(self, *command: Any) -> Any:
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
            reply = self.client.execute_command(*command)
            self._via_cluster = False
            return reply
        try:
            conn.send_packed_command(conn.pack_command(*command), check_health=False)
            return conn.read_response()
        except (AskError, ClusterDownError, TryAgainError):
            if not self.cluster:
                raise
            self.close()  # not run there (MovedError is an AskError)
            return self.client.execute_command(*command)
        except self.retryable:
            self._conn_failed(conn)
            raise

    def two(self, command: str, key: bytes, member: int) -> tuple[Any, Any]:
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
            except self.retryable:
                self._conn_failed(conn)
                raise
            if not (self.cluster and isinstance(replies[0], (AskError, ClusterDownError,
                                                              TryAgainError))):
                return replies[0], replies[1]
            self.close()  # not run there: through RedisCluster
        pipe = self.client.pipeline(transaction=False)
        pipe.execute_command(command, key, member)
        pipe.execute_command("SCARD", key)
        first, second = pipe.execute(raise_on_error=False)
        if not isinstance(first, Exception):
            self._via_cluster = False
        return first, second


class RedisSeenSet:
    """The fingerprints stored in one Redis (or Redis Cluster), format 4 (module doc).

    *new_client* makes the redis-py client (:func:`~.redis_client.new_client`);
    *key* is the base before ``:v<version>:<tag>``, *options_tag* what the keys
    depend on.  *base_buckets* (the root count; default: :func:`roots_for` of the
    optional size hint *expected_urls*) and *bucket_cap* shape a key set this one
    creates (tests use tiny values to split buckets quickly); an existing meta
    wins over both.  *local_cache* bounds the fingerprints remembered as stored (0:
    none); *safe_url* (password masked) names the server in messages, written to
    *log*.  :meth:`connect` opens the client; the other methods connect if needed.
    """

    def __init__(
        self,
        new_client: Callable[[], Any],
        *,
        key: str,
        options_tag: str,
        expected_urls: int | None = None,
        base_buckets: int | None = None,
        bucket_cap: int = BUCKET_CAP,
        local_cache: int = DEFAULT_LOCAL_CACHE,
        cluster: bool = False,
        safe_url: str = "",
        log: logging.Logger = logger,
    ) -> None:
        if base_buckets is None:
            base_buckets = roots_for(expected_urls)
        if not _is_power_of_two(int(base_buckets)) or int(base_buckets) > _MAX_ROOTS:
            raise IRIRedisError(f"base_buckets must be a power of two <= {_MAX_ROOTS}")
        if not 1 <= int(bucket_cap) <= 512:
            raise IRIRedisError("bucket_cap must be between 1 and 512 (intsets hold 512)")
        self._new_client = new_client
        self.options_tag = options_tag
        self.cluster = bool(cluster)
        self.safe_url = safe_url
        self.log = log
        self.base_key = f"{key}:v{CANONICALIZATION_VERSION}:{tag_hash(options_tag)}"
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
        self.client: Any = None
        self._router: KeyRouter | None = None
        #: Fingerprints this process knows are stored in Redis (None: no local cache).
        self.local_cache = max(0, int(local_cache))
        self._local: FingerprintSet | None = FingerprintSet() if self.local_cache else None
        self._meta_ok = False
        try:
            #: What a lost (or failing-over) Redis raises: the caller retries these.
            self.retryable = retryable_errors()
        except ImportError:  # no redis package: connect() raises ImportError, saying so
            self.retryable = (OSError,)

    # --- connection ------------------------------------------------------------

    @property
    def connected(self) -> bool:
        """True once :meth:`connect` agreed on the key layout (until closed or cleared)."""
        return self._meta_ok

    def connect(self) -> None:
        """Open the client, check Redis answers and agree on the key layout.

        Raises :class:`IRIRedisError` naming the (password-masked) URL.
        """
        from redis.exceptions import RedisClusterException, RedisError

        try:
            if self.client is None:
                self.client = self._new_client()  # connects at once (single connection)
                self._router = KeyRouter(self.client, self.cluster, self.retryable)
            self.client.ping()
            self._ensure_meta()
        except (RedisError, RedisClusterException, ValueError) as exc:
            self.disconnect()
            error = IRIRedisError(
                f"RedisIRIDupeFilter cannot use Redis at {self.safe_url}: {exc} "
                "(set IRI_REDIS_URL, or scrapy-redis's REDIS_URL, to a running server)"
            )
            self.log.error("%s", error)
            raise error from exc
        except IRIRedisError as exc:  # keys this crawler must not use (_refuse): say so
            self.log.error("%s", exc)
            raise
        check_server_config(self.client, cluster=self.cluster, bucket_cap=self.bucket_cap,
                            safe_url=self.safe_url, log=self.log)
        self.log.info(
            "RedisIRIDupeFilter: Redis%s %s, keys %s:* (format 4, %d root buckets)",
            " Cluster" if self.cluster else "", self.safe_url, self.base_key,
            self.base_buckets,
        )

    def disconnect(self) -> None:
        """Close the client (the keys are kept); :meth:`connect` opens a new one."""
        client, self.client = self.client, None
        router, self._router = self._router, None
        if router is not None:
            router.close()
        self._meta_ok = False
        if client is not None:
            try:
                client.close()
            except Exception:  # noqa: BLE001 - closing a broken socket is best effort
                self.log.debug("RedisIRIDupeFilter: error closing the Redis client",
                               exc_info=True)

    # --- the key layout ----------------------------------------------------------

    def _ensure_meta(self) -> None:
        """Create ``<base>:meta`` if absent (atomically) and check/adopt what is there."""
        wanted: dict[str, str | int] = {
            "format": FORMAT_VERSION,
            "canonicalization_version": CANONICALIZATION_VERSION,
            "options_tag": self.options_tag,
            "field_bytes": FIELD_BYTES,
            "roots": self.base_buckets,
            "cap": self.bucket_cap,
            "fanout": SPLIT_FANOUT,
        }
        flat: list[str | int] = []
        for name, value in wanted.items():
            flat += [name, value]
        reply = self.client.execute_command("EVAL", _INIT_SCRIPT, 1, self.meta_key, *flat)
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
            self.log.info(
                "RedisIRIDupeFilter: %s was created with roots=%d, cap=%d: keeping them",
                self.base_key, roots, cap,
            )
        if roots != len(self._root_keys):
            self._split.clear()
        self.base_buckets, self.bucket_cap = roots, cap
        prefix = self.base_key.encode()
        self._root_keys = [prefix + b":{%x}" % r for r in range(roots)]

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
        return sorted(set(self.client.scan_iter(**kwargs)))

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
            pipe = self.client.pipeline(transaction=False)
            for key in keys[i : i + 1000]:
                pipe.execute_command(command, key, *args)
            replies += pipe.execute()
        return replies

    def bucket_keys(self) -> list[bytes]:
        """The names of the buckets and split markers that exist (``SCAN``)."""
        if not self._meta_ok:
            self.connect()
        return self._existing_trie_keys()

    # --- add and look up ----------------------------------------------------------

    def add(self, fingerprint: bytes) -> bool:
        """Store *fingerprint* (one ``SADD``): True if it was not stored before.

        Redis errors are raised: a connection error (:attr:`retryable`) may come
        after the ``SADD`` was applied (the caller decides what a retry means).
        The local cache is neither read nor filled (:meth:`cached`, :meth:`remember`).
        """
        return self._apply(fingerprint)

    def has(self, fingerprint: bytes) -> bool:
        """True if *fingerprint* is stored in Redis (one round trip, no side effect).

        It always asks Redis (the local cache is neither read nor filled).
        """
        if not self._meta_ok:
            self.connect()
        return not self._apply(fingerprint, insert=False)

    def forget_splits(self) -> None:
        """Learn the split buckets again (a Redis restarted without its data has none)."""
        self._split.clear()

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

        router = self._router
        if router is None:
            raise IRIRedisError(f"{self.base_key}: not connected")
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
                reply, card = router.two(command, key, member)
            else:
                card = None
                try:
                    reply = router.one(command, key, member)
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

    def _split_bucket(self, key: bytes, depth: int) -> None:
        """Split the full bucket *key* (atomic; a no-op if another process did)."""
        try:
            done = self.client.execute_command(
                "EVAL", SPLIT_SCRIPT, 1, key, self.bucket_cap, depth
            )
        except self.retryable:
            return  # the answer stands; a later check splits it
        if done == 1:  # else another process split it first: WRONGTYPE will say so
            self._split.add(key)

    # --- the local cache -----------------------------------------------------------

    def cached(self, fingerprint: bytes) -> bool:
        """True if this process knows *fingerprint* is stored (its local cache).

        Redis never forgets a stored fingerprint (short of losing its data or a
        :meth:`clear`), so that "seen" is true without a round trip.
        """
        local = self._local
        return local is not None and int.from_bytes(fp64(fingerprint), "big") in local

    def remember(self, fingerprint: bytes) -> None:
        """Note that Redis holds *fingerprint* (the cache is emptied when full)."""
        local = self._local
        if local is not None:
            if len(local) >= self.local_cache:
                local.clear()
            local.add(int.from_bytes(fp64(fingerprint), "big"))

    @property
    def local_cached(self) -> int:
        """Fingerprints in this process's local cache now: at most ``local_cache``,
        0 without one (``local_cache=0``)."""
        return 0 if self._local is None else len(self._local)

    # --- inspection and clearing -------------------------------------------------

    @property
    def known_splits(self) -> frozenset[bytes]:
        """The bucket keys this process knows are split (learned from a ``WRONGTYPE``
        reply, or split by it); empty after :meth:`clear`."""
        return frozenset(self._split)

    def clear(self) -> int:
        """Delete every key of this set and empty the local cache; the keys deleted."""
        if self._local is not None:
            self._local.clear()
        if self.client is None:
            self.connect()
        keys = self.bucket_keys() if self.client.exists(self.meta_key) else []
        deleted = 0
        for i in range(0, len(keys), 1000):
            deleted += int(self.client.unlink(*keys[i : i + 1000]))
        deleted += int(self.client.unlink(self.meta_key))
        self._split.clear()
        self._meta_ok = False
        return deleted

    def __len__(self) -> int:
        """Fingerprints stored in Redis: ``SCARD`` of every existing bucket, pipelined."""
        if not self._meta_ok:
            self.connect()
        return sum(int(n) for n in self._each("SCARD", self._existing_trie_keys(True)))

    def memory_usage(self) -> int:
        """``MEMORY USAGE`` (exact, ``SAMPLES 0``) of all existing keys, in bytes."""
        if not self._meta_ok:
            self.connect()
        keys = [*self.bucket_keys(), self.meta_key.encode()]
        if self.cluster:  # redis-py routes MEMORY USAGE by key through its own method
            return sum(int(self.client.memory_usage(k, samples=0) or 0) for k in keys)
        return sum(int(n) for n in self._each("MEMORY USAGE", keys, "SAMPLES", 0)
                   if n is not None)

    @property
    def layout(self) -> str:
        """``format=4 roots=<n> cap=<n>`` (and `` cluster``), for a repr."""
        layout = f"format=4 roots={self.base_buckets} cap={self.bucket_cap}"
        if self.cluster:
            layout += " cluster"
        return layout

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.safe_url} {self.base_key} {self.layout}>"
