"""The Redis queue of :class:`~iri_scrapy.RedisIRIScheduler`: its keys, its Lua scripts.

One crawl's queue is a handful of keys under one base (``<key>:v<format>`` and, with
:class:`~iri_scrapy.RedisIRIDupeFilter`, the seen-set's canonicalization tag), all with
one hash tag so that each script runs on one Redis Cluster master.  Every change is one
Lua script (atomic, and idempotent when sent again after a lost reply): enqueue, lease,
acknowledge, the heartbeat's tick, and the epoch marker's scripts that loss detection
uses (:mod:`.redis_loss`).  No Scrapy import: the scheduler (:mod:`.redis_scheduler`)
does the retrying, the stats and the stops, as :mod:`.redis_seen` is for the dupefilter.
Layout and scripts: docs/redis-fleet.md.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from iri_scrapy.frontier.redis_client import IRIRedisError

#: The field of ``<base>:skipped`` that is there while the crawl's protocol state
#: is (level protocol: iri_scrapy.protocol.redis_store; kept by :meth:`clear`).
MARKER = "iri-protocol:marker"


class ProtocolStateLost(IRIRedisError):
    """The crawl's rules are in Redis without its skipped requests (found at open)."""


#: The scheduler's log lines (one logger for the scheduler and its parts).
logger = logging.getLogger("iri_scrapy.frontier.redis_scheduler")

#: The layout of the crawl's keys (docs/redis-fleet.md), part of every key's name.
FORMAT_VERSION = 2
_MAX_PRIORITY = 1 << 40
#: Every key of a crawl's queue: ``<base>:<name>``.
KEY_NAMES = ("meta", "ready", "bodies", "leases", "workers", "intents", "refused", "epoch",
             "clock", "rules", "skipped", "holders", "pages")

# A lease is the member "<worker> <score> <queue member>" of the leases ZSET (score: the
# deadline): it says who holds it and how to put it back, with no other key to update.
# Every redis.call in a script costs about 2.5 us of server time: the scripts make few.
# The crawl's clock (<base>:clock) goes up by one at every enqueue and heartbeat, inside
# their scripts, which return it: a Redis whose clock is behind what a worker has seen
# went back in time (docs/redis.md, "What the crawl checks").  Leases and acks leave it
# alone: undone, they make duplicates only, and they run once per request.

# KEYS: ready, bodies, intents, clock
# ARGV: queue member, id, score, body, intent field or "" -> clock
ENQUEUE_SCRIPT = """
if ARGV[5] ~= '' then redis.call('HDEL', KEYS[3], ARGV[5]) end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[4])
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
return redis.call('INCR', KEYS[4])
"""

# KEYS: ready, leases, bodies; ARGV: worker, lease ms
# -> {lease or "", body or "", queue entries popped without a body (evicted, deleted)}
LEASE_SCRIPT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local missing = 0
for _ = 1, 100 do
  local popped = redis.call('ZPOPMIN', KEYS[1])
  if #popped == 0 then return {'', '', missing} end
  local member = popped[1]
  local body = redis.call('HGET', KEYS[3], string.sub(member, 18))
  if body then
    local lease = ARGV[1] .. ' ' .. popped[2] .. ' ' .. member
    redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), lease)
    return {lease, body, missing}
  end
  missing = missing + 1
end
return {'', '', missing}
"""

# KEYS: ready, leases, bodies, intents; ARGV: intent field to clear or "", leases...
ACK_SCRIPT = """
if ARGV[1] ~= '' then redis.call('HDEL', KEYS[4], ARGV[1]) end
local n = 0
for i = 2, #ARGV do
  local member = string.match(ARGV[i], '^%S+ %S+ (%S+)$')
  if member then
    if redis.call('ZREM', KEYS[2], ARGV[i]) == 0 then
      redis.call('ZREM', KEYS[1], member)  -- expired and put back meanwhile
    end
    n = n + redis.call('HDEL', KEYS[3], string.sub(member, 18))
  end
