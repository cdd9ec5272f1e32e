"""``RedisIRIScheduler`` against a real redis-server: leases, acks, expiry, priorities.

Several schedulers on one server stand for several workers (each has its own
worker id and Redis connection); a worker "dies" by being dropped without
``close()``.  The crawls with real processes and real signals are in
``tests/redis/test_redis_fleet.py``.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import pytest
from scrapy import Request, signals
from scrapy.exceptions import CloseSpider, DontCloseSpider
from scrapy.utils.test import get_crawler
from twisted.python.failure import Failure

import iri_scrapy
from iri_scrapy.addon import FRONTIER_SCHEDULER, REDIS_DUPEFILTER, REDIS_SCHEDULER
from iri_scrapy.frontier.redis_backend import META_LEASE
from iri_scrapy.frontier.redis_heartbeat import REASON_IDLE_TIMEOUT
from iri_scrapy.frontier.redis_scheduler import RedisIRIScheduler
from tests.support.redis_support import RedisServer
from tests.support.redis_workers import WorkerSpider, open_worker, reactor  # noqa: F401
from tests.support.watch import wait_until

pytestmark = [pytest.mark.redis, pytest.mark.usefixtures("reactor")]

#: A wait for Redis's clock (a lease of 1 s to expire) is bounded by this.
CLOCK_BOUND = 60.0



def idle(crawler: Any) -> BaseException | None:
    """The spider is idle: send ``spider_idle`` as Scrapy's engine does; the exception a
    handler raised (``DontCloseSpider``: keep waiting, ``CloseSpider``: close), if any."""
    results = crawler.signals.send_catch_log(
        signals.spider_idle, spider=crawler.spider, dont_log=(DontCloseSpider, CloseSpider))
    raised = [result.value for _, result in results if isinstance(result, Failure)]
    assert len(raised) <= 1, raised
    return raised[0] if raised else None


def drain(scheduler: RedisIRIScheduler) -> list[Request]:
    out = []
    while (request := scheduler.next_request()) is not None:
        out.append(request)
    return out


def redis_ms(client: Any) -> int:
    """Redis's clock (``TIME``) in milliseconds: the clock the scripts compare with."""
    seconds, micros = client.time()
    return int(seconds) * 1000 + int(micros) // 1000


def wait_expired(client: Any, key: str, member: str | None = None) -> None:
    """Wait until every entry of the ZSET *key* (leases or workers), or *member*, has
    expired by Redis's clock: the event itself, not a sleep guessed long enough.
    Redis's clock runs however busy the machine is: bounded by a plain CLOCK_BOUND."""

    def expired() -> bool:
        if member is not None:
            score = client.zscore(key, member)
            return score is not None and score <= redis_ms(client)
        entries = client.zrange(key, 0, -1, withscores=True)
        return bool(entries) and max(score for _, score in entries) <= redis_ms(client)

    wait_until(expired, what=f"expiry in {key}", stall=CLOCK_BOUND, ceiling=CLOCK_BOUND)


def test_public_name_and_addon_selection(tmp_path: Path) -> None:
    assert iri_scrapy.RedisIRIScheduler is RedisIRIScheduler
    assert "RedisIRIScheduler" in iri_scrapy.__all__
    jobdir = str(tmp_path / "job")
    crawler = get_crawler(WorkerSpider, {"ADDONS": {"iri_scrapy.Addon": 0},
                                    "IRI_REDIS_URL": "redis://127.0.0.1:1/0", "JOBDIR": jobdir})
    assert crawler.settings["SCHEDULER"] == REDIS_SCHEDULER
    assert crawler.settings["DUPEFILTER_CLASS"] == REDIS_DUPEFILTER
    assert any("RedisSchedulerSpiderMiddleware" in str(k)
               for k in crawler.settings.getdict("SPIDER_MIDDLEWARES"))
    optout = get_crawler(WorkerSpider, {"ADDONS": {"iri_scrapy.Addon": 0}, "JOBDIR": jobdir,
                                   "IRI_REDIS_URL": "redis://127.0.0.1:1/0",
                                   "IRI_REDIS_SCHEDULER": False})
    assert optout.settings["SCHEDULER"] == FRONTIER_SCHEDULER
    assert optout.settings["DUPEFILTER_CLASS"] == REDIS_DUPEFILTER


