"""RedisIRIDupeFilter against a real redis-server (tests/support/redis_support.py), in process.

Crawls (several processes, scrapy-redis's scheduler, Redis killed mid-crawl) are in
tests/redis/test_redis_crawl.py.
"""

from __future__ import annotations

import hashlib
import logging
import os
import random
import threading
import time
import uuid
from hashlib import blake2b
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scrapy import Request, Spider
from scrapy.utils.test import get_crawler

from iri_scrapy import CANONICALIZATION_VERSION, RedisIRIDupeFilter
from iri_scrapy.frontier.redis_dupefilter import (
    BUCKET_CAP,
    DEFAULT_BASE_BUCKETS,
    DEFAULT_ROOTS,
    FIELD_BYTES,
    GROWTH,
    HASH_FORMAT_VERSION,
    MAX_BUCKET_MEAN,
    STAT_AMBIGUOUS,
    STAT_OUTAGES,
    STAT_RETRIES,
    IRIRedisError,
    IRIRedisSpiderMixin,
    base_buckets_for,
    bucket_count,
    generation_buckets,
    mask_url,
    redis_url_from_settings,
    roots_for,
)
from iri_scrapy.plugin.fingerprinter import IRIRequestFingerprinter
from iri_scrapy.plugin.refusal import CLOSESPIDER_AT_OPEN
from tests.support.redis_support import RedisServer, find_free_port

pytestmark = pytest.mark.redis


def _spider(settings: dict[str, Any], name: str = "unit") -> Spider:
    crawler = get_crawler(Spider, settings)
    spider = Spider.from_crawler(crawler, name=name)
    crawler.spider = spider
    return spider


def _filter(server: RedisServer, name: str = "unit", **settings: Any) -> RedisIRIDupeFilter:
    """Built the way scrapy-redis's scheduler builds it (from_spider, which connects)."""
    base = {
        "DUPEFILTER_CLASS": "iri_scrapy.RedisIRIDupeFilter",
        "REQUEST_FINGERPRINTER_CLASS": "iri_scrapy.IRIRequestFingerprinter",
        "IRI_REDIS_URL": server.url,
    }
    base.update(settings)
    return RedisIRIDupeFilter.from_spider(_spider(base, name))


def _direct(server: RedisServer, key: str | None = None, **kwargs: Any) -> RedisIRIDupeFilter:
    """Built directly (tests' tiny generations: base_buckets, bucket_fill), connected.

    Creates a format-2 key set (HASH generations, still read and extended) unless
    *key_format* says otherwise: format 3 has its own tests in test_redis_format3.py.
    """
    kwargs.setdefault("key_format", HASH_FORMAT_VERSION)
    df = RedisIRIDupeFilter(redis_url=server.url, key=key or f"t-{uuid.uuid4().hex}", **kwargs)
    df.connect()
    return df


def _fp(i: int) -> bytes:
    """A 20-byte fingerprint (like the IRI fingerprinter's SHA-1) for integer *i*."""
    return blake2b(b"%d" % i, digest_size=20).digest()


def _bucket_hash(fp: bytes) -> int:
    return int.from_bytes(fp[8:12], "big")


# --------------------------------------------------------------------------- keys


def test_key_names_version_and_options(redis_server_session: RedisServer) -> None:
    df = _filter(redis_server_session)
    tag = df.options_tag()
    digest = hashlib.sha1(tag.encode()).hexdigest()[:8]
    assert df.base_key == f"unit:iri-dupefilter:v{CANONICALIZATION_VERSION}:{digest}"
    assert df.request_seen(Request("http://example.com/a")) is False
    client = redis_server_session.client()
    meta = {k.decode(): v.decode() for k, v in client.hgetall(df.meta_key).items()}
    assert meta == {
        "format": "4",
        "canonicalization_version": str(CANONICALIZATION_VERSION),
        "options_tag": tag,
        "field_bytes": "8",
        "roots": str(DEFAULT_ROOTS),
        "cap": str(BUCKET_CAP),
        "fanout": "10",
    }
    assert "fingerprinter=iri_scrapy.plugin.fingerprinter.IRIRequestFingerprinter" in tag
    # other options, other keys: a changed ladder never shares keys silently
    other = _filter(redis_server_session, IRI_KEEP_FRAGMENTS=True)
    assert other.base_key != df.base_key
    assert other.request_seen(Request("http://example.com/a")) is False
    # IRI_REDIS_KEY replaces the spider-derived part
    named = _filter(redis_server_session, IRI_REDIS_KEY="shared:%(spider)s:seen")
    assert named.base_key.startswith(f"shared:unit:seen:v{CANONICALIZATION_VERSION}:")
    for key in client.keys("*"):
        assert key.decode().split(":v", 1)[1].startswith(f"{CANONICALIZATION_VERSION}:")


