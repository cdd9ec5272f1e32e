"""The Redis seen-set on its own (frontier/redis_seen.py), without the dupefilter.

``RedisSeenSet`` is the format-4 layout (a trie of intset buckets) with no Scrapy
import: built from a client factory and options, two of them share one key set
through a real ``redis-server``; the dupefilter's tests (test_redis_dupefilter.py,
test_redis_format4.py) cover the same layout through ``RedisIRIDupeFilter``.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from hashlib import blake2b
from pathlib import Path
from typing import Any

import pytest

from iri_scrapy import CANONICALIZATION_VERSION
from iri_scrapy.frontier.redis_client import IRIRedisError, new_client
from iri_scrapy.frontier.redis_seen import RedisSeenSet, tag_hash
from tests.support.redis_support import RedisServer

pytestmark = pytest.mark.redis

REPO = Path(__file__).resolve().parents[2]


def _seen(server: RedisServer, key: str, **kwargs: Any) -> RedisSeenSet:
    return RedisSeenSet(lambda: new_client(server.url, 2.0, {}, cluster=False), key=key,
                        options_tag="test-options", safe_url=server.url, **kwargs)


def test_the_seen_set_loads_no_scrapy() -> None:
    code = ("import sys, iri_scrapy.frontier.redis_seen; "
            "print([m for m in ('scrapy', 'twisted') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"


def test_two_seen_sets_share_one_trie(redis_server_session: RedisServer) -> None:
    key = f"seen-{uuid.uuid4().hex}"
    one = _seen(redis_server_session, key, base_buckets=1, bucket_cap=4, local_cache=10)
    two = _seen(redis_server_session, key, local_cache=0)  # adopts the meta's layout
    assert one.base_key == f"{key}:v{CANONICALIZATION_VERSION}:{tag_hash('test-options')}"
    with pytest.raises(IRIRedisError, match="not connected"):
        one.add(b"x" * 20)
    one.connect()
    two.connect()
    assert (two.base_buckets, two.bucket_cap) == (1, 4)
    fps = [blake2b(b"%d" % i, digest_size=20).digest() for i in range(60)]
    assert all(one.add(fp) for fp in fps)  # new: stored, buckets split on the way
    assert not any(two.add(fp) for fp in fps)  # seen, through splits learned from WRONGTYPE
    assert two.known_splits and max(two.level_counts()) >= 1
    assert len(two) == 60 and two.has(fps[0]) and not two.has(b"y" * 20)
    assert not one.cached(fps[0]) and one.local_cached == 0  # the caller fills the cache
    one.remember(fps[0])
    assert one.cached(fps[0]) and one.local_cached == 1 and not two.cached(fps[0])
    keys = len(one.bucket_keys()) + 1  # buckets, split markers and the meta
    assert one.clear() == keys
    assert redis_server_session.client().keys(one.base_key + "*") == []
    assert one.local_cached == 0 and one.known_splits == frozenset()
