"""RedisIRIDupeFilter against a real redis-server (tests/support/redis_support.py), in process.

Crawls (several processes, scrapy-redis's scheduler, Redis killed mid-crawl) are in
tests/redis/test_redis_crawl.py.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from scrapy import Request, Spider
from scrapy.utils.test import get_crawler

from iri_scrapy import CANONICALIZATION_VERSION, RedisIRIDupeFilter
from iri_scrapy.frontier.redis_client import IRIRedisError, mask_url, redis_url_from_settings
from iri_scrapy.frontier.redis_dupefilter import (
    STAT_AMBIGUOUS,
    STAT_OUTAGES,
    STAT_RETRIES,
    IRIRedisSpiderMixin,
)
from iri_scrapy.frontier.redis_seen import BUCKET_CAP, DEFAULT_ROOTS, FIELD_BYTES, roots_for
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
    """Built directly (tests' tiny layouts: base_buckets, bucket_cap), connected.

    The layout itself (splits, races, memory) is tested in test_redis_format4.py.
    """
    df = RedisIRIDupeFilter(redis_url=server.url, key=key or f"t-{uuid.uuid4().hex}", **kwargs)
    df.connect()
    return df


def _bucket_hash(fp: bytes) -> int:
    return int.from_bytes(fp[8:12], "big")


# --------------------------------------------------------------------------- keys


def test_key_names_version_and_options(redis_server_session: RedisServer) -> None:
    df = _filter(redis_server_session)
    tag = df.options_tag()
    digest = hashlib.sha1(tag.encode()).hexdigest()[:8]
    assert df.base_key == f"scrapybot:unit:iri-dupefilter:v{CANONICALIZATION_VERSION}:{digest}"
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
    assert df.level_counts() == {0: (len(df.bucket_keys()), 50)}
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
    # no IRI_REDIS_EXPECTED_URLS: the default; a later crawler with a hint adopts the meta
    small = _filter(redis_server_session)
    assert small.request_seen(Request("http://example.com/x")) is False
    big = _filter(redis_server_session, IRI_REDIS_EXPECTED_URLS=10_000_000)
    assert big.base_buckets == small.base_buckets == DEFAULT_ROOTS
    assert big.request_seen(Request("http://EXAMPLE.com/x")) is True
    # a hinted key set: more roots
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


#: What the pre-release formats 1-3 wrote (their meta's own fields, one bucket), as data.
PRE_RELEASE: dict[int, tuple[dict[str, int], tuple[Any, ...]]] = {
    1: ({"buckets": 8}, ("HSET", ":3", b"\x01" * 8, "")),
    2: ({"growth": 4, "b0": 16, "fill": 200, "generations": 1, "n0": 1},
        ("HSET", ":g0:3", b"\x01" * 8, "")),
    3: ({"growth": 16, "b0": 16, "cap": 440, "generations": 1},
        ("SADD", ":s0:3", 72340172838076673)),
}


@pytest.mark.parametrize("fmt", sorted(PRE_RELEASE))
def test_pre_release_formats_are_refused_at_start(
    redis_server_session: RedisServer, fmt: int, caplog: pytest.LogCaptureFixture,
) -> None:
    """Key formats 1-3 were never released: a meta of one is refused, one ERROR line
    saying what to do, and nothing in Redis is touched."""
    crawler = _spider({
        "IRI_REDIS_URL": redis_server_session.url,
        "REQUEST_FINGERPRINTER_CLASS": "iri_scrapy.IRIRequestFingerprinter",
    }).crawler
    probe = RedisIRIDupeFilter.from_crawler(crawler)  # not connected
    client = redis_server_session.client()
    fields, (command, suffix, *args) = PRE_RELEASE[fmt]
    client.hset(probe.meta_key, mapping={
        "format": fmt, "canonicalization_version": CANONICALIZATION_VERSION,
        "options_tag": probe.options_tag(), "field_bytes": 8, **fields,
    })
    client.execute_command(command, probe.base_key + suffix, *args)
    before = {k: client.dump(k) for k in client.keys("*")}
    with caplog.at_level(logging.ERROR), pytest.raises(IRIRedisError) as info:
        _filter(redis_server_session)  # scrapy-redis's scheduler: from_spider raises
    message = str(info.value)
    assert f"has format='{fmt}', this crawler needs 4" in message
    assert "IRI_REDIS_KEY" in message and "delete the old keys" in message
    assert "\n" not in message
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == [message]
    # Scrapy's scheduler: open() refuses to start (Scrapy 2.18+: the spider is closed
    # before any request, iri_redis_unavailable; 2.17: the error is raised)
    caplog.clear()
    df = RedisIRIDupeFilter.from_crawler(crawler)
    with caplog.at_level(logging.ERROR):
        if CLOSESPIDER_AT_OPEN:
            df.open()
        else:
            with pytest.raises(IRIRedisError, match=f"format='{fmt}'"):
                df.open()
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == [message]
    assert {k: client.dump(k) for k in client.keys("*")} == before  # nothing written
    # what the message says to do: delete the keys, and the next start is format 4
    client.delete(*before)
    fresh = _filter(redis_server_session)
    assert fresh.request_seen(Request("http://example.com/")) is False
    assert client.hget(fresh.meta_key, "format") == b"4"


@pytest.mark.slow
@pytest.mark.parametrize("fleet", [False, True], ids=["scrapy-scheduler", "fleet-queue"])
def test_pre_release_format_refused_by_scrapy_crawl(
    redis_server_session: RedisServer, tmp_path: Path, fleet: bool,
) -> None:
    """A real ``scrapy crawl``: one ERROR line, iri_redis_unavailable, exit 1, no request."""
    from tests.plugin.test_start_refusals import check_refusal, project, scrapy_crawl

    root = project(tmp_path)
    settings = ("DUPEFILTER_CLASS=iri_scrapy.RedisIRIDupeFilter",
                f"IRI_REDIS_URL={redis_server_session.url}", f"IRI_REDIS_SCHEDULER={fleet}")
    first = scrapy_crawl(root, *settings)
    assert first.returncode == 0 and "'finish_reason': 'finished'" in first.stderr, \
        first.stderr[-3000:]
    client = redis_server_session.client()
    [meta_key] = client.keys("*:one:iri-dupefilter:*:meta")
    client.hdel(meta_key, "roots", "fanout")
    client.hset(meta_key, mapping={"format": 3, **PRE_RELEASE[3][0]})
    meta = client.hgetall(meta_key)
    second = scrapy_crawl(root, *settings)
    check_refusal(second, "iri_redis_unavailable", "has format='3', this crawler needs 4",
                  "use another IRI_REDIS_KEY or delete the old keys")
    assert client.hgetall(meta_key) == meta




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
    # one count per duplicate: the rung at which /%7ea#x became /~a
    assert stats.get_value("iri/dupefilter/decided_by/percent") == 1


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
    df = _direct(redis_server_session, "unit", base_buckets=1, bucket_cap=4)
    for i in range(100):
        df.request_seen(Request(f"http://example.com/{i}"))
    assert len(df) == 100 and max(df.level_counts()) >= 1  # split buckets and markers
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
    assert any("closing the crawl" in r.getMessage() for r in caplog.records
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
