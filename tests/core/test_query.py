"""The query and fragment toolkit (RFC 3986 sections 3.4 and 3.5): vectors keyed by section
and behaviour, the glob matcher against :func:`fnmatch.fnmatchcase`, and hostile patterns.

The hostile vectors are the protocol issue's: ``Clean-param: sid /*a*a*a*a*a*a*a*a*b``
(a line of robots.txt) against a 60-character path of ``a`` took a
backtracking regex about 10x longer per ``*a``; here the matcher's work is counted
(steps of its scans), so the test says "linear" without timing anything.
"""

from __future__ import annotations

import fnmatch
import re
import subprocess
import sys

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from iri_scrapy.core import query as q
from iri_scrapy.core.query import (
    Glob,
    NameGlobs,
    drop_params,
    glob_match,
    in_clean_param_scope,
    join_query,
    param_name,
    query_pairs,
    rewrite_query,
    sort_params,
    split_fragment,
    split_query,
    strip_fragment,
)

# --------------------------------------------------------------------------- vectors

# section -> [(id, input, expected)]
FRAGMENT: dict[str, list[tuple[str, str, tuple[str, str]]]] = {
    "3.5 fragment": [
        ("none", "http://h/p?q", ("http://h/p?q", "")),
        ("plain", "http://h/p#f", ("http://h/p", "#f")),
        ("empty", "http://h/p#", ("http://h/p", "#")),
        ("first-hash", "http://h/p#a#b", ("http://h/p", "#a#b")),
        ("query-kept", "http://h/p?x=1#f?y", ("http://h/p?x=1", "#f?y")),
        ("only", "#f", ("", "#f")),
        ("empty-string", "", ("", "")),
    ],
}

QUERY: dict[str, list[tuple[str, str, tuple[str, str, str]]]] = {
    "3.4 query": [
        ("none", "http://h/p", ("http://h/p", "", "")),
        ("empty", "http://h/p?", ("http://h/p", "?", "")),
        ("first-question-mark", "http://h/p?a=?b", ("http://h/p", "?", "a=?b")),
        ("pairs", "http://h/?a=1&b", ("http://h/", "?", "a=1&b")),
    ],
}

PAIRS: list[tuple[str, list[str], list[str]]] = [
    # (query, pairs, names)
    ("", [""], [""]),
    ("a=1&b=2", ["a=1", "b=2"], ["a", "b"]),
    ("a&&b=", ["a", "", "b="], ["a", "", "b"]),
    ("a=b=c", ["a=b=c"], ["a"]),
    ("=v", ["=v"], [""]),
]

# behaviour -> [(id, uri, drop_query_params, sort_query, expected)]
REWRITE: dict[str, list[tuple[str, str, tuple[str, ...], bool, str]]] = {
    "off": [
        ("nothing-asked", "http://h/?b&a", (), False, "http://h/?b&a"),
        ("no-query", "http://h/p#f", ("*",), True, "http://h/p#f"),
    ],
    "drop": [
        ("glob", "http://e.com/?utm_source=x&id=3", ("utm_*",), False, "http://e.com/?id=3"),
        ("exact", "http://e.com/p?ref=1", ("utm_*", "ref"), False, "http://e.com/p"),
        ("every-occurrence", "http://h/?a=1&b&a=2", ("a",), False, "http://h/?b"),
        ("case-sensitive", "http://h/?UTM_X=1&utm_x=2", ("utm_*",), False, "http://h/?UTM_X=1"),
        ("question-mark", "http://h/?ab=1&abc=2", ("a?",), False, "http://h/?abc=2"),
        ("class", "http://h/?s1&s2&sx", ("s[0-9]",), False, "http://h/?sx"),
        ("negated-class", "http://h/?s1&s2&sx", ("s[!0-9]",), False, "http://h/?s1&s2"),
        ("all-gone-question-mark-too", "http://h/p?a=1#f", ("*",), False, "http://h/p#f"),
        ("empty-query-star", "http://h/p?", ("*",), False, "http://h/p"),
        ("empty-query-kept", "http://h/p?", ("x",), False, "http://h/p?"),
        ("name-is-before-first-equals", "http://h/?a=b=c", ("b",), False, "http://h/?a=b=c"),
        ("fragment-never-read", "http://h/?a#a=1", ("a",), False, "http://h/#a=1"),
    ],
    "sort": [
        ("pairs", "http://h/?b=1&a=2&a=1", (), True, "http://h/?a=1&a=2&b=1"),
        ("code-point-order", "http://h/?b&B&a=&a", (), True, "http://h/?B&a&a=&b"),
        ("fragment-kept", "http://h/?b&a#z", (), True, "http://h/?a&b#z"),
    ],
    "drop-then-sort": [
        ("both", "http://h/?z&utm_a=1&b", ("utm_*",), True, "http://h/?b&z"),
    ],
}