def test_digests_are_8_byte_integers_in_intsets(redis_server_session: RedisServer) -> None:
    df = _filter(redis_server_session)
    urls = [f"http://example.com/page/{i}" for i in range(50)]
    for url in urls:
        assert df.request_seen(Request(url)) is False
    client = redis_server_session.client()
    assert df.generations() == 0 and df.level_counts() == {0: (len(df.bucket_keys()), 50)}
    members: set[int] = set()
    for key in df.bucket_keys():
        assert key.startswith(df.base_key.encode() + b":{")
        assert client.type(key) == b"set"
        assert client.object("encoding", key) == b"intset"
        members.update(int(m) for m in client.smembers(key))
    fps = [df.fingerprint(Request(u)) for u in urls]
    assert len(fps[0]) == 20

    def member(fp: bytes) -> int:  # the first 8 bytes as a signed 64-bit integer
        return int.from_bytes(fp[:FIELD_BYTES], "big", signed=True)

    assert members == {member(fp) for fp in fps}
    for fp in fps:  # the root is 4 other bytes of the fingerprint, modulo the root count
        key = df.base_key.encode() + b":{%x}" % (_bucket_hash(fp) % DEFAULT_ROOTS)
        assert client.sismember(key, member(fp))
    assert len(df) == 50
    assert Request(urls[3]) in df and Request("http://example.com/other") not in df
    assert len(df) == 50  # __contains__ stores nothing


def test_size_hint_and_adoption(redis_server_session: RedisServer) -> None:
    assert bucket_count(1) == 1 and bucket_count(201) == 2  # format 1 sizing, kept
    assert bucket_count(10_000_000) == 65536
    assert base_buckets_for(None) == DEFAULT_BASE_BUCKETS == 16
    assert base_buckets_for(1000) == 16  # a hint never goes below the default
    assert base_buckets_for(10_000_000) == bucket_count(10_000_000) // GROWTH**3
    assert generation_buckets(16, 3) == 16 * GROWTH**3
    # no IRI_REDIS_EXPECTED_URLS: the default; a later crawler with a hint adopts the meta
    small = _filter(redis_server_session)
    assert small.request_seen(Request("http://example.com/x")) is False
    big = _filter(redis_server_session, IRI_REDIS_EXPECTED_URLS=10_000_000)
    assert big.base_buckets == small.base_buckets == DEFAULT_ROOTS
    assert big.request_seen(Request("http://EXAMPLE.com/x")) is True
    # a hinted key set (old configs set IRI_REDIS_EXPECTED_URLS: accepted)
    hinted = _filter(redis_server_session, name="hinted", IRI_REDIS_EXPECTED_URLS=10_000_000)
    assert hinted.base_buckets == roots_for(10_000_000)
    assert hinted.request_seen(Request("http://example.com/x")) is False
    assert hinted.request_seen(Request("http://example.com/x")) is True


def test_incompatible_meta_is_refused(redis_server_session: RedisServer) -> None:
    df = _filter(redis_server_session)
    client = redis_server_session.client()
    client.hset(df.meta_key, "field_bytes", "16")
    with pytest.raises(IRIRedisError, match="field_bytes"):
        _filter(redis_server_session)
    client.hset(df.meta_key, mapping={"field_bytes": "8", "format": "5"})
    with pytest.raises(IRIRedisError, match="format='5'"):
        _filter(redis_server_session)
    client.hset(df.meta_key, mapping={"format": "3", "growth": "2", "b0": "16",
                                      "generations": "1"})
    with pytest.raises(IRIRedisError, match="growth=2"):
        _filter(redis_server_session)
    client.hset(df.meta_key, mapping={"format": "2", "growth": "2", "fill": "200"})
    with pytest.raises(IRIRedisError, match="growth=2"):
        _filter(redis_server_session)


