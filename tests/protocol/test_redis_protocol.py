"""Learned protocol rules and what they skipped, kept in Redis for a fleet (issue 23).

``RedisIRIScheduler`` at ``IRI_LEVEL = "protocol"`` against a real redis-server:
the rules written and read back by a second worker, a damaged value set aside, the
skipped requests scheduled again when their rule is gone (at open, after this
worker's revocation, after another worker's), the keys vanishing mid-crawl made
loud.  Several schedulers on one server stand for several workers, as in
``tests/redis/test_redis_scheduler.py``.  The real crawls are at the end (slow).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import signal
import threading
import time
from typing import Any

import pytest
from scrapy import Request

from iri_scrapy.core.ladder import CANONICALIZATION_VERSION
from iri_scrapy.frontier.redis_loss import REASON_FRONTIER_LOST
from iri_scrapy.frontier.redis_queue import MARKER, ProtocolStateLost
from iri_scrapy.frontier.redis_scheduler import RedisIRIScheduler
from iri_scrapy.plugin.refusal import CLOSESPIDER_AT_OPEN
from iri_scrapy.protocol.store import merge_rules_data
from tests.support import redis_workers
from tests.support.crawl import CrawlError, run_crawl
from tests.support.messy_site import MessySite
from tests.support.redis_support import RedisServer
from tests.support.redis_workers import reactor  # noqa: F401 (a fixture)

pytestmark = [pytest.mark.redis, pytest.mark.usefixtures("reactor")]

HOST = "http://h.test"



def open_worker(url: str, **extra: Any) -> tuple[Any, RedisIRIScheduler]:
    """A worker at level protocol (leases of 5 s: none expires during a test)."""
    return redis_workers.open_worker(url, lease=5, IRI_LEVEL="protocol", **extra)


def learned(worker: RedisIRIScheduler) -> Any:
    out = getattr(worker.df, "learned", None)
    assert out is not None
    return out


def teach_add_slash(worker: RedisIRIScheduler, host: str = HOST) -> None:
    """Two permanent redirects to the slashed spelling: the host rule add-slash."""
    rules = learned(worker).rules
    for name in ("a", "b"):
        rules.observe_redirect(f"{host}/{name}", f"{host}/{name}/", 301)
    assert rules.apply(f"{host}/x") == f"{host}/x/"


def skip_alias(worker: RedisIRIScheduler, name: str, host: str = HOST) -> None:
    """Schedule /name/ then /name: the second is merged by the learned rule (kept)."""
    assert worker.enqueue_request(Request(f"{host}/{name}/"))
    assert not worker.enqueue_request(Request(f"{host}/{name}"))
    assert f"{host}/{name}" in learned(worker).skipped


def drain(worker: RedisIRIScheduler) -> list[str]:
    out = []
    while (request := worker.next_request()) is not None:
        out.append(request.url)
        worker.answered(request)
    return out


def stored(client: Any, worker: RedisIRIScheduler) -> dict[str, Any]:
    value = client.get(worker.backend.redis_keys["rules"])
    assert value is not None
    return json.loads(value)  # type: ignore[no-any-return]


def skipped_fields(client: Any, worker: RedisIRIScheduler) -> set[str]:
    return {f.decode() for f in client.hkeys(worker.backend.redis_keys["skipped"])} - {MARKER}


def test_rules_and_skipped_written_and_read_back_by_a_second_worker(
        redis_server: RedisServer) -> None:
    client = redis_server.client()
    _, a = open_worker(redis_server.url)
    keys = a.backend.redis_keys
    assert keys["rules"].startswith(a.backend.base) and keys["skipped"].startswith(a.backend.base)
    assert f":c{CANONICALIZATION_VERSION}:" in keys["rules"]  # beside the seen-set's version
    teach_add_slash(a)
    skip_alias(a, "c")
    # written before the dupefilter dropped it, as a codec record (data)
    assert skipped_fields(client, a) == {f"{HOST}/c"}
    record = json.loads(client.hget(keys["skipped"], f"{HOST}/c"))
    assert record["via"] == f"{HOST}/c" and record["merged"] == f"{HOST}/c/"
    assert a.protocol is not None
    a.protocol.sync()
    document = stored(client, a)
    assert document["format"] == 1
    assert document["canonicalization_version"] == CANONICALIZATION_VERSION
    assert len(document["rules"]["exact"]) == 2
    _, b = open_worker(redis_server.url)  # a second worker of the fleet
    assert learned(b).rules.apply(f"{HOST}/zzz") == f"{HOST}/zzz/"
    assert f"{HOST}/c" in learned(b).skipped  # the merge still holds: kept, not fetched
    assert drain(b) == [f"{HOST}/c/"]
    b.close("finished")
    a.close("finished")
    # a recrawl on the same keys starts with what was learned
    _, c = open_worker(redis_server.url, IRI_REDIS_FLUSH_ON_START=True)
    assert learned(c).rules.apply(f"{HOST}/y") == f"{HOST}/y/"
    assert skipped_fields(client, c) == set()  # went with the seen-set
    c.close("finished")


def test_the_queued_record_carries_what_the_dupefilter_marked(redis_server: RedisServer) -> None:
    """The record is written before the dupefilter decides (its intent), and the
    filter marks the request it lets through: the key it added, or a learned rule's
    sample.  The record queued carries the marks: a sample queued unmarked is the
    same record as the alias queued before the rule, so Redis kept one of them,
    which the download then dropped as the sample's duplicate: a page lost."""
    _, a = open_worker(redis_server.url)
    teach_add_slash(a)
    learned(a).rules.sample_every = 1  # the second merge is a sample
    skip_alias(a, "c")
    assert a.enqueue_request(Request(f"{HOST}/d/"))
    assert a.enqueue_request(Request(f"{HOST}/d"))  # a sample of add-slash
    popped = {}
    while (request := a.next_request()) is not None:
        popped[request.url] = request.meta
        a.answered(request)
    assert set(popped) == {f"{HOST}/c/", f"{HOST}/d/", f"{HOST}/d"}
    assert all("iri_keyed" in meta for url, meta in popped.items() if url != f"{HOST}/d")
    assert popped[f"{HOST}/d"].get("iri_protocol_sample") is True
    a.close("finished")


