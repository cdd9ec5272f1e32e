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
