"""RedisIRIDupeFilter against a real redis-server (tests/redis_support.py), in process.

Crawls (several processes, scrapy-redis's scheduler, Redis killed mid-crawl) are in
tests/test_redis_crawl.py.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from scrapy import Request, Spider
from scrapy.utils.test import get_crawler

from iri_scrapy import CANONICALIZATION_VERSION, RedisIRIDupeFilter
from iri_scrapy.adapters.fingerprinter import IRIRequestFingerprinter
from iri_scrapy.adapters.redis_dupefilter import (
    FIELD_BYTES,
    STAT_AMBIGUOUS,
    STAT_OUTAGES,
    STAT_RETRIES,
    IRIRedisError,
    IRIRedisSpiderMixin,
    bucket_count,
    mask_url,
    redis_url_from_settings,
)
from tests.redis_support import RedisServer, find_free_port

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
        "format": "1",
        "canonicalization_version": str(CANONICALIZATION_VERSION),
        "options_tag": tag,
        "field_bytes": "8",
        "buckets": str(bucket_count(10_000_000)),
    }
    assert "fingerprinter=iri_scrapy.adapters.fingerprinter.IRIRequestFingerprinter" in tag
    # other options, other keys: a changed ladder never shares keys silently
    other = _filter(redis_server_session, IRI_KEEP_FRAGMENTS=True)
    assert other.base_key != df.base_key
    assert other.request_seen(Request("http://example.com/a")) is False
    # IRI_REDIS_KEY replaces the spider-derived part
    named = _filter(redis_server_session, IRI_REDIS_KEY="shared:%(spider)s:seen")
    assert named.base_key.startswith(f"shared:unit:seen:v{CANONICALIZATION_VERSION}:")
    for key in client.keys("*"):
        assert key.decode().split(":v", 1)[1].startswith(f"{CANONICALIZATION_VERSION}:")


def test_digests_are_raw_8_byte_fields(redis_server_session: RedisServer) -> None:
    df = _filter(redis_server_session, IRI_REDIS_EXPECTED_URLS=1000)
    assert df.buckets == 8
    urls = [f"http://example.com/page/{i}" for i in range(50)]
    for url in urls:
        assert df.request_seen(Request(url)) is False
    client = redis_server_session.client()
    fields: set[bytes] = set()
    for key in df.bucket_keys():
        assert client.type(key) in (b"hash", b"none")
        if client.exists(key):
            assert client.object("encoding", key) == b"listpack"
        fields.update(client.hkeys(key))
    fps = [df.fingerprint(Request(u)) for u in urls]
    assert len(fps[0]) == 20
    assert fields == {fp[:FIELD_BYTES] for fp in fps}
    assert all(len(f) == FIELD_BYTES for f in fields)
    assert len(df) == 50
    assert Request(urls[3]) in df and Request("http://example.com/other") not in df


def test_bucket_count_and_adoption(redis_server_session: RedisServer) -> None:
    assert bucket_count(1) == 1
    assert bucket_count(200) == 1
    assert bucket_count(201) == 2
    assert bucket_count(10_000_000) == 65536
    small = _filter(redis_server_session, IRI_REDIS_EXPECTED_URLS=1000)
    assert small.request_seen(Request("http://example.com/x")) is False
    # a later crawler with another size keeps the layout already in Redis
    big = _filter(redis_server_session, IRI_REDIS_EXPECTED_URLS=10_000_000)
    assert big.buckets == small.buckets == 8
    assert big.request_seen(Request("http://EXAMPLE.com/x")) is True


def test_incompatible_meta_is_refused(redis_server_session: RedisServer) -> None:
    df = _filter(redis_server_session)
    redis_server_session.client().hset(df.meta_key, "field_bytes", "16")
    with pytest.raises(IRIRedisError, match="field_bytes"):
        _filter(redis_server_session)


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
         "REQUEST_FINGERPRINTER_CLASS": "tests.test_redis_dupefilter.ConstantFingerprinter"}
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
    df = _filter(redis_server_session, IRI_REDIS_EXPECTED_URLS=5000)
    for i in range(100):
        df.request_seen(Request(f"http://example.com/{i}"))
    assert len(df) == 100
    df.clear()
    assert client.keys(df.base_key + ":*") == []
    assert client.exists("unit:dupefilter")
    assert df.request_seen(Request("http://example.com/1")) is False  # meta re-created
    assert client.exists(df.meta_key)


def test_memory_at_most_half_of_scrapy_redis_set(redis_server_session: RedisServer) -> None:
    n = 20_000
    df = _filter(redis_server_session, IRI_REDIS_EXPECTED_URLS=n)
    client = redis_server_session.client()
    pipe = client.pipeline(transaction=False)
    for i in range(n):
        req = Request(f"http://example.com/item/{i}?ref={i % 7}")
        assert df.request_seen(req) is False
        pipe.sadd("hex:dupefilter", df.fingerprint(req).hex())  # scrapy-redis's layout
    pipe.execute()
    ours = df.memory_usage() / n
    theirs = client.memory_usage("hex:dupefilter", samples=0) / n
    assert ours <= 0.5 * theirs, (ours, theirs)
    assert ours < 20


# --------------------------------------------------------------------------- faults


def test_unreachable_at_start_names_the_url() -> None:
    port = find_free_port()
    url = f"redis://user:hunter2@127.0.0.1:{port}/3"
    spider = _spider({"IRI_REDIS_URL": url})
    with pytest.raises(IRIRedisError) as info:
        RedisIRIDupeFilter.from_spider(spider)
    text = str(info.value)
    assert f"redis://user:***@127.0.0.1:{port}/3" in text and "hunter2" not in text
    # Scrapy's scheduler path: from_crawler builds, open() raises
    df = RedisIRIDupeFilter.from_crawler(spider.crawler)
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
    df = _filter(redis_server, IRI_REDIS_RETRY_SECONDS=20)
    assert df.request_seen(Request("http://example.com/a")) is False
    redis_server.kill()
    thread = _restart_later(redis_server, 0.5)
    assert df.request_seen(Request("http://example.com/b")) is False
    thread.join(10)
    # the restarted server lost its data: a seen URL is fetched again, never dropped
    assert df.request_seen(Request("http://example.com/a")) is False


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
    from iri_scrapy.adapters.redis_dupefilter import IRIRedisSpider

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
