"""The learned rules' answers kept until they learn something (iri_scrapy.protocol.memo).

At level PROTOCOL a request asks the rules for its key from the fingerprinter,
the learner and the dupefilter's log: the rules are applied once per request,
and what is kept never outlives a change of the rules (every method of the
learner empties it).
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from iri_scrapy.protocol.evidence import canonical_from_html
from iri_scrapy.protocol.rules import ProtocolRules
from tests.support import protocol_rules_gen as gen

H = "http://h.test"


def _counting(rules: ProtocolRules) -> list[str]:
    """Count the rule applications of *rules* (calls of its unmemoized trace)."""
    calls: list[str] = []
    inner = rules._trace

    def counted(uri: str):  # type: ignore[no-untyped-def]
        calls.append(uri)
        return inner(uri)

    rules._trace = counted  # type: ignore[method-assign]
    return calls


def test_the_rules_are_applied_once_per_uri_until_they_change() -> None:
    rules = ProtocolRules(min_evidence=2)
    rules.observe_redirect(H + "/b", H + "/b/", 301)
    rules.observe_redirect(H + "/c", H + "/c/", 301)  # add-slash in force
    calls = _counting(rules)
    for _ in range(3):  # the fingerprinter, the learner, the dupefilter's log
        assert rules.apply(H + "/a") == H + "/a/"
        assert rules.trace(H + "/a#x") == (H + "/a/#x", [("http://h.test", "add-slash", "")])
    assert calls == [H + "/a", H + "/a#x"]
    rules.observe_contrary(H + "/a")  # a 2xx at /a: the host rule stops
    assert rules.apply(H + "/a") == H + "/a"
    assert calls[-1] == H + "/a"


def test_no_rule_in_force_applies_nothing() -> None:
    """A site whose only rule is a candidate (not in force) costs no rule application."""
    rules = ProtocolRules(min_evidence=2)
    rules.observe_canonical(H + "/a?s=1", H + "/a")  # nominates drop-param:s
    calls = _counting(rules)
    assert rules.trace(H + "/a?s=2") == (H + "/a?s=2", [])
    assert calls == []


def test_a_method_a_subclass_adds_empties_what_is_kept() -> None:
    """Any method of the learner counts as changing the rules (one added later too)."""

    class Rules(ProtocolRules):
        def teach(self) -> None:
            self._exact[H + "/a"] = (H + "/z", (H, "add-slash", ""))

    rules = Rules()
    rules.observe_redirect(H + "/q", H + "/q/", 301)  # some rule, so that apply works
    assert rules.apply(H + "/a") == H + "/a"
    rules.teach()
    assert rules.apply(H + "/a") == H + "/z"


def test_what_is_kept_is_bounded() -> None:
    rules = ProtocolRules(min_evidence=1)
    rules.observe_redirect(H + "/b", H + "/b/", 301)
    for i in range(9000):
        rules.apply(f"{H}/p{i}")
    assert len(rules._memo) <= 8192


@settings(deadline=None, max_examples=60)
@given(st.lists(st.sampled_from(gen.EVENTS), max_size=12), st.integers(1, 3), st.randoms())
def test_what_is_kept_is_what_the_rules_answer(
    events: list[gen.Event], n: int, rnd: random.Random
) -> None:
    """After each event, every answer equals the one computed afresh (kept answers
    were asked for before the event)."""
    rules = ProtocolRules(min_evidence=n)
    uris = rnd.sample(gen.SPELLINGS, 20)
    for kind, uri, target, status in events:
        for u in uris:
            rules.trace(u)
        if kind == "redirect":
            rules.observe_redirect(uri, target, status)
        else:
            rules.observe_contrary(uri)
        for u in uris:
            assert rules.trace(u) == rules._trace(u)


def test_a_canonical_link_spelled_in_capitals_in_a_non_ascii_head_is_found() -> None:
    """The cheap test for "no canonical link here" compares ASCII case-insensitively,
    as the ``rel`` token is compared."""
    page = ('<html><head><title>Ünïcode — ok</title>'
            '<LINK REL="CANONICAL" HREF="/a"></head><body>x</body></html>')
    assert canonical_from_html(page) == "/a"
    assert canonical_from_html(page.replace("CANONICAL", "canonicalx")) is None