def test_a_damaged_value_is_set_aside_and_learning_starts_afresh(
        redis_server: RedisServer, caplog: pytest.LogCaptureFixture) -> None:
    client = redis_server.client()
    _, a = open_worker(redis_server.url)
    teach_add_slash(a)
    skip_alias(a, "c")
    a.close("finished")
    keys = a.backend.redis_keys
    damaged = json.dumps({"format": 1, "canonicalization_version": CANONICALIZATION_VERSION,
                          "rules": {"v": 1, "min_evidence": 2, "exact": "cat /etc/passwd",
                                    "away": [], "rules": []}})
    for value in (damaged.encode(), b"\x80\x04\x95cos\nsystem\n."):  # and a pickle
        client.set(keys["rules"], value)
        with caplog.at_level(logging.WARNING):
            caplog.clear()
            _, b = open_worker(redis_server.url)
        warnings = [r for r in caplog.records if "cannot be read" in r.getMessage()]
        assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING
        assert client.get(keys["rules"] + ":damaged") == value
        assert learned(b).rules.apply(f"{HOST}/x") == f"{HOST}/x"  # afresh
        document = stored(client, b)  # replaced by a readable one
        assert document["rules"]["exact"] == []
        b.close("finished")
    # the request the lost rules had skipped was scheduled again: no page lost
    assert skipped_fields(client, a) == set()
    _, c = open_worker(redis_server.url)
    assert f"{HOST}/c" in drain(c)
    c.close("finished")


