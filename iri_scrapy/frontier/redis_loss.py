"""Loss detection for :class:`~iri_scrapy.RedisIRIScheduler`: the epoch marker, the clock.

A Redis that lost or evicted the crawl's keys, or went back to older data, must stop
the crawl (``iri_frontier_lost``) instead of losing pages silently.  Three checks
find it: the crawl's *epoch marker* (``<base>:epoch``, created with the crawl and
never written again but to say "lost"), the crawl's *clock* (``<base>:clock``, which
the enqueue and heartbeat scripts advance: a Redis whose clock is behind what this
worker saw went back in time), and the counts that must agree (no stored request
neither queued nor leased).  At start the server's configuration is read: an
``allkeys-*`` eviction policy is refused.  No Scrapy import: the scheduler retries the
calls and closes the spider.  Docs: docs/redis.md, "What the crawl checks".
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

from iri_scrapy.frontier.redis_client import IRIRedisError, mask_url
from iri_scrapy.frontier.redis_queue import RedisQueue, text

#: The scheduler's log lines (one logger for the scheduler and its parts).
logger = logging.getLogger("iri_scrapy.frontier.redis_scheduler")

#: ``finish_reason`` when Redis lost or evicted this crawl's queue (module doc).
REASON_FRONTIER_LOST = "iri_frontier_lost"
#: ``finish_reason`` of a start refused because Redis's ``maxmemory-policy`` can evict keys.
REASON_REDIS_EVICTION = "iri_redis_eviction_policy"


class FrontierLost(IRIRedisError):
    """Redis lost or evicted this crawl's frontier (found at start)."""


class EvictionPolicy(IRIRedisError):
    """Redis's ``maxmemory-policy`` can evict the crawl's keys (refused at start)."""


def lost_at_start(component: str, url: str, base: str, what: str, exc: BaseException) -> str:
    """The refusal line of a start that found the crawl's *what* (``frontier``,
    ``state``) in Redis lost: what to do."""
    return (f"{component}: this crawl's {what} in Redis at {mask_url(url)} ({base}:*) is "
            f"lost: {exc}. Pages may be missing: crawl again from the start with "
            "IRI_REDIS_FLUSH_ON_START = True, after making Redis keep its data (appendonly "
            "yes, maxmemory-policy noeviction: docs/redis.md)")


def _config(client: Any, name: str, target: dict[str, Any]) -> str:
    """``CONFIG GET name`` (one server, or the cluster node in *target*) as text."""
    reply = client.execute_command("CONFIG", "GET", name, **target)
    if isinstance(reply, dict):  # redis-py parses CONFIG GET into a dict
        if len(reply) == 1 and not any(isinstance(v, dict) for v in reply.values()):
            return text(next(iter(reply.values())))
        for value in reply.values():  # a cluster: {node: {name: value}}
            if isinstance(value, dict) and value:
                return text(next(iter(value.values())))
        return ""
    if isinstance(reply, (list, tuple)) and len(reply) >= 2:
        return text(reply[1])
    return ""