end
return n
"""

# KEYS: ready, leases, bodies, workers, intents, epoch, clock
# ARGV: worker, lease ms, alive (1: heartbeat, 0: leaving), leases held...
# -> {requeued, recovered intents, ready, leased, epoch, bodies, clock}
TICK_SCRIPT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local me = ARGV[1]
local deadline = now + tonumber(ARGV[2])
if ARGV[3] == '1' then
  redis.call('ZADD', KEYS[4], deadline, me)
  for i = 4, #ARGV do
    redis.call('ZADD', KEYS[2], 'XX', deadline, ARGV[i])
  end
else
  -- leaving: put the given leases back at once, forget the worker and its intent
  for i = 4, #ARGV do
    redis.call('ZADD', KEYS[2], 'XX', 0, ARGV[i])
  end
  redis.call('ZREM', KEYS[4], me)
  redis.call('HDEL', KEYS[5], me)
end
local requeued = 0
local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, 1000)
for _, lease in ipairs(expired) do
  redis.call('ZREM', KEYS[2], lease)
  local score, member = string.match(lease, '^%S+ (%S+) (%S+)$')
  if member and redis.call('HEXISTS', KEYS[3], string.sub(member, 18)) == 1 then
    redis.call('ZADD', KEYS[1], score, member)
    requeued = requeued + 1
  end
end
local recovered = {}
if ARGV[3] == '1' then
  local dead = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now)
  local isdead = {}
  for _, w in ipairs(dead) do
    redis.call('ZREM', KEYS[4], w)
    isdead[w] = true
  end
  local fields = redis.call('HKEYS', KEYS[5])
  for _, f in ipairs(fields) do
    local owner = string.match(f, '^[^/]+')
    if owner ~= me and (isdead[owner] or redis.call('ZSCORE', KEYS[4], owner) == false) then
      local body = redis.call('HGET', KEYS[5], f)
      redis.call('HDEL', KEYS[5], f)
      local taken = me .. '/' .. f
      redis.call('HSET', KEYS[5], taken, body)
      table.insert(recovered, taken)
      table.insert(recovered, body)
    end
  end
end
return {requeued, recovered, redis.call('ZCARD', KEYS[1]), redis.call('ZCARD', KEYS[2]),
        redis.call('GET', KEYS[6]) or '', redis.call('HLEN', KEYS[3]),
        redis.call('INCR', KEYS[7])}
"""

# KEYS: epoch, ready, bodies, leases, intents; ARGV: new marker, seen-set exists (1/0)
# -> {0: the marker there, 1: created, 2: none but the crawl has data; marker}
EPOCH_SCRIPT = """
local e = redis.call('GET', KEYS[1])
if e then return {0, e} end
if ARGV[2] == '1' then return {2, ''} end
for i = 2, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then return {2, ''} end
end
redis.call('SET', KEYS[1], ARGV[1])
return {1, ARGV[1]}
"""

# KEYS: epoch, bodies, ready, leases, clock -> {epoch, bodies, ready, leased, clock}
# (the clock as it is: reading changes nothing)
CHECK_SCRIPT = """
return {redis.call('GET', KEYS[1]) or '', redis.call('HLEN', KEYS[2]),
        redis.call('ZCARD', KEYS[3]), redis.call('ZCARD', KEYS[4]),
        tonumber(redis.call('GET', KEYS[5]) or 0)}
"""

# KEYS: epoch; ARGV: this crawl's marker, the lost marker.  The marker is replaced only
# if it is gone or still this crawl's (a new crawl's marker is left alone).
LOST_SCRIPT = """
local e = redis.call('GET', KEYS[1])
if (not e) or e == ARGV[1] then redis.call('SET', KEYS[1], ARGV[2]) return 1 end
return 0
"""


# KEYS: skipped, ready, bodies, clock; ARGV: field, queue member, id, score, body
# -> {1, clock}: the held request's record deleted and the request queued, in one
# step (a kill between the two cannot lose it); {0, 0}: another worker claimed it
CLAIM_SCRIPT = """
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then return {0, 0} end
redis.call('HSET', KEYS[3], ARGV[3], ARGV[5])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[2])
return {1, redis.call('INCR', KEYS[4])}
"""


_SCRIPTS = {
    "enqueue": ENQUEUE_SCRIPT,
    "lease": LEASE_SCRIPT,
    "ack": ACK_SCRIPT,
    "tick": TICK_SCRIPT,
    "epoch": EPOCH_SCRIPT,
    "check": CHECK_SCRIPT,
    "lost": LOST_SCRIPT,
    "claim": CLAIM_SCRIPT,
}


def text(value: Any) -> str:
    """A Redis reply (bytes or not) as text."""
    return value.decode() if isinstance(value, bytes) else str(value)