# --------------------------------------------------------------------------- generations


def test_generations_open_as_counts_grow(redis_server_session: RedisServer) -> None:
    df = _direct(redis_server_session, base_buckets=1, bucket_fill=2)
    client = redis_server_session.client()
    opened = []
    for i in range(120):
        assert df.seen_add(_fp(i)) is False
        opened.append(df.generations())
    # generation g holds GROWTH**g * 2 fields: full at 2, 2 + 2*GROWTH, ...
    caps = [2 * GROWTH**g for g in range(8)]
    assert opened[0] == 1 and opened[1] == 2  # the second insert filled generation 0
    assert opened.index(3) == caps[0] + caps[1] - 1
    expected, left = [], 120
    for cap in caps:
        expected.append(min(cap, left))
        left -= expected[-1]
        if not left:
            break
    assert df.generation_counts() == expected
    assert len(df) == 120
    prefix = df.base_key.encode()
    for g, count in enumerate(df.generation_counts()):
        keys = [prefix + b":g%d:%x" % (g, i) for i in range(GROWTH**g)]
        assert sum(client.hlen(k) for k in keys) == count  # nothing was ever moved
    assert set(df.bucket_keys()) >= set(client.keys(df.base_key + ":g*"))
    for i in range(120):  # every generation is looked up
        assert df.seen_add(_fp(i)) is True
    assert df.generation_counts() == expected


def test_randomized_table_against_a_python_set(redis_server_session: RedisServer) -> None:
    df = _direct(redis_server_session, base_buckets=1, bucket_fill=3)
    rng = random.Random(20240611)
    pool = [_fp(i) for i in range(1500)]
    model: set[bytes] = set()
    for step in range(6000):
        fp = rng.choice(pool)
        if rng.random() < 0.2:
            assert (fp in model) == df.has_fingerprint(fp), step
        else:
            assert df.seen_add(fp) == (fp in model), step
            model.add(fp)
    assert len(df) == len(model)
    assert df.generations() >= 3  # the table crossed several generations
    assert sum(df.generation_counts()) == len(model)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    ops=st.lists(st.tuples(st.booleans(), st.integers(0, 40)), max_size=120),
    fill=st.integers(1, 4),
    b0=st.sampled_from([1, 2, 4]),
)
@pytest.mark.slow
def test_no_false_answers_across_generations(
    redis_server_session: RedisServer, ops: list[tuple[bool, int]], fill: int, b0: int,
) -> None:
    df = _direct(redis_server_session, base_buckets=b0, bucket_fill=fill)
    # fingerprints that share bucket bytes: many fields meet in the same buckets
    pool = [_fp(i)[:8] + (i % 3).to_bytes(4, "big") + bytes(8) for i in range(41)]
    model: set[int] = set()
    try:
        for insert, i in ops:
            if insert:
                assert df.seen_add(pool[i]) == (i in model)
                model.add(i)
            else:
                assert df.has_fingerprint(pool[i]) == (i in model)
        assert len(df) == len(model)
    finally:
        df.clear()
        df.close()


def test_two_clients_racing_exactly_one_new(redis_server_session: RedisServer) -> None:
    key = f"race-{uuid.uuid4().hex}"
    filters = [_direct(redis_server_session, key, base_buckets=1, bucket_fill=2)
               for _ in range(2)]
    fps = [_fp(i) for i in range(3000)]
    results: list[dict[bytes, bool]] = [{}, {}]
    barrier = threading.Barrier(2)

    def run(n: int) -> None:
        # Both race on the same 50 fingerprints at a time, from opposite ends, and
        # meet at a barrier after each chunk: so each wins some, whatever the
        # thread scheduling (bounded: 60 chunks, barrier timeout).
        for start in range(0, len(fps), 50):
            chunk = fps[start : start + 50]
            barrier.wait(timeout=30)
            for fp in chunk if n == 0 else reversed(chunk):
                results[n][fp] = filters[n].seen_add(fp)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for fp in fps:
        assert [results[0][fp], results[1][fp]].count(False) == 1  # exactly one got "new"
    news = [sum(not seen for seen in r.values()) for r in results]
    assert min(news) > 100, news  # they really interleaved
    assert len(filters[0]) == 3000
    assert filters[0].generations() >= 3


