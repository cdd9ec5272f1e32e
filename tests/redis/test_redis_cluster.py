"""RedisIRIDupeFilter on a real local 3-master Redis Cluster (``IRI_REDIS_CLUSTER``).

The cluster is ``tests/redis_support.redis_cluster``: three ``redis-server
--cluster-enabled yes`` on 127.0.0.1 joined by ``redis-cli --cluster create``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from hashlib import blake2b
from typing import Any

import pytest
from scrapy import Request, Spider
from scrapy.utils.test import get_crawler

from iri_scrapy import CANONICALIZATION_VERSION, RedisIRIDupeFilter
from iri_scrapy.frontier.redis_dupefilter import IRIRedisError
from tests.support.bigsite import large_site
from tests.support.crawl import DEPRECATIONS_ENV, run_crawl
from tests.support.redis_support import RedisCluster
from tests.support.server import SiteServer, serve_site

pytestmark = [pytest.mark.redis, pytest.mark.slow]  # real crawls, real redis-servers

STRICT = {DEPRECATIONS_ENV: "1"}


def _fp(i: int, salt: bytes = b"") -> bytes:
    return blake2b(salt + b"%d" % i, digest_size=20).digest()


def _direct(cluster: RedisCluster, key: str | None = None, **kwargs: Any) -> RedisIRIDupeFilter:
    kwargs.setdefault("local_cache", 0)
    df = RedisIRIDupeFilter(redis_url=cluster.url, key=key or f"c-{uuid.uuid4().hex}",
                            cluster=True, **kwargs)
    df.connect()
    return df


def _assert_even(sizes: list[int]) -> None:
    mean = sum(sizes) / len(sizes)
    assert all(abs(n - mean) <= 0.2 * mean for n in sizes), sizes


def test_request_seen_new_and_repeats(redis_cluster: RedisCluster) -> None:
    crawler = get_crawler(Spider, {
        "IRI_REDIS_URL": redis_cluster.url,
        "IRI_REDIS_CLUSTER": True,
        "REQUEST_FINGERPRINTER_CLASS": "iri_scrapy.IRIRequestFingerprinter",
    })
    crawler.spider = Spider.from_crawler(crawler, name="cl")
    one = RedisIRIDupeFilter.from_spider(crawler.spider)
    two = RedisIRIDupeFilter.from_spider(crawler.spider)  # another crawler
    assert one.cluster and "format=4" in repr(one) and "cluster" in repr(one)
    assert one.request_seen(Request("http://example.com/a")) is False
    assert one.request_seen(Request("http://EXAMPLE.com:80/a")) is True  # local cache
    assert two.request_seen(Request("http://example.com/./a")) is True  # from the cluster
    assert two.request_seen(Request("http://example.com/b")) is False
    assert one.request_seen(Request("http://example.com/b")) is True
    assert Request("http://example.com/c") not in one and len(one) == 2
    one.close()
    two.close()


@pytest.mark.slow
def test_splits_spread_and_clear(redis_cluster: RedisCluster) -> None:
    df = _direct(redis_cluster, bucket_cap=20)
    other = _direct(redis_cluster, df.base_key.split(":v")[0], bucket_cap=20)
    n = 30_000
    for i in range(n):
        assert df.seen_add(_fp(i)) is False
    for i in range(0, n, 7):  # another process: learns the splits from WRONGTYPE
        assert other.seen_add(_fp(i)) is True
    assert other.seen_add(_fp(0, b"new")) is False and df.seen_add(_fp(0, b"new")) is True
    assert len(df) == n + 1
    levels = df.level_counts()
    assert max(levels) >= 1  # roots split (cap 20, about 29 a root)
    sizes = redis_cluster.dbsizes()
    print(f"keys per master: {sizes}, levels {levels}")  # shown with pytest -rP
    assert sum(sizes) == len(df.bucket_keys()) + 1  # buckets, markers and the meta
    _assert_even(sizes)
    # one request, one node: every key of a root shares its hash tag (one slot)
    client = redis_cluster.client()
    try:
        from redis.crc import key_slot

        for key in df.bucket_keys()[:2000]:
            root = key[: key.rindex(b"}") + 1]
            assert key_slot(key) == key_slot(root)
        assert df.memory_usage() > 8 * n  # MEMORY USAGE routed to each key's node
    finally:
        client.close()
    df.clear()
    assert redis_cluster.dbsizes() == [0, 0, 0]
    assert df.seen_add(_fp(1)) is False
    df.close()
    other.close()


def test_other_formats_and_braces_are_refused_on_a_cluster(redis_cluster: RedisCluster) -> None:
    key = f"f3-{uuid.uuid4().hex}"
    probe = RedisIRIDupeFilter(redis_url=redis_cluster.url, key=key, cluster=True)
    client = redis_cluster.client()
    try:  # the meta a pre-release format 3 wrote, as data
        client.hset(probe.meta_key, mapping={
            "format": 3, "canonicalization_version": CANONICALIZATION_VERSION,
            "options_tag": probe.options_tag(), "field_bytes": 8, "growth": 16, "b0": 16,
            "cap": 440, "generations": 1,
        })
    finally:
        client.close()
    with pytest.raises(IRIRedisError, match="has format='3', this crawler needs 4"):
        _direct(redis_cluster, key)
    with pytest.raises(IRIRedisError, match="braces"):
        RedisIRIDupeFilter(redis_url=redis_cluster.url, key="{x}", cluster=True)


# --------------------------------------------------------------------------- real crawls

SITE = large_site(pages=1000, fanout=4)


@pytest.fixture(scope="module")
def big_site() -> Iterator[SiteServer]:
    with serve_site(SITE) as server:
        yield server


@pytest.mark.slow
@pytest.mark.parametrize("fleet_queue", [False, True], ids=["scrapy-scheduler", "fleet-queue"])
def test_two_crawls_share_the_cluster(
    redis_cluster: RedisCluster, big_site: SiteServer, fleet_queue: bool
) -> None:
    """Two processes on the cluster: with Scrapy's scheduler and the shared seen-set,
    and with the add-on's default fleet queue (RedisIRIScheduler, its keys under one
    hash tag) on top of it."""
    big_site.reset()
    redis_cluster.flushall()
    settings = {
        "ADDONS": {"iri_scrapy.Addon": 0},
        "DUPEFILTER_CLASS": "iri_scrapy.RedisIRIDupeFilter",
        "IRI_REDIS_URL": redis_cluster.url,
        "IRI_REDIS_CLUSTER": True,
        "IRI_REDIS_SCHEDULER": fleet_queue,
        "IRI_REDIS_IDLE_TIMEOUT": 20,
        "CONCURRENT_REQUESTS": 8,
    }
    starts = [list(SITE.start_urls), ["http://frontier.example/p/0"]]
    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(run_crawl, settings, s, big_site.proxy_url, timeout=300,
                               env=STRICT) for s in starts]
        results = [f.result() for f in futures]
    for result in results:
        assert result.ok, (result.finish_reason, result.errors, result.stderr[-3000:])
        assert result.warnings == []
        assert result.stats.get("iri/redis/remote_calls", 0) > 0
    # every resource of the site fetched, each exactly once between the two processes
    assert big_site.hits.duplicates() == {}
    assert big_site.hits.fetched() == SITE.keys
    assert big_site.hits.not_found() == []
    assert sum(int(r.stats.get("downloader/response_count", 0)) for r in results) == len(
        big_site.hits.hits)
    sizes = redis_cluster.dbsizes()
    print(f"keys per master after the crawl: {sizes}")  # shown with pytest -rP
    assert sum(sizes) > 500  # the roots of about 1,000 URLs, and the meta
    _assert_even(sizes)


@pytest.mark.slow
def test_a_master_killed_and_restarted_loses_nothing(tmp_path: Any) -> None:
    """SIGKILL one master (AOF, fsync always) and start it again within the node timeout:
    request_seen waits, then answers right; no request is lost or wrongly merged."""
    import threading

    from scrapy.statscollectors import MemoryStatsCollector

    aof = ("--appendonly", "yes", "--appendfsync", "always")
    with RedisCluster(tmp_path / "cl", extra_args=aof) as cluster:
        stats = MemoryStatsCollector(get_crawler(Spider))
        df = _direct(cluster, retry_seconds=30, stats=stats)
        fps = [_fp(i) for i in range(300)]
        assert not any(df.seen_add(fp) for fp in fps)
        victim = cluster.nodes[1]
        victim.kill()
        restart = threading.Timer(1.0, victim.start)
        restart.start()
        try:
            answers = [df.seen_add(fp) for fp in fps]  # some wait for the restart
        finally:
            restart.join(30)
        assert victim.is_running
        ambiguous = int(stats.get_value("iri/redis/ambiguous_refetch", 0))
        assert answers.count(False) == ambiguous <= 1  # a reply lost in the kill, at most
        assert stats.get_value("iri/redis/outages", 0) >= 1
        assert all(df.seen_add(fp) for fp in fps)
        assert df.seen_add(_fp(0, b"new")) is False and len(df) == 301
        df.close()