def test_a_request_enters_in_fetch_form(redis_server: RedisServer) -> None:
    """The entry (plugin/entry.py): a request another component made is queued, for
    every worker, in fetch form; another spelling of it is a duplicate."""
    crawler, worker = open_worker(redis_server.url)
    made = Request("http://E.COM:80/./a#x")
    assert worker.enqueue_request(made)
    assert not worker.enqueue_request(Request("http://e.com/%61"))
    [got] = drain(worker)
    assert got.url == "http://e.com/a#x" and got.meta["iri_original"] == made.url
    assert crawler.stats.get_value("iri/entry/normalized") == 2
    worker.answered(got)
    worker.close("finished")


def test_priority_order_dedup_and_ack(redis_server: RedisServer) -> None:
    crawler, worker = open_worker(redis_server.url)
    for url, priority in (("a", 0), ("b", 5), ("c", 0), ("d", -3), ("e", 5)):
        assert worker.enqueue_request(Request(f"http://e.com/{url}", priority=priority))
    assert not worker.enqueue_request(Request("http://E.COM:80/./a#x"))  # an alias: seen
    assert worker.enqueue_request(Request("http://e.com/a", dont_filter=True, priority=-9))
    assert len(worker) == 6 and worker.has_pending_requests()
    got = drain(worker)
    # higher priority first, first in first out within one priority
    assert [r.url.rsplit("/", 1)[1] for r in got] == ["b", "e", "a", "c", "d", "a"]
    client = redis_server.client()
    keys = worker.backend.redis_keys
    assert client.zcard(keys["leases"]) == 6
    assert not worker.has_pending_requests()
    for request in got:
        worker.answered(request)
    assert client.zcard(keys["leases"]) == 0
    assert client.hlen(keys["bodies"]) == 0
    assert client.hlen(keys["intents"]) == 0  # the stale intent went with an ack
    worker.close("finished")
    counts = {k: v for k, v in crawler.stats.get_stats().items() if "redis_scheduler" in k}
    assert counts["iri/redis_scheduler/enqueued"] == 6
    assert counts["iri/redis_scheduler/leased"] == 6
    assert counts["iri/redis_scheduler/acked"] == 6
    assert crawler.stats.get_value("dupefilter/filtered") == 1


@pytest.mark.slow
def test_expired_lease_taken_over_by_another_worker(redis_server: RedisServer) -> None:
    _, dying = open_worker(redis_server.url)
    crawler2, other = open_worker(redis_server.url)
    for i in range(3):
        dying.enqueue_request(Request(f"http://e.com/{i}"))
    held = dying.next_request()
    assert held is not None and META_LEASE in held.meta
    dying.backend.abandon()  # killed while the request is in flight
    rest = drain(other)
    assert sorted(r.url for r in rest) == ["http://e.com/1", "http://e.com/2"]
    assert other.next_request() is None  # the lease has not expired yet
    wait_expired(redis_server.client(), dying.backend.redis_keys["leases"])
    other.backend.heartbeat()  # the heartbeat reaps
    again = drain(other)
    assert [r.url for r in again] == [held.url]
    assert other.backend.counts["requeued_expired"] == 1
    for request in rest + again:
        other.answered(request)
    client = redis_server.client()
    keys = other.backend.redis_keys
    assert client.zcard(keys["leases"]) == 0 and client.zcard(keys["ready"]) == 0
    other.close("finished")
    assert crawler2.stats.get_value("iri/redis_scheduler/requeued_expired") == 1


@pytest.mark.slow
def test_heartbeat_keeps_a_slow_request(redis_server: RedisServer) -> None:
    _, slow = open_worker(redis_server.url)
    _, other = open_worker(redis_server.url)
    client = redis_server.client()
    leases = slow.backend.redis_keys["leases"]
    # another try only when the machine stalled for a whole lease (1 s) between the
    # last heartbeat and the other worker's: the lease may then have expired, rightly
    for attempt in range(10):
        slow.enqueue_request(Request(f"http://e.com/slow{attempt}"))
        request = slow.next_request()
        assert request is not None
        ((lease, deadline),) = client.zrange(leases, 0, -1, withscores=True)
        # heartbeats until the request has been out longer than its first lease
        # (by Redis's clock), each one extending the lease
        while True:
            before = redis_ms(client)
            slow.backend.heartbeat()
            extended = client.zscore(leases, lease)
            assert extended is not None and extended >= before + slow.backend.lease_ms
            if before > deadline:
                break
            time.sleep(0.2)
        # the other worker's heartbeat puts expired leases back: not this one
        requeued = other.backend.counts.get("requeued_expired", 0)
        other.backend.heartbeat()
        if redis_ms(client) - before < slow.backend.lease_ms:
            assert other.backend.counts.get("requeued_expired", 0) == requeued
            assert other.next_request() is None
            slow.answered(request)
            break
        for late in drain(other):
            other.answered(late)
        slow.answered(request)
    else:
        pytest.fail("every try stalled for a whole lease between two heartbeats")
    slow.close("finished")
    other.close("finished")


