"""RedisIRIDupeFilter's format 3 (generations of intset SET buckets) and local cache.

Real redis-server (tests/support/redis_support.py), in process.
"""

from __future__ import annotations

import random
import threading
import uuid
from hashlib import blake2b
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scrapy import Request

from iri_scrapy import RedisIRIDupeFilter
from iri_scrapy.frontier.redis_dupefilter import (
    BUCKET_CAP,
    FORMAT_VERSION,
    HASH_FORMAT_VERSION,
    SET_FORMAT_VERSION,
    SET_GROWTH,
)
from tests.support.redis_support import RedisServer

pytestmark = pytest.mark.redis


def _direct(server: RedisServer, key: str | None = None, **kwargs: Any) -> RedisIRIDupeFilter:
    kwargs.setdefault("local_cache", 0)  # every call reaches Redis unless a test says so
    kwargs.setdefault("key_format", SET_FORMAT_VERSION)  # format 4: test_redis_format4.py
    df = RedisIRIDupeFilter(redis_url=server.url, key=key or f"t-{uuid.uuid4().hex}", **kwargs)
    df.connect()
    return df


def _fp(i: int, salt: bytes = b"") -> bytes:
    return blake2b(salt + b"%d" % i, digest_size=20).digest()


def _evalsha_calls(server: RedisServer) -> int:
    stats = server.client().info("commandstats")
    return int(stats.get("cmdstat_evalsha", {}).get("calls", 0))


def test_generations_open_when_a_bucket_reaches_the_cap(
    redis_server_session: RedisServer,
) -> None:
    df = _direct(redis_server_session, base_buckets=1, bucket_cap=3)
    assert df.format == SET_FORMAT_VERSION and df.generations() == 1
    model: set[bytes] = set()
    rng = random.Random(8)
    pool = [_fp(i) for i in range(800)]
    for step in range(3000):
        fp = rng.choice(pool)
        if rng.random() < 0.2:
            assert df.has_fingerprint(fp) == (fp in model), step
        else:
            assert df.seen_add(fp) == (fp in model), step
            model.add(fp)
    gens = df.generations()
    assert gens >= 3
    counts = df.generation_counts()
    assert sum(counts) == len(df) == len(model)
    client = redis_server_session.client()
    for g in range(gens):  # generation g has b0 * 16**g buckets, all intsets
        keys = client.keys(f"{df.base_key}:s{g}:*")
        assert all(int(k.rsplit(b":", 1)[1], 16) < SET_GROWTH**g for k in keys)
        if g < gens - 1:  # a closed generation had one bucket reach the cap
            assert max(client.scard(k) for k in keys) >= 3
        assert {client.object("encoding", k) for k in keys} <= {b"intset"}


@settings(max_examples=50, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    ops=st.lists(st.tuples(st.booleans(), st.integers(0, 40)), max_size=120),
    cap=st.integers(1, 4),
    b0=st.sampled_from([1, 2, 4]),
)
def test_no_false_answers_across_generations(
    redis_server_session: RedisServer, ops: list[tuple[bool, int]], cap: int, b0: int,
) -> None:
    df = _direct(redis_server_session, base_buckets=b0, bucket_cap=cap)
    # fingerprints sharing bucket bytes, and pairs sharing their 8 stored bytes
    pool = [_fp(i % 30)[:8] + (i % 3).to_bytes(4, "big") + bytes(8) for i in range(41)]
    distinct = {p[:12] for p in pool}
    model: set[bytes] = set()
    try:
        for insert, i in ops:
            if insert:
                assert df.seen_add(pool[i]) == (pool[i][:12] in model)
                model.add(pool[i][:12])
            else:
                assert df.has_fingerprint(pool[i]) == (pool[i][:12] in model)
        assert len(df) == len(model) <= len(distinct)
    finally:
        df.clear()
        df.close()


def test_stale_generation_count_is_refreshed(redis_server_session: RedisServer) -> None:
    key = f"stale-{uuid.uuid4().hex}"
    old = _direct(redis_server_session, key, base_buckets=1, bucket_cap=2)
    new = _direct(redis_server_session, key, base_buckets=1, bucket_cap=2)
    assert old.known_generations == 1
    for i in range(200):  # `new` opens several generations; `old` does not know
        assert new.seen_add(_fp(i)) is False
    assert new.generations() >= 3 and old.known_generations == 1
    for i in range(200):  # old's first call is refused (-2), re-reads, answers right
        assert old.seen_add(_fp(i)) is True
    assert old.known_generations == new.generations()
    assert old.seen_add(_fp(1000)) is False and new.seen_add(_fp(1000)) is True


@pytest.mark.slow
def test_clients_racing_exactly_one_new(redis_server_session: RedisServer) -> None:
    key = f"race-{uuid.uuid4().hex}"
    n = 3
    filters = [_direct(redis_server_session, key, base_buckets=1, bucket_cap=2)
               for _ in range(n)]
    fps = [_fp(i) for i in range(3000)]
    results: list[dict[bytes, bool]] = [{} for _ in range(n)]
    barrier = threading.Barrier(n)

    def run(k: int) -> None:
        rng = random.Random(k)
        for start in range(0, len(fps), 50):
            chunk = fps[start : start + 50]
            rng.shuffle(chunk)
            barrier.wait(timeout=30)
            for fp in chunk:
                results[k][fp] = filters[k].seen_add(fp)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for fp in fps:
        assert [r[fp] for r in results].count(False) == 1  # exactly one got "new"
    news = [sum(not seen for seen in r.values()) for r in results]
    assert min(news) > 100, news  # they really interleaved
    assert len(filters[0]) == 3000
    assert filters[0].generations() >= 3