@pytest.mark.slow
def test_listpack_and_memory_with_format_2(redis_server_session: RedisServer) -> None:
    """Format 2 at the benchmark's size (91,424 URLs), no sizing: <= 0.5 of scrapy-redis."""
    df = _direct(redis_server_session)
    assert (df.base_buckets, df.bucket_fill) == (DEFAULT_BASE_BUCKETS, MAX_BUCKET_MEAN)
    client = redis_server_session.client()
    ratios = {}
    done = 0
    for size in (100, 1000, 10_000, 91_424):
        pipe = client.pipeline(transaction=False)
        for i in range(done, size):
            fp = _fp(i)
            assert df.seen_add(fp) is False
            pipe.sadd("hex:dupefilter", fp.hex())  # scrapy-redis's layout
        pipe.execute()
        done = size
        ours = df.memory_usage() / size
        theirs = client.memory_usage("hex:dupefilter", samples=0) / size
        ratios[size] = ours / theirs
    assert all(r <= 0.5 for r in ratios.values()), ratios
    assert ratios[91_424] <= 0.2, ratios  # about 14 B/URL against about 85
    caps, total = [], 0
    while total < 91_424:  # 3,200 + 3,200*GROWTH + ... >= 91,424
        caps.append(DEFAULT_BASE_BUCKETS * MAX_BUCKET_MEAN * GROWTH ** len(caps))
        total += caps[-1]
    assert df.generations() == len(caps)
    pipe = client.pipeline(transaction=False)
    existing = client.keys(df.base_key + ":g*")
    for key in existing:
        pipe.object("encoding", key)
        pipe.hlen(key)
    answers = pipe.execute()
    assert set(answers[0::2]) == {b"listpack"}
    assert max(answers[1::2]) < 300  # far below hash-max-listpack-entries (512)


def test_format_1_key_set_is_read_and_extended(redis_server_session: RedisServer) -> None:
    """A key set written by the fixed-bucket version keeps working as it is."""
    probe = _filter(redis_server_session, name="old")
    client = redis_server_session.client()
    client.delete(probe.meta_key)
    old_urls = [f"http://example.com/old/{i}" for i in range(40)]
    client.hset(probe.meta_key, mapping={
        "format": 1, "canonicalization_version": CANONICALIZATION_VERSION,
        "options_tag": probe.options_tag(), "field_bytes": 8, "buckets": 8,
    })
    for url in old_urls:  # the format 1 layout: <base>:<i>, i = bytes 8..12 & (buckets - 1)
        fp = probe.fingerprint(Request(url))
        client.hset(f"{probe.base_key}:{_bucket_hash(fp) & 7:x}", fp[:8], "")
    df = _filter(redis_server_session, name="old")
    assert df.format == 1 and df.buckets == 8
    assert len(df) == 40
    for url in old_urls:
        assert df.request_seen(Request(url.replace("http", "HTTP"))) is True
    assert df.request_seen(Request("http://example.com/new")) is False
    assert Request("http://example.com/new") in df and len(df) == 41
    assert client.keys(df.base_key + ":g*") == []  # nothing in format 2 keys
    assert client.hget(df.meta_key, "format") == b"1"
    df.clear()
    assert client.keys(df.base_key + ":*") == []
    assert df.request_seen(Request("http://example.com/new")) is False  # now format 4
    assert df.format == 4 and client.hget(df.meta_key, "format") == b"4"


def test_lost_script_and_lost_meta_are_recovered(redis_server_session: RedisServer) -> None:
    df = _filter(redis_server_session, IRI_REDIS_LOCAL_CACHE=0)  # every call goes to Redis
    client = redis_server_session.client()
    assert df.request_seen(Request("http://example.com/a")) is False
    client.script_flush()  # NOSCRIPT: loaded again, same round trip count for the caller
    assert df.request_seen(Request("http://example.com/a")) is True
    assert df.request_seen(Request("http://example.com/b")) is False
    client.flushall()  # data lost (a restart without persistence)
    assert df.request_seen(Request("http://example.com/a")) is False
    assert len(df) == 1
    # format 4 never reads the meta per call: the next crawler to connect re-creates it
    assert client.hget(df.meta_key, "format") is None
    _filter(redis_server_session)
    assert client.hget(df.meta_key, "format") == b"4"
    # format 3 (still read): its script is loaded again, its meta re-created in the call
    f3 = _direct(redis_server_session, key_format=3, local_cache=0)
    assert f3.seen_add(_fp(1)) is False
    client.script_flush()
    assert f3.seen_add(_fp(1)) is True
    client.flushall()
    assert f3.seen_add(_fp(1)) is False and client.hget(f3.meta_key, "format") == b"3"


