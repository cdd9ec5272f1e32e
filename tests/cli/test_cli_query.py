"""The opt-in query heuristics on the command line: ``--drop-query-param GLOB`` and
``--sort-query`` on ``normalize`` and ``dedupe``, the same function as the plugin's
``IRI_DROP_QUERY_PARAMS`` / ``IRI_SORT_QUERY`` (:func:`iri_scrapy.core.query.rewrite_query`).
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from iri_scrapy import normalize
from iri_scrapy.cli.main import _normalized, build_parser, main
from iri_scrapy.plugin.config import IRIConfig
from iri_scrapy.store.dedupe import Deduper, Outcome


def run_main(argv: list[str], capsys: pytest.CaptureFixture[Any],
             monkeypatch: pytest.MonkeyPatch, stdin: bytes = b"") -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


# behaviour -> (argv, output)
NORMALIZE: dict[str, list[tuple[list[str], str]]] = {
    "off-by-default": [(["http://a/?utm_x=1&b"], "http://a/?utm_x=1&b")],
    "drop": [
        (["--drop-query-param", "utm_*", "HTTP://A/?utm_x=1&b"], "http://a/?b"),
        (["--drop-query-param", "utm_*", "--drop-query-param", "b", "http://a/p?utm_x=1&b"],
         "http://a/p"),
        (["--drop-query-param", "utm_*", "http://a/?UTM_X=1"], "http://a/?UTM_X=1"),
    ],
    "sort": [(["--sort-query", "http://a/?b=1&a=2"], "http://a/?a=2&b=1")],
    "forms": [
        (["--sort-query", "--form", "iri", "http://xn--bcher-kva.de/?z=%C3%A9&a"],
         "http://bücher.de/?a&z=é"),
        (["--drop-query-param", "sid", "--form", "surt", "http://www.ex.com/p?sid=1&x"],
         "com,ex)/p?x"),
    ],
    "fragment": [
        (["--sort-query", "--keep-fragment", "http://a/?b&a#f"], "http://a/?a&b#f"),
        (["--sort-query", "http://a/?b&a#f"], "http://a/?a&b"),
    ],
}


@pytest.mark.parametrize(("argv", "out"), [
    pytest.param(argv, out, id=f"{section}/{n}")
    for section, cases in NORMALIZE.items() for n, (argv, out) in enumerate(cases)])
def test_normalize_query_heuristics(argv: list[str], out: str,
                                    capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    code, stdout, err = run_main(["normalize", *argv], capsys, monkeypatch)
    assert (code, stdout, err) == (0, out + "\n", "")


def test_dedupe_merges_what_the_heuristics_merge(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    data = b"http://a/?id=1&utm_source=x\nhttp://A/?utm_medium=y&id=1\nhttp://a/?id=2\n"
    code, out, _ = run_main(["dedupe", "-q"], capsys, monkeypatch, stdin=data)
    assert out.splitlines() == data.decode().splitlines()  # off: three resources
    rep = tmp_path / "r.json"
    code, out, err = run_main(
        ["dedupe", "-o", "-", "--canonical", "--drop-query-param", "utm_*", "--sort-query",
         "--json-report", str(rep)], capsys, monkeypatch, stdin=data)
    assert code == 0
    assert out.splitlines() == ["http://a/?id=1", "http://a/?id=2"]
    report = json.loads(rep.read_text())
    assert (report["unique"], report["duplicates"]) == (2, 1)
    assert (report["drop_query_params"], report["sort_query"]) == (["utm_*"], True)
    assert "query heuristics (not RFC 3987): parameters dropped utm_*, query sorted yes" in err


def test_dedupe_canonical_iri_is_written_from_the_rewritten_key(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    data = "http://bücher.de/?ü=1&utm_a=2\nhttp://xn--bcher-kva.de/?%C3%BC=1\n".encode()
    code, out, _ = run_main(["dedupe", "-q", "--canonical", "--form", "iri",
                             "--drop-query-param", "utm_*"], capsys, monkeypatch, stdin=data)
    assert (code, out) == (0, "http://bücher.de/?ü=1\n")


_PARSER = build_parser()
_DEDUPERS: dict[tuple[tuple[str, ...], bool], Deduper] = {}  # each costs its table
_PAIR = st.text("ab_utmsid=%", max_size=6)


@given(st.lists(_PAIR, max_size=5), st.sampled_from([(), ("utm_*",), ("s?d", "a*")]),
       st.booleans())
def test_the_cli_and_the_plugin_give_one_key(pairs: list[str], drop: tuple[str, ...],
                                             sort: bool) -> None:
    """The plugin's IRIConfig, the CLI's Deduper and normalize: one function."""
    url = "http://Example.com/p?" + "&".join(pairs)
    config = IRIConfig(sort_query=sort, drop_query_params=drop)
    plugin_key = config.apply_heuristics(normalize(url, keep_fragment=False))
    deduper = _DEDUPERS.get((drop, sort)) or _DEDUPERS.setdefault(
        (drop, sort), Deduper(drop_query_params=drop, sort_query=sort))
    outcome, key, _, _ = deduper.classify(url)
    assert outcome is None and key == plugin_key
    argv = ["normalize", *[a for g in drop for a in ("--drop-query-param", g)],
            *(["--sort-query"] if sort else []), url]
    args = _PARSER.parse_args(argv)
    assert _normalized(url, args) == plugin_key  # what cmd_normalize writes


def test_deduper_heuristics_off_by_default() -> None:
    d = Deduper()
    assert not d.heuristics
    assert d.process("http://a/?utm_x=1")[0] is Outcome.UNIQUE
    assert d.process("http://a/?utm_x=2")[0] is Outcome.UNIQUE