@pytest.mark.slow
def test_intsets_and_memory_with_default_settings(redis_server_session: RedisServer) -> None:
    df = _direct(redis_server_session)
    assert df.bucket_cap == BUCKET_CAP
    client = redis_server_session.client()
    n = 91_424  # the benchmark corpus's size
    pipe = client.pipeline(transaction=False)
    for i in range(n):
        fp = _fp(i)
        assert df.seen_add(fp) is False
        pipe.sadd("hex:dupefilter", fp.hex())  # scrapy-redis's layout
    pipe.execute()
    ours = df.memory_usage() / n
    theirs = client.memory_usage("hex:dupefilter", samples=0) / n
    assert ours <= 13 and ours / theirs <= 0.16, (ours, theirs)
    keys = client.keys(df.base_key + ":s*")
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.object("encoding", key)
        pipe.scard(key)
    answers = pipe.execute()
    assert set(answers[0::2]) == {b"intset"}
    assert max(answers[1::2]) <= BUCKET_CAP
    assert len(df) == n


def test_format_2_key_set_is_read_and_extended(redis_server_session: RedisServer) -> None:
    key = f"f2-{uuid.uuid4().hex}"
    old = _direct(redis_server_session, key, key_format=HASH_FORMAT_VERSION,
                  base_buckets=1, bucket_fill=2)
    for i in range(50):
        assert old.seen_add(_fp(i)) is False
    df = _direct(redis_server_session, key, key_format=FORMAT_VERSION)  # the meta says 2: wins
    assert df.format == HASH_FORMAT_VERSION
    assert all(df.seen_add(_fp(i)) for i in range(50))
    assert df.seen_add(_fp(50)) is False and len(df) == 51
    client = redis_server_session.client()
    assert client.keys(df.base_key + ":s*") == []
    df.clear()
    assert df.seen_add(_fp(0)) is False and df.format == FORMAT_VERSION  # a new key set: 4


# --------------------------------------------------------------------------- local cache


def test_repeats_are_answered_locally(redis_server_session: RedisServer) -> None:
    key = f"local-{uuid.uuid4().hex}"
    one = _direct(redis_server_session, key, local_cache=100)
    two = _direct(redis_server_session, key, local_cache=100)
    before = _evalsha_calls(redis_server_session)
    assert one.seen_add(_fp(1)) is False  # first sighting: Redis
    assert one.seen_add(_fp(1)) is True  # repeat: local
    assert two.seen_add(_fp(1)) is True  # another process: Redis says seen
    assert two.seen_add(_fp(1)) is True  # and now it knows too
    assert _evalsha_calls(redis_server_session) - before == 2
    assert (one.local_hits, one.remote_calls) == (1, 1)
    assert (two.local_hits, two.remote_calls) == (1, 1)


@pytest.mark.slow
def test_local_cache_is_bounded_and_never_wrong(redis_server_session: RedisServer) -> None:
    df = _direct(redis_server_session, local_cache=50, base_buckets=1, bucket_cap=4)
    other = _direct(redis_server_session, df.base_key.split(":v")[0], local_cache=0)
    rng = random.Random(4)
    model: set[int] = set()
    for _ in range(4000):
        i = rng.randrange(300)
        who = df if rng.random() < 0.7 else other
        assert who.seen_add(_fp(i)) == (i in model)
        model.add(i)
        assert df.local_cached <= 50
    assert df.local_cached > 0 and df.local_hits > 100 and df.remote_calls < 4000 * 0.7


def test_clear_empties_the_local_cache_and_stats_are_recorded(
    redis_server_session: RedisServer,
) -> None:
    from scrapy.statscollectors import MemoryStatsCollector
    from scrapy.utils.test import get_crawler

    stats = MemoryStatsCollector(get_crawler())
    df = _direct(redis_server_session, local_cache=10, stats=stats)
    assert df.seen_add(_fp(1)) is False and df.seen_add(_fp(1)) is True
    df.clear()
    assert df.seen_add(_fp(1)) is False  # forgotten in Redis and locally
    assert df.request_seen(Request("http://example.com/")) is False
    assert df.request_seen(Request("http://EXAMPLE.com/")) is True
    df.close()
    assert stats.get_value("iri/redis/local_hits") == 2
    assert stats.get_value("iri/redis/remote_calls") == 3


def test_local_cache_setting(redis_server_session: RedisServer) -> None:
    from scrapy import Spider
    from scrapy.utils.test import get_crawler

    for value, expected in ((None, 1_000_000), (0, 0), (5000, 5000)):
        settings: dict[str, Any] = {"IRI_REDIS_URL": redis_server_session.url,
                                    "IRI_REDIS_KEY": f"cache-{uuid.uuid4().hex}"}
        if value is not None:
            settings["IRI_REDIS_LOCAL_CACHE"] = value
        crawler = get_crawler(Spider, settings)
        crawler.spider = Spider.from_crawler(crawler, name="s")
        df = RedisIRIDupeFilter.from_spider(crawler.spider)
        assert df.local_cache == expected and df.local_cached == 0
        assert df.seen_add(_fp(1)) is False and df.seen_add(_fp(1)) is True
        # no local cache at 0: every call asks Redis
        assert df.known_seen(_fp(1)) == (expected > 0)
        assert df.local_cached == (1 if expected else 0)
        assert (df.local_hits, df.remote_calls) == ((1, 1) if expected else (0, 2))
        df.clear()
        df.close()
