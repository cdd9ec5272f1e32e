"""The CLI's front door (issue 22): the ``homograph`` finding of ``check``, dedupe's
rung counts and messages, long URLs in messages.

In-process ``main(argv)`` calls (see tests/cli/test_cli.py's ``run_main``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.cli.test_cli import run_main

# --- check: whole-script homographs ----------------------------------------------------

@pytest.mark.parametrize(("url", "reading"), [
    ("http://xn--80ak6aa92e.com/", "apple"),
    ("https://раураӏ.com/", "paypal"),
    ("http://αρρ.com/", "app"),
])
def test_check_flags_whole_script_homographs(url: str, reading: str,
                                             capsys: pytest.CaptureFixture[Any],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    r = run_main(["check", url], capsys, monkeypatch)
    assert r.code == 1
    assert r.out.endswith("[homograph]\n")
    assert f"read as ASCII '{reading}'" in r.out
    doc = json.loads(run_main(["check", "--json", url], capsys, monkeypatch).out)
    assert [f["kind"] for f in doc["findings"]] == ["homograph"]


@pytest.mark.parametrize("url", ["http://пример.испытание/", "http://россия.рф/",
                                 "http://apple.com/", "http://аррӏе.ru/"])
def test_check_leaves_genuine_labels_alone(url: str, capsys: pytest.CaptureFixture[Any],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    r = run_main(["check", url], capsys, monkeypatch)
    assert (r.code, r.out) == (0, "ok\n")


# --- dedupe: rung counts from the canonical key, plural, positions ----------------------

def _rung_counts(err: str) -> dict[str, int]:
    rows = err.split("URL lines by rung", 1)[1].splitlines()[1:]
    return {row.split()[0]: int(row.split()[-1].replace(",", "")) for row in rows
            if row.startswith("    5.")}


@pytest.mark.parametrize("lines", [
    ["HTTP://EXAMPLE.COM", "http://example.com/"],
    ["http://example.com/", "HTTP://EXAMPLE.COM"],
])
def test_rung_counts_do_not_depend_on_the_order(lines: list[str],
                                                capsys: pytest.CaptureFixture[Any],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    r = run_main(["dedupe"], capsys, monkeypatch, stdin="\n".join(lines).encode() + b"\n")
    assert r.code == 0
    assert "2 lines read: 1 unique, 1 duplicate, 0 blank" in r.err  # "1 duplicate"
    assert _rung_counts(r.err) == {"5.3.1": 1, "5.3.2.1": 1, "5.3.2.3": 0, "5.3.2.4": 0,
                                   "5.3.3": 1, "5.1": 0}


def test_json_report_has_order_free_spellings_by_rung(tmp_path: Any,
                                                      capsys: pytest.CaptureFixture[Any],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    docs = []
    for lines in (b"HTTP://A.EXAMPLE/%7e\nhttp://a.example/~\n",
                  b"http://a.example/~\nHTTP://A.EXAMPLE/%7e\n"):
        rep = tmp_path / "r.json"
        run_main(["dedupe", "-q", "-o", str(tmp_path / "o"), "--json-report", str(rep)],
                 capsys, monkeypatch, stdin=lines)
        docs.append(json.loads(rep.read_text()))
    assert docs[0]["spellings_by_rung"] == docs[1]["spellings_by_rung"]
    assert docs[0]["spellings_by_rung"]["percent"] == 1
    assert docs[0]["spellings_by_rung"]["simple"] == 1


def test_one_line_is_singular(capsys: pytest.CaptureFixture[Any],
                              monkeypatch: pytest.MonkeyPatch) -> None:
    r = run_main(["dedupe"], capsys, monkeypatch, stdin=b"http://a.example/\n")
    assert "dedupe: 1 line read: 1 unique, 0 duplicates," in r.err


def test_positions_are_0_based_character_indices(capsys: pytest.CaptureFixture[Any],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """One convention in one rejects list: the refusal's index and the library's agree."""
    stdin = "http://é.example/\x00\nhttp://é.example:8x/\n".encode()
    r = run_main(["dedupe"], capsys, monkeypatch, stdin=stdin)
    assert "line 1: control character U+0000 (NUL) at index 17:" in r.err
    assert "line 2: port: port is not a decimal number" in r.err
    assert "U+0078 at index 18" in r.err  # 'x' of 8x: the 19th character
    assert "column" not in r.err


# --- long URLs in messages ----------------------------------------------------------------

def test_shorten() -> None:
    from iri_scrapy.core.shorten import SHOWN_LENGTH, shorten

    assert shorten("http://a/") == "http://a/"
    long = "http://a/" + "x" * 600_000
    shown = shorten(long)
    assert shown == long[:SHOWN_LENGTH] + "\u2026(600,009 characters)"
    assert len(shown) < 250