class RedisQueue:
    """One crawl's queue in Redis: the key layout, the client and the scripts on it.

    :meth:`call` runs a script once; the caller retries it (through an outage) and
    reads the reply as each script's comment says.
    """

    def __init__(self, key_template: str, project: str) -> None:
        self.key_template = key_template
        self.project = project
        #: ``<key>:v<format>[:c<canonicalization>:<seen-set tag>]``: every key's prefix.
        self.base = ""
        #: The keys by name (:data:`KEY_NAMES`); empty before :meth:`set_base`.
        self.keys: dict[str, str] = {}
        self.client: Any = None
        self.scripts: dict[str, Any] = {}
        self._counter = 0
        self._seq = 0

    def set_base(self, spider_name: str, seen_tag: str = "") -> None:
        """The keys of *spider_name*'s crawl; *seen_tag*: the seen-set's, if in Redis."""
        try:
            base = self.key_template % {"spider": spider_name, "project": self.project}
        except (KeyError, TypeError, ValueError) as exc:
            raise IRIRedisError(
                f"IRI_REDIS_SCHEDULER_KEY {self.key_template!r} must be a string using only "
                f"%(project)s and %(spider)s: {exc}"
            ) from exc
        self.base = f"{base}:v{FORMAT_VERSION}"
        if seen_tag:
            # the queue goes with its seen-set: other canonicalization options, other keys
            self.base += f":{seen_tag}"
        self.keys = {name: f"{self.base}:{name}" for name in KEY_NAMES}

    def key_list(self, *names: str) -> list[str]:
        return [self.keys[name] for name in names]

    def connect(self, client: Any) -> None:
        """Use *client*: check the stored format, register the scripts (redis errors
        and :class:`IRIRedisError` raised to the caller)."""
        self.client = client
        client.ping()
        client.execute_command("HSETNX", self.keys["meta"], "format", FORMAT_VERSION)
        stored = client.execute_command("HGET", self.keys["meta"], "format")
        if stored is not None and int(stored) != FORMAT_VERSION:
            raise IRIRedisError(
                f"{self.keys['meta']} has format {stored!r}; this iri_scrapy writes "
                f"format {FORMAT_VERSION}"
            )
        self.scripts = {name: client.register_script(src) for name, src in _SCRIPTS.items()}

    def close(self) -> None:
        client, self.client = self.client, None
        if client is not None:
            try:
                client.close()
            except Exception:  # noqa: BLE001 - best effort
                logger.debug("RedisIRIScheduler: error closing the Redis client", exc_info=True)

    def flush(self) -> int:
        """Delete the crawl's keys but its format and learned rules, unless workers are
        registered: then nothing is deleted and their number returned."""
        client, keys = self.client, self.keys
        now_workers = int(client.execute_command("ZCARD", keys["workers"]))
        if now_workers:
            return now_workers
        client.execute_command("DEL", *[k for n, k in keys.items() if n not in ("meta", "rules")])
        if client.execute_command("EXISTS", keys["rules"]):
            # the learned rules stay (a recrawl starts with them); what they skipped
            # went with the seen-set
            client.execute_command("HSET", keys["skipped"], MARKER, "1")
        return 0

    def call(self, name: str, keys: list[str], args: list[Any]) -> Any:
        """One run of script *name* (not retried)."""
        return self.scripts[name](keys=keys, args=args, client=self.client)

    def push(self, member: str, rid: str, score: int, data: bytes, intent: str) -> int:
        """Enqueue one request (the *enqueue* script; idempotent for one *member*
        and *rid*); the crawl's clock."""
        return int(self.call("enqueue", self.key_list("ready", "bodies", "intents", "clock"),
                             [member, rid, score, data, intent]))

    def claim(self, field: str, member: str, rid: str, score: int,
              data: bytes) -> tuple[bool, int]:
        """Give back the held request of *field* of ``<base>:skipped`` (the *claim*
        script): True and the crawl's clock if this call deleted its record and
        queued it, False if another worker had."""
        claimed, clock = self.call("claim", self.key_list("skipped", "ready", "bodies", "clock"),
                                   [field, member, rid, score, data])
        return bool(int(claimed)), int(clock)

    def lease(self, worker: str, lease_ms: int) -> tuple[str, Any, int]:
        """Lease the first queued request to *worker* (the *lease* script): its member
        ("" if none), its stored request, and the entries found with no request."""
        reply = self.call("lease", self.key_list("ready", "leases", "bodies"),
                          [worker, lease_ms])
        return text(reply[0]), reply[1], int(reply[2])

    def ack(self, intent: str, members: list[str]) -> None:
        """Acknowledge *members* and clear the intent of *intent* if not "" (*ack*)."""
        self.call("ack", self.key_list("ready", "leases", "bodies", "intents"),
                  [intent, *members])

    def new_entry(self, worker: str, priority: int) -> tuple[str, str, int]:
        """A new request's queue member, id and score (lowest first)."""
        self._counter += 1
        rid = f"{worker}.{self._counter}"
        # first in first out within a priority, across workers as far as their clocks
        # agree (microseconds, 16 digits; never backwards within this worker)
        self._seq = max(self._seq + 1, time.time_ns() // 1000)
        member = f"{self._seq:016d}|{rid}"
        score = -max(-_MAX_PRIORITY, min(_MAX_PRIORITY, int(priority)))
        return member, rid, score
