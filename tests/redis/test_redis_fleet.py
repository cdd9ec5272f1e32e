"""A fleet of real ``scrapy crawl`` processes on one real redis-server, with real signals.

The workers run the add-on with ``IRI_REDIS_URL`` (so ``RedisIRIDupeFilter`` and
``RedisIRIScheduler``) against the 1,500-page aliased site of
:mod:`tests.support.bigsite`; the site server's hit log is the oracle.
Leases are short here (``IRI_REDIS_LEASE_SECONDS = 10``) so that a killed
worker's requests are taken over quickly; not shorter, because a live worker
whose heartbeat (every third of the lease) comes later than the lease (a busy
machine) has its leases taken over too, and those pages are fetched twice.

Every wait is bounded by progress (:mod:`tests.support.watch`: server hits, the
workers' logs and CPU time), not by a deadline; a kill is made while the server
holds its answers (:func:`~tests.support.watch.hold_answers`), so that it comes
with the killed worker's requests in flight however slow the machine.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.frontier.test_frontier import child_env, log_tail, make_project, stat_of
from tests.support import watch
from tests.support.bigsite import LARGE_HOST, SlowSiteServer, _aliases, large_site, page_name
from tests.support.redis_support import RedisServer
from tests.support.site import Link, Resource, Site

pytestmark = [pytest.mark.redis, pytest.mark.slow]  # real crawls, real redis-servers

PAGES = 1500
SMALL_PAGES = 600
CONCURRENCY = 8
LATENCY = 0.005
SEED = 3987
LEASE = 10
#: start requests (deduplicated by the add-on) + the one possible intent duplicate
EXTRA = 1 + 1


def tree_site(pages: int = PAGES, fanout: int = 4) -> Site:
    """:func:`large_site` without its parent and sibling links: a tree, each link under
    three spellings.  A page is linked from its parent only, so a response that is
    fetched but never processed (a worker killed with it in flight) loses the whole
    subtree under it unless the page is fetched again: the server's hit log shows it."""
    host = LARGE_HOST
    resources = [Resource("home", host, "/", None, "Fleet home", "",
                          (Link("/p/0", page_name(0)),))]
    for i in range(pages):
        links = tuple(Link(href, page_name(c))
                      for c in range(fanout * i + 1, min(pages, fanout * i + fanout + 1))
                      for href in _aliases(c))
        resources.append(Resource(page_name(i), host, f"/p/{i}", None, f"Page {i}",
                                  "A page of the fleet test tree.", links))
    return Site(hosts=(host,), resources=tuple(resources),
                start_urls=("http://frontier.example/",))


@pytest.fixture(scope="module")
def site_server() -> Iterator[SlowSiteServer]:
    with SlowSiteServer(tree_site(PAGES), latency=LATENCY) as srv:
        yield srv


def fleet_project(where: Path, srv: SlowSiteServer, redis_url: str, lease: float = LEASE,
                  extra: str = "") -> Path:
    settings = (f'IRI_REDIS_URL = "{redis_url}"\nIRI_REDIS_LEASE_SECONDS = {lease}\n'
                f"IRI_REDIS_IDLE_TIMEOUT = 60\n{extra}")
    return make_project(where, srv.proxy_url, extra=settings)


def start_worker(project: Path, name: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "scrapy", "crawl", "frontier",
         "-s", f"LOG_FILE={project / f'log{name}.txt'}"],
        cwd=project, env=child_env(project), stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )


Workers = dict[str, "subprocess.Popen[bytes]"]


def progress(srv: SlowSiteServer, project: Path,
             workers: Workers) -> list[Callable[[], object]]:
    """The fleet's progress signals: server hits, the workers' logs and CPU time."""
    return [lambda: len(srv.hits.hits),
            *(watch.size_of(project / f"log{name}.txt") for name in workers),
            *(watch.cpu_of(proc.pid) for proc in workers.values())]