# behaviour -> [(id, prefix, path, in scope)]
CLEAN_PARAM_SCOPE: dict[str, list[tuple[str, str, str, bool]]] = {
    "no-path-given": [
        ("empty", "", "", True), ("slash", "/", "/any", True), ("slash-empty-path", "/", "", True),
    ],
    "prefix": [
        ("starts", "/forum/", "/forum/a", True), ("exact", "/forum", "/forum", True),
        ("other", "/forum", "/foru", False), ("case-sensitive", "/Forum", "/forum", False),
    ],
    "star": [
        ("yandex-doc", "/forum*/showthread.php", "/forum12/showthread.php?x", True),
        ("empty-star", "/forum*/showthread.php", "/forum/showthread.php", True),
        ("not-there", "/forum*/showthread.php", "/forum12/other.php", False),
        ("implicit-star-at-end", "/a*b", "/axxbyy", True),
        ("leading-star", "*.php", "/x/y.php", True),
        ("star-only", "*", "", True),
        ("question-mark-is-itself", "/a?b*", "/axb", False),
        ("bracket-is-itself", "/[ab]*", "/[ab]x", True),
        ("newline-is-a-character", "/a*b", "/a\nb", True),
    ],
    "hostile": [
        ("protocol-issue", "/*a*a*a*a*a*a*a*a*b", "/" + "a" * 60, False),
        ("protocol-issue-matching", "/*a*a*a*a*a*a*a*a*b", "/" + "a" * 60 + "b", True),
    ],
}


def _cases(table: dict[str, list[tuple]]) -> list:  # type: ignore[type-arg]
    return [pytest.param(*case[1:], id=f"{section}/{case[0]}")
            for section, cases in table.items() for case in cases]


@pytest.mark.parametrize(("uri", "expected"), _cases(FRAGMENT))
def test_split_fragment(uri: str, expected: tuple[str, str]) -> None:
    assert split_fragment(uri) == expected
    assert strip_fragment(uri) == expected[0]
    assert "".join(split_fragment(uri)) == uri


@pytest.mark.parametrize(("uri", "expected"), _cases(QUERY))
def test_split_query(uri: str, expected: tuple[str, str, str]) -> None:
    assert split_query(uri) == expected


@pytest.mark.parametrize(("query", "pairs", "names"), PAIRS)
def test_pairs_and_names(query: str, pairs: list[str], names: list[str]) -> None:
    assert query_pairs(query) == pairs
    assert [param_name(p) for p in pairs] == names
    assert join_query(pairs) == query


def test_drop_params_takes_exact_names_or_globs() -> None:
    pairs = ["a=1", "ab=2", "b", "a=3"]
    assert drop_params(pairs, {"a"}) == ["ab=2", "b"]
    assert drop_params(pairs, NameGlobs(["a*"])) == ["b"]
    assert drop_params(pairs, set()) == pairs
    assert sort_params(["b", "a=2", "a=1"]) == ["a=1", "a=2", "b"]


@pytest.mark.parametrize(("uri", "drop", "sort", "expected"), _cases(REWRITE))
def test_rewrite_query(uri: str, drop: tuple[str, ...], sort: bool, expected: str) -> None:
    assert rewrite_query(uri, drop, sort) == expected


@pytest.mark.parametrize(("prefix", "path", "expected"), _cases(CLEAN_PARAM_SCOPE))
def test_clean_param_scope(prefix: str, path: str, expected: bool) -> None:
    assert in_clean_param_scope(prefix, path) is expected
    evidence = pytest.importorskip("iri_scrapy.protocol.evidence")  # the optional folder
    assert evidence.CleanParam(frozenset({"s"}), prefix).matches(path) is expected


# --------------------------------------------------------------------------- the old definitions

def _old_heuristics(uri: str, drop: tuple[str, ...], sort: bool) -> str:
    """``IRIConfig.apply_heuristics`` before the toolkit (fnmatch.translate, re)."""
    if not drop and not sort:
        return uri
    head, hash_, fragment = uri.partition("#")
    base, qm, query = head.partition("?")
    if not qm:
        return uri
    params = query.split("&")
    if drop:
        pattern = re.compile("|".join(fnmatch.translate(p) for p in drop))
        params = [p for p in params if not pattern.fullmatch(p.split("=", 1)[0])]
    if sort:
        params.sort()
    return base + ("?" + "&".join(params) if params else "") + hash_ + fragment


def _old_scope(prefix: str, path: str) -> bool:
    """``CleanParam.matches`` before the toolkit (a backtracking regex)."""
    if prefix in ("", "/"):
        return True
    pattern = ".*".join(re.escape(part) for part in prefix.split("*"))
    return re.compile(pattern, re.DOTALL).match(path) is not None


