"""Redis faults under the fleet queue: a Redis that forgets, evicts or is full is loud.

``RedisIRIScheduler`` keeps the crawl's pending requests in Redis, so a Redis that
loses them loses pages.  Each fault here ends either with every page fetched, or
with a loud stop (its own ``finish_reason``, exit status 1, one ERROR line) after
which the documented recovery loses nothing:

* Redis restarted empty (no persistence) or flushed mid-crawl: ``iri_frontier_lost``;
* queue entries or request bodies deleted (what an eviction does): ``iri_frontier_lost``;
* ``maxmemory-policy allkeys-lru``: refused at start (``iri_redis_eviction_policy``);
* two projects with one spider name on one Redis database: separate keys, 0 lost;
* Redis out of memory (``noeviction``) mid-crawl: rides through once memory is
  freed, or stops with ``iri_frontier_write_failed`` and a re-run loses nothing.

The in-process tests drive schedulers directly (as ``test_redis_scheduler.py``); the
crawls are real ``scrapy crawl`` processes (as ``test_redis_fleet.py``), every wait
bounded by progress (:mod:`tests.support.watch`).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from scrapy import Request
from scrapy.exceptions import CloseSpider

from iri_scrapy.frontier.redis_loss import (
    REASON_FRONTIER_LOST,
    REASON_REDIS_EVICTION,
)
from iri_scrapy.plugin.refusal import CLOSESPIDER_AT_OPEN, REASON_FRONTIER_WRITE_FAILED
from tests.frontier.test_frontier import log_tail, stat_of
from tests.redis.test_redis_fleet import (
    fleet_project,
    log_of,
    progress,
    start_worker,
    tree_site,
)
from tests.redis.test_redis_scheduler import drain, idle, open_worker
from tests.support import watch
from tests.support.bigsite import SlowSiteServer
from tests.support.redis_support import RedisServer

pytestmark = pytest.mark.redis

PAGES = 300


def _errors(log: str) -> list[str]:
    return [line for line in log.splitlines() if "[iri_scrapy" in line and "] ERROR:" in line]


# --------------------------------------------------------------------------- in-process


def test_epoch_marker_created_adopted_and_kept(redis_server: RedisServer) -> None:
    _, first = open_worker(redis_server.url)
    client = redis_server.client()
    marker = client.get(first.backend.redis_keys["epoch"]).decode()
    assert marker == first.backend.epoch and len(marker.split()) == 2
    _, second = open_worker(redis_server.url)
    assert second.backend.epoch == first.backend.epoch  # adopted, never overwritten
    first.enqueue_request(Request("http://e.com/1"))
    first.backend.heartbeat()
    second.backend.heartbeat()
    assert first.backend.lost is None and second.backend.lost is None
    first.close("finished")
    second.close("finished")


def test_flushed_redis_stops_the_crawl_loudly(redis_server: RedisServer,
                                              caplog: pytest.LogCaptureFixture) -> None:
    crawler, worker = open_worker(redis_server.url)
    _, other = open_worker(redis_server.url)
    for i in range(5):
        worker.enqueue_request(Request(f"http://e.com/{i}"))
    assert worker.next_request() is not None
    redis_server.flushall()  # what a restart without persistence does
    with caplog.at_level(logging.ERROR, logger="iri_scrapy"):
        worker.backend.heartbeat()
    assert worker.backend.lost is not None and "epoch marker" in worker.backend.lost
    assert not worker.backend.connected and worker.next_request() is None
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, [r.getMessage() for r in errors]
    message = errors[0].getMessage()
    assert REASON_FRONTIER_LOST in message and "IRI_REDIS_FLUSH_ON_START" in message
    with pytest.raises(CloseSpider) as raised:
        raise idle(crawler)  # type: ignore[misc]
    assert raised.value.reason == REASON_FRONTIER_LOST
    # the marker says so: the other worker stops at its next heartbeat ...
    client = redis_server.client()
    assert client.get(worker.backend.redis_keys["epoch"]).decode().startswith("lost ")
    other.backend.heartbeat()
    assert other.backend.lost is not None and "another worker found it lost" in other.backend.lost
    worker.close(REASON_FRONTIER_LOST)
    other.close(REASON_FRONTIER_LOST)
    # ... and a new run is refused until the crawl is started again from scratch
    if CLOSESPIDER_AT_OPEN:
        _, refused = open_worker(redis_server.url)
        assert not refused.backend.connected
    else:  # Scrapy 2.17: a start refusal is raised (iri_scrapy.plugin.refusal)
        from iri_scrapy.frontier.redis_loss import FrontierLost

        with pytest.raises(FrontierLost):
            open_worker(redis_server.url)
    _, fresh = open_worker(redis_server.url, IRI_REDIS_FLUSH_ON_START=True)
    assert fresh.backend.connected and fresh.backend.lost is None
    fresh.close("finished")


def test_queue_entries_without_their_request_are_loud(redis_server: RedisServer) -> None:
    """Bodies gone (evicted, deleted): found when leasing, never skipped silently."""
    crawler, worker = open_worker(redis_server.url)
    for i in range(6):
        worker.enqueue_request(Request(f"http://e.com/{i}"))
    client = redis_server.client()
    keys = worker.backend.redis_keys
    ids = sorted(client.hkeys(keys["bodies"]))[:2]
    client.hdel(keys["bodies"], *ids)
    got = drain(worker)
    assert len(got) < 6
    assert worker.backend.lost is not None and "no stored request" in worker.backend.lost
    assert worker.backend.counts["frontier_lost"] == 1
    with pytest.raises(CloseSpider):
        raise idle(crawler)  # type: ignore[misc]
    worker.close(REASON_FRONTIER_LOST)


def test_queue_gone_found_at_the_heartbeat(redis_server: RedisServer) -> None:
    """The queue (a ZSET) evicted while its requests (a HASH) stay: the counts disagree."""
    _, worker = open_worker(redis_server.url)
    for i in range(4):
        worker.enqueue_request(Request(f"http://e.com/{i}"))
    redis_server.client().delete(worker.backend.redis_keys["ready"])
    worker.backend.heartbeat()
    assert worker.backend.lost is not None and "neither queued nor leased" in worker.backend.lost
    worker.close(REASON_FRONTIER_LOST)


@pytest.mark.parametrize("call", ["enqueue", "heartbeat", "verify"])
def test_redis_back_in_time_found_by_the_clock(redis_server: RedisServer, call: str) -> None:
    """The crawl's clock behind what the worker has seen (Redis back on older data),
    found by whichever of an enqueue, a heartbeat or a check after an outage comes
    first (a lease and an ack do not read the clock)."""
    _, worker = open_worker(redis_server.url)
    for i in range(3):
        worker.enqueue_request(Request(f"http://e.com/{i}"))
    got = worker.next_request()
    assert got is not None
    worker.backend.heartbeat()
    assert worker.backend.lost is None
    client = redis_server.client()
    seen = int(client.get(worker.backend.redis_keys["clock"]))
    client.set(worker.backend.redis_keys["clock"], seen - 3)
    worker.answered(got)  # an ack, which does not read the clock
    assert worker.next_request() is not None and worker.backend.lost is None  # nor does a lease
    if call == "enqueue":
        worker.enqueue_request(Request("http://e.com/new"))
    elif call == "heartbeat":
        worker.backend.heartbeat()
    else:
        assert not worker.backend.verify("in the test")
    assert worker.backend.lost is not None and "went back in time" in worker.backend.lost, worker.backend.lost
    assert f"was at {seen - 3}, this worker had seen it at {seen}" in worker.backend.lost
    worker.close(REASON_FRONTIER_LOST)


@pytest.mark.parametrize("first_since", ["left", "idle", "heartbeat"])
def test_restored_from_a_snapshot_older_than_every_live_worker(
        redis_server: RedisServer, tmp_path: Path, caplog: pytest.LogCaptureFixture,
        first_since: str) -> None:
    """redis-server restarted from an RDB snapshot taken before the second worker joined;
    the worker there at the snapshot has left since, stayed idle (it raised the clock no
    more), or made a heartbeat.  The first heartbeat after the restart of a worker that
    raised the clock since the snapshot finds Redis back in time and stops the crawl
    (iri_frontier_lost, one ERROR line); the other worker stops at its next heartbeat
    (the marker) and a new run is refused.  Nothing of the second worker was in the
    snapshot to compare with."""
    crawler0, first = open_worker(redis_server.url)
    for i in range(3):
        first.enqueue_request(Request(f"http://e.com/{i}"))
    snapshot = redis_server.snapshot(tmp_path / "old.rdb")
    if first_since == "left":
        first.close("shutdown")
    crawler, worker = open_worker(redis_server.url)  # joins after the snapshot
    for i in range(3, 8):
        worker.enqueue_request(Request(f"http://e.com/{i}"))
    got = drain(worker)
    for request in got[:4]:
        worker.answered(request)
    worker.backend.heartbeat()
    if first_since == "heartbeat":
        first.backend.heartbeat()
    assert worker.backend.lost is None and first.backend.lost is None
    redis_server.restart_from(snapshot)
    finder, other = (first, worker) if first_since == "heartbeat" else (worker, first)
    with caplog.at_level(logging.ERROR, logger="iri_scrapy"):
        if first_since == "idle":
            first.backend.heartbeat()  # nothing it saw was undone: it cannot tell
            assert first.backend.lost is None
        finder.backend.heartbeat()
        assert finder.backend.lost is not None and "went back in time" in finder.backend.lost, finder.backend.lost
        if first_since != "left":
            other.backend.heartbeat()
            assert other.backend.lost is not None and "another worker found it lost" in other.backend.lost
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == (1 if first_since == "left" else 2), [r.getMessage() for r in errors]
    assert all(REASON_FRONTIER_LOST in r.getMessage() for r in errors)
    for c in (crawler,) if first_since == "left" else (crawler, crawler0):
        with pytest.raises(CloseSpider) as raised:
            raise idle(c)  # type: ignore[misc]
        assert raised.value.reason == REASON_FRONTIER_LOST
    worker.close(REASON_FRONTIER_LOST)
    if first_since != "left":
        first.close(REASON_FRONTIER_LOST)
    _assert_refused(redis_server)


def _assert_refused(redis_server: RedisServer) -> None:
    """A new run on the crawl's keys is refused (the marker says lost)."""
    if CLOSESPIDER_AT_OPEN:
        _, refused = open_worker(redis_server.url)
        assert not refused.backend.connected
    else:  # Scrapy 2.17: a start refusal is raised (iri_scrapy.plugin.refusal)
        from iri_scrapy.frontier.redis_loss import FrontierLost

        with pytest.raises(FrontierLost):
            open_worker(redis_server.url)