def wait_exit(srv: SlowSiteServer, project: Path, name: str,
              proc: subprocess.Popen[bytes]) -> None:
    """Wait until worker *name* ends by itself (bounded by progress); it exits 0."""
    watch.wait_exit(proc, *progress(srv, project, {name: proc}), what=f"worker {name}",
                    detail=lambda: log_tail(project, name))
    assert proc.returncode == 0, log_tail(project, name)


def log_of(project: Path, name: str) -> str:
    return (project / f"log{name}.txt").read_text(encoding="utf-8")


def running(workers: Workers) -> bool:
    ended = [name for name, proc in workers.items() if proc.poll() is not None]
    assert not ended, f"worker(s) {ended} ended before the kill"
    return True


def wait_hits(srv: SlowSiteServer, project: Path, count: int, workers: Workers) -> None:
    watch.wait_until(lambda: running(workers) and len(srv.hits.hits) >= count,
                     *progress(srv, project, workers), what=f"{count} hits")


def kill_mid_crawl(srv: SlowSiteServer, project: Path, workers: Workers, victim: str,
                   after: int) -> int:
    """SIGKILL worker *victim* (of two) with requests of its own in flight, once the
    server has seen *after* hits; returns the hits at the kill.

    From that hit on the server holds its answers, until more requests wait for one
    than the other worker can have in flight (``CONCURRENT_REQUESTS``): the victim
    then has some in flight (leased, unanswered), and both workers are crawling.
    The victim is killed before the answers are let go.
    """
    with watch.hold_answers(srv.hits, after) as held:
        watch.wait_until(lambda: running(workers) and held.held > CONCURRENCY,
                         *progress(srv, project, workers),
                         what=f"more than {CONCURRENCY} requests in flight after {after} hits")
        proc = workers[victim]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        return len(srv.hits.hits)


def queue_state(redis: RedisServer) -> dict[str, int]:
    client = redis.client()
    metas = client.keys("iri:{fproj:frontier}:sched:v2:*:meta")
    assert len(metas) == 1, metas  # one crawl: one version and options tag
    base = metas[0].decode().removesuffix(":meta")
    return {name: int(client.execute_command(cmd, f"{base}:{name}"))
            for name, cmd in (("ready", "ZCARD"), ("leases", "ZCARD"), ("bodies", "HLEN"),
                              ("intents", "HLEN"))}


@pytest.mark.slow
def test_kill_9_one_of_two_workers(site_server: SlowSiteServer, redis_server: RedisServer,
                                   tmp_path: Path) -> None:
    """Two workers; SIGKILL one mid-crawl; the other finishes, taking over its expired
    leases; a replacement worker started afterwards finds nothing to do."""
    srv = site_server
    srv.reset()
    project = fleet_project(tmp_path, srv, redis_server.url)
    kill_at = random.Random(SEED).randrange(200, 600)
    started = time.monotonic()
    a, b = start_worker(project, "A"), start_worker(project, "B")
    try:
        # held answers: A is killed with requests in flight while B crawls (on a busy
        # machine B can start so late that A has fetched the kill's count alone)
        killed_at = kill_mid_crawl(srv, project, {"A": a, "B": b}, "A", kill_at)
        wait_exit(srv, project, "B", b)
    finally:
        for proc in (a, b):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    fleet_seconds = time.monotonic() - started
    after_b = len(srv.hits.hits)
    log_b = log_of(project, "B")
    assert "'finish_reason': 'finished'" in log_b
    taken_over = stat_of(project, "B", "iri/redis_scheduler/requeued_expired") or 0
    assert taken_over >= 1, log_b[-3000:]
    # a replacement worker: nothing left to do
    c = start_worker(project, "C")
    try:
        wait_exit(srv, project, "C", c)
    finally:
        if c.poll() is None:
            c.kill()
            c.wait()
    assert len(srv.hits.hits) == after_b
    log_c = log_of(project, "C")
    assert "'finish_reason': 'finished'" in log_c
    assert stat_of(project, "C", "iri/redis_scheduler/leased") is None
    counts = srv.hits.counts()
    refetched = sum(n - 1 for n in counts.values())
    print(f"fleet: A killed after {killed_at} hits; {after_b} hits in all for "
          f"{len(srv.site.keys)} pages in {fleet_seconds:.1f}s; B took over {taken_over} "
          f"expired leases; refetched {refetched}; "
          f"intents recovered {stat_of(project, 'B', 'iri/redis_scheduler/intents_recovered')}")
    assert set(counts) == srv.site.keys, sorted(str(k) for k in srv.site.keys - set(counts))  # none lost
    assert refetched <= CONCURRENCY + EXTRA, sorted(k for k, n in counts.items() if n > 1)
    assert srv.hits.not_found() == []
    assert queue_state(redis_server) == {"ready": 0, "leases": 0, "bodies": 0, "intents": 0}