def test_skipped_requests_scheduled_again_when_the_rule_is_gone(
        redis_server: RedisServer) -> None:
    client = redis_server.client()
    _, a = open_worker(redis_server.url)
    teach_add_slash(a)
    skip_alias(a, "c")
    skip_alias(a, "d")
    assert drain(a) == [f"{HOST}/c/", f"{HOST}/d/"]
    # this worker's own revocation: a 2xx at /d against the host rule
    rules = learned(a).rules
    rules.observe_contrary(f"{HOST}/d")
    assert rules.apply(f"{HOST}/d") == f"{HOST}/d"
    again = learned(a).changed()  # what Learned.requeue hands to the engine
    assert {r.url for r in again} == {f"{HOST}/c", f"{HOST}/d"}
    assert a.protocol is not None
    a.protocol.sync()
    assert skipped_fields(client, a) == set()  # removed from Redis
    a.close("finished")

    # a rule lost between two runs: what it skipped is scheduled again at open
    _, b = open_worker(redis_server.url)
    teach_add_slash(b, "http://g.test")  # h.test's rule stays revoked: another host
    skip_alias(b, "e", "http://g.test")
    b.close("finished")
    empty = {"format": 1, "canonicalization_version": CANONICALIZATION_VERSION,
             "rules": {"v": 1, "min_evidence": 2, "exact": [], "away": [], "rules": []}}
    client.set(b.backend.redis_keys["rules"], json.dumps(empty))
    _, c = open_worker(redis_server.url)
    assert skipped_fields(client, c) == set()  # claimed
    assert "http://g.test/e" in drain(c)
    c.close("finished")


def test_a_kept_request_whose_own_key_was_seen_is_fetched_on_resume(
        redis_server: RedisServer) -> None:
    """A request kept after it passed the dupefilter (alias served first, or deferred
    at download): its own key is in the seen-set, so given back it must pass it."""
    client = redis_server.client()
    _, a = open_worker(redis_server.url)
    request = Request(f"{HOST}/own/")
    assert a.enqueue_request(request)  # its key is recorded now
    assert drain(a) == [f"{HOST}/own/"]
    learned(a).keep(f"{HOST}/own/", f"{HOST}/own", f"{HOST}/own/", request)  # alias-first
    a.close("finished")
    assert skipped_fields(client, a) == {f"{HOST}/own/"}
    _, b = open_worker(redis_server.url)  # the alias does not map there: given back
    assert drain(b) == [f"{HOST}/own/"]
    b.close("finished")


def test_a_rule_revoked_by_another_worker_gives_back_what_this_one_skipped(
        redis_server: RedisServer) -> None:
    client = redis_server.client()
    _, a = open_worker(redis_server.url)
    teach_add_slash(a)
    assert a.protocol is not None
    a.protocol.sync()
    _, b = open_worker(redis_server.url)  # starts with A's rules
    assert b.protocol is not None
    skip_alias(a, "c")  # A skips with the rule; B never saw /c
    a.protocol.sync()
    b.protocol.sync()
    learned(b).rules.observe_contrary(f"{HOST}/q")  # B: a 2xx against the rule
    b.protocol.sync()  # the fleet's document revokes it: B claims /c and schedules it
    assert skipped_fields(client, a) == set()
    assert b.protocol.requeued == 1
    urls = drain(b)
    assert f"{HOST}/c" in urls
    assert learned(b).rules.events["requeued"] == 1
    a.protocol.sync()  # A agrees with the fleet's document (no second re-queue)
    assert a.protocol.requeued == 0
    document = stored(client, a)["rules"]
    assert any(entry["contrary"] for entry in document["rules"])
    a.close("finished")
    b.close("finished")


def test_a_running_worker_adopts_the_rules_another_learned_and_keeps_its_own(
        redis_server: RedisServer) -> None:
    _, a = open_worker(redis_server.url)
    _, b = open_worker(redis_server.url)  # both running before anything is learned
    assert a.protocol is not None and b.protocol is not None
    rules_b = learned(b).rules
    rules_b.observe_content(f"{HOST}/seen/", b"P" * 16)  # B's own evidence
    rules_b.observe_canonical(f"{HOST}/x?utm=1", f"{HOST}/x")
    events = dict(rules_b.events)
    teach_add_slash(a)
    a.protocol.sync()
    assert rules_b.apply(f"{HOST}/zzz") == f"{HOST}/zzz"
    b.protocol.sync()  # one tick: the fleet's document adopted, B never reopened
    assert rules_b.apply(f"{HOST}/zzz") == f"{HOST}/zzz/"
    assert rules_b.was_served(f"{HOST}/seen/")  # B's digests kept
    assert {k: rules_b.events[k] for k in events} == events
    assert rules_b.events["redirect/adopted"] == 1
    skip_alias(b, "d")  # B skips with A's rule at once
    assert b.backend.counts.get("frontier_lost") is None and not b.protocol.failed
    a.close("finished")
    b.close("finished")