def test_worker_reaped_after_a_stall_is_not_found_lost(redis_server: RedisServer) -> None:
    """A worker that stalled past its lease is reaped by another: not a loss (the clock
    went on meanwhile); its next heartbeat registers it again."""
    _, stalled = open_worker(redis_server.url)
    _, other = open_worker(redis_server.url)
    for i in range(3):
        stalled.enqueue_request(Request(f"http://e.com/{i}"))
    client = redis_server.client()
    keys = stalled.backend.redis_keys
    client.zadd(keys["workers"], {stalled.backend.worker: 0})  # its liveness expired
    other.backend.heartbeat()  # reaps it
    assert client.zscore(keys["workers"], stalled.backend.worker) is None
    assert stalled.backend.verify("after the stall")
    stalled.backend.heartbeat()
    assert client.zscore(keys["workers"], stalled.backend.worker) is not None
    assert stalled.backend.verify("after its heartbeat")
    assert stalled.backend.lost is None and other.backend.lost is None
    stalled.close("finished")
    other.close("finished")


def test_allkeys_policy_refused_volatile_accepted(redis_server: RedisServer,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    client = redis_server.client()
    client.config_set("maxmemory-policy", "allkeys-lru")
    with caplog.at_level(logging.WARNING, logger="iri_scrapy"):
        if CLOSESPIDER_AT_OPEN:
            _, worker = open_worker(redis_server.url)
            assert not worker.backend.connected
        else:  # Scrapy 2.17: the error is raised
            with pytest.raises(Exception, match="allkeys-lru"):
                open_worker(redis_server.url)
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "maxmemory-policy allkeys-lru" in errors[0], errors
    assert client.keys("*epoch") == []  # refused before anything was written
    # our keys have no TTL: a volatile-* policy never evicts them
    client.config_set("maxmemory-policy", "volatile-lru")
    _, worker = open_worker(redis_server.url)
    assert worker.backend.connected
    worker.enqueue_request(Request("http://e.com/1"))
    assert all(client.ttl(key) == -1 for key in client.keys("*"))
    worker.close("finished")


def test_dupefilter_alone_warns_about_an_evicting_policy(
        redis_server: RedisServer, caplog: pytest.LogCaptureFixture) -> None:
    """Without the fleet queue an eviction costs refetches, not pages: one WARNING."""
    from tests.redis.test_redis_dupefilter import _filter

    redis_server.client().config_set("maxmemory-policy", "allkeys-lfu")
    with caplog.at_level(logging.WARNING, logger="iri_scrapy"):
        df = _filter(redis_server)
    lines = [r.getMessage() for r in caplog.records if "maxmemory-policy" in r.getMessage()]
    assert len(lines) == 1 and "allkeys-lfu" in lines[0] and "fetched again" in lines[0]
    df.close()


def test_no_persistence_warned_config_disabled_warned(
        redis_server: RedisServer, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="iri_scrapy"):
        _, worker = open_worker(redis_server.url)  # the fixtures: save "", appendonly no
    warnings = [r.getMessage() for r in caplog.records if "keeps no data" in r.getMessage()]
    assert len(warnings) == 1 and REASON_FRONTIER_LOST in warnings[0]
    worker.close("finished")
    caplog.clear()
    renamed = RedisServer(tmp_path / "renamed", extra_args=("--rename-command", "CONFIG", ""))
    renamed.start()
    try:
        with caplog.at_level(logging.WARNING, logger="iri_scrapy"):
            _, worker = open_worker(renamed.url)
        assert worker.backend.connected
        lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        cannot = [line for line in lines if "cannot read the configuration" in line]
        assert len(cannot) == 1, lines
        assert not [line for line in lines if "keeps no data" in line]
        worker.close("finished")
    finally:
        renamed.close()


def test_oom_keeps_the_parent_leased(redis_server: RedisServer,
                                     caplog: pytest.LogCaptureFixture) -> None:
    """Out of memory while a callback's children are stored: retried, then the crawl
    closes with iri_frontier_write_failed and the parent is not acknowledged."""
    crawler, worker = open_worker(redis_server.url, IRI_REDIS_RETRY_SECONDS=0.3)
    worker.enqueue_request(Request("http://e.com/parent"))
    parent = worker.next_request()
    assert parent is not None
    client = redis_server.client()
    client.config_set("maxmemory", 1)
    try:
        child = Request("http://e.com/child")  # scheduled from the parent's callback
        with caplog.at_level(logging.WARNING, logger="iri_scrapy"):
            worker.enqueue_request(child)
            worker.answered(parent)
        lines = [r.getMessage() for r in caplog.records]
        assert any("out of memory" in line and "retrying" in line for line in lines), lines
        errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        assert len(errors) == 1 and REASON_FRONTIER_WRITE_FAILED in errors[0], errors
        assert "maxmemory" in errors[0]
    finally:
        client.config_set("maxmemory", 0)
    keys = worker.backend.redis_keys
    assert client.zcard(keys["leases"]) == 1  # the parent: fetched again by the next run
    assert client.hlen(keys["bodies"]) == 1
    with pytest.raises(CloseSpider) as raised:
        raise idle(crawler)  # type: ignore[misc]
    assert raised.value.reason == REASON_FRONTIER_WRITE_FAILED
    worker.close(REASON_FRONTIER_WRITE_FAILED)


def test_default_keys_name_the_project(redis_server: RedisServer) -> None:
    _, a = open_worker(redis_server.url, BOT_NAME="alpha")
    _, b = open_worker(redis_server.url, BOT_NAME="beta")
    assert a.backend.base.startswith("iri:{alpha:fleet-unit}:sched:v2:")
    assert b.backend.base.startswith("iri:{beta:fleet-unit}:sched:v2:")
    assert a.df.base_key.startswith("alpha:fleet-unit:iri-dupefilter:")  # type: ignore[attr-defined]
    a.enqueue_request(Request("http://e.com/same"))
    assert b.enqueue_request(Request("http://e.com/same"))  # not a duplicate there
    assert len(drain(a)) == 1 and len(drain(b)) == 1
    a.close("finished")
    b.close("finished")


# --------------------------------------------------------------------------- real crawls


@pytest.fixture(scope="module")
def site() -> Iterator[SlowSiteServer]:
    with SlowSiteServer(tree_site(PAGES), latency=0.01) as srv:
        yield srv


def _finish(srv: SlowSiteServer, project: Path, name: str,
            proc: subprocess.Popen[bytes]) -> int:
    try:
        return watch.wait_exit(proc, *progress(srv, project, {name: proc}),
                               what=f"worker {name}", detail=lambda: log_tail(project, name))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _held_at(srv: SlowSiteServer, project: Path, name: str, proc: subprocess.Popen[bytes],
             after: int) -> Any:
    """Hold the server's answers from hit *after* on, and wait until the worker waits
    for one (so that what the test does next happens mid-crawl)."""
    held = watch.hold_answers(srv.hits, after)
    state = held.__enter__()
    try:
        watch.wait_until(lambda: proc.poll() is None and state.held >= 1,
                         *progress(srv, project, {name: proc}), what=f"{after} hits",
                         detail=lambda: log_tail(project, name))
    except BaseException:
        held.__exit__(None, None, None)
        raise
    return held


@pytest.mark.slow
def test_redis_restarted_empty_mid_crawl(site: SlowSiteServer, redis_server: RedisServer,
                                         tmp_path: Path) -> None:
    """redis-server without persistence restarted mid-crawl: the crawl stops with
    iri_frontier_lost and exit status 1, one ERROR line; never "finished"."""
    srv = site
    srv.reset()
    project = fleet_project(tmp_path, srv, redis_server.url)
    worker = start_worker(project, "A")
    held = _held_at(srv, project, "A", worker, 40)
    try:
        redis_server.restart()  # SIGTERM with save "": it comes back empty
    finally:
        held.__exit__(None, None, None)
    code = _finish(srv, project, "A", worker)
    log = log_of(project, "A")
    assert code == 1, log[-3000:]
    assert f"'finish_reason': '{REASON_FRONTIER_LOST}'" in log
    errors = _errors(log)
    assert len(errors) == 1, errors
    assert "lost this crawl's frontier" in errors[0] and "IRI_REDIS_FLUSH_ON_START" in errors[0]
    print(f"restart empty: stopped after {len(srv.hits.hits)} hits of {len(srv.site.keys)}")
    # the next run is refused (the marker says lost) until started again from scratch
    again = start_worker(project, "B")
    assert _finish(srv, project, "B", again) == 1
    assert len(_errors(log_of(project, "B"))) == 1


@pytest.mark.slow
def test_redis_restored_from_an_older_snapshot_mid_crawl(
        site: SlowSiteServer, redis_server: RedisServer, tmp_path: Path) -> None:
    """redis-server restarted from an RDB snapshot taken before the live worker joined
    (the worker running then was killed since): the live worker stops with
    iri_frontier_lost, exit status 1, one ERROR line; the next run is refused."""
    srv = site
    srv.reset()
    project = fleet_project(tmp_path, srv, redis_server.url)
    first = start_worker(project, "A")
    held = _held_at(srv, project, "A", first, 40)
    try:
        snapshot = redis_server.snapshot(tmp_path / "old.rdb")
        os.kill(first.pid, signal.SIGKILL)  # the only worker the snapshot knows
        first.wait()
    finally:
        held.__exit__(None, None, None)
    worker = start_worker(project, "B")  # joins after the snapshot
    held = _held_at(srv, project, "B", worker, len(srv.hits.hits) + 60)
    try:
        redis_server.restart_from(snapshot)
    finally:
        held.__exit__(None, None, None)
    code = _finish(srv, project, "B", worker)
    log = log_of(project, "B")
    assert code == 1, log[-3000:]
    assert f"'finish_reason': '{REASON_FRONTIER_LOST}'" in log
    errors = _errors(log)
    assert len(errors) == 1, errors
    assert "went back in time" in errors[0] and "IRI_REDIS_FLUSH_ON_START" in errors[0]
    twice = sum(1 for n in srv.hits.counts().values() if n > 1)
    print(f"restored snapshot: stopped after {len(srv.hits.hits)} hits of "
          f"{len(srv.site.keys)}, {twice} pages fetched twice")
    again = start_worker(project, "C")  # refused: the marker says lost
    assert _finish(srv, project, "C", again) == 1
    assert len(_errors(log_of(project, "C"))) == 1


@pytest.mark.slow
def test_deleted_queue_entries_stop_the_crawl(site: SlowSiteServer, redis_server: RedisServer,
                                              tmp_path: Path) -> None:
    """Request bodies deleted from under queue entries mid-crawl (as an eviction would):
    a loud stop, never a silent skip."""
    srv = site
    srv.reset()
    project = fleet_project(tmp_path, srv, redis_server.url)
    worker = start_worker(project, "A")
    held = _held_at(srv, project, "A", worker, 40)
    try:
        client = redis_server.client()
        (bodies,) = client.keys("iri:{fproj:frontier}:sched:v2:*:bodies")
        (ready,) = client.keys("iri:{fproj:frontier}:sched:v2:*:ready")
        queued = client.zrange(ready, 0, 4)
        assert queued
        client.hdel(bodies, *[member.decode()[17:] for member in queued])
    finally:
        held.__exit__(None, None, None)
    code = _finish(srv, project, "A", worker)
    log = log_of(project, "A")
    assert code == 1, log[-3000:]
    assert f"'finish_reason': '{REASON_FRONTIER_LOST}'" in log
    errors = _errors(log)
    assert len(errors) == 1 and "no stored request" in errors[0], errors


@pytest.mark.slow
def test_allkeys_lru_refused_at_start(site: SlowSiteServer, redis_server: RedisServer,
                                      tmp_path: Path) -> None:
    srv = site
    srv.reset()
    redis_server.client().config_set("maxmemory-policy", "allkeys-lru")
    project = fleet_project(tmp_path, srv, redis_server.url)
    code = _finish(srv, project, "A", start_worker(project, "A"))
    log = log_of(project, "A")
    assert code == 1, log[-3000:]
    assert srv.hits.hits == []
    errors = _errors(log)
    assert len(errors) == 1 and "maxmemory-policy allkeys-lru" in errors[0], errors
    if CLOSESPIDER_AT_OPEN:  # Scrapy 2.18+; on 2.17 the error is raised, with its traceback
        assert f"'finish_reason': '{REASON_REDIS_EVICTION}'" in log
        assert "Traceback" not in log


@pytest.mark.slow
def test_two_projects_one_spider_name_one_database(redis_server: RedisServer,
                                                   tmp_path: Path) -> None:
    """Two projects (BOT_NAME) with the same spider name crawl the same site at once on
    one Redis database: each fetches every page (nothing shared, nothing lost)."""
    with SlowSiteServer(tree_site(120), latency=0.01) as srv:
        _two_projects(srv, redis_server, tmp_path)


def _two_projects(srv: SlowSiteServer, redis_server: RedisServer, tmp_path: Path) -> None:
    first = fleet_project(tmp_path / "one", srv, redis_server.url)
    second = fleet_project(tmp_path / "two", srv, redis_server.url, extra='BOT_NAME = "other"')
    a, b = start_worker(first, "A"), start_worker(second, "B")
    assert _finish(srv, first, "A", a) == 0, log_tail(first, "A")
    assert _finish(srv, second, "B", b) == 0, log_tail(second, "B")
    for project, name in ((first, "A"), (second, "B")):
        assert "'finish_reason': 'finished'" in log_of(project, name)
        assert stat_of(project, name, "iri/redis_scheduler/refused_records") is None  # type: ignore[arg-type]
    counts = srv.hits.counts()
    assert set(counts) == srv.site.keys
    assert sorted(set(counts.values())) == [2], sorted(k for k, n in counts.items() if n != 2)


@pytest.mark.slow
@pytest.mark.parametrize("freed", [True, False], ids=["freed-in-time", "re-run"])
def test_redis_out_of_memory_mid_crawl(site: SlowSiteServer, redis_server: RedisServer,
                                       tmp_path: Path, freed: bool) -> None:
    """maxmemory reached under noeviction mid-crawl.  Memory freed within
    IRI_REDIS_RETRY_SECONDS: the crawl rides through and fetches every page.  Not
    freed in time: iri_frontier_write_failed, exit status 1; the same command run
    once memory is freed fetches the rest: no page lost."""
    srv = site
    srv.reset()
    retry = 60 if freed else 2
    project = fleet_project(tmp_path, srv, redis_server.url, lease=3,
                            extra=f"IRI_REDIS_RETRY_SECONDS = {retry}\n")
    client = redis_server.client()
    worker = start_worker(project, "A")
    held = _held_at(srv, project, "A", worker, 40)
    try:
        client.config_set("maxmemory", 1)
    finally:
        held.__exit__(None, None, None)
    try:
        watch.wait_until(lambda: "out of memory" in log_tail(project, "A")
                         or worker.poll() is not None,
                         *progress(srv, project, {"A": worker}), what="the worker meeting OOM",
                         detail=lambda: log_tail(project, "A"))
        if freed:
            client.config_set("maxmemory", 0)
        code = _finish(srv, project, "A", worker)
    finally:
        client.config_set("maxmemory", 0)
    log = log_of(project, "A")
    assert "out of memory" in log
    if freed:
        assert code == 0, log[-3000:]
        assert "'finish_reason': 'finished'" in log
    else:
        assert code == 1, log[-3000:]
        assert f"'finish_reason': '{REASON_FRONTIER_WRITE_FAILED}'" in log
        # one line from the scheduler, and one from the dupefilter if its write met the
        # OOM first (each retried for IRI_REDIS_RETRY_SECONDS)
        errors = _errors(log)
        assert 1 <= len(errors) <= 2, errors
        assert all("maxmemory" in line and REASON_FRONTIER_WRITE_FAILED in line
                   for line in errors), errors
        stopped_at = len(srv.hits.hits)
        again = start_worker(project, "B")
        assert _finish(srv, project, "B", again) == 0, log_tail(project, "B")
        assert "'finish_reason': 'finished'" in log_of(project, "B")
        print(f"OOM: stopped after {stopped_at} hits; {len(srv.hits.hits)} after the re-run")
    counts = srv.hits.counts()
    lost = srv.site.keys - set(counts)
    assert not lost, sorted(str(k) for k in lost)
