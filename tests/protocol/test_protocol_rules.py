"""Learned protocol rules (RFC 3987 section 5.3.4): vectors and properties over rule sets.

Issue 23 found the trailing-slash rules not idempotent when a host had an exact
rule and an opposite host-wide rule (``/a -> /a/ -> /a``) and mapping URLs to the
very spelling a server redirected away from.  The vectors are the generator's
minimal reproducers (tests/support/protocol_rules_gen.py), keyed by section; each
runs through every code path of ``normalize``.  The properties hold for any rule
set the generator's events can teach: with a fixed rule set, level PROTOCOL is
idempotent, never splits what level SCHEME (or SYNTAX) merged, and never maps
to a spelling redirected away from.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import iri_scrapy as iri
from iri_scrapy import Level, ProtocolRules
from iri_scrapy.core.ladder import Rung, rungs_applied
from tests.support import protocol_rules_gen as gen
from tests.support.paths import via

H = "http://h.test"


def r(source: str, target: str, status: int = 301) -> gen.Event:
    return ("redirect", H + source, H + target, status)


def served(uri: str) -> gen.Event:
    return ("served", H + uri, "", 200)


ADD_B_C = [r("/b", "/b/"), r("/c", "/c/")]  # two confirmations: host rule add-slash
REMOVE_B_C = [r("/b/", "/b"), r("/c/", "/c")]  # host rule remove-slash

# (id, events in order, URL, its canonical URI at level PROTOCOL, what the old rules did)
VECTORS: dict[str, list[tuple[str, list[gen.Event], str, str, str]]] = {
    "5.3.4": [
        ("exact-remove-beats-host-add", ADD_B_C + [r("/a/", "/a")], "/a", "/a",
         "/a/: redirected away from, and /a/ -> /a: not idempotent"),
        ("exact-remove-learned-before-host-add", [r("/a/", "/a")] + ADD_B_C, "/a/", "/a",
         "/a, then /a -> /a/: not idempotent"),
        ("exact-add-beats-host-remove", REMOVE_B_C + [r("/a", "/a/")], "/a/", "/a/",
         "/a: redirected away from, not idempotent"),
        ("host-remove-one-slash-only", REMOVE_B_C, "/a//", "/a//",
         "/a/, then /a: not idempotent"),
        ("host-remove-not-onto-other-redirect", REMOVE_B_C + [r("/a", "/elsewhere")],
         "/a/", "/a/", "/a: redirected away from (to /elsewhere)"),
        ("host-add-applies", ADD_B_C, "/a?q=1", "/a/?q=1", "/a/?q=1"),
        ("host-add-not-a-file", ADD_B_C, "/f.html", "/f.html", "/f.html"),
        ("latest-wins-source", [r("/a", "/a/"), r("/a/", "/a")], "/a/", "/a",
         "/a/: the later a/ -> a was refused, a/ kept though redirected away from"),
        ("latest-wins-target", [r("/a", "/a/"), r("/a/", "/a")], "/a", "/a",
         "/a/: redirected away from"),
        ("target-later-redirected-away", [r("/a", "/a/"), r("/a/", "/elsewhere")], "/a",
         "/a", "/a/: redirected away from"),
        ("served-revokes-exact", [r("/a", "/a/"), served("/a")], "/a", "/a", "/a/"),
        ("fragment-kept-exact", [r("/a", "/a/")], "/a#top", "/a/#top",
         "/a#top: the exact rule missed a URI with a fragment"),
        ("fragment-kept-host", ADD_B_C + [r("/a/", "/a")], "/a#top", "/a#top",
         "/a/#top: redirected away from"),
        ("temporary-not-learned", [r("/a", "/a/", 302)], "/a", "/a", "/a"),
        # the other kinds (issue 23, evidence source 1), each exact at once, host-wide at 2
        ("https-exact", [("redirect", H + "/a", "https://h.test/a", 301)], "/a",
         "https://h.test/a", "/a"),
        ("https-host", [("redirect", H + p, "https://h.test" + p, 301) for p in ("/a", "/b")],
         "/z?q=1", "https://h.test/z?q=1", "/z?q=1"),
        ("https-then-exact-slash", [("redirect", H + p, "https://h.test" + p, 301)
                                    for p in ("/a", "/b")]
         + [("redirect", "https://h.test/z", "https://h.test/z/", 301)], "/z",
         "https://h.test/z/", "/z"),
        ("remove-www-host", [("redirect", "http://www.h.test" + p, H + p, 301)
                             for p in ("/a", "/b")], "http://www.h.test/z", "/z",
         "http://www.h.test/z"),
        ("add-www-contradicts-remove-www", [("redirect", "http://www.h.test" + p, H + p, 301)
                                            for p in ("/a", "/b")]
         + [("redirect", H + "/c", "http://www.h.test/c", 301)], "http://www.h.test/z",
         "http://www.h.test/z", "http://www.h.test/z"),
        ("drop-param-host", [r("/a?ref=1", "/a"), r("/b?ref=2&p=1", "/b?p=1")],
         "/z?x=1&ref=3", "/z?x=1", "/z?x=1&ref=3"),
        ("drop-param-served-counterexample", [r("/a?ref=1", "/a"), r("/b?ref=2", "/b"),
                                              served("/c?ref=1")], "/z?ref=3", "/z?ref=3",
         "/z?ref=3"),
        ("drop-param-other-name", [r("/a?ref=1", "/a"), r("/b?ref=2", "/b")], "/z?sort=1",
         "/z?sort=1", "/z?sort=1"),
        # a section's slash rule: its posts redirect to their slash, a page at the root
        # is served without one (that refutes the host's rule, not the section's)
        ("add-slash-section", [r("/post/1", "/post/1/"), r("/post/2", "/post/2/"),
                               served("/home")], "/post/9", "/post/9/", "/post/9"),
        ("add-slash-section-not-elsewhere", [r("/post/1", "/post/1/"),
                                             r("/post/2", "/post/2/"), served("/home")],
         "/about", "/about", "/about"),
        ("add-slash-section-refuted-in-it", [r("/post/1", "/post/1/"),
                                             r("/post/2", "/post/2/"), served("/post/x")],
         "/post/9", "/post/9", "/post/9"),
        ("drop-index-host", [r("/x/index.php", "/x/"), r("/index.php", "/")],
         "/y/index.php?q=1", "/y/?q=1", "/y/index.php?q=1"),
        ("drop-index-not-onto-away", [r("/x/index.php", "/x/"), r("/index.php", "/"),
                                      r("/y/", "/y/home")], "/y/index.php", "/y/index.php",
         "/y/index.php"),
    ],
}


def _abs(url: str) -> str:
    return url if "://" in url else H + url


def cases() -> list[Any]:
    return [
        pytest.param(events, _abs(url), _abs(expected), id=f"{section}/{name}")
        for section, rows in VECTORS.items()
        for name, events, url, expected, _old in rows
    ]


@pytest.mark.parametrize(("events", "url", "expected"), cases())
def test_vector(path: str, events: list[gen.Event], url: str, expected: str) -> None:
    rules = gen.build(events)
    out = via(path, url, Level.PROTOCOL, rules=rules)
    assert out == expected
    assert via(path, out, Level.PROTOCOL, rules=rules) == out
    assert gen.violations(rules, gen.redirected_away(events), url) == []
    assert gen.violations(rules, gen.redirected_away(events), url, keep_fragment=False) == []


@pytest.mark.parametrize(("events", "url", "expected"), cases())
def test_vector_iri_form_and_rungs(events: list[gen.Event], url: str, expected: str) -> None:
    rules = gen.build(events)
    readable = iri.normalize(url, "protocol", form="iri", rules=rules)
    assert iri.normalize(readable, "protocol", rules=rules) == expected
    assert (Rung.PROTOCOL in rungs_applied(url, "protocol", rules=rules)) == (url != expected)


def test_latest_wins_and_revocations() -> None:
    rules = ProtocolRules(min_evidence=2)
    assert rules.observe_redirect(H + "/a", H + "/a/", 301)
    assert not rules.observe_redirect(H + "/a", H + "/a/#x", 308)  # known: no new evidence
    assert rules.observe_redirect(H + "/a/", H + "/a", 301)  # the server changed its mind
    assert (len(rules), rules.revoked["add-slash"]) == (1, 1)
    assert rules.redirected_away(H + "/a/#frag") and not rules.redirected_away(H + "/a")
    assert rules.apply(H + "/a/") == rules.apply(H + "/a") == H + "/a"  # still one key
    assert rules.observe_contrary(H + "/a/")  # now served as is: the rule goes
    assert (len(rules), sum(rules.revoked.values())) == (0, 2)
    assert rules.apply(H + "/a/") == H + "/a/"
    assert not rules.observe_contrary(H + "/a/")


def test_a_counterexample_stops_a_host_rule_for_good() -> None:
    rules = gen.build(ADD_B_C)
    assert rules.host_rule(H + "/z") == "add-slash"
    assert rules.observe_redirect(H + "/f.html/", H + "/f.html", 301)  # out of add-slash's scope
    assert rules.host_rule(H + "/z") == "add-slash"
    assert rules.observe_redirect(H + "/a/", H + "/a", 301)  # in its scope: contradicts it
    assert rules.host_rule(H + "/z") is None
    assert rules.observe_redirect(H + "/d", H + "/d/", 301)
    assert rules.host_rule(H + "/z") is None
    assert rules.host_rule("http://other.test/z") is None  # per host


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "2"])
def test_min_evidence_must_be_a_positive_integer(bad: Any) -> None:
    with pytest.raises(ValueError, match="min_evidence must be an integer >= 1"):
        ProtocolRules(min_evidence=bad)


def test_generator_finds_nothing() -> None:
    """A short run of the generator (``python -m tests.support.protocol_rules_gen``
    runs 360,000 checks; the trailing-slash rules before issue 23's fix failed 2,230
    idempotence and 190 away checks of the current generator)."""
    result = gen.run(6_000, seed=5)
    assert result["checks"] == 6_000
    assert {k: result[k] for k in gen.CHECKS} == dict.fromkeys(gen.CHECKS, 0)


# --------------------------------------------------------------------------- properties

events_st = st.lists(
    st.one_of(st.sampled_from(gen.SLASH_EVENTS), st.sampled_from(gen.KIND_EVENTS),
              st.sampled_from(gen.EVENTS)),
    max_size=14,
)


@settings(deadline=None)
@given(events_st, st.integers(1, 3), st.sampled_from(gen.SPELLINGS), st.randoms(), st.booleans())
def test_protocol_level_properties(
    events: list[gen.Event], n: int, uri: str, rnd: random.Random, keep: bool
) -> None:
    """Idempotent, never splits a lower level's merge, never onto a spelling redirected away."""
    rules = gen.build(events, min_evidence=n)
    text = gen.respell(rnd, uri)
    assert gen.violations(rules, gen.redirected_away(events), text, keep_fragment=keep) == []
    outs = {via(p, text, Level.PROTOCOL, rules=rules, keep_fragment=keep)
            for p in ("climb", "fused", "fast")}
    assert len(outs) == 1
    out = outs.pop()
    readable = iri.normalize(text, Level.PROTOCOL, form="iri", rules=rules, keep_fragment=keep)
    assert iri.normalize(readable, Level.PROTOCOL, rules=rules, keep_fragment=keep) == out


