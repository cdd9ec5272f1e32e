"""Held requests and shared evidence in the Redis fleet store (issue 30), unit tests.

``RedisIRIScheduler`` objects on one real redis-server stand for workers (as in
test_redis_protocol.py): the keys' holders and the pages' digests are kept in
Redis and replayed by a worker that opens; a page one worker serves is content
evidence for every other at once (the fleet learns together); a held request
given back is queued in the script that deletes its record; a held record that
cannot be read back is refused loudly (the crawl never ends ``finished``).
"""

from __future__ import annotations

import contextlib
import json
import logging

import pytest
from scrapy.exceptions import CloseSpider

from iri_scrapy.frontier.codec import REASON_REFUSED_RECORDS
from iri_scrapy.frontier.redis_queue import MARKER, RedisQueue
from tests.protocol.test_redis_protocol import (
    HOST,
    drain,
    learned,
    open_worker,
    skip_alias,
    skipped_fields,
    teach_add_slash,
)
from tests.support.redis_support import RedisServer
from tests.support.redis_workers import reactor  # noqa: F401 (a fixture)

pytestmark = [pytest.mark.redis, pytest.mark.usefixtures("reactor")]

DIGEST = bytes(range(16))


def test_holders_and_page_digests_are_kept_and_replayed_at_open(
        redis_server: RedisServer) -> None:
    client = redis_server.client()
    _, a = open_worker(redis_server.url)
    keys = a.backend.redis_keys
    assert keys["pages"].startswith(a.backend.base) and keys["holders"].startswith(
        a.backend.base)
    learned(a).observe_content(f"{HOST}/p?ref=1", DIGEST)
    learned(a).admitted(f"{HOST}/k", f"{HOST}/k/")  # a rule moved the key's first request
    entries = [e.split(b"\n")[1] for e in client.lrange(keys["pages"], 0, -1)]
    assert entries.count(b"page") == 1  # (and the rules' writes: "rules")
    assert client.hget(keys["holders"], f"{HOST}/k/") == f"{HOST}/k".encode()
    a.backend.abandon()  # killed: nothing written at close
    _, b = open_worker(redis_server.url)
    assert learned(b).rules.was_served(f"{HOST}/p?ref=1")  # a sample compares with it
    assert learned(b)._holders.get(f"{HOST}/k/") == f"{HOST}/k"
    learned(b).admitted(f"{HOST}/k/", f"{HOST}/k/")  # its own spelling holds it now
    assert client.hget(keys["holders"], f"{HOST}/k/") is None
    b.close("finished")


def test_a_page_one_worker_serves_is_evidence_for_the_other_at_once(
        redis_server: RedisServer) -> None:
    _, a = open_worker(redis_server.url)
    _, b = open_worker(redis_server.url)
    learned(a).observe_content(f"{HOST}/x?ref=1", DIGEST)
    assert not learned(b).rules.was_served(f"{HOST}/x?ref=1")
    # b serves the same content without the parameter: with a's page, a nomination
    learned(b).observe_content(f"{HOST}/x", DIGEST)
    assert learned(b).rules.was_served(f"{HOST}/x?ref=1")
    assert learned(b).rules.events["content/nominated"] >= 1
    # a learns b's page at its next tick (or its next page)
    assert a.protocol is not None
    a.protocol.sync()
    assert learned(a).rules.was_served(f"{HOST}/x")
    assert learned(a).rules.events["content/nominated"] >= 1
    a.close("finished")
    b.close("finished")


def test_a_held_request_given_back_is_queued_by_the_script_that_deletes_it(
        redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    client = redis_server.client()
    _, a = open_worker(redis_server.url)
    teach_add_slash(a)
    skip_alias(a, "c")
    assert drain(a) == [f"{HOST}/c/"]
    a.close("finished")
    keys = a.backend.redis_keys
    empty = {"format": 1, "canonicalization_version": json.loads(
        client.get(keys["rules"]))["canonicalization_version"],
        "rules": {"v": 1, "min_evidence": 2, "exact": [], "away": [], "rules": []}}
    client.set(keys["rules"], json.dumps(empty))  # the rule lost: /c comes back


    class Killed(BaseException):
        """The worker dies here (kill -9 between two Redis calls)."""

    def killed(*_: object, **__: object) -> None:
        raise Killed

    # the opening worker dies right after the give-back, before any other queue write:
    # the request is already queued by the script that deleted its record
    monkeypatch.setattr(RedisQueue, "push", killed)
    with contextlib.suppress(Killed):
        open_worker(redis_server.url)
    monkeypatch.undo()
    assert skipped_fields(client, a) == set()
    assert client.zcard(keys["ready"]) == 1 and client.hlen(keys["bodies"]) == 1
    _, c = open_worker(redis_server.url)
    assert drain(c) == [f"{HOST}/c"]
    c.close("finished")


def test_an_unreadable_held_record_closes_the_crawl_loudly(
        redis_server: RedisServer, caplog: pytest.LogCaptureFixture) -> None:
    client = redis_server.client()
    _, a = open_worker(redis_server.url)
    teach_add_slash(a)
    skip_alias(a, "c")
    a.close("finished")
    keys = a.backend.redis_keys
    client.hset(keys["skipped"], f"{HOST}/d", b"\x80\x04\x95cos\nsystem\n.")  # a pickle
    record = json.loads(client.hget(keys["skipped"], f"{HOST}/c"))
    record["record"] = "bm90IGEgcmVjb3Jk"  # base64, not a codec record
    client.hset(keys["skipped"], f"{HOST}/c", json.dumps(record))
    with caplog.at_level(logging.ERROR):
        crawler, b = open_worker(redis_server.url)
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert errors and all(REASON_REFUSED_RECORDS in e for e in errors), errors
    assert b.backend.counts["refused_records"] == 2
    assert skipped_fields(client, b) == set()  # kept aside, never executed
    assert {f.decode() for f in client.hkeys(keys["refused"])} == {
        f"protocol-skipped:{HOST}/c", f"protocol-skipped:{HOST}/d"}
    assert client.hexists(keys["skipped"], MARKER)
    drain(b)
    with pytest.raises(CloseSpider) as closing:  # queue empty: never "finished"
        b._on_idle()
    assert closing.value.reason == REASON_REFUSED_RECORDS
    b.close(REASON_REFUSED_RECORDS)
    del crawler


def test_a_rule_another_worker_revoked_is_given_back_through_the_queue(
        redis_server: RedisServer) -> None:
    client = redis_server.client()
    _, a = open_worker(redis_server.url)
    _, b = open_worker(redis_server.url)
    teach_add_slash(a)
    skip_alias(a, "c")
    assert a.protocol is not None and b.protocol is not None
    a.protocol.sync()
    b.protocol.sync()  # b adopts the rule
    learned(b).rules.observe_contrary(f"{HOST}/c")  # and refutes it
    b.protocol.sync()
    keys = a.backend.redis_keys
    queued = client.zcard(keys["ready"])
    a.protocol.sync()  # a sees the revocation: claims /c into the queue
    assert skipped_fields(client, a) == set()
    assert client.zcard(keys["ready"]) in (queued, queued + 1)
    urls = drain(a) + drain(b)
    assert f"{HOST}/c" in urls
    a.close("finished")
    b.close("finished")