class LossWatch:
    """What this worker knows of the crawl's frontier in Redis: its epoch marker, the
    highest clock seen, and why it is lost (module doc).

    *run* calls a script of *queue* (retried), *on_lost* closes the crawl with
    ``iri_frontier_lost``, *count* adds to the scheduler's counters and *extra*
    gives the log lines' ``extra``.
    """

    def __init__(self, queue: RedisQueue, worker: str, redis_url: str, *,
                 run: Callable[[str, list[str], list[Any]], Any],
                 on_lost: Callable[[], None], count: Callable[[str], None],
                 extra: Callable[[], dict[str, Any]]) -> None:
        self.queue = queue
        self.worker = worker
        self.redis_url = redis_url
        self._run = run
        self._on_lost = on_lost
        self._count = count
        self._extra = extra
        #: This crawl's epoch marker (``<base>:epoch``): a token and its creation time.
        self.epoch = ""
        #: Why the crawl's frontier is known to be lost, or None.
        self.lost: str | None = None
        #: The highest value of the crawl's clock (``<base>:clock``) this worker has seen.
        self.clock = 0
        #: True while :meth:`verify` runs (an outage then does not verify again).
        self.checking = False

    def verify(self, when: str) -> bool:
        """Read the marker, the counts and the clock: False (and the crawl closing) if
        the frontier is lost."""
        self.checking = True
        try:
            epoch, bodies, ready, leased, clock = self._run(
                "check", self.queue.key_list("epoch", "bodies", "ready", "leases", "clock"), [])
        except IRIRedisError:
            return self.lost is None
        finally:
            self.checking = False
        return self.check(when, text(epoch), int(bodies), int(ready), int(leased),
                          int(clock), advanced=False)

    def check(self, when: str, epoch: str, bodies: int, ready: int, leased: int,
              clock: int, *, advanced: bool) -> bool:
        keys = self.queue.keys
        if epoch != self.epoch:
            if not epoch:
                what = f"its epoch marker {keys['epoch']} is gone"
            elif epoch.startswith("lost "):
                what = f"another worker found it lost ({epoch[5:]})"
            else:
                what = f"its epoch marker {keys['epoch']} was replaced ({epoch!r})"
            self.frontier_lost(f"{what} ({when})")
            return False
        if not self.clock_ok(clock, when, advanced=advanced):
            return False
        if bodies > ready + leased:
            self.frontier_lost(
                f"{bodies - ready - leased} of the {bodies} stored requests are neither "
                f"queued nor leased ({when}): queue entries were evicted or deleted")
            return False
        return True

    def clock_ok(self, clock: int, when: str, *, advanced: bool = True) -> bool:
        """*clock*: the crawl's clock as a script left it (*advanced*: the script added
        one).  Redis had it at least as high as any value this worker saw before, unless
        Redis went back in time: then False, and the crawl closing (docs/redis.md).

        Only the clock a script advanced is remembered: a read (:meth:`verify`, after an
        outage) can come after the write whose reply is checked next."""
        before = clock - 1 if advanced else clock
        if before < self.clock:
            key = self.queue.keys["clock"]
            self.frontier_lost(
                f"the crawl's clock {key} is gone ({when}): Redis came back empty (a "
                "restart without persistence), was flushed, or the crawl's keys were deleted"
                if before == 0 else
                f"Redis went back in time: the crawl's clock {key} was at {before}, this "
                f"worker had seen it at {self.clock} ({when}): Redis came back on older data "
                "(a restart or restore from an older snapshot, a failover to a replica that "
                "lagged) or the crawl's keys were changed")
            return False
        if advanced:
            self.clock = clock
        return True

    def frontier_lost(self, what: str) -> None:
        """Redis lost (or evicted) part of this crawl's frontier: pages may be missing.
        Stop: ``iri_frontier_lost``, exit status 1, one ERROR line; the marker says so
        to the other workers and the next run."""
        if self.lost is not None:
            return
        self.lost = what
        self._count("frontier_lost")
        marker = f"lost {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} by {self.worker}: "
        try:  # best effort, once: the other workers find it at their next heartbeat
            self.queue.call("lost", [self.queue.keys["epoch"]], [self.epoch, marker + what[:300]])
        except Exception:  # noqa: BLE001 - they also see the marker gone
            logger.debug("RedisIRIScheduler: could not mark the frontier lost", exc_info=True)
        logger.error(
            "RedisIRIScheduler: Redis at %s lost this crawl's frontier (%s:*): %s. Pages "
            "may be missing: closing with finish_reason %s (exit status 1). Make Redis keep "
            "its data (appendonly yes, maxmemory-policy noeviction, its own database or "
            "BOT_NAME per project: docs/redis.md), then crawl again from the start with "
            "IRI_REDIS_FLUSH_ON_START = True",
            mask_url(self.redis_url), self.queue.base, what, REASON_FRONTIER_LOST,
            extra=self._extra())
        self._on_lost()

    def start(self, seen: bool) -> None:
        """Adopt the crawl's epoch marker, or create it for a new crawl; refuse a crawl
        whose data is there without its marker (*seen*: its seen-set is in Redis), or
        that was found lost."""
        queue = self.queue
        token = f"{uuid.uuid4().hex} {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}"
        code, marker = queue.call(
            "epoch", queue.key_list("epoch", "ready", "bodies", "leases", "intents"),
            [token, "1" if seen else "0"])
        marker = text(marker)
        if int(code) == 2:
            what = ("its seen-set" if seen else "its queue") + (
                f" is in Redis but not its epoch marker {queue.keys['epoch']}: Redis lost or "
                "evicted part of this crawl's data (or the seen-set was written by a crawl "
                "without RedisIRIScheduler)")
            raise FrontierLost(what)
        if marker.startswith("lost "):
            raise FrontierLost(f"a worker found it lost: {marker[5:]}")
        self.epoch = marker

    def check_server(self, cluster: bool) -> None:
        """At start: refuse a ``maxmemory-policy`` that can evict the crawl's keys, warn
        about a server that keeps nothing across a restart (module doc)."""
        from redis.exceptions import RedisError

        client = self.queue.client
        target: dict[str, Any] = {}
        if cluster:  # the master of the crawl's slot
            target = {"target_nodes": client.get_node_from_key(self.queue.keys["ready"])}
        url = mask_url(self.redis_url)
        try:
            policy = _config(client, "maxmemory-policy", target)
            save = _config(client, "save", target)
            appendonly = _config(client, "appendonly", target)
        except RedisError as exc:  # CONFIG renamed or not allowed (managed Redis, ACLs)
            logger.warning(
                "RedisIRIScheduler: cannot read the configuration of Redis at %s (CONFIG GET: "
                "%s): make sure its maxmemory-policy is noeviction (or volatile-*) and that "
                "it persists its data (appendonly yes), or a restart or an eviction loses "
                "pages (the crawl then stops with %s)", url, exc, REASON_FRONTIER_LOST)
            return
        if policy.startswith("allkeys-"):
            raise EvictionPolicy(
                f"RedisIRIScheduler: Redis at {url} has maxmemory-policy "
                f"{policy}, which evicts the crawl's queue when memory is full (pages lost): "
                "set maxmemory-policy noeviction (CONFIG SET maxmemory-policy noeviction, and in "
                "redis.conf), or use another Redis for the crawl")
        if not save.strip() and appendonly.strip().lower() != "yes":
            logger.warning(
                "RedisIRIScheduler: Redis at %s keeps no data across a restart (save \"\", "
                "appendonly no): a restart loses the crawl's frontier, and the crawl then stops "
                "with %s; set appendonly yes (appendfsync everysec or always) for a crawl that "
                "must not lose pages", url, REASON_FRONTIER_LOST)
