"""The rule kinds of the aliases web applications make: vectors, load checks, hostile input.

``query-form:TOKENS@PATH`` (one path's query in a normal form: ``order``,
``empty``, ``%XX`` reserved characters decoded), ``drop-pair:NAME=VALUE`` (a
pair at its default value) and ``alias-path:FROM>TO`` (a section served at an
ancestor path): what each makes of a URI (tables keyed by kind), which rules two
URIs with equal content nominate, which parameters a rules document may hold,
their life cycle in :class:`ProtocolRules` (nominated, confirmed, refuted for
good), and input a server or a file controls handled in linear time.
"""

from __future__ import annotations

import random
import time

import pytest

from iri_scrapy.protocol.document import RulesDataError
from iri_scrapy.protocol.rulebook import RuleBook
from iri_scrapy.protocol.rules import ProtocolRules
from iri_scrapy.protocol.transforms import (
    ALIAS_PATH,
    DROP_PAIR,
    QUERY_FORM,
    form_spec,
    pair_rules,
    query_form,
    valid_param,
)

H = "http://app.test"

#: kind -> (URI, the rule's parameter, what the rule alone makes of the URI)
VECTORS: dict[str, list[tuple[str, str, str]]] = {
    QUERY_FORM: [
        (f"{H}/s?b=1&a=2", "order@/s", f"{H}/s?a=2&b=1"),
        (f"{H}/s?b=1&a=2&a=1", "order@/s", f"{H}/s?a=2&a=1&b=1"),  # one name keeps its order
        (f"{H}/s?a=1&q=&b=", "empty@/s", f"{H}/s?a=1"),
        (f"{H}/s?q=&b=", "empty@/s", f"{H}/s"),
        (f"{H}/s?a=1&&b=2&", "empty@/s", f"{H}/s?a=1&b=2"),
        (f"{H}/s?amp&a=1", "empty@/s", f"{H}/s?amp&a=1"),  # a bare name is a flag, kept
        (f"{H}/s?a==&b=1", "empty@/s", f"{H}/s?a==&b=1"),  # a value "=" is not empty
        (f"{H}/s?c=id%2Ctitle", "%2C@/s", f"{H}/s?c=id,title"),
        (f"{H}/s?c=id%2ctitle", "%2C@/s", f"{H}/s?c=id,title"),
        (f"{H}/s?c=id%2Ctitle%3Ax", "%2C@/s", f"{H}/s?c=id,title%3Ax"),  # only what was shown
        (f"{H}/s?c=a%26b", "%2C@/s", f"{H}/s?c=a%26b"),
        (f"{H}/s?@sort=x&@columns=id%2Cb&@search_text=", "empty+order+%2C@/s",
         f"{H}/s?@columns=id,b&@sort=x"),
        (f"{H}/t?b=1&a=2", "order@/s", f"{H}/t?b=1&a=2"),  # another path
        (f"{H}/s/?b=1&a=2", "order@/s", f"{H}/s/?b=1&a=2"),
        (f"{H}/s", "order@/s", f"{H}/s"),
        (f"{H}/s?a=1&b=2", "order@/s", f"{H}/s?a=1&b=2"),  # already in form
    ],
    DROP_PAIR: [
        (f"{H}/wiki/X?format=txt&version=1", "version=1", f"{H}/wiki/X?format=txt"),
        (f"{H}/wiki/X?version=1", "version=1", f"{H}/wiki/X"),
        (f"{H}/wiki/X?version=1&version=1", "version=1", f"{H}/wiki/X"),
        (f"{H}/wiki/X?version=2", "version=1", f"{H}/wiki/X?version=2"),
        (f"{H}/wiki/X?version=10", "version=1", f"{H}/wiki/X?version=10"),
        (f"{H}/p/1/?amp", "amp", f"{H}/p/1/"),  # a flag: the pair with no value
        (f"{H}/p/1/?amp=1", "amp", f"{H}/p/1/?amp=1"),
        (f"{H}/wiki/X?xversion=1", "version=1", f"{H}/wiki/X?xversion=1"),
        (f"{H}/q?order=priority&status=new", "order=priority", f"{H}/q?status=new"),
        (f"{H}/q?a=", "a=", f"{H}/q"),
    ],
    ALIAS_PATH: [
        (f"{H}/wiki/WikiStart", "/wiki/WikiStart>/wiki", f"{H}/wiki"),
        (f"{H}/wiki/WikiStart?action=history", "/wiki/WikiStart>/wiki",
         f"{H}/wiki?action=history"),
        (f"{H}/wiki/WikiStart/", "/wiki/WikiStart>/wiki", f"{H}/wiki/WikiStart/"),
        (f"{H}/wiki/WikiStartX", "/wiki/WikiStart>/wiki", f"{H}/wiki/WikiStartX"),
        (f"{H}/wiki/WikiStart/x", "/wiki/WikiStart>/wiki", f"{H}/wiki/WikiStart/x"),
        (f"{H}/wiki", "/wiki>/", f"{H}/"),
    ],
}


