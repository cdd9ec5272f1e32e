"""Peers' test suites (tests/data, origins in its README): agree where the semantics are RFC 3987's.

Every case of the RFC-comparable files either agrees with us or is listed in
tests/support/peer_deviations.py with the reason we differ.  Files with other semantics
(WHATWG, Safe Browsing, aggressive crawler canonicalization) are used for
robustness: no exception but IRIError, and idempotence, on every input.
"""

from __future__ import annotations

from typing import Any

import pytest

import iri_scrapy as iri
from iri_scrapy import Level
from iri_scrapy.core.resolve import remove_dot_segments
from tests.support.peer_deviations import DEVIATIONS
from tests.support.vectors import DATA, load

COMPARABLE = sorted(DEVIATIONS) + ["rfc3986py_tests"]
# Cases with options are only valid under those settings; these files' options
# are flags we model (strictness of resolution, special scheme, IDNA).
OPTIONS_OK = {"uritools_join", "urlcanon_path_dots", "hyperlink_iri", "rfc3986py_tests"}
ROBUSTNESS = [
    "whatwg_urltestdata", "urlcanon_whatwg", "urlcanon_semantic_precise", "urlcanon_aggressive",
    "google_safebrowsing_go", "w3lib_safe_url_string", "purell",
]
# The kinds ``run`` checks, and "idna" (UTS 46 cases, tests/core/test_hosts.py; left out
# here).  A record of any other kind fails: it would otherwise pass unchecked.
KINDS = frozenset({
    "resolve", "remove_dot_segments", "normalize", "equivalent", "different", "iri_to_uri",
    "uri_to_iri", "idna",
})
# Data files that are not vector records (no "kind"): surt's outputs (tests/core/test_surt.py).
NOT_VECTORS = {
    "surt_package_outputs",
    # Unicode confusables.txt lines: source data of core/confusables.py (test_confusables.py)
    "unicode_confusables_latin",
    # real documentation pages: the protocol level's fingerprint (test_fingerprint_same.py)
    "python3_doc_pages",
}


def selected(name: str) -> list[dict[str, Any]]:
    out = []
    for r in load(name):
        if r.get("error") or r.get("component") or r.get("input_octets_latin1") or r.get("input_is_bytes"):
            continue
        if r.get("options") and name not in OPTIONS_OK:
            continue
        if r["kind"] == "idna" or (r.get("options") or {}).get("relativeTo"):
            continue
        out.append(r)
    return out


def run(r: dict[str, Any]) -> tuple[Any, bool]:
    kind, opts = r["kind"], r.get("options") or {}
    try:
        if kind == "resolve":
            got: Any = iri.resolve(r["base"], r["input"], strict=opts.get("strict", True))
        elif kind == "remove_dot_segments":
            got = remove_dot_segments(r["input"])
        elif kind == "normalize":
            got = iri.normalize(r["input"])
        elif kind in ("equivalent", "different"):
            got = iri.equivalent(r["input"], r["expected"])
            return got, got is (kind == "equivalent")
        elif kind == "iri_to_uri":
            got = iri.iri_to_uri(r["input"], idna=opts.get("idna", True))
        elif kind == "uri_to_iri":
            got = iri.uri_to_iri(r["input"], unicode_host=bool(opts))
        else:
            pytest.fail(f"unknown kind {kind!r}: {r!r}")
    except iri.IRIError as exc:
        return exc, False
    return got, got == r["expected"]


def cases() -> list[Any]:
    out = []
    for name in COMPARABLE:
        for i, r in enumerate(selected(name)):
            if name == "urlcanon_path_dots" and r["options"].get("special_scheme") and "\\" in r["input"]:
                continue  # WHATWG: "\" is a separator in special URLs only
            out.append(pytest.param(name, r, id=f"{name}-{i}"))
    assert out, "no comparable peer cases"
    return out


@pytest.mark.parametrize(("name", "record"), cases())
def test_peer_case_agrees_or_is_a_documented_deviation(name: str, record: dict[str, Any]) -> None:
    got, ok = run(record)
    key = f"{record['kind']}|{record['input']}|{record.get('base') or ''}"
    reason = DEVIATIONS.get(name, {}).get(key)
    if reason is None:
        assert ok, f"{name}: {record['input']!r} gave {got!r}, expected {record['expected']!r}"
    else:
        assert not ok, f"stale deviation (we now agree): {name} {key}: {reason}"


def test_a_record_of_an_unknown_kind_fails() -> None:
    with pytest.raises(pytest.fail.Exception, match="unknown kind 'normalise'"):
        run({"kind": "normalise", "input": "http://h/", "expected": "http://h/"})


def test_every_data_file_has_only_known_kinds() -> None:
    files = sorted(DATA.glob("*.jsonl*"))
    names = {path.name.split(".")[0] for path in files}
    assert set(COMPARABLE + ROBUSTNESS) | NOT_VECTORS <= names
    for name in sorted(names):
        kinds = {r.get("kind") for r in load(name)}
        if name in NOT_VECTORS:
            assert kinds == {None}, f"{name}: kinds {kinds}"
        else:
            assert kinds <= KINDS, f"{name}: unknown kinds {sorted(map(str, kinds - KINDS))}"


def test_deviation_table_has_no_orphans() -> None:
    for name, table in DEVIATIONS.items():
        keys = {f"{r['kind']}|{r['input']}|{r.get('base') or ''}" for r in selected(name)}
        assert set(table) <= keys, name


def robustness_inputs() -> list[Any]:
    out = []
    for name in ROBUSTNESS + COMPARABLE:
        for i, r in enumerate(load(name)):
            if isinstance(r.get("input"), str) and r["kind"] != "idna":
                out.append(pytest.param(r["input"], id=f"{name}-{i}"))
    assert out, "no peer inputs"
    return out


@pytest.mark.parametrize("text", robustness_inputs())
def test_no_crash_and_idempotent_on_every_peer_input(text: str) -> None:
    for level in Level:
        for form in ("uri", "iri"):
            try:
                once = iri.normalize(text, level, form=form)  # type: ignore[arg-type]
            except iri.IRIError:
                continue
            assert iri.normalize(once, level, form=form) == once  # type: ignore[arg-type]
