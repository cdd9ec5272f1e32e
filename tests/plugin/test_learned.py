"""What learned rules skipped is given back, exactly, when a rule is revoked (5.3.4).

The dupefilter at level ``protocol`` with real Scrapy requests: a request dropped
only because a learned rule merged it is kept by :class:`Learned`; after a
counterexample revokes that rule, :meth:`Learned.changed` gives back exactly the
requests it had merged (the same objects), and none merged by a rule still in
force.  Samples: one alias in ``IRI_PROTOCOL_SAMPLE_EVERY`` (K, 2K, 4K...) per rule
is let through, marked ``meta["iri_protocol_sample"]``; an alias met twice is
counted once.
"""

from __future__ import annotations

from scrapy import Request

from iri_scrapy.core.ladder import Level
from iri_scrapy.core.protocol import ProtocolRules
from iri_scrapy.plugin.config import META_SAMPLE, IRIConfig
from iri_scrapy.plugin.dupefilter import IRIDupeFilter

B = "http://blog.test"


def D(n: int) -> bytes:  # noqa: N802 - a digest stand-in
    return n.to_bytes(16, "big")


def learned_filter(sample_every: int = 10) -> tuple[ProtocolRules, IRIDupeFilter]:
    rules = ProtocolRules(sample_every=sample_every)
    for n in (1, 2):  # two confirmations each: drop replytocom, drop utm_source
        rules.observe_content(f"{B}/p/{n}/", D(n))
        rules.observe_content(f"{B}/p/{n}/?replytocom=9", D(n))
        rules.observe_content(f"{B}/p/{n}/?utm_source=x", D(n))
    assert [kind for kind, _ in rules.host_rules(B + "/")] == ["drop-param", "drop-param"]
    df = IRIDupeFilter(config=IRIConfig(level=Level.PROTOCOL), rules=rules)
    return rules, df


def test_a_revoked_rule_gives_back_exactly_what_it_skipped() -> None:
    rules, df = learned_filter()
    assert df.learned is not None
    assert not df.request_seen(Request(f"{B}/p/5/"))
    replies = [Request(f"{B}/p/5/?replytocom={i}") for i in range(1, 6)]
    utms = [Request(f"{B}/p/5/?utm_source={i}") for i in range(1, 4)]
    assert all(df.request_seen(r) for r in replies + utms)
    assert len(df.learned.skipped) == 8
    assert df.learned.changed() == []  # nothing stopped
    # the content of /p/3/ differs with ?replytocom: that rule is wrong, for good
    rules.observe_content(f"{B}/p/3/", D(3))
    rules.observe_content(f"{B}/p/3/?replytocom=1", D(33))
    assert [param for _, param in rules.host_rules(B + "/")] == ["utm_source"]
    back = df.learned.changed()
    assert sorted(r.url for r in back) == sorted(r.url for r in replies)
    assert all(any(b is r for r in replies) for b in back)  # the very requests
    assert len(df.learned.skipped) == 3  # the utm_source ones stay kept
    # given back, they pass the dupefilter now (their keys were never seen)
    assert not any(df.request_seen(r) for r in back)


def test_samples_per_rule_each_alias_once() -> None:
    rules, df = learned_filter(sample_every=3)
    assert not df.request_seen(Request(f"{B}/p/7/"))
    verdicts = []
    for i in range(1, 13):
        request = Request(f"{B}/p/7/?replytocom={i}")
        verdicts.append((df.request_seen(request), bool(request.meta.get(META_SAMPLE))))
    # merges 3, 6, 12 of the rule are fetched as samples (K, 2K, 4K)
    assert [i + 1 for i, (seen, _) in enumerate(verdicts) if not seen] == [3, 6, 12]
    assert all(sample for seen, sample in verdicts if not seen)
    # an alias met again is a plain duplicate: counted once
    assert df.request_seen(Request(f"{B}/p/7/?replytocom=1"))
    assert df.request_seen(Request(f"{B}/p/7/?replytocom=3"))
    assert rules.events["content/sampled"] == 3