def _cases() -> list[tuple[str, str, str, str]]:
    return [(kind, uri, param, out) for kind, rows in VECTORS.items()
            for uri, param, out in rows]


@pytest.mark.parametrize(("kind", "uri", "param", "expected"), _cases())
def test_vector(kind: str, uri: str, param: str, expected: str) -> None:
    assert valid_param(kind, param)
    assert RuleBook().step_image((H, kind, param), uri) == expected


#: (one URI, another with equal content, the rules of these kinds they nominate)
PAIRS: list[tuple[str, str, set[tuple[str, str]]]] = [
    (f"{H}/s?b=1&a=2", f"{H}/s?a=2&b=1", {(QUERY_FORM, "order@/s")}),
    (f"{H}/s?a=1&q=", f"{H}/s?a=1", {(QUERY_FORM, "empty@/s"), (DROP_PAIR, "q=")}),
    (f"{H}/s?c=a%2Cb", f"{H}/s?c=a,b", {(QUERY_FORM, "%2C@/s")}),
    (f"{H}/rt/issue?@sort=x&@columns=id%2Cb&@search_text=&s=1",
     f"{H}/rt/issue?s=1&@columns=id,b&@sort=x", {(QUERY_FORM, "empty+order+%2C@/rt/issue")}),
    (f"{H}/s?c=a%2Cb", f"{H}/s?c=a;b", set()),  # not one decoding
    (f"{H}/s?a=1&b=2", f"{H}/s?a=2&b=1", set()),  # values swapped: no normal form
    (f"{H}/w/X?format=txt&version=1", f"{H}/w/X?format=txt", {(DROP_PAIR, "version=1")}),
    (f"{H}/w/X?version=1&format=txt", f"{H}/w/X?format=txt", {(DROP_PAIR, "version=1")}),
    (f"{H}/w/X?format=txt&version=1", f"{H}/w/X?version=1", {(DROP_PAIR, "format=txt")}),
    (f"{H}/wiki/WikiStart", f"{H}/wiki", {(ALIAS_PATH, "/wiki/WikiStart>/wiki")}),
    (f"{H}/", f"{H}/wiki/WikiStart", {(ALIAS_PATH, "/wiki/WikiStart>/")}),
    (f"{H}/a?x=1", f"{H}/a/b?x=1", {(ALIAS_PATH, "/a/b>/a")}),
    (f"{H}/a?x=1", f"{H}/a/b?x=2", set()),  # another query
    (f"{H}/ticket/1", f"{H}/ticket/2", set()),  # siblings are never one
    (f"{H}/ab", f"{H}/a", set()),  # not an ancestor: a segment is whole
    (f"{H}/a", f"{H}/a/", set()),  # a trailing slash is its own kind
    (f"{H}/a", "http://other.test/a", set()),
]


@pytest.mark.parametrize(("a", "b", "expected"), PAIRS)
def test_equal_content_nominates(a: str, b: str, expected: set[tuple[str, str]]) -> None:
    kinds = (QUERY_FORM, DROP_PAIR, ALIAS_PATH)
    for x, y in ((a, b), (b, a)):
        assert {(k, p) for _, k, p in pair_rules(x, y) if k in kinds} == expected