@settings(deadline=None)
@given(events_st, st.integers(1, 3), st.randoms())
def test_rule_set_is_one_consistent_map(
    events: list[gen.Event], n: int, rnd: random.Random
) -> None:
    """Every spelling's image is a fixed point, never redirected away from (unless
    unmoved), and one kind of trailing-slash host rule at most is in force (the
    host's and a section's, ``add-slash`` and ``add-slash:/x/``, are one kind)."""
    rules = gen.build(events, min_evidence=n)
    for uri in rnd.sample(gen.SPELLINGS, 30):
        out = rules.apply(uri)
        assert rules.apply(out) == out
        assert out == uri or not rules.redirected_away(out)
    for host in gen.HOSTS:
        slash = sorted({k for k, _ in rules.host_rules(host + "/") if k.endswith("-slash")})
        assert len(slash) <= 1
        assert rules.host_rule(host + "/") == (slash[0] if slash else None)


def test_a_host_slash_rule_and_a_contrary_section_rule_are_neither_used() -> None:
    """``add-slash`` learned for the host and ``remove-slash:/x/`` for a section say
    opposite things below ``/x/``: at most one kind of slash rule is in force (a
    case Hypothesis found once section rules came)."""
    rules = gen.build([("redirect", "http://www.h.test/b", "http://www.h.test/b/", 301),
                       ("redirect", "http://www.h.test/x/index.html/?q=1",
                        "http://www.h.test/x/index.html?q=1", 301)], min_evidence=1)
    assert [k for k, _ in rules.host_rules("http://www.h.test/") if k.endswith("-slash")] == []
    assert rules.apply("http://www.h.test/c") == "http://www.h.test/c"