def test_late_ack_of_a_requeued_request_removes_it(redis_server: RedisServer) -> None:
    """A worker stalled past its lease answers after the request went back: the
    queue entry goes too (it is not fetched again)."""
    _, stalled = open_worker(redis_server.url)
    stalled.enqueue_request(Request("http://e.com/x"))
    request = stalled.next_request()
    assert request is not None
    wait_expired(redis_server.client(), stalled.backend.redis_keys["leases"])
    _, other = open_worker(redis_server.url)  # its first tick puts the lease back
    assert other.backend.counts["requeued_expired"] == 1
    stalled.answered(request)
    assert other.next_request() is None
    stalled.close("finished")
    other.close("finished")


def test_close_puts_leases_back_and_idle_waits_for_foreign_leases(
    redis_server: RedisServer,
) -> None:
    _, first = open_worker(redis_server.url, IRI_REDIS_IDLE_TIMEOUT=0.5)
    crawler2, second = open_worker(redis_server.url, IRI_REDIS_IDLE_TIMEOUT=0.5)
    first.enqueue_request(Request("http://e.com/1"))
    held = first.next_request()
    assert held is not None
    # the second worker has nothing to do, but the first holds a lease: it waits...
    assert isinstance(idle(crawler2), DontCloseSpider)
    time.sleep(0.6)
    # ... for IRI_REDIS_IDLE_TIMEOUT at most
    closing = idle(crawler2)
    assert isinstance(closing, CloseSpider) and closing.reason == REASON_IDLE_TIMEOUT
    first.close("shutdown")  # not finished: the lease goes back at once
    assert first.backend.counts["released_on_close"] == 1
    got = drain(second)
    assert [r.url for r in got] == [held.url]
    # answers it; queue and leases empty: finished (no exception)
    assert idle(crawler2) is None
    assert second.backend.counts["acked"] == 1 and not second.has_pending_requests()
    second.close("finished")


class _Killed(Exception):
    """The worker process dies here."""


