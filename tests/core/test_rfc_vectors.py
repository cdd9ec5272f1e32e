"""Every RFC 3986 / RFC 3987 example is a test vector (ids name the section).

These files are our primary oracle and must pass in full
(tests/data/README.md: rfc3986_examples, rfc3987_examples).
"""

from __future__ import annotations

from typing import Any

import pytest

import iri_scrapy as iri
from iri_scrapy.core.resolve import remove_dot_segments
from tests.support.paths import via
from tests.support.vectors import load, params

RFC3986 = load("rfc3986_examples")
RFC3987 = load("rfc3987_examples")


def check(r: dict[str, Any]) -> None:
    kind, opts = r["kind"], r.get("options") or {}
    if kind == "resolve":
        got = iri.resolve(r["base"], r["input"], strict=opts.get("strict", True))
        assert got == r["expected"]
    elif kind == "remove_dot_segments":
        assert remove_dot_segments(r["input"]) == r["expected"]
    elif kind == "normalize":
        assert iri.normalize(r["input"]) == r["expected"]
        assert iri.normalize(r["expected"]) == r["expected"]
    elif kind == "equivalent":
        assert iri.equivalent(r["input"], r["expected"]), iri.explain(r["input"], r["expected"])
        assert iri.explain(r["input"], r["expected"]).equivalent
    elif kind == "different":
        assert not iri.equivalent(r["input"], r["expected"])
        assert not iri.explain(r["input"], r["expected"]).equivalent
    elif kind == "iri_to_uri":
        assert iri.iri_to_uri(r["input"], idna=opts.get("idna", True)) == r["expected"]
    elif kind == "uri_to_iri":
        got = iri.uri_to_iri(r["input"], unicode_host=bool(opts.get("host_to_unicode")))
        assert got == r["expected"]
    else:  # pragma: no cover - a new kind in the files
        pytest.fail(f"unknown kind {kind}")


@pytest.mark.parametrize("record", params(RFC3986, "rfc3986"))
def test_rfc3986_examples(record: dict[str, Any]) -> None:
    check(record)


@pytest.mark.parametrize("record", params(RFC3987, "rfc3987"))
def test_rfc3987_examples(record: dict[str, Any]) -> None:
    check(record)


LADDER_KINDS = ("normalize", "equivalent", "different")


@pytest.mark.parametrize(
    "record",
    [p for p in params(RFC3986, "rfc3986") + params(RFC3987, "rfc3987")
     if p.values[0]["kind"] in LADDER_KINDS],
)
def test_ladder_examples_through_every_path(record: dict[str, Any], path: str) -> None:
    kind, a, b = record["kind"], record["input"], record["expected"]
    if kind == "normalize":
        assert via(path, a) == b
        assert via(path, b) == b
    else:
        assert (via(path, a) == via(path, b)) is (kind == "equivalent")


def test_rfc_files_are_complete() -> None:
    assert len(RFC3986) == 61
    assert len(RFC3987) == 33