def test_a_worker_does_not_adopt_back_what_it_revoked_itself(redis_server: RedisServer) -> None:
    """Its own write holds nothing new from the fleet: adopting it would bring back
    (by the merge's union) an exact rule this worker's later evidence revoked."""
    _, a = open_worker(redis_server.url)
    assert a.protocol is not None
    teach_add_slash(a)
    a.protocol.sync()
    rules = learned(a).rules
    rules.observe_contrary(f"{HOST}/a")  # /a served as it is: its exact rule revoked
    assert rules.apply(f"{HOST}/a") == f"{HOST}/a"
    a.protocol.sync()
    a.protocol.sync()
    assert rules.apply(f"{HOST}/a") == f"{HOST}/a"
    a.close("finished")


def _b_learns_what_a_refuted(redis_server: RedisServer) -> tuple[Any, Any, Any]:
    """Two workers: A has add-slash nominated and a 2xx against it (written), B
    learns it (in force here, not yet written): the client, A, B."""
    client = redis_server.client()
    _, a = open_worker(redis_server.url)
    _, b = open_worker(redis_server.url)
    assert a.protocol is not None and b.protocol is not None
    rules_a = learned(a).rules
    rules_a.observe_redirect(f"{HOST}/z", f"{HOST}/z/", 301)  # nominated, not in force
    rules_a.observe_contrary(f"{HOST}/q")  # a 2xx against add-slash
    a.protocol.sync()
    teach_add_slash(b)
    return client, a, b


def test_a_rule_in_force_here_that_the_fleet_stops_gives_back_what_it_skipped_here(
        redis_server: RedisServer) -> None:
    """B learned a rule and skipped with it before any write; A has a 2xx against
    it.  The fleet's document never had the rule in force, so only adopting the
    document stops it in B: B's revision moves and /c comes back (claimed)."""
    client, a, b = _b_learns_what_a_refuted(redis_server)
    skip_alias(b, "c")
    assert skipped_fields(client, b) == {f"{HOST}/c"}
    rules_b = learned(b).rules
    revision = rules_b.revision
    b.protocol.sync()
    assert rules_b.revision > revision
    assert rules_b.apply(f"{HOST}/x") == f"{HOST}/x"
    assert rules_b.events["redirect/revoked"] == 1
    assert b.protocol.requeued == 1 and rules_b.events["requeued"] == 1
    assert skipped_fields(client, b) == set()  # claimed
    assert f"{HOST}/c" in drain(b)  # nothing lost
    a.protocol.sync()
    assert a.protocol.requeued == 0  # claimed once, by B
    a.close("finished")
    b.close("finished")


def test_a_fleet_revocation_of_a_request_whose_spelling_was_served_here_is_no_failure(
        redis_server: RedisServer) -> None:
    """B holds /c (its very spelling served here: nothing to give back) and /d
    under a rule the fleet stops: /d comes back, /c's record is deleted, and B
    goes on writing (the two lists once zipped apart, and B stopped syncing)."""
    client, a, b = _b_learns_what_a_refuted(redis_server)
    learned(b).observe_content(f"{HOST}/c", b"C" * 16)  # /c itself served here
    skip_alias(b, "c")
    skip_alias(b, "d")
    assert skipped_fields(client, b) == {f"{HOST}/c", f"{HOST}/d"}
    b.protocol.sync()
    assert not b.protocol.failed
    assert b.protocol.requeued == 1
    assert learned(b).rules.events["refetch-avoided"] == 1
    b.protocol.sync()
    assert skipped_fields(client, b) == set()  # /d claimed, /c's record deleted
    assert f"{HOST}/d" in drain(b) and f"{HOST}/c" not in drain(b)
    a.close("finished")
    b.close("finished")


