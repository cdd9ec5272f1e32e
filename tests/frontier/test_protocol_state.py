"""The protocol rung's state as data (:mod:`iri_scrapy.frontier.protocol_state`).

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
from iri_scrapy.frontier.protocol_state import (
    merge_rules_data,
    read_skipped_record,
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
    base, (via, merged, back) = read_skipped_record(codec, text)
    assert (base, via, merged) == ("http://h.test/c", "http://h.test/c", "http://h.test/c/")
    assert back.url == request.url and back.priority == 3
    assert back.meta.get("k") == 1 and "iri_redis_lease" not in back.meta