# --------------------------------------------------------------------------- behaviour


def test_shared_between_filters_and_iri_equivalence(redis_server_session: RedisServer) -> None:
    one = _filter(redis_server_session)
    two = _filter(redis_server_session)  # another crawler, same spider name
    assert one.request_seen(Request("http://пример.испытание/статья")) is False
    assert two.request_seen(
        Request("HTTP://xn--e1afmkfd.xn--80akhbyknj4f/%d1%81%d1%82%d0%b0%d1%82%d1%8c%d1%8f")
    ) is True
    assert two.request_seen(Request("http://example.com/~a/./b#frag")) is False
    assert one.request_seen(Request("http://example.com/%7ea/b")) is True
    # a spider with another name has its own keys
    other = _filter(redis_server_session, name="other")
    assert other.request_seen(Request("http://example.com/~a/b")) is False


def test_dont_normalize_iri_and_redirect_same_key(redis_server_session: RedisServer) -> None:
    df = _filter(redis_server_session)
    assert df.request_seen(Request("http://example.com/~a")) is False
    verbatim = Request("http://example.com/%7Ea", meta={"dont_normalize_iri": True})
    assert df.request_seen(verbatim) is False  # keyed on the URL as given
    assert df.request_seen(Request("http://example.com/%7Ea")) is True
    # a redirect whose target has the key of its source passes (IRIDupeFilter's rule)
    redirected = Request(
        "http://example.com/~a", meta={"redirect_urls": ["http://example.com/%7Ea"]}
    )
    assert df.request_seen(redirected) is False
    assert df.stats is not None
    assert df.stats.get_value("iri/dupefilter/redirect_same_key") == 1


def test_log_counts_standard_and_per_rung_stats(redis_server_session: RedisServer) -> None:
    spider = _spider(
        {"IRI_REDIS_URL": redis_server_session.url,
         "REQUEST_FINGERPRINTER_CLASS": "iri_scrapy.IRIRequestFingerprinter"}
    )
    df = RedisIRIDupeFilter.from_spider(spider)
    assert df.request_seen(Request("http://example.com/~a")) is False
    dup = Request("http://example.com/%7ea#x")
    assert df.request_seen(dup) is True
    df.log(dup, spider)  # ScrapyDeprecationWarning is an error here: none raised
    stats = spider.crawler.stats
    assert stats is not None
    assert stats.get_value("dupefilter/filtered") == 1
    assert stats.get_value("iri/dupefilter/filtered") == 1
    assert stats.get_value("iri/dupefilter/rung/percent") == 1
    assert stats.get_value("iri/dupefilter/rung/fragment") == 1


def test_stock_fingerprinter_is_replaced_custom_kept(redis_server_session: RedisServer) -> None:
    spider = _spider({"IRI_REDIS_URL": redis_server_session.url})
    assert type(spider.crawler.request_fingerprinter).__name__ == "RequestFingerprinter"
    df = RedisIRIDupeFilter.from_spider(spider)
    assert isinstance(df.fingerprinter, IRIRequestFingerprinter)
    custom = _spider(
        {"IRI_REDIS_URL": redis_server_session.url,
         "REQUEST_FINGERPRINTER_CLASS": "tests.redis.test_redis_dupefilter.ConstantFingerprinter"}
    )
    df2 = RedisIRIDupeFilter.from_spider(custom)
    assert type(df2.fingerprinter).__name__ == "ConstantFingerprinter"
    assert df2.base_key != df.base_key  # the fingerprinter class is part of the options tag
    assert df2.request_seen(Request("http://a.example/")) is False
    assert df2.request_seen(Request("http://b.example/")) is True