@pytest.mark.parametrize(("qa", "qb", "spec"), [
    ("b=1&a=2", "a=2&b=1", "order"),
    ("a=1&b=", "a=1", "empty"),
    ("c=a%2Cb", "c=a,b", "%2C"),
    ("c=a%2Cb&z=", "c=a,b", "empty+%2C"),
    ("c=a%2Cb&d=%3A", "d=%3A&c=a,b", "order+%2C"),
    ("a=1", "a=1", None),
    ("a=1", "a=2", None),
    ("c=a%26b", "c=a&b", None),  # never decodes what cuts the query
])
def test_form_spec_is_the_fewest_tokens(qa: str, qb: str, spec: str | None) -> None:
    assert form_spec(qa, qb) == spec
    if spec is not None:
        assert query_form(qa, spec.split("+")) == query_form(qb, spec.split("+"))


@pytest.mark.parametrize(("kind", "param"), [
    (QUERY_FORM, "order"),  # no path
    (QUERY_FORM, "@/s"),  # no token
    (QUERY_FORM, "sort@/s"),
    (QUERY_FORM, "%26@/s"),  # '&' cuts the query
    (QUERY_FORM, "%3D@/s"),
    (QUERY_FORM, "%23@/s"),
    (QUERY_FORM, "order+order@/s"),
    (QUERY_FORM, "order@s"),
    (QUERY_FORM, "order@/s?x"),
    (DROP_PAIR, "=1"),
    (DROP_PAIR, "a&b=1"),
    (DROP_PAIR, "a=1#x"),
    (ALIAS_PATH, "/a"),
    (ALIAS_PATH, "/a>/a"),
    (ALIAS_PATH, "/a>b"),
    (ALIAS_PATH, "/a>/b>/c"),
    (ALIAS_PATH, "/a?x>/b"),
    (QUERY_FORM, "order@/" + "a" * 5000),
])
def test_a_rules_document_with_a_bad_parameter_is_refused_whole(kind: str, param: str) -> None:
    assert not valid_param(kind, param)
    good = {"rule": [H, DROP_PAIR, "v=1"], "origin": "content", "confirmed": [],
            "bad": 0, "contrary": 0, "skips": 0}
    data = {"v": 1, "min_evidence": 2, "exact": [], "away": [],
            "rules": [good, {**good, "rule": [H, kind, param]}]}
    with pytest.raises(RulesDataError, match="not a parameter of its kind"):
        ProtocolRules.from_data(data)
    assert ProtocolRules.from_data({**data, "rules": [good]}).to_data()["rules"][0] == good


def _observe(rules: ProtocolRules, pages: list[tuple[str, int]]) -> None:
    for uri, n in pages:
        rules.observe_content(uri, n.to_bytes(16, "big"))


@pytest.mark.parametrize(("kind", "param", "one", "two", "alias", "key", "wrong"), [
    (QUERY_FORM, "empty+order+%2C@/s",
     [(f"{H}/s?p=1&c=a,b", 1), (f"{H}/s?c=a%2Cb&x=&p=1", 1)],
     [(f"{H}/s?p=2&c=a,b", 2), (f"{H}/s?c=a%2Cb&x=&p=2", 2)],
     f"{H}/s?c=a%2Cb&p=7", f"{H}/s?c=a,b&p=7",
     [(f"{H}/s?p=3&c=a,b", 3), (f"{H}/s?c=a%2Cb&x=&p=3", 33)]),
    (DROP_PAIR, "view=full",  # ?view=short first: drop-param:view is refuted
     [(f"{H}/i/1?view=short", 11), (f"{H}/i/1", 1), (f"{H}/i/1?view=full", 1)],
     [(f"{H}/i/2", 2), (f"{H}/i/2?view=full", 2)],
     f"{H}/i/7?view=full", f"{H}/i/7",
     [(f"{H}/i/3", 3), (f"{H}/i/3?view=full", 33)]),
    (ALIAS_PATH, "/docs/Start>/docs",
     [(f"{H}/docs?page=1", 1), (f"{H}/docs/Start?page=1", 1)],
     [(f"{H}/docs?page=2", 2), (f"{H}/docs/Start?page=2", 2)],
     f"{H}/docs/Start?page=7", f"{H}/docs?page=7",
     [(f"{H}/docs?page=3", 3), (f"{H}/docs/Start?page=3", 33)]),
])
def test_life_cycle(kind: str, param: str, one: list[tuple[str, int]],
                    two: list[tuple[str, int]], alias: str, key: str,
                    wrong: list[tuple[str, int]]) -> None:
    """Nominated by equal content, in force after two confirmations (distinct
    images), kept in the rules document, and refuted for good by one counterexample."""
    rules = ProtocolRules()
    _observe(rules, one)
    assert rules.apply(alias) == alias  # one confirmation: not yet
    _observe(rules, two)
    assert (kind, param) in rules.host_rules(H + "/")
    assert rules.apply(alias) == key
    assert rules.apply(rules.apply(alias)) == rules.apply(alias)
    loaded = ProtocolRules.from_data(rules.to_data())
    assert loaded.apply(alias) == key
    revision = rules.revision
    _observe(rules, wrong)
    assert (kind, param) not in rules.host_rules(H + "/")
    assert rules.apply(alias) == alias and rules.revision > revision
    _observe(rules, [(u.replace("1", "8"), n + 100) for u, n in one]
             + [(u.replace("2", "9"), n + 100) for u, n in two])
    assert (kind, param) not in rules.host_rules(H + "/")  # for good


