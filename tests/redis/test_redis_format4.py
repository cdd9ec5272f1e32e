"""RedisIRIDupeFilter's key format 4 (a trie of intset SET buckets, one plain SADD a
request) and its local cache.

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
from iri_scrapy.frontier.redis_client import IRIRedisError
from iri_scrapy.frontier.redis_seen import (
    BUCKET_CAP,
    DEFAULT_ROOTS,
    FORMAT_VERSION,
    roots_for,
)
from tests.support.redis_support import RedisServer

pytestmark = pytest.mark.redis


def _direct(server: RedisServer, key: str | None = None, **kwargs: Any) -> RedisIRIDupeFilter:
    kwargs.setdefault("local_cache", 0)  # every call reaches Redis unless a test says so
    df = RedisIRIDupeFilter(redis_url=server.url, key=key or f"t-{uuid.uuid4().hex}", **kwargs)
    df.connect()
    return df


def _fp(i: int, salt: bytes = b"") -> bytes:
    return blake2b(salt + b"%d" % i, digest_size=20).digest()


def _member(fp: bytes) -> int:
    return int.from_bytes(fp[:8], "big", signed=True)


def _leaf(df: RedisIRIDupeFilter, client: Any, fp: bytes) -> bytes:
    """Where *fp* lives now: its root, then one decimal digit a level while split."""
    key = df.base_key.encode() + b":{%x}" % (int.from_bytes(fp[8:12], "big") % df.base_buckets)
    rest = abs(_member(fp))
    while client.type(key) == b"string":
        key += b"%d" % (rest % 10)
        rest //= 10
    return key


def _commands(server: RedisServer) -> dict[str, int]:
    stats = server.client().info("commandstats")
    return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()}


@pytest.mark.slow
def test_layout_and_splits(redis_server_session: RedisServer) -> None:
    df = _direct(redis_server_session, base_buckets=2, bucket_cap=4)
    assert "format=4 roots=2 cap=4" in repr(df)
    client = redis_server_session.client()
    meta = {k.decode(): v.decode() for k, v in client.hgetall(df.meta_key).items()}
    assert meta["format"] == "4" and meta["roots"] == "2" and meta["cap"] == "4"
    assert meta["fanout"] == "10"
    model: set[bytes] = set()
    rng = random.Random(3)
    pool = [_fp(i) for i in range(1500)]
    for step in range(5000):
        fp = rng.choice(pool)
        if rng.random() < 0.2:
            assert df.has_fingerprint(fp) == (fp in model), step
        else:
            assert df.seen_add(fp) == (fp in model), step
            model.add(fp)
    levels = df.level_counts()
    assert max(levels) >= 2  # the tiny cap split buckets several levels deep
    assert sum(members for _, members in levels.values()) == len(df) == len(model)
    for fp in model:  # every member is in its own leaf (no copies, none lost)
        assert client.sismember(_leaf(df, client, fp), _member(fp))
    keys = df.bucket_keys()
    types = {client.type(k) for k in keys}
    assert types == {b"set", b"string"}  # buckets and split markers, nothing else
    for key in keys:
        assert key.startswith(df.base_key.encode() + b":{")
        if client.type(key) == b"set":
            assert client.object("encoding", key) == b"intset"
        else:
            assert client.get(key) == b""
    df.clear()
    assert client.keys(df.base_key + "*") == [] and df.known_splits == set()


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    ops=st.lists(st.tuples(st.booleans(), st.integers(0, 60)), max_size=150),
    cap=st.integers(1, 4),
    roots=st.sampled_from([1, 2]),
)
@pytest.mark.slow
def test_no_false_answers_across_splits(
    redis_server_session: RedisServer, ops: list[tuple[bool, int]], cap: int, roots: int,
) -> None:
    df = _direct(redis_server_session, base_buckets=roots, bucket_cap=cap)
    # members sharing their last decimal digits (one path), and pairs sharing all 8 bytes
    # but not the root bytes: never merged
    pool = []
    for i in range(61):
        base = 10**17 + (i % 31) * 1000 + 7 * (i % 2)
        pool.append(base.to_bytes(8, "big") + (i % 3).to_bytes(4, "big") + bytes(8))
    model: set[bytes] = set()
    try:
        for insert, i in ops:
            fp = pool[i]
            ident = fp[:8] + (int.from_bytes(fp[8:12], "big") % roots).to_bytes(4, "big")
            if insert:
                assert df.seen_add(fp) == (ident in model)
                model.add(ident)
            else:
                assert df.has_fingerprint(fp) == (ident in model)
        assert len(df) == len(model)
    finally:
        df.clear()
        df.close()


def test_every_call_is_one_plain_command(redis_server_session: RedisServer) -> None:
    df = _direct(redis_server_session)
    before = _commands(redis_server_session)
    for i in range(2000):
        assert df.seen_add(_fp(i)) is False
    for i in range(2000):
        assert df.seen_add(_fp(i)) is True
    after = _commands(redis_server_session)
    calls = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    calls = {k: n for k, n in calls.items() if n and not k.startswith(("info", "hello", "client"))}
    # no script at all below the cap: one SADD a call, SCARD on about one in eight
    assert calls["sadd"] == 4000
    assert 300 < calls["scard"] < 700, calls
    assert set(calls) == {"sadd", "scard"}, calls


def test_stale_process_learns_splits_from_wrongtype(redis_server_session: RedisServer) -> None:
    key = f"stale-{uuid.uuid4().hex}"
    old = _direct(redis_server_session, key, base_buckets=1, bucket_cap=3)
    new = _direct(redis_server_session, key, base_buckets=1, bucket_cap=3)
    for i in range(400):  # `new` splits the root and more; `old` does not know
        assert new.seen_add(_fp(i)) is False
    assert old.known_splits == set() and len(new.known_splits) >= 1
    for i in range(400):
        assert old.seen_add(_fp(i)) is True
    assert old.known_splits  # learnt
    assert old.seen_add(_fp(1000)) is False and new.seen_add(_fp(1000)) is True


def test_clients_racing_exactly_one_new(redis_server_session: RedisServer) -> None:
    key = f"race-{uuid.uuid4().hex}"
    n = 3
    filters = [_direct(redis_server_session, key, base_buckets=1, bucket_cap=8)
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
    assert not any(t.is_alive() for t in threads)
    for fp in fps:
        assert [r[fp] for r in results].count(False) == 1  # exactly one got "new"
    news = [sum(not seen for seen in r.values()) for r in results]
    assert min(news) > 100, news  # they really interleaved
    assert len(filters[0]) == 3000
    assert max(filters[0].level_counts()) >= 2


@pytest.mark.scale
@pytest.mark.slow
def test_memory_intsets_and_server_time_at_corpus_size(
    redis_server_session: RedisServer,
) -> None:
    """91,424 fingerprints (the corpus's size), default settings."""
    df = _direct(redis_server_session)
    assert (df.base_buckets, df.bucket_cap) == (DEFAULT_ROOTS, BUCKET_CAP)
    client = redis_server_session.client()
    n = 91_424
    pipe = client.pipeline(transaction=False)
    for i in range(n):
        fp = _fp(i)
        assert df.seen_add(fp) is False
        pipe.sadd("hex:dupefilter", fp.hex())  # scrapy-redis's layout
        if i % 10_000 == 0:
            pipe.execute()
    pipe.execute()
    ours = df.memory_usage() / n
    theirs = client.memory_usage("hex:dupefilter", samples=0) / n
    assert ours <= 12 and ours / theirs <= 0.15, (ours, theirs)
    keys = df.bucket_keys()
    assert {client.object("encoding", k) for k in keys} == {b"intset"}
    assert len(df) == n
    # server time per call against scrapy-redis's SADD of the hex digest, same load
    probe_new = [_fp(i, b"new") for i in range(5000)]
    probe_dup = [_fp(i) for i in range(0, n, n // 5000)][:5000]
    usec: dict[str, float] = {}
    for name, call in (("ours", df.seen_add),
                       ("theirs", lambda fp: client.sadd("hex:dupefilter", fp.hex()) == 0)):
        client.config_resetstat()
        assert not any(call(fp) for fp in probe_new)
        assert all(call(fp) for fp in probe_dup)
        stats = client.info("commandstats")
        usec[name] = sum(float(v["usec"]) for k, v in stats.items()
                         if k.split("_", 1)[1].split("|")[0] in ("sadd", "scard", "eval"))
    assert usec["ours"] <= 3 * usec["theirs"], usec


def test_newer_or_damaged_meta_is_refused(redis_server_session: RedisServer) -> None:
    """Formats 1-3 (never released) are refused too: test_redis_dupefilter.py."""
    key = f"meta-{uuid.uuid4().hex}"
    df = _direct(redis_server_session, key)
    assert df.seen_add(_fp(0)) is False
    client = redis_server_session.client()
    client.hset(df.meta_key, "format", str(FORMAT_VERSION + 1))
    with pytest.raises(IRIRedisError, match="format='5', this crawler needs 4"):
        _direct(redis_server_session, key)
    client.hset(df.meta_key, mapping={"format": "4", "fanout": "16"})
    with pytest.raises(IRIRedisError, match="fanout=16"):
        _direct(redis_server_session, key)
    client.hset(df.meta_key, "fanout", "10")
    client.hdel(df.meta_key, "roots")
    with pytest.raises(IRIRedisError, match="damaged format-4 layout"):
        _direct(redis_server_session, key)


def test_lost_data_is_relearnt(redis_server_session: RedisServer) -> None:
    df = _direct(redis_server_session, base_buckets=1, bucket_cap=3)
    for i in range(100):
        assert df.seen_add(_fp(i)) is False
    assert df.known_splits
    client = redis_server_session.client()
    client.flushall()  # a restart without persistence: buckets and markers gone
    # the process still believes in its splits: a new URL lands below the lost root,
    # which is a duplicate at worst (never a false "seen")
    assert df.seen_add(_fp(0)) is False
    df.clear()  # its own clear forgets the splits as well
    assert df.known_splits == set()
    assert df.seen_add(_fp(0)) is False and df.seen_add(_fp(0)) is True
    assert Request("http://example.com/") not in df


def test_size_hint_sets_the_roots() -> None:
    assert roots_for(None) == roots_for(0) == DEFAULT_ROOTS == 1024
    assert roots_for(100_000) == 1024
    assert roots_for(10_000_000) == 65536
    assert roots_for(10**12) == 1 << 20


def test_edge_members_split_the_same_in_lua_and_python(
    redis_server_session: RedisServer,
) -> None:
    """Short, negative and extreme members: the script and the client pick one child."""
    df = _direct(redis_server_session, base_buckets=1, bucket_cap=1)
    values = [0, 1, -1, 9, -10, 10, 123, -123, 10**18, -(10**18), 2**63 - 1, -(2**63),
              -(2**63) + 1, 99_999, -99_990, 5, -5, 10**18 + 5, -(10**18) - 5]
    fps = [v.to_bytes(8, "big", signed=True) + bytes(12) for v in values]  # root 0, checked
    for fp in fps:
        assert df.seen_add(fp) is False
    fresh = _direct(redis_server_session, df.base_key.split(":v")[0], base_buckets=1,
                    bucket_cap=1)  # knows no split: learns each from WRONGTYPE
    client = redis_server_session.client()
    for fp in fps:
        assert df.seen_add(fp) is True and fresh.seen_add(fp) is True
        assert client.sismember(_leaf(df, client, fp), _member(fp))
    assert len(df) == len(values)
    assert max(df.level_counts()) >= 3


# --------------------------------------------------------------------------- local cache


def test_repeats_are_answered_locally(redis_server_session: RedisServer) -> None:
    key = f"local-{uuid.uuid4().hex}"
    one = _direct(redis_server_session, key, local_cache=100)
    two = _direct(redis_server_session, key, local_cache=100)
    before = _commands(redis_server_session).get("sadd", 0)
    assert one.seen_add(_fp(1)) is False  # first sighting: Redis
    assert one.seen_add(_fp(1)) is True  # repeat: local
    assert two.seen_add(_fp(1)) is True  # another process: Redis says seen
    assert two.seen_add(_fp(1)) is True  # and now it knows too
    assert _commands(redis_server_session).get("sadd", 0) - before == 2
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