class ConstantFingerprinter:
    """A custom fingerprinter (short digest): honoured, hashed to 16 bytes for the layout."""

    @classmethod
    def from_crawler(cls, crawler: Any) -> ConstantFingerprinter:
        return cls()

    def fingerprint(self, request: Request) -> bytes:
        return b"same"


def test_clear_deletes_only_own_keys(redis_server_session: RedisServer) -> None:
    client = redis_server_session.client()
    client.sadd("unit:dupefilter", "not ours")
    df = _direct(redis_server_session, "unit", base_buckets=1, bucket_fill=4)
    for i in range(100):
        df.request_seen(Request(f"http://example.com/{i}"))
    caps = [4 * GROWTH**g for g in range(8)]
    expected_generations = next(g + 1 for g in range(8) if sum(caps[: g + 1]) >= 100)
    assert len(df) == 100 and df.generations() == expected_generations
    df.clear()
    assert client.keys(df.base_key + ":*") == []
    assert client.exists("unit:dupefilter")
    assert df.request_seen(Request("http://example.com/1")) is False  # meta re-created
    assert client.exists(df.meta_key)


# --------------------------------------------------------------------------- faults


def test_unreachable_at_start_names_the_url(caplog: pytest.LogCaptureFixture) -> None:
    port = find_free_port()
    url = f"redis://user:hunter2@127.0.0.1:{port}/3"
    spider = _spider({"IRI_REDIS_URL": url})
    with pytest.raises(IRIRedisError) as info:
        RedisIRIDupeFilter.from_spider(spider)
    text = str(info.value)
    assert f"redis://user:***@127.0.0.1:{port}/3" in text and "hunter2" not in text
    # Scrapy's scheduler path: from_crawler builds, open() refuses to start (logs
    # the error and closes the spider once open: test_start_refusals.py), or
    # raises on Scrapy 2.17
    df = RedisIRIDupeFilter.from_crawler(spider.crawler)
    if CLOSESPIDER_AT_OPEN:
        with caplog.at_level(logging.ERROR):
            df.open()
        assert f"cannot use Redis at redis://user:***@127.0.0.1:{port}/3" in caplog.text
    else:
        with pytest.raises(IRIRedisError, match=f"127.0.0.1:{port}"):
            df.open()


def test_settings_url_fallbacks() -> None:
    from scrapy.settings import Settings

    assert redis_url_from_settings(Settings({"IRI_REDIS_URL": "redis://a/1",
                                             "REDIS_URL": "redis://b/2"})) == "redis://a/1"
    assert redis_url_from_settings(Settings({"REDIS_URL": "redis://b/2"})) == "redis://b/2"
    assert redis_url_from_settings(
        Settings({"REDIS_HOST": "h", "REDIS_PORT": 7000})
    ) == "redis://h:7000/0"
    assert mask_url("redis://:pw@h:1/0") == "redis://:***@h:1/0"
    assert mask_url("redis://h:1/0") == "redis://h:1/0"


def _restart_later(server: RedisServer, delay: float) -> threading.Thread:
    thread = threading.Thread(target=lambda: (time.sleep(delay), server.start()), daemon=True)
    thread.start()
    return thread


@pytest.mark.slow
def test_outage_blocks_then_continues_with_persistence(tmp_path: Path) -> None:
    aof = ("--appendonly", "yes", "--appendfsync", "always")
    with RedisServer(tmp_path / "aof", extra_args=aof) as server:
        df = _filter(server, IRI_REDIS_RETRY_SECONDS=20)
        assert df.request_seen(Request("http://example.com/before")) is False
        server.kill()
        thread = _restart_later(server, 1.0)
        t0 = time.monotonic()
        # not answered while Redis is down: request_seen waits for it
        assert df.request_seen(Request("http://example.com/after")) is False
        waited = time.monotonic() - t0
        thread.join(10)
        assert 0.9 <= waited < 10
        assert df.request_seen(Request("http://EXAMPLE.com/before")) is True  # AOF kept it
        assert df.request_seen(Request("http://example.com/after")) is True
        stats = df.stats
        assert stats is not None
        assert stats.get_value(STAT_OUTAGES) == 1
        assert stats.get_value(STAT_RETRIES) >= 2
        assert stats.get_value(STAT_AMBIGUOUS) is None