@pytest.fixture(scope="module")
def small_site_server() -> Iterator[SlowSiteServer]:
    with SlowSiteServer(large_site(SMALL_PAGES), latency=LATENCY) as srv:
        yield srv


@pytest.mark.slow
def test_redis_killed_and_restarted_mid_crawl(small_site_server: SlowSiteServer,
                                              tmp_path: Path) -> None:
    """redis-server SIGKILLed mid-crawl and started again on its AOF (appendfsync
    always): the worker waits for it (bounded retries) and finishes; nothing lost."""
    srv = small_site_server
    srv.reset()
    redis = RedisServer(tmp_path / "redis",
                        extra_args=("--appendonly", "yes", "--appendfsync", "always"))
    redis.start()
    try:
        project = fleet_project(tmp_path / "p", srv, redis.url, lease=30)
        worker = start_worker(project, "A")
        try:
            wait_hits(srv, project, random.Random(SEED + 1).randrange(100, 300),
                      {"A": worker})
            redis.kill()
            down_at = len(srv.hits.hits)
            # Redis comes back once the worker has met the outage (it logs it), not
            # after a fixed time: a worker slowed down by a busy machine may not send
            # a command to Redis for a while
            watch.wait_until(
                lambda: running({"A": worker}) and "unreachable" in log_tail(project, "A"),
                *progress(srv, project, {"A": worker}), what="the worker meeting the outage")
            redis.start()
            wait_exit(srv, project, "A", worker)
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
        log = log_of(project, "A")
        assert "'finish_reason': 'finished'" in log
        outages = (stat_of(project, "A", "iri/redis_scheduler/outages") or 0) + (
            stat_of(project, "A", "iri/redis/outages") or 0)
        assert outages >= 1, log[-3000:]
        counts = srv.hits.counts()
        refetched = sum(n - 1 for n in counts.values())
        print(f"redis restart: killed after {down_at} hits, {len(srv.hits.hits)} hits in "
              f"all, refetched {refetched}")
        assert set(counts) == srv.site.keys
        assert refetched <= CONCURRENCY + EXTRA
        assert queue_state(redis) == {"ready": 0, "leases": 0, "bodies": 0, "intents": 0}
    finally:
        redis.close()


SCRAPY_REDIS = '''
warnings.filterwarnings("ignore", category=ScrapyDeprecationWarning)  # scrapy-redis warns
IRI_REDIS_SCHEDULER = False
SCHEDULER = "scrapy_redis.scheduler.Scheduler"
SCHEDULER_PERSIST = True
REDIS_URL = "{url}"
DUPEFILTER_CLASS = "iri_scrapy.RedisIRIDupeFilter"
'''