_GLOB_CHARS = "ab-]![^\\*?"
_NAME_CHARS = "ab-]![^\\\n"


@given(st.text(_GLOB_CHARS, max_size=10), st.text(_NAME_CHARS, max_size=10))
@example("[!]", "!")
@example("[]]", "]")
@example("[z-a]", "z")
@example("[a-]", "-")
@example("a*b*a", "aba")
@example("*?", "")
def test_glob_agrees_with_fnmatchcase(pattern: str, name: str) -> None:
    assert glob_match(pattern, name) is fnmatch.fnmatchcase(name, pattern)


@given(st.text("/ab*?[.", min_size=1, max_size=10), st.text("/ab?[.\n", max_size=12))
def test_clean_param_scope_agrees_with_the_old_regex(prefix: str, path: str) -> None:
    assert in_clean_param_scope(prefix, path) is _old_scope(prefix, path)


@given(st.text("?&=#ab_utm", max_size=24),
       st.lists(st.sampled_from(["utm_*", "a", "*", "?", "[ab]", "b*a"]), max_size=3),
       st.booleans())
def test_rewrite_agrees_with_the_old_heuristics(tail: str, drop: list[str], sort: bool) -> None:
    uri = "http://h/p" + tail
    assert rewrite_query(uri, tuple(drop), sort) == _old_heuristics(uri, tuple(drop), sort)


# --------------------------------------------------------------------------- hostile patterns

class _Counting(str):
    """A str that counts the scans the matcher asks of it."""

    steps = 0

    def find(self, sub: str, *args: object) -> int:  # type: ignore[override]
        _Counting.steps += 1
        return str.find(self, sub, *args)  # type: ignore[arg-type]

    def startswith(self, prefix: object, *args: object) -> bool:  # type: ignore[override]
        _Counting.steps += 1
        return str.startswith(self, prefix, *args)  # type: ignore[arg-type]


@pytest.mark.parametrize("stars", [8, 64, 400])
def test_the_hostile_prefix_is_linear(stars: int) -> None:
    """One scan per segment, whatever the number of ``*a``: a backtracking regex
    needs about 10 times longer per ``*a`` on this input."""
    prefix = "/" + "*a" * stars + "*b"
    path = _Counting("/" + "a" * max(60, stars))
    _Counting.steps = 0
    assert Glob(prefix, star_only=True, prefix=True).match(path) is False
    assert _Counting.steps <= stars + 3


def test_a_hostile_name_glob_is_bounded() -> None:
    """With ``?`` (no ``str.find``) a segment is tried at each place: O(n * m) at worst."""
    glob = Glob("*a?" * 30 + "b")
    calls = 0
    original = q._at

    def counting(*args: object) -> bool:
        nonlocal calls
        calls += 1
        return original(*args)  # type: ignore[arg-type]

    q._at = counting  # type: ignore[assignment]
    try:
        assert glob.match("a" * 200) is False
    finally:
        q._at = original
    assert calls <= 200 * 31


HOSTILE = "/*a*a*a*a*a*a*a*a*b"

# Run in a child with a deadline: a backtracking matcher would not fail, it would hang
# (re gives no control back to Python while it matches).
_HOSTILE_SCRIPT = f"""
from iri_scrapy.protocol.evidence import parse_clean_param
from iri_scrapy.protocol.rules import ProtocolRules
prefix = {HOSTILE!r}
(clean,) = parse_clean_param("Clean-param: sid " + prefix + "\\n")
print(clean.matches("/" + "a" * 60), clean.matches("/" + "a" * 60 + "b"))
rule = {{"rule": ["http://h", "drop-param", "sid@" + prefix], "origin": "clean-param",
        "confirmed": ["http://h/ab", "http://h/aab"], "bad": 0, "contrary": 0, "skips": 0}}
rules = ProtocolRules.from_data({{"v": 1, "min_evidence": 2, "exact": [], "away": [],
                                 "rules": [rule]}})
print(rules.apply("http://h/" + "a" * 60 + "?sid=1"))
print(rules.apply("http://h/" + "a" * 60 + "b?sid=1"))
"""


def test_the_hostile_robots_txt_line_and_rules_file_are_answered_at_once() -> None:
    """The 38 characters of robots.txt, and the same prefix in a rules document
    (``IRI_PROTOCOL_RULES_FILE``, a fleet's shared rules), which the protocol rung
    applies to every request's key: answered well inside a generous deadline (the
    backtracking regex did not finish in 15 s)."""
    pytest.importorskip("iri_scrapy.protocol")  # the optional folder
    done = subprocess.run([sys.executable, "-c", _HOSTILE_SCRIPT], capture_output=True,
                          text=True, timeout=20, check=True)
    a60 = "http://h/" + "a" * 60
    assert done.stdout.splitlines() == ["False True", a60 + "?sid=1", a60 + "b"]