# --- on the ladder (iri_scrapy.core's rules hook; moved from tests/core/test_ladder.py)


def test_explain_with_protocol_rules() -> None:
    rules = iri.ProtocolRules()
    rules.observe_redirect("http://h.com/data", "http://h.com/data/", 301)
    e = iri.explain("http://h.com/data", "http://h.com/data/", Level.PROTOCOL, rules=rules)
    assert e.rung is Rung.PROTOCOL


def test_protocol_rules_on_the_ladder() -> None:
    rules = iri.ProtocolRules(min_evidence=2)
    assert not rules.observe_redirect("http://h.com/a", "http://h.com/b", 301)  # not a slash
    assert not rules.observe_redirect("http://h.com/a", "http://h.com/a/", 302)  # not permanent
    assert rules.observe_redirect("http://h.com/data", "http://h.com/data/", 301)
    assert iri.normalize("http://H.com/data", Level.PROTOCOL, rules=rules) == "http://h.com/data/"
    # the target itself is unchanged: a rule never maps a target away (no loop)
    assert rules.apply("http://h.com/data/") == "http://h.com/data/"
    # (the opposite redirect, learned later, would win: tests/protocol/test_protocol_rules.py)
    # one observation is not a host rule yet; two are
    assert rules.apply("http://h.com/other") == "http://h.com/other"
    assert rules.observe_redirect("http://h.com/docs", "http://h.com/docs/", 308)
    assert rules.apply("http://h.com/other?x=1") == "http://h.com/other/?x=1"
    assert rules.apply("http://h.com/file.html") == "http://h.com/file.html"  # looks like a file
    assert rules.apply("http://other.com/x") == "http://other.com/x"  # per host
    # a page served without the slash is contrary evidence: the host rule stops
    rules.observe_contrary("http://h.com/plain")
    assert rules.apply("http://h.com/other") == "http://h.com/other"
    assert rules.apply("http://h.com/data") == "http://h.com/data/"  # exact pairs stay
    assert iri.normalize("http://h.com/data", Level.SCHEME, rules=rules) == "http://h.com/data"