def test_outage_without_persistence_forgets_but_never_drops(redis_server: RedisServer) -> None:
    df = _filter(redis_server, IRI_REDIS_RETRY_SECONDS=20, IRI_REDIS_LOCAL_CACHE=0)
    assert df.request_seen(Request("http://example.com/a")) is False
    redis_server.kill()
    thread = _restart_later(redis_server, 0.5)
    assert df.request_seen(Request("http://example.com/b")) is False
    thread.join(10)
    # the restarted server lost its data: a seen URL is fetched again, never dropped
    assert df.request_seen(Request("http://example.com/a")) is False


def _wait_until_busy(server: RedisServer, timeout: float = 10.0) -> None:
    """Return once *server* is inside a script: a PING from another connection is
    then not answered in time (or answered BUSY).  Waits on that condition, not on
    a guess of how long the script takes to start."""
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        probe = server.client(socket_timeout=0.05, retry=Retry(NoBackoff(), 0))
        try:
            probe.ping()
        except (redis.exceptions.TimeoutError, redis.exceptions.BusyLoadingError):
            return
        except redis.exceptions.ResponseError as exc:
            if str(exc).startswith("BUSY"):
                return
            raise
        finally:
            probe.close()
    raise AssertionError("the busy script never started")


def test_reply_lost_after_the_script_ran_is_fetched_once_more(
    redis_server_session: RedisServer,
) -> None:
    """The script call times out but Redis runs it: the retry says "seen" -> refetched."""
    df = _filter(redis_server_session, IRI_REDIS_SOCKET_TIMEOUT=0.2, IRI_REDIS_RETRY_SECONDS=20)
    busy = redis_server_session.client(socket_timeout=10)
    spin = """
    local t = redis.call('TIME'); local stop = t[1] * 1e6 + t[2] + ARGV[1]
    repeat t = redis.call('TIME') until t[1] * 1e6 + t[2] >= stop
    return 1"""
    thread = threading.Thread(target=busy.eval, args=(spin, 0, 800_000), daemon=True)
    thread.start()
    _wait_until_busy(redis_server_session)  # our call then waits, and times out
    request = Request("http://example.com/slow")
    assert df.request_seen(request) is False
    thread.join(10)
    stats = df.stats
    assert stats is not None
    assert stats.get_value(STAT_OUTAGES) == 1
    assert stats.get_value(STAT_AMBIGUOUS) == 1  # it was stored by the lost call
    assert df.request_seen(Request("http://example.com/slow")) is True
    assert len(df) == 1


def test_outage_past_the_deadline_fails_loudly(redis_server: RedisServer,
                                               caplog: pytest.LogCaptureFixture) -> None:
    df = _filter(redis_server, IRI_REDIS_RETRY_SECONDS=1)
    assert df.request_seen(Request("http://example.com/a")) is False
    redis_server.kill()
    t0 = time.monotonic()
    # no engine here (the crawler was never started): the error is raised to the caller;
    # in a crawl the spider is closed with reason iri_redis_unavailable instead
    with pytest.raises(IRIRedisError, match=redis_server.url):
        df.request_seen(Request("http://example.com/b"))
    assert 0.9 <= time.monotonic() - t0 < 5
    assert any("closing the spider" in r.getMessage() for r in caplog.records
               if r.levelname == "ERROR")


# --------------------------------------------------------------------------- start URLs


def test_redis_spider_mixin_makes_start_urls_filterable(
    redis_server_session: RedisServer,
) -> None:
    from iri_scrapy.frontier.redis_dupefilter import IRIRedisSpider

    assert issubclass(IRIRedisSpider, IRIRedisSpiderMixin)

    def make(settings: dict[str, Any]) -> Request:
        crawler = get_crawler(IRIRedisSpider, {"REDIS_URL": redis_server_session.url, **settings})
        spider = IRIRedisSpider.from_crawler(crawler, name="rs")
        try:
            request = spider.make_request_from_data(b'{"url": "http://example.com/start"}')
        finally:
            spider.server.close()
        assert isinstance(request, Request)
        return request

    request = make({})
    assert request.dont_filter is False and request.meta["allow_offsite"] is True
    kept = make({"IRI_DEDUPE_START_REQUESTS": False})
    assert kept.dont_filter is True  # scrapy-redis's own behaviour


def test_no_env_leak() -> None:
    assert "IRI_REDIS_URL" not in os.environ
