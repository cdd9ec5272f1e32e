"""The protocol rung's state as data (:mod:`iri_scrapy.protocol.store`).

Over generated rule sets (``tests/support/protocol_rules_gen.py``: rules learned
from random redirects and 2xx responses on a small universe, so that they meet):
the merge of two workers' documents is a document ``from_data`` reads, is
commutative, associative and idempotent (workers converge), loses no evidence
against a rule, and the merged rule set is idempotent and maps no URL to a
spelling either worker saw redirected away from (RFC 3987 section 5.3.4's rung
with a fixed rule set).  The skipped request's record reads back.
"""

from __future__ import annotations

import random

from scrapy import Request

from iri_scrapy import Level, ProtocolRules, normalize
from iri_scrapy.frontier.codec import RequestCodec
from iri_scrapy.protocol.store import (
    merge_rules_data,
    read_skipped_record,
    resume,
    skipped_record,
)
from tests.support.protocol_rules_gen import SPELLINGS, build, random_events, respell

SETS = 300


def _docs(rng: random.Random) -> dict[str, object]:
    return build(random_events(rng)).to_data()


def test_merge_is_a_join_that_keeps_every_counterexample() -> None:
    rng = random.Random(23)
    checked = 0
    for _ in range(SETS):
        a, b, c = _docs(rng), _docs(rng), _docs(rng)
        ab = merge_rules_data(a, b)
        rules = ProtocolRules.from_data(ab)  # a document like any other
        assert ab == merge_rules_data(b, a)
        assert merge_rules_data(ab, ab) == ab
        assert merge_rules_data(ab, c) == merge_rules_data(a, merge_rules_data(b, c))
        merged = {tuple(e["rule"]): e for e in ab["rules"]}
        for doc in (a, b):
            for entry in doc["rules"]:
                mine = merged[tuple(entry["rule"])]
                assert mine["contrary"] >= entry["contrary"]
                assert mine["bad"] >= entry["bad"]
            assert set(doc["away"]) <= set(ab["away"])
        away = set(ab["away"])
        for _ in range(10):
            url = respell(rng, rng.choice(SPELLINGS))
            once = normalize(url, Level.PROTOCOL, rules=rules)
            assert normalize(once, Level.PROTOCOL, rules=rules) == once, (a, b, url)
            # never a spelling some worker saw redirected away from (unless unmoved)
            assert once == normalize(url, Level.SCHEME) or once.split("#")[0] not in away
            checked += 1
    print(f"\n{SETS} merged rule sets, {checked} URLs: idempotent, never redirected away")


def test_the_skipped_record_reads_back() -> None:
    codec = RequestCodec(None)
    request = Request("http://h.test/c", meta={"iri_redis_lease": "x", "k": 1}, priority=3)
    text = skipped_record(codec, "http://h.test/c", "http://h.test/c", "http://h.test/c/",
                          request, drop_meta=("iri_redis_lease",))
    base, (via, merged, back), holder = read_skipped_record(codec, text)
    assert (base, via, merged, holder) == ("http://h.test/c", "http://h.test/c",
                                           "http://h.test/c/", "")
    assert back.url == request.url and back.priority == 3
    assert back.meta.get("k") == 1 and "iri_redis_lease" not in back.meta


def test_resume_gives_back_what_no_longer_merges_past_the_filter_only_if_seen() -> None:
    from iri_scrapy.protocol.learned import Learned

    rules = ProtocolRules()
    for name in ("a", "b"):
        rules.observe_redirect(f"http://h.test/{name}", f"http://h.test/{name}/", 301)
    learned = Learned(None, rules)
    holds = Request("http://h.test/c", meta={"is_start_request": True})
    lost = Request("http://g.test/d", meta={"is_start_request": True})
    own = Request("http://g.test/e/")
    kept = {"http://h.test/c": ("http://h.test/c", "http://h.test/c/", holds),
            "http://g.test/d": ("http://g.test/d", "http://g.test/d/", lost),
            "http://g.test/e/": ("http://g.test/e", "http://g.test/e/", own)}
    again = dict(resume(learned, kept, seen=lambda r: r.url == own.url))
    assert set(again) == {"http://g.test/d", "http://g.test/e/"}
    assert set(learned.skipped) == {"http://h.test/c"}  # its merge holds: still kept
    # its own key is in the seen-set: past the filter, no longer a start request
    assert again["http://g.test/e/"].dont_filter
    # a key not seen: filtered as usual (a redirect it makes is not followed past it)
    assert not again["http://g.test/d"].dont_filter
    assert again["http://g.test/d"].meta.get("is_start_request")
    # without the seen-set's answer, every one passes the filter (nothing lost)
    back = resume(Learned(None, ProtocolRules()), kept)
    assert len(back) == 3 and all(r.dont_filter for _, r in back)
    assert not any(r.meta.get("is_start_request") for _, r in back)