# --- query parameter names holding "@" (Roundup's @sort, @startwith...) ------------

ROUNDUP = "http://tracker.test/issue"


@pytest.mark.parametrize(
    ("param", "expected"),
    [
        ("sid", ("sid", "")),
        ("a&b@/shop", ("a&b", "/shop")),
        ("a@*x", ("a", "*x")),
        ("@startwith", ("@startwith", "")),
        ("@sort&@startwith@/issue", ("@sort&@startwith", "/issue")),
        ("a@b@/p", ("a@b", "/p")),
    ],
)
def test_drop_param_names_may_hold_an_at_sign(param: str, expected: tuple[str, str]) -> None:
    from iri_scrapy.protocol.transforms import param_parts

    assert param_parts(param) == expected


def test_a_parameter_named_with_an_at_sign_can_be_dropped() -> None:
    from iri_scrapy.protocol.transforms import (
        DROP_PARAM,
        classify,
        split_uri,
        vary,
        without_params,
    )

    parts = split_uri(f"{ROUNDUP}?a=1&@startwith=50")
    assert parts is not None
    assert without_params(parts, "@startwith") == split_uri(f"{ROUNDUP}?a=1")
    assert classify(f"{ROUNDUP}?a=1&@s=", f"{ROUNDUP}?a=1") == (
        "http://tracker.test", DROP_PARAM, "@s")
    rule = ("http://tracker.test", DROP_PARAM, "@startwith")
    assert vary(rule, f"{ROUNDUP}?@startwith=0", f"{ROUNDUP}?@startwith=50")
    # a name that would read as a Clean-param prefix is never a rule's name
    assert classify(f"{ROUNDUP}?a=1&x@/y=2", f"{ROUNDUP}?a=1") is None