def test_a_site_one_worker_calibrated_is_calibrated_for_the_fleet(
        redis_server: RedisServer) -> None:
    """A's two fetches of its first page go into the fleet's log with A's next
    page: B learns what changes by chance there (B's own counterexample that
    this explains is withdrawn) and does not calibrate that site again."""
    import random

    from iri_scrapy.protocol.calibration import section_of
    from tests.protocol.test_fingerprint import page

    _, a = open_worker(redis_server.url)
    _, b = open_worker(redis_server.url)
    assert a.protocol is not None and b.protocol is not None
    home, again = (page("<h1>Home</h1>", ("counter",), random.Random(n)) for n in (1, 2))
    rules_a, rules_b = learned(a).rules, learned(b).rules
    rules_b.observe_content(f"{HOST}/", home)  # B: the same page by chance different
    rules_b.observe_content(f"{HOST}/?ref=x", again)  # under drop-param:ref
    assert rules_b.events["counterexamples"] == 1
    assert rules_a.calibration.start(f"{HOST}/", home) is not None
    assert rules_a.calibration.land(f"{HOST}/", section_of(f"{HOST}/"), again) == (True, [])
    learned(a).observe_content(f"{HOST}/", home)  # A's page: its calibration goes first
    assert rules_a.calibration.pairs == []
    b.protocol.sync()
    assert rules_b.calibration.volatility(f"{HOST}/").same(home, again)
    assert rules_b.events["counterexamples/withdrawn"] == 1
    assert rules_b.calibration.start(f"{HOST}/", home) is None  # calibrated already
    a.close("finished")
    b.close("finished")


def test_rules_written_or_learned_are_synced_at_the_next_page_not_the_tick(
        redis_server: RedisServer) -> None:
    """A's write of the rules goes into the pages log: B's next page sees it and
    B looks at the fleet's rules on the reactor's next turn (its one-second tick
    left a rule learned by one worker unused by the others meanwhile); a rule B
    learns itself is written as soon."""
    _, a = open_worker(redis_server.url)
    _, b = open_worker(redis_server.url)
    assert a.protocol is not None and b.protocol is not None
    teach_add_slash(a)
    a.protocol.sync()
    rules_b = learned(b).rules
    assert rules_b.apply(f"{HOST}/zzz") == f"{HOST}/zzz"
    learned(b).observe_content(f"{HOST}/seen/", b"P" * 16)  # B's next page
    pending = b.protocol._pending
    assert pending is not None and pending.active()  # a sync on the next turn
    pending.cancel()
    b.protocol._tick()
    assert rules_b.apply(f"{HOST}/zzz") == f"{HOST}/zzz/"
    a.protocol._tick()  # (A saw B's first write: synced now)
    assert a.protocol._pending is None
    host = "http://other.test"
    learned(a).rules.observe_redirect(f"{host}/a", f"{host}/a/", 301)  # A learns
    learned(a).observe_content(f"{host}/b/", b"Q" * 16)
    assert a.protocol._pending is not None and a.protocol._pending.active()
    a.close("finished")
    b.close("finished")


def test_the_keys_vanishing_mid_crawl_close_it_as_lost(
        redis_server: RedisServer, caplog: pytest.LogCaptureFixture) -> None:
    client = redis_server.client()
    for name in ("rules", "skipped"):
        _, a = open_worker(redis_server.url)
        teach_add_slash(a)
        skip_alias(a, "c")
        assert a.protocol is not None
        a.protocol.sync()
        assert a.backend.lost is None
        client.delete(a.backend.redis_keys[name])  # evicted, or deleted by hand
        with caplog.at_level(logging.ERROR):
            caplog.clear()
            a.protocol.sync()
        assert a.backend.lost is not None and a.backend.redis_keys[name] in a.backend.lost
        errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
        assert len(errors) == 1 and REASON_FRONTIER_LOST in errors[0], errors
        assert a.backend.counts.get("frontier_lost") == 1
        a.close("shutdown")
        client.flushall()


def test_rules_without_their_skipped_requests_refuse_the_start(
        redis_server: RedisServer, caplog: pytest.LogCaptureFixture) -> None:
    client = redis_server.client()
    _, a = open_worker(redis_server.url)
    teach_add_slash(a)
    skip_alias(a, "c")
    a.close("finished")
    client.delete(a.backend.redis_keys["skipped"])
    with caplog.at_level(logging.ERROR):
        if CLOSESPIDER_AT_OPEN:  # Scrapy 2.18+: the spider is closed at once
            crawler, b = open_worker(redis_server.url)
            assert b.protocol is None and not b.backend.connected
            del crawler
        else:  # Scrapy 2.17: the refusal raises, after its line
            with pytest.raises(ProtocolStateLost):
                open_worker(redis_server.url)
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert any("is lost" in m and a.backend.redis_keys["skipped"] in m for m in errors), errors
    assert client.zcard(a.backend.redis_keys["workers"]) == 0  # deregistered