def test_drop_pair_waits_while_the_parameter_whatever_its_value_stands() -> None:
    """Equal content with and without ``view=full`` nominates ``drop-param:view``
    alone; once another value shows the parameter matters, ``drop-pair:view=full``."""
    rules = ProtocolRules()
    _observe(rules, [(f"{H}/i/1", 1), (f"{H}/i/1?view=full", 1)])
    kinds = {tuple(e["rule"][1:]) for e in rules.to_data()["rules"]}
    assert kinds == {("drop-param", "view")}
    _observe(rules, [(f"{H}/i/1?view=short", 11), (f"{H}/i/2", 2), (f"{H}/i/2?view=full", 2)])
    kinds = {tuple(e["rule"][1:]) for e in rules.to_data()["rules"]}
    assert ("drop-pair", "view=full") in kinds


def test_apply_is_idempotent_with_every_kind_in_force() -> None:
    rules = ProtocolRules(min_evidence=1)
    _observe(rules, [(f"{H}/s?b=1&a=%2C", 1), (f"{H}/s?a=,&b=1", 1),
                     (f"{H}/s?q=&z=1", 2), (f"{H}/s?z=1", 2),
                     (f"{H}/s?v=2&k=1", 9), (f"{H}/s?v=1&k=1", 3), (f"{H}/s?k=1", 3),
                     (f"{H}/s/x?k=5", 4), (f"{H}/s?k=5", 4)])
    assert {k for k, _ in rules.host_rules(H + "/")} >= {QUERY_FORM, DROP_PAIR, ALIAS_PATH}
    rng = random.Random(30)
    pairs = ["a=1", "a=%2C", "a=,", "b=1", "q=", "v=1", "k=1", "z=1", "", "c=%3A"]
    for _ in range(2000):
        path = rng.choice(["/s", "/s/x", "/t"])
        query = "&".join(rng.choice(pairs) for _ in range(rng.randrange(0, 6)))
        uri = f"{H}{path}?{query}" if query or rng.random() < 0.5 else f"{H}{path}"
        once = rules.apply(uri)
        assert rules.apply(once) == once, uri


@pytest.mark.slow
def test_hostile_input_is_linear() -> None:
    """Queries and paths a server controls, and parameters a file controls, cost
    time linear in their length: no pattern, so no backtracking to provoke (8x
    the input: about 8x the time; a quadratic cost would be 64x)."""
    def cost(n: int) -> float:
        rules = ProtocolRules(min_evidence=1)
        _observe(rules, [(f"{H}/s?b=1&a=%2C&x=", 1), (f"{H}/s?a=,&b=1", 1),
                         (f"{H}/s/x?k=5", 4), (f"{H}/s?k=5", 4)])
        query = "&".join(["a=%2C%2c%2C" * 3, "x=", "b=" + "%2C" * 20, "=" * 5] * n)
        long = f"{H}/s?{query}"
        best = float("inf")
        for _ in range(3):
            began = time.perf_counter()
            rules.apply(long)
            rules.observe_content(long, b"\x07" * 16)
            rules.observe_content(long.replace("x=&", "x=&y=&", 1), b"\x07" * 16)
            form_spec(query, query[::-1])
            valid_param(QUERY_FORM, "+".join(["order"] * n) + "@/s")
            valid_param(ALIAS_PATH, "/a" * n + ">/a")
            best = min(best, time.perf_counter() - began)
        return best
    small, big = cost(200), cost(1600)
    assert big < 5.0, big
    assert big < 30 * max(small, 1e-3), (small, big)