@pytest.mark.slow
def test_scrapy_redis_scheduler_loses_the_killed_workers_requests(
    site_server: SlowSiteServer, redis_server: RedisServer, tmp_path: Path
) -> None:
    """The same kill with scrapy-redis 0.9.1's scheduler (and our shared seen-set): the
    killed worker's requests were popped from the shared queue and marked seen, so
    nobody fetches them again: pages are lost."""
    srv = site_server
    srv.reset()
    project = fleet_project(tmp_path, srv, redis_server.url,
                            extra=SCRAPY_REDIS.format(url=redis_server.url))
    # B joins once the queue is under way (its start request is then a duplicate, and
    # scrapy-redis's scheduler closes a worker whose queue is empty at once)
    a = start_worker(project, "A")
    b = None
    try:
        wait_hits(srv, project, 50, {"A": a})
        b = start_worker(project, "B")
        # early, while the pages in flight are inner pages of the tree (their subtrees
        # are lost with them); later, with leaves in flight, the loss is smaller.  The
        # server holds its answers from that hit on, so the kill comes there with A's
        # requests in flight, however slow the machine
        kill_mid_crawl(srv, project, {"A": a, "B": b}, "A",
                       random.Random(SEED).randrange(100, 160))
        wait_exit(srv, project, "B", b)
    finally:
        for proc in (a, b):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    lost = srv.site.keys - set(srv.hits.counts())
    print(f"scrapy-redis scheduler: {len(lost)} of {len(srv.site.keys)} pages never fetched "
          f"after one kill -9")
    assert lost  # what RedisIRIScheduler fixes (test_kill_9_one_of_two_workers)


def test_records_planted_in_redis_refused_by_a_real_worker(redis_server: RedisServer,
                                                           tmp_path: Path) -> None:
    """A finished crawl; someone with write access to Redis plants a pickle that would
    create a file in the queue and as a dead worker's intent, and a record whose callback
    the spider lacks: a worker started afterwards executes nothing, keeps them aside,
    logs them and exits 1 with finish_reason iri_frontier_refused_records."""
    import json
    import pickle

    from iri_scrapy.frontier.codec import REASON_REFUSED_RECORDS
    from tests.frontier.test_codec import Plant

    target = tmp_path / "pwned"
    with SlowSiteServer(tree_site(12), latency=LATENCY) as srv:
        project = fleet_project(tmp_path / "p", srv, redis_server.url)
        first = start_worker(project, "A")
        wait_exit(srv, project, "A", first)
        assert "'finish_reason': 'finished'" in log_of(project, "A")
        client = redis_server.client()
        (meta,) = client.keys("iri:{fproj:frontier}:sched:v2:*:meta")
        base = meta.decode().removesuffix(":meta")
        payload = pickle.dumps(Plant(str(target)))
        record = {"v": 1, "url": "http://frontier.example/p/1", "callback": "gone",
                  "errback": None, "headers": [], "body": {"$b": ""}, "cookies": {},
                  "meta": {}, "encoding": "utf-8", "flags": [], "cb_kwargs": {},
                  "dont_filter": True, "method": "GET", "priority": 0}
        client.hset(f"{base}:bodies", mapping={"x.1": payload, "x.2": json.dumps(record)})
        client.zadd(f"{base}:ready", {"0000000000000001|x.1": 0, "0000000000000002|x.2": 0})
        client.hset(f"{base}:intents", "x", payload)
        srv.reset()
        second = start_worker(project, "B")
        code = watch.wait_exit(second, *progress(srv, project, {"B": second}),
                               what="worker B", detail=lambda: log_tail(project, "B"))
        log = log_of(project, "B")
        assert not target.exists()
        assert code == 1, log[-3000:]
        assert f"'finish_reason': '{REASON_REFUSED_RECORDS}'" in log
        assert stat_of(project, "B", "iri/redis_scheduler/refused_records") == 3
        assert stat_of(project, "B", "iri/redis_scheduler/refused_records/pickle") == 2
        assert [line for line in log.splitlines() if "ERROR" in line and "refused" in line]
        assert srv.hits.hits == []  # nothing fetched: the planted records were refused
        assert client.hlen(f"{base}:refused") == 3
        assert queue_state(redis_server) == {"ready": 0, "leases": 0, "bodies": 0, "intents": 0}
    assert not target.exists()