def test_merge_is_a_join_and_counterexamples_win() -> None:
    def doc(exact: list[list[str]], rules: list[dict[str, Any]]) -> dict[str, Any]:
        return {"v": 1, "min_evidence": 2, "exact": exact, "away": [], "rules": rules}

    def entry(confirmed: list[str], bad: int = 0) -> dict[str, Any]:
        return {"rule": [HOST, "drop-param", "sid"], "origin": "content",
                "confirmed": confirmed, "bad": bad, "contrary": 0, "skips": 0}

    a = doc([[f"{HOST}/a", f"{HOST}/a/", HOST, "add-slash", ""]], [entry(["x", "y"])])
    b = doc([[f"{HOST}/b", f"{HOST}/b/", HOST, "add-slash", ""]], [entry(["z"], bad=1)])
    ab, ba = merge_rules_data(a, b), merge_rules_data(b, a)
    assert ab == ba
    assert merge_rules_data(ab, a) == ab and merge_rules_data(ab, ab) == ab
    assert len(ab["exact"]) == 2
    assert ab["rules"][0]["bad"] == 1  # revoked by B: revoked in the fleet
    assert ab["rules"][0]["confirmed"] == ["x", "y", "z"]


# --------------------------------------------------------------------------- real crawls

REDIS_PROTOCOL = {"ADDONS": {"iri_scrapy.Addon": 0}, "ROBOTSTXT_OBEY": True,
                  "IRI_LEVEL": "protocol"}


def _kill_after(site: MessySite, hits: int, killed: list[bool]) -> Any:
    def started(proc: Any, _log: Any) -> None:
        def watch() -> None:
            while proc.poll() is None:  # bounded by the child's life
                if site.total_hits() >= hits:
                    os.kill(proc.pid, signal.SIGKILL)
                    killed.append(True)
                    return
                time.sleep(0.005)

        threading.Thread(target=watch, daemon=True).start()

    return started


def _crawl(redis_url: str, **extra: Any) -> tuple[MessySite, Any]:
    settings = {**REDIS_PROTOCOL, "IRI_REDIS_URL": redis_url, **extra}
    with MessySite("messy") as site:
        result = run_crawl(settings, site.start_urls, site.proxy_url)
        return site, result


@pytest.mark.own
@pytest.mark.slow
def test_a_recrawl_on_the_same_redis_keys_starts_with_the_rules_learned(
        redis_server: RedisServer) -> None:
    first, result = _crawl(redis_server.url)
    assert result.finish_reason == "finished", result.stderr[-2000:]
    assert first.missed() == set(), sorted(first.missed())
    client = redis_server.client()
    (rules_key,) = client.keys("*:rules")
    document = json.loads(client.get(rules_key))
    assert document["rules"]["rules"]
    # the same crawl again from the start: queue and seen-set flushed, the rules kept
    again, result = _crawl(redis_server.url, IRI_REDIS_FLUSH_ON_START=True)
    print(f"\nfirst (Redis, level protocol): {first.summary()}\n"
          f"again (same keys, seen-set flushed): {again.summary()}")
    assert result.finish_reason == "finished", result.stderr[-2000:]
    assert again.missed() == set(), sorted(again.missed())
    assert again.ratio() <= 2.0, again.summary()  # stock: 4.00
    _assert_started_with_rules(result.stderr)