def test_a_rule_dropping_several_parameters_is_confirmed_only_where_each_was_there() -> None:
    """``drop-param:color&ref`` (a colour variant declaring the standard item canonical)
    is not confirmed by pages that only had ``ref``: it would merge the colour
    variants, whose content no fetch compared (a recrawl starting with such rules
    lost the standard item behind its blue variant).  ``drop-param:ref`` is."""
    from iri_scrapy.protocol.rules import ProtocolRules

    s = "http://shop.test"
    rules = ProtocolRules()
    assert rules.observe_canonical(f"{s}/i?id=2&color=blue&ref=l1", f"{s}/i?id=2")
    for n in (1, 3, 4):
        rules.observe_content(f"{s}/i?id={n}", bytes([n]) * 16)
        rules.observe_content(f"{s}/i?id={n}&ref=l{n}", bytes([n]) * 16)
    assert rules.apply(f"{s}/i?id=5&ref=l2") == f"{s}/i?id=5"  # drop-param:ref
    assert rules.apply(f"{s}/i?id=2&color=blue") == f"{s}/i?id=2&color=blue"
    assert rules.apply(f"{s}/i?id=2&color=blue&ref=l1") == f"{s}/i?id=2&color=blue"


def test_a_parameter_dropped_at_one_value_only_is_that_pair_not_the_parameter() -> None:
    """A report with its default sort spelled out (``?sort=id``) serves the page
    without it, on every table: that says nothing of ``?sort=title``, the same rows
    in another order (two workers of a fleet, fetching in another order than one,
    merged and lost eight sorted tables under ``drop-param:sort`` so confirmed).
    The pair is what the pages showed (``drop-pair:sort=id``); the parameter takes
    two values the same as without."""
    s = "http://app.test"
    rules = ProtocolRules()
    for n in (1, 2, 3):
        rules.observe_content(f"{s}/rank?t={n}", bytes([n]) * 16)
        rules.observe_content(f"{s}/rank?t={n}&sort=id", bytes([n]) * 16)
    assert rules.apply(f"{s}/rank?t=4&sort=id") == f"{s}/rank?t=4"
    assert rules.apply(f"{s}/rank?t=4&sort=title") == f"{s}/rank?t=4&sort=title"
    assert [k for k, _ in rules.host_rules(s + "/")] == ["drop-pair"]
    data = rules.to_data()
    (entry,) = [e for e in data["rules"] if e["rule"][1:] == ["drop-param", "sort"]]
    assert entry["values"] == ["sort=id"] and len(entry["confirmed"]) == 3
    back = ProtocolRules.from_data(data)  # (kept across a resume, and in a fleet)
    assert back.apply(f"{s}/rank?t=4&sort=title") == f"{s}/rank?t=4&sort=title"
    other = ProtocolRules()  # another worker saw another value the same
    for n in (5, 6):
        other.observe_content(f"{s}/rank?t={n}", bytes([n]) * 16)
        other.observe_content(f"{s}/rank?t={n}&sort=asc", bytes([n]) * 16)
    merged = ProtocolRules.merge_data(data, other.to_data())
    (entry,) = [e for e in merged["rules"] if e["rule"][1:] == ["drop-param", "sort"]]
    assert entry["values"] == ["sort=asc", "sort=id"]
    assert ProtocolRules.from_data(merged).apply(f"{s}/rank?t=4&sort=x") == f"{s}/rank?t=4"
    # one worker alone: a second value makes the parameter droppable
    rules.observe_content(f"{s}/rank?t=7", bytes([7]) * 16)
    rules.observe_content(f"{s}/rank?t=7&sort=size", bytes([7]) * 16)
    assert rules.apply(f"{s}/rank?t=4&sort=title") == f"{s}/rank?t=4"
    with pytest.raises(ValueError, match="values"):
        ProtocolRules.from_data({**data, "rules": [{**entry, "values": [1]}]})
