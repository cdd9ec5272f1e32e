"""Rules learned from content, canonical links and Clean-param (RFC 3987 section 5.3.4).

Vectors keyed by evidence source: a sequence of observations, then what level
PROTOCOL makes of URLs (merged or left alone).  Content digests are stand-ins
(``D(n)``: the same ``n`` is the same content).  Properties over generated
observation sequences: with a fixed rule set ``apply`` is idempotent; a rule
that saw content differ in its scope is never used again; every URI whose merge
used a rule that stopped changes its key (what ``Learned`` re-queues), and only
those.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iri_scrapy import ProtocolRules, explain
from iri_scrapy.protocol.document import RulesDataError

B, S, E = "http://blog.test", "http://shop.test", "http://events.test"


def D(n: int) -> bytes:  # noqa: N802 - a digest stand-in
    return n.to_bytes(16, "big")


Obs = tuple[str, ...]


def feed(rules: ProtocolRules, events: list[Obs]) -> None:
    for event in events:
        kind = event[0]
        if kind == "page":
            rules.observe_content(event[1], D(int(event[2])))
        elif kind == "canonical":
            rules.observe_canonical(event[1], event[2])
        elif kind == "clean":
            rules.observe_clean_param(event[1], event[2].split("&"), event[3])
        elif kind == "redirect":
            rules.observe_redirect(event[1], event[2], 301)
        else:  # pragma: no cover - a typo in a vector
            raise AssertionError(kind)


def page(uri: str, n: int) -> Obs:
    return ("page", uri, str(n))


REPLY = [page(B + "/p/1/?replytocom=7", 1), page(B + "/p/1/", 1),
         page(B + "/p/2/", 2), page(B + "/p/2/?replytocom=3", 2)]

# (id, observations, URL, what PROTOCOL makes of it)
VECTORS: dict[str, list[tuple[str, list[Obs], str, str]]] = {
    "content": [
        ("two-confirmations-generalize", REPLY, B + "/p/9/?replytocom=1", B + "/p/9/"),
        ("one-confirmation-is-not-enough", REPLY[:2], B + "/p/9/?replytocom=1",
         B + "/p/9/?replytocom=1"),
        ("other-parameters-kept", REPLY, B + "/p/9/?a=1&replytocom=1", B + "/p/9/?a=1"),
        ("other-host-untouched", REPLY, S + "/p/9/?replytocom=1", S + "/p/9/?replytocom=1"),
        ("a-counterexample-revokes-for-good",
         REPLY + [page(B + "/p/3/?replytocom=1", 30), page(B + "/p/3/", 3)]
         + [page(B + f"/p/{i}/?replytocom=1", i) for i in (4, 5, 6)]
         + [page(B + f"/p/{i}/", i) for i in (4, 5, 6)],
         B + "/p/9/?replytocom=1", B + "/p/9/?replytocom=1"),
        ("a-parameter-that-changes-content-never-dropped",
         [page(S + "/list?sort=a", 1), page(S + "/list?sort=b", 2),
          page(S + "/l2?sort=a", 3), page(S + "/l2?sort=b", 4)],
         S + "/list?sort=c", S + "/list?sort=c"),
        ("session-values-differ-same-content",
         [page(S + "/i?id=1&sid=a", 1), page(S + "/i?id=1&sid=b", 1),
          page(S + "/i?id=2&sid=c", 2), page(S + "/i?id=2&sid=d", 2)],
         S + "/i?id=3&sid=z", S + "/i?id=3"),
        ("www-twin", [page("http://www.blog.test/a/", 1), page(B + "/a/", 1),
                      page("http://www.blog.test/b/", 2), page(B + "/b/", 2)],
         "http://www.blog.test/c/", B + "/c/"),
        # the www. twin's links carry a session id the bare host's never do: the twin's
        # own drop-param:sid applies before remove-www moves the URI to the bare host
        ("www-twin-with-its-own-session-ids",
         [page("http://www.blog.test/a/", 1), page(B + "/a/", 1),
          page("http://www.blog.test/b/", 2), page(B + "/b/", 2),
          page("http://www.blog.test/a/?sid=x", 1), page("http://www.blog.test/a/?sid=y", 1),
          page("http://www.blog.test/b/?sid=x", 2), page("http://www.blog.test/b/?sid=z", 2)],
         "http://www.blog.test/c/?sid=q", B + "/c/"),
        ("script-prefix", [page(B + "/index.php/a/", 1), page(B + "/a/", 1),
                           page(B + "/index.php/b/", 2), page(B + "/b/", 2)],
         B + "/index.php/c/", B + "/c/"),
        ("growing-path-trap", [page(E + "/cal/end" + "/next" * i + "/", 5) for i in (1, 2, 3)],
         E + "/cal/end" + "/next" * 9 + "/", E + "/cal/end/next/"),
        ("growing-query-trap",
         [page(E + "/search?" + "&".join(["q=x"] * i), 6) for i in (1, 2, 3)],
         E + "/search?" + "&".join(["q=x"] * 7), E + "/search?q=x"),
        ("unrelated-equal-pages-merge-nothing",
         [page(B + "/a", 1), page(B + "/zzz", 1), page(B + "/b", 2), page(B + "/yyy", 2)],
         B + "/a", B + "/a"),
    ],
    "canonical": [
        ("wrong-canonical-to-home-ignored",
         [page(B + f"/tag/{t}/", t) for t in range(1, 6)]
         + [("canonical", B + f"/tag/{t}/", B + "/") for t in range(1, 6)] + [page(B + "/", 99)],
         B + "/tag/7/", B + "/tag/7/"),
        ("amp-confirmed-by-content",
         [page(B + "/p/1/?amp", 1), ("canonical", B + "/p/1/?amp", B + "/p/1/"), page(B + "/p/1/", 1),
          page(B + "/p/2/?amp", 2), ("canonical", B + "/p/2/?amp", B + "/p/2/"), page(B + "/p/2/", 2)],
         B + "/p/3/?amp", B + "/p/3/"),
        ("canonical-but-content-differs",
         [page(B + "/p/1/?v=2", 10), ("canonical", B + "/p/1/?v=2", B + "/p/1/"), page(B + "/p/1/", 1),
          page(B + "/p/2/?v=2", 2), ("canonical", B + "/p/2/?v=2", B + "/p/2/"), page(B + "/p/2/", 2),
          page(B + "/p/3/?v=2", 3), page(B + "/p/3/", 3)],
         B + "/p/4/?v=2", B + "/p/4/?v=2"),
        ("cross-host-canonical-ignored",
         [page(B + "/g/1/", 1), ("canonical", B + "/g/1/", "http://mirror.test/g/1/"),
          page("http://mirror.test/g/1/", 1)],
         B + "/g/1/", B + "/g/1/"),
    ],
    "clean-param": [
        ("declared-and-confirmed",
         [("clean", S + "/robots.txt", "ref&sid", "/shop/")]
         + [page(S + f"/shop/item?id={i}&ref=l&sid=s{i}", i) for i in (1, 2)]
         + [page(S + f"/shop/item?id={i}", i) for i in (1, 2)],
         S + "/shop/item?id=5&ref=x&sid=q", S + "/shop/item?id=5"),
        ("declared-but-content-differs",
         [("clean", S + "/robots.txt", "ref", "")]
         + [page(S + f"/x?id={i}&ref=l", 10 + i) for i in (1, 2, 3)]
         + [page(S + f"/x?id={i}", i) for i in (1, 2, 3)],
         S + "/x?id=5&ref=x", S + "/x?id=5&ref=x"),
        ("declared-only-is-not-enough",
         [("clean", S + "/robots.txt", "ref&sid", "/shop/")],
         S + "/shop/item?id=5&ref=x", S + "/shop/item?id=5&ref=x"),
    ],
}

CASES = [(f"{source}:{case[0]}", *case[1:]) for source, cases in VECTORS.items() for case in cases]


@pytest.mark.parametrize(("case", "events", "url", "expected"), CASES, ids=[c[0] for c in CASES])
def test_vector(case: str, events: list[Obs], url: str, expected: str) -> None:
    rules = ProtocolRules()
    feed(rules, events)
    assert rules.apply(url) == expected
    assert rules.apply(expected) == expected
    assert rules.apply(rules.apply(url)) == rules.apply(url)


@pytest.mark.parametrize(("case", "events", "url", "expected"), CASES, ids=[c[0] for c in CASES])
def test_vector_survives_export(case: str, events: list[Obs], url: str, expected: str) -> None:
    rules = ProtocolRules()
    feed(rules, events)
    again = ProtocolRules.from_data(json.loads(json.dumps(rules.to_data())))
    assert again.apply(url) == expected


def test_explain_names_the_rule_and_its_evidence() -> None:
    rules = ProtocolRules()
    feed(rules, REPLY)
    text = str(explain(B + "/p/5/?replytocom=1", B + "/p/5/", "protocol", rules=rules))
    assert text.splitlines()[0] == (
        "equivalent at 5.3.4 protocol-based normalization by drop-param:replytocom on "
        "http://blog.test (from content: 2 page(s) with equal content)")


def test_stats_per_source_and_revision() -> None:
    rules = ProtocolRules()
    feed(rules, [("clean", S + "/robots.txt", "sid", "")])
    assert rules.events["clean-param/nominated"] == 1
    feed(rules, [page(S + f"/i?id={i}&sid=a", i) for i in (1, 2)]
         + [page(S + f"/i?id={i}", i) for i in (1, 2)])
    assert rules.events["clean-param/learned"] == 1
    assert rules.revision == 0
    feed(rules, [page(S + "/i?id=3&sid=a", 33), page(S + "/i?id=3", 3)])
    assert rules.events["clean-param/revoked"] == 1
    assert rules.revision == 1


def test_samples_per_rule() -> None:
    rules = ProtocolRules(sample_every=4)
    feed(rules, REPLY)
    _, used = rules.trace(B + "/p/9/?replytocom=1")
    assert used
    assert rules.describe(used[0]).endswith("2 page(s) with equal content)")
    decisions = [rules.skip(used) for _ in range(40)]
    # two confirmations count as the first sample: merges 8, 16, 32 are fetched
    assert [i + 1 for i, skip in enumerate(decisions) if not skip] == [8, 16, 32]
    assert rules.events["content/sampled"] == 3
    assert rules.events["content/applied"] == 37


@pytest.mark.parametrize("bad", [
    None, [], {"v": 2}, {"v": 1, "min_evidence": 0, "exact": [], "away": [], "rules": []},
    {"v": 1, "min_evidence": 2, "exact": [["a", "b"]], "away": [], "rules": []},
    # an exact rule of an unknown kind: accepted before, then every URL of its host
    # raised ValueError mid-crawl
    {"v": 1, "min_evidence": 2, "exact": [["http://h.test/a", "http://h.test/a/",
                                           "http://h.test", "no-such-kind", ""]],
     "away": [], "rules": []},
    {"v": 1, "min_evidence": 2, "exact": [], "away": [1], "rules": []},
    {"v": 1, "min_evidence": 2, "exact": [], "away": [], "rules": [
        {"rule": ["s", "rm -rf", ""], "origin": "content", "confirmed": [], "bad": 0,
         "contrary": 0, "skips": 0}]},
    {"v": 1, "min_evidence": 2, "exact": [], "away": [], "rules": [
        {"rule": ["s", "drop-param", "x"], "origin": "content", "confirmed": [], "bad": -1,
         "contrary": 0, "skips": 0}]},
])
def test_a_document_that_is_not_one_is_refused(bad: Any) -> None:
    with pytest.raises(RulesDataError):
        ProtocolRules.from_data(bad)


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                               max_size=5),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(JSONISH)
def test_any_json_is_read_or_refused_with_a_value_error(data: Any) -> None:
    with contextlib.suppress(RulesDataError):  # anything else fails the test
        ProtocolRules.from_data(data)


# --- properties over generated observation sequences ------------------------------

PATHS = ("/a/", "/b/", "/p/1/", "/p/2/", "/index.php/a/", "/a", "/c/next/", "/c/next/next/")
QUERIES = ("", "?sid=1", "?sid=2", "?id=1&sid=1", "?id=2", "?ref=x&sid=3", "?q=x&q=x", "?q=x")
HOSTS = ("http://h.test", "http://www.h.test", "http://o.test")
URIS = [h + p + q for h in HOSTS for p in PATHS for q in QUERIES]

observation = st.one_of(
    st.tuples(st.just("page"), st.sampled_from(URIS), st.sampled_from("12345")),
    st.tuples(st.just("canonical"), st.sampled_from(URIS), st.sampled_from(URIS)),
    st.tuples(st.just("clean"), st.sampled_from(HOSTS), st.sampled_from(["sid", "ref&sid", "q"]),
              st.sampled_from(["", "/p/", "/a"])),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(observation, max_size=40))
def test_fixed_rules_are_idempotent(events: list[Obs]) -> None:
    rules = ProtocolRules()
    feed(rules, events)
    for uri in URIS:
        once = rules.apply(uri)
        assert rules.apply(once) == once, uri


@settings(max_examples=150, deadline=None)
@given(st.lists(observation, max_size=30), st.lists(observation, max_size=30))
def test_what_a_stopped_rule_merged_changes_key_and_nothing_else(
    first: list[Obs], later: list[Obs]
) -> None:
    """What ``Learned`` re-queues after a revocation is exactly what the stopped
    rules had merged: a URI merged only by rules still in force keeps its key."""
    rules = ProtocolRules()
    feed(rules, first)
    before = {uri: rules.trace(uri) for uri in URIS}
    revision = rules.revision
    feed(rules, later)
    for uri, (merged, used) in before.items():
        if merged == uri:
            continue
        still = all(rule[1:] in rules.host_rules(rule[0] + "/") for rule in used)
        if rules.revision == revision:
            # nothing stopped: every merge holds (rules only get added)
            assert still
        if not still:
            assert rules.apply(uri) != merged or any(
                rules.trace(uri)[1]), (uri, merged, used)


@settings(max_examples=150, deadline=None)
@given(st.lists(observation, max_size=40))
def test_content_that_differs_never_merges(events: list[Obs]) -> None:
    """Two URIs whose observed content differed never share a key (the last content
    seen at each)."""
    rules = ProtocolRules()
    feed(rules, events)
    seen: dict[str, str] = {}
    for event in events:
        if event[0] == "page":
            seen[event[1].split("#")[0]] = event[2]
    keys: dict[str, str] = {}
    for uri, content in seen.items():
        key = rules.apply(uri)
        if key in keys and keys[key] != content:
            other = next(u for u in seen if rules.apply(u) == key and seen[u] != content)
            pytest.fail(f"{uri} ({content}) and {other} ({seen[other]}) both keyed {key}")
        keys.setdefault(key, content)


def test_pending_names_the_rules_a_fetch_would_teach() -> None:
    rules = ProtocolRules()
    reply = (B, "drop-param", "replytocom")
    assert rules.pending(B + "/p/1/?replytocom=5") == []  # no page served yet
    feed(rules, [page(B + "/p/1/", 1)])
    # not nominated yet: the rule a fetch would nominate, its image served once
    assert rules.pending(B + "/p/1/?replytocom=5") == [(reply, B + "/p/1/", 1)]
    assert rules.needed(reply) == 2
    feed(rules, [page(B + "/p/1/?replytocom=7", 1), page(B + "/p/2/", 2)])
    assert rules.needed(reply) == 1
    # /p/1/ confirmed it already: another alias of /p/1/ teaches nothing
    assert rules.pending(B + "/p/1/?replytocom=5") == [(reply, B + "/p/1/", 2)]
    assert rules.pending(B + "/p/2/?replytocom=5") == [(reply, B + "/p/2/", 1)]
    assert rules.pending(B + "/p/3/?replytocom=5") == [(reply, B + "/p/3/", 0)]
    feed(rules, [page(B + "/p/2/?replytocom=3", 2)])
    assert rules.needed(reply) == 0
    assert rules.pending(B + "/p/3/?replytocom=5") == []  # in force: nothing pending


def test_content_refutes_a_rule_before_it_is_nominated() -> None:
    rules = ProtocolRules()
    ref = (S + "", "drop-param", "ref")
    feed(rules, [page(S + "/a/1", 1), page(S + "/a/1?ref=x", 11), page(S + "/a/2", 2)])
    assert rules.events["counterexamples"] == 1
    assert rules.pending(S + "/a/2?ref=y") == []  # never worth a confirmation again
    feed(rules, [page(S + "/a/2?ref=y", 2), page(S + "/a/3", 3), page(S + "/a/3?ref=z", 3)])
    assert rules.apply(S + "/a/4?ref=w") == S + "/a/4?ref=w"
    assert rules.needed(ref) == 2


def test_aliases_alike_in_a_dropped_parameter_do_not_confirm_dropping_it() -> None:
    """Found by the crawl simulation (tests/protocol/test_learned_simulation.py): a
    wrong ``Clean-param: color&sid``; colour variants of two items each served
    twice under other session ids.  Equal content there says nothing about
    ``color`` (both blue), so the rule is never in force; a pair that differs in
    both parameters and serves other content refutes it."""
    shop = "http://shop.test"
    rules = ProtocolRules()
    rules.observe_clean_param(f"{shop}/robots.txt", ["color", "sid"], "/")
    for n in (1, 2):
        for sid in ("a", "b"):
            rules.observe_content(f"{shop}/i?id={n}&sid={sid}&color=blue", D(n))
    # the pairs do confirm dropping sid alone (its value differs); never color
    assert rules.apply(f"{shop}/i?id=3&sid=c&color=red") == f"{shop}/i?id=3&color=red"
    rules.observe_content(f"{shop}/i?id=1&sid=c&color=red", D(11))  # differs in both: refutes
    rules.observe_content(f"{shop}/i?id=2", D(22))
    assert rules.apply(f"{shop}/i?id=2&sid=c&color=red").endswith("&color=red")