@pytest.mark.slow
def test_kill_9_and_resume_on_redis_keep_the_rules_and_lose_nothing(
        redis_server: RedisServer) -> None:
    # short leases: the killed worker's requests go back to the queue quickly
    settings = {**REDIS_PROTOCOL, "IRI_REDIS_URL": redis_server.url,
                "IRI_REDIS_LEASE_SECONDS": 2}
    with MessySite("messy") as site:
        killed: list[bool] = []
        with contextlib.suppress(CrawlError):  # killed: no result written
            run_crawl(settings, site.start_urls, site.proxy_url,
                      started=_kill_after(site, 120, killed))
        assert killed, "the crawl ended before it could be killed"
        client = redis_server.client()
        (skipped_key,) = client.keys("*:skipped")
        kept = client.hlen(skipped_key) - 1  # the marker
        before = site.total_hits()
        result = run_crawl(settings, site.start_urls, site.proxy_url)
        print(f"\nkilled after {before} hits ({kept} skipped requests in Redis); "
              f"in all: {site.summary()}")
        assert result.finish_reason == "finished", result.stderr[-2000:]
        assert site.missed() == set(), sorted(site.missed())
        (rules_key,) = client.keys("*:rules")
        assert json.loads(client.get(rules_key))["rules"]["rules"]
        assert site.ratio() < 4.0, site.summary()  # stock: 4.00 without a kill


@pytest.mark.own
@pytest.mark.slow
def test_two_workers_share_the_rules_and_lose_nothing(redis_server: RedisServer) -> None:
    from concurrent.futures import ThreadPoolExecutor

    # a delay per host: the crawl lasts long enough for both workers to take part
    settings = {**REDIS_PROTOCOL, "IRI_REDIS_URL": redis_server.url,
                "CONCURRENT_REQUESTS": 4, "DOWNLOAD_DELAY": 0.2,
                "RANDOMIZE_DOWNLOAD_DELAY": False}
    with MessySite("messy") as site:
        with ThreadPoolExecutor(2) as pool:
            futures = [pool.submit(run_crawl, settings, site.start_urls, site.proxy_url)
                       for _ in range(2)]
            results = [f.result() for f in futures]
        print(f"\ntwo workers, one Redis, level protocol: {site.summary()}; "
              f"requests each: {[r.stats.get('downloader/request_count') for r in results]}")
        for result in results:
            assert result.finish_reason == "finished", result.stderr[-2000:]
        assert site.missed() == set(), sorted(site.missed())
        # running workers share the queue, the seen-set, revocations, (on each 1 s
        # tick) each other's rules and (at once) each other's pages: 1.17x to 1.21x
        # over 16 runs (1.37x to 1.82x when each worker's content evidence was its
        # own); one worker alone 1.15x, stock 4.00 (test_redis_held_crawl.py)
        # (with the near-duplicate measure: 1.30-1.33 quiet, 1.82 under CI's load)
        assert site.ratio() < 2.5, site.summary()
        assert all(r.stats.get("downloader/request_count") for r in results)
        # each worker merges with rules: its own, adopted from the fleet's document
        # (``.../adopted``), or learned from the fleet's pages (then nothing is new
        # to adopt: adopting is checked by the unit tests above)
        for result in results:
            applied = sum(v for k, v in result.stats.items()
                          if k.startswith("iri/protocol/") and k.endswith("/applied"))
            assert applied, result.stats


@pytest.mark.own
@pytest.mark.slow
def test_on_a_redis_cluster_the_keys_share_the_queue_slot(redis_cluster: Any) -> None:
    """The rules and skipped keys go with the queue's hash tag (one slot, one script)."""
    settings = {"IRI_REDIS_CLUSTER": True}
    first, result = _crawl(redis_cluster.url, **settings)
    assert result.finish_reason == "finished", result.stderr[-2000:]
    assert first.missed() == set(), sorted(first.missed())
    again, result = _crawl(redis_cluster.url, IRI_REDIS_FLUSH_ON_START=True, **settings)
    print(f"\ncluster: first {first.summary()}\ncluster: again {again.summary()}")
    assert result.finish_reason == "finished", result.stderr[-2000:]
    assert again.missed() == set(), sorted(again.missed())
    assert again.ratio() <= 2.0, again.summary()  # stock: 4.00
    _assert_started_with_rules(result.stderr)


def _assert_started_with_rules(log: str) -> None:
    """A recrawl on the same keys starts with the rules read back: 1.14-1.20 hits
    per resource, or up to 1.85 when the first pages compared before the site's
    calibration landed revoked rules (their counterexamples withdrawn once it
    lands, what they held given back meanwhile: the calibration is not kept with
    the rules)."""
    read = re.search(r"IRI protocol: (\d+) learned rule\(s\) and \d+ skipped request\(s\) read",
                     log)
    assert read is not None and int(read[1]) > 0, log[-2000:]
