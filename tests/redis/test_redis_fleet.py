"""A fleet of real ``scrapy crawl`` processes on one real redis-server, with real signals.

The workers run the add-on with ``IRI_REDIS_URL`` (so ``RedisIRIDupeFilter`` and
``RedisIRIScheduler``) against the 1,500-page aliased site of
:mod:`tests.support.bigsite`; the site server's hit log is the oracle.
Leases are short here (``IRI_REDIS_LEASE_SECONDS = 3``) so that a killed
worker's requests are taken over quickly.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.frontier.test_frontier import child_env, make_project, stat_of
from tests.support.bigsite import LARGE_HOST, SlowSiteServer, _aliases, large_site, page_name
from tests.support.redis_support import RedisServer
from tests.support.site import Link, Resource, Site

pytestmark = [pytest.mark.redis, pytest.mark.slow]  # real crawls, real redis-servers

PAGES = 1500
SMALL_PAGES = 600
CONCURRENCY = 8
LATENCY = 0.005
SEED = 3987
LEASE = 3
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


def wait_exit(proc: subprocess.Popen[bytes], project: Path, name: str, timeout: float) -> None:
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError(f"worker {name} still running after {timeout}s: "
                             + log_of(project, name)[-3000:]) from None
    assert proc.returncode == 0, log_of(project, name)[-3000:]


def log_of(project: Path, name: str) -> str:
    return (project / f"log{name}.txt").read_text(encoding="utf-8")


def wait_hits(srv: SlowSiteServer, count: int, procs: list[subprocess.Popen[bytes]],
              timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while len(srv.hits.hits) < count:
        assert all(p.poll() is None for p in procs), "a worker ended before the kill"
        assert time.monotonic() < deadline, f"fewer than {count} hits after {timeout}s"
        time.sleep(0.001)


def wait_both_leasing(redis: RedisServer, procs: list[subprocess.Popen[bytes]],
                      timeout: float = 60) -> None:
    """Wait until leases of two different workers are in Redis at once: both are
    crawling (on a busy machine one worker can start so late that the other has
    fetched the kill's count of pages alone, and the kill then takes over nothing)."""
    client = redis.client()
    deadline = time.monotonic() + timeout
    while True:
        assert all(p.poll() is None for p in procs), "a worker ended before the kill"
        holders = set()
        for meta in client.keys("iri:{frontier}:sched:v1:*:meta"):
            leases = meta.decode().removesuffix(":meta") + ":leases"
            holders.update(m.split(b" ", 1)[0] for m in client.zrange(leases, 0, -1))
        if len(holders) >= 2:
            return
        assert time.monotonic() < deadline, f"not two workers leasing after {timeout}s"
        time.sleep(0.005)


def queue_state(redis: RedisServer) -> dict[str, int]:
    client = redis.client()
    metas = client.keys("iri:{frontier}:sched:v1:*:meta")
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
        wait_both_leasing(redis_server, [a, b])
        wait_hits(srv, max(kill_at, len(srv.hits.hits) + 50), [a, b])
        os.kill(a.pid, signal.SIGKILL)
        a.wait(timeout=10)
        killed_at = len(srv.hits.hits)
        wait_exit(b, project, "B", timeout=120)
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
    wait_exit(c, project, "C", timeout=60)
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
            wait_hits(srv, random.Random(SEED + 1).randrange(100, 300), [worker])
            redis.kill()
            down_at = len(srv.hits.hits)
            time.sleep(1.5)
            redis.start()
            wait_exit(worker, project, "A", timeout=120)
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
        wait_hits(srv, 50, [a])
        b = start_worker(project, "B")
        # early, while the pages in flight are inner pages of the tree (their subtrees
        # are lost with them); later, with leaves in flight, the loss is smaller
        wait_hits(srv, random.Random(SEED).randrange(100, 160), [a, b])
        os.kill(a.pid, signal.SIGKILL)
        a.wait(timeout=10)
        wait_exit(b, project, "B", timeout=120)
    finally:
        for proc in (a, b):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    lost = srv.site.keys - set(srv.hits.counts())
    print(f"scrapy-redis scheduler: {len(lost)} of {len(srv.site.keys)} pages never fetched "
          f"after one kill -9")
    assert lost  # what RedisIRIScheduler fixes (test_kill_9_one_of_two_workers)