def test_dead_workers_intent_is_enqueued(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Killed after the dupefilter recorded a URL and before the queue got it."""
    _, dying = open_worker(redis_server.url)
    request = Request("http://e.com/lost")
    record = dying.df.request_seen

    def recorded_then_killed(req: Request) -> bool:
        assert record(req) is False  # recorded as seen...
        raise _Killed  # ... and killed before the enqueue

    monkeypatch.setattr(dying.df, "request_seen", recorded_then_killed)
    with pytest.raises(_Killed):
        dying.enqueue_request(request)
    client = redis_server.client()
    intents = dying.backend.redis_keys["intents"]
    assert client.hkeys(intents) == [dying.backend.worker.encode()]  # written before the dupefilter
    assert client.zcard(dying.backend.redis_keys["ready"]) == 0  # not queued
    dying.backend.abandon()
    wait_expired(client, dying.backend.redis_keys["workers"], dying.backend.worker)
    _, other = open_worker(redis_server.url)
    assert other.backend.counts["intents_recovered"] == 1
    got = drain(other)
    assert [r.url for r in got] == ["http://e.com/lost"]
    assert client.hlen(intents) == 0
    other.answered(got[0])
    other.close("finished")


def test_replacement_acks_its_parent_and_start_requests_when_joining(
    redis_server: RedisServer,
) -> None:
    _, worker = open_worker(redis_server.url)
    worker.enqueue_request(Request("http://e.com/old"))
    worker.enqueue_request(Request("http://e.com/other"))
    old = worker.next_request()
    assert old is not None
    worker.enqueue_request(old.replace(url="http://e.com/new"))  # a redirect
    assert worker.backend.counts["acked"] == 1
    assert worker.backend.counts["replaced"] == 1  # counted as by the JOBDIR frontier
    # a worker joining now skips dont_filter start requests
    _, joining = open_worker(redis_server.url)
    assert joining.backend.counts["joined"] == 1
    start = Request("http://e.com/", dont_filter=True, meta={"is_start_request": True})
    assert not joining.enqueue_request(start)
    assert joining.backend.counts["start_skipped"] == 1
    assert sorted(r.url for r in drain(joining)) == ["http://e.com/new", "http://e.com/other"]
    joining.close("shutdown")
    worker.close("shutdown")


def test_redis_down_at_start_refuses(tmp_path: Any) -> None:
    from tests.support.redis_support import find_free_port

    crawler = get_crawler(WorkerSpider, {"ADDONS": {"iri_scrapy.Addon": 0},
                                    "IRI_REDIS_URL": f"redis://127.0.0.1:{find_free_port()}/0"})
    spider = WorkerSpider.from_crawler(crawler)
    crawler.spider = spider
    scheduler = RedisIRIScheduler.from_crawler(crawler)
    from iri_scrapy.plugin.refusal import CLOSESPIDER_AT_OPEN

    if CLOSESPIDER_AT_OPEN:
        assert scheduler.open(spider) is None
        assert not scheduler.backend.connected
    else:
        with pytest.raises(Exception, match="cannot use Redis"):
            scheduler.open(spider)


@pytest.mark.parametrize(("name", "value"), [
    ("IRI_REDIS_LEASE_SECONDS", 0), ("IRI_REDIS_LEASE_SECONDS", "soon"),
    ("IRI_REDIS_IDLE_TIMEOUT", -1),
])
def test_bad_settings(name: str, value: Any) -> None:
    crawler = get_crawler(WorkerSpider, {"ADDONS": {"iri_scrapy.Addon": 0},
                                    "IRI_REDIS_URL": "redis://127.0.0.1:1/0", name: value})
    with pytest.raises(ValueError, match=name):
        RedisIRIScheduler.from_crawler(crawler)


def test_flush_on_start(redis_server: RedisServer) -> None:
    _, first = open_worker(redis_server.url)
    first.enqueue_request(Request("http://e.com/1"))
    first.close("shutdown")
    assert len(first) == 0  # closed: nothing here (the queue stays in Redis)
    # a finished (or abandoned) crawl: its seen-set keeps a new run from fetching again
    _, again = open_worker(redis_server.url)
    assert not again.enqueue_request(Request("http://e.com/1"))
    again.close("shutdown")
    _, fresh = open_worker(redis_server.url, IRI_REDIS_FLUSH_ON_START=True)
    assert len(fresh) == 0
    assert fresh.enqueue_request(Request("http://e.com/1"))  # forgotten: fetched again
    assert [r.url for r in drain(fresh)] == ["http://e.com/1"]
    fresh.close("shutdown")


def test_a_finished_crawl_run_again_says_so(redis_server: RedisServer, caplog: Any) -> None:
    """Run again, a finished fleet crawl ended ``finished`` after 0 requests in silence:
    one WARNING now names IRI_REDIS_FLUSH_ON_START; a run that fetched says nothing."""
    _, first = open_worker(redis_server.url)
    first.enqueue_request(Request("http://e.com/1"))
    for request in drain(first):
        first.answered(request)
    first._on_idle()  # finished: nothing raised, nothing said
    first.close("finished")
    assert not any("IRI_REDIS_FLUSH_ON_START" in r.getMessage() for r in caplog.records)
    crawler, again = open_worker(redis_server.url)
    assert not again.enqueue_request(Request("http://e.com/1"))
    again._on_idle()
    again._on_idle()
    said = [r for r in caplog.records if "IRI_REDIS_FLUSH_ON_START" in r.getMessage()]
    assert len(said) == 1 and said[0].levelname == "WARNING", said
    again.close("finished")


def test_unserializable_request_kept_in_memory(redis_server: RedisServer, caplog: Any) -> None:
    _, worker = open_worker(redis_server.url)
    request = Request("http://e.com/lambda", callback=lambda response: None)
    assert worker.enqueue_request(request)
    assert worker.backend.counts["unserializable"] == 1
    assert worker.has_pending_requests() and len(worker) == 1
    assert worker.next_request() is request  # handed out from memory, no lease
    assert "cannot be stored in Redis" in caplog.text
    worker.close("finished")


def test_planted_queue_entry_and_intent_refused(
    redis_server: RedisServer, tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    """Someone who can write to Redis plants a pickle in the queue and as the intent of
    a "dead worker" (the heartbeat takes those over): refused, kept aside, counted,
    logged, never unpickled; the worker does not end "finished"."""
    import json
    import logging
    import pickle

    from iri_scrapy.frontier.codec import REASON_REFUSED_RECORDS, RequestCodec
    from tests.frontier.test_codec import Plant

    crawler, worker = open_worker(redis_server.url)
    keys = worker.backend.redis_keys
    client = redis_server.client()
    target = tmp_path / "pwned"
    payload = pickle.dumps(Plant(str(target)))
    client.hset(keys["bodies"], "attacker.1", payload)
    client.zadd(keys["ready"], {"0000000000000001|attacker.1": 0})
    record = json.loads(RequestCodec(crawler.spider).encode(Request("http://e.com/gone")))
    record["callback"] = "gone"
    client.hset(keys["bodies"], "attacker.2", json.dumps(record))
    client.zadd(keys["ready"], {"0000000000000002|attacker.2": 0})
    client.hset(keys["intents"], "attacker", payload)  # a worker never seen: "dead"
    with caplog.at_level(logging.ERROR):
        worker.backend.heartbeat()  # takes the dead worker's intent over
        assert worker.next_request() is None
    assert not target.exists()
    assert worker.backend.counts["refused_records"] == 3
    assert worker.backend.counts["refused_records/pickle"] == 2
    assert worker.backend.counts["refused_records/callback"] == 1
    assert "intents_recovered" not in worker.backend.counts
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 2 and all(REASON_REFUSED_RECORDS in e for e in errors), errors
    assert sorted(client.hkeys(keys["refused"])) == [
        b"intent:" + f"{worker.backend.worker}/attacker".encode(),
        b"queue:0000000000000001|attacker.1", b"queue:0000000000000002|attacker.2"]
    for name in ("ready", "leases"):
        assert client.zcard(keys[name]) == 0
    assert client.hlen(keys["bodies"]) == 0 and client.hlen(keys["intents"]) == 0
    closing = idle(crawler)  # queue and leases empty: not "finished"
    assert isinstance(closing, CloseSpider) and closing.reason == REASON_REFUSED_RECORDS
    worker.close(REASON_REFUSED_RECORDS)
    assert crawler.stats.get_value("iri/redis_scheduler/refused_records") == 3


def test_non_plain_meta_signed_across_workers(redis_server: RedisServer) -> None:
    import datetime

    when = datetime.date(2024, 5, 6)
    _, plain = open_worker(redis_server.url)
    assert plain.enqueue_request(Request("http://e.com/d0", meta={"when": when}))
    assert plain.backend.counts["unserializable"] == 1  # kept in memory without a secret
    plain.close("shutdown")
    _, first = open_worker(redis_server.url, IRI_FRONTIER_SECRET="s3cret")
    _, second = open_worker(redis_server.url, IRI_FRONTIER_SECRET="s3cret")
    assert first.enqueue_request(Request("http://e.com/d", meta={"when": when}))
    (got,) = drain(second)
    assert got.meta["when"] == when
    second.answered(got)
    first.close("finished")
    second.close("finished")


def test_in_flight_cap_lifted_as_by_the_jobdir_frontier(
    redis_server: RedisServer, caplog: Any,
) -> None:
    """One scheduler skeleton: the cap is lifted with the same line and counter."""
    _, worker = open_worker(redis_server.url, IRI_FRONTIER_MAX_INFLIGHT=1)
    worker.enqueue_request(Request("http://e.com/1"))
    worker.enqueue_request(Request("http://e.com/2"))
    held = worker.next_request()
    assert held is not None and worker.next_request() is None  # at the cap
    worker.stall_seconds = 0.0
    with caplog.at_level(logging.WARNING):
        assert worker.next_request() is not None
    assert worker.backend.counts["cap_lifted"] == 1
    assert any("lifting the in-flight cap" in r.getMessage() for r in caplog.records)
    worker.close("shutdown")
