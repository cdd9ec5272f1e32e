"""``iri-scrapy dedupe --report FILE.html`` rendered in a real headless Chromium.

The page is written by the real command (in process), then Debian's ``chromium``
loads it from disk with ``--dump-dom`` (the DOM after parsing: the totals, the
rung chart's bars, the hosts table and the clusters must be there) and
``--screenshot`` (a PNG of the rendered page).  Without ``chromium`` on PATH these
tests skip, unless Chromium is required (``IRI_REQUIRE_CHROMIUM=1`` or ``CI=true``,
as ``tests/support/redis_support.py`` does for Redis): then they fail, so CI never
goes green with the report unrendered (``.ci/run`` installs ``chromium``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from iri_scrapy.store.dedupe import MAX_CLUSTERS
from tests.cli.test_cli import run_main
from tests.support.watch import run_watched

_TRUTHY = {"1", "true", "yes", "on"}
DUMP = """\
http://www.example.test/
HTTP://WWW.EXAMPLE.TEST:80/
http://www.example.test/a/./b/../c
http://www.example.test/a/c
http://www.example.test/%7euser
http://www.example.test/~user#top
http://bücher.example/café
http://xn--bcher-kva.example/caf%C3%A9

no scheme here
http://b.example/x\u202e<script>alert(1)</script>
http://B.EXAMPLE/x\u202e<script>alert(1)</script>
"""


def chromium() -> str:
    """The Chromium binary, or skip (fail when Chromium is required)."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    required = (os.environ.get("IRI_REQUIRE_CHROMIUM", "").strip().lower() in _TRUTHY
                or os.environ.get("CI", "").strip().lower() in _TRUTHY)
    if required:
        pytest.fail("chromium is not on PATH (apt-get install chromium); required because "
                    "IRI_REQUIRE_CHROMIUM=1 or CI=true", pytrace=False)
    pytest.skip("chromium is not on PATH (apt-get install chromium)")


def _browser(binary: str, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_watched(
        [binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         f"--user-data-dir={tmp / 'profile'}", *args],
        what="chromium", tree=True, encoding="utf-8", errors="replace",
        stdin=subprocess.DEVNULL)


@pytest.fixture
def report(tmp_path: Path, capsys: pytest.CaptureFixture[Any],
           monkeypatch: pytest.MonkeyPatch) -> Path:
    src, page = tmp_path / "frontier.txt", tmp_path / "report.html"
    src.write_text(DUMP, encoding="utf-8")
    r = run_main(["dedupe", str(src), "-o", str(tmp_path / "out.txt"), "--report", str(page)],
                 capsys, monkeypatch)
    assert r.code == 1  # one refused line
    assert "12 lines read: 5 unique, 5 duplicates, 1 blank, 1 unparseable" in r.err
    return page


def test_report_is_self_contained(report: Path) -> None:
    text = report.read_text(encoding="utf-8")
    assert "<script" not in text  # the input's <script> is escaped, and the page has none
    assert "&lt;script&gt;" in text and "\\u202e" in text  # shown, not obeyed
    assert not re.search(r"(?:src|href)\s*=|@import|url\(", text)  # nothing to fetch


@pytest.mark.slow
def test_report_renders_in_headless_chromium(report: Path, tmp_path: Path) -> None:
    binary = chromium()
    dom = _browser(binary, tmp_path, "--dump-dom", report.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout
    totals = dict(re.findall(r"id=\"total-(\w+)\"><div class=\"n\">([\d,]+)<", html))
    assert totals == {"lines": "12", "unique": "5", "duplicates": "5", "blank": "1",
                      "unparseable": "1"}
    for rung in ("simple", "case", "percent", "path", "scheme"):
        assert f'id="rung-{rung}"' in html
    assert re.search(r'id="hosts".*www\.example\.test.*>3<', html, re.S)
    assert "bücher.example" in html and "equivalent at 5.3.3 scheme-based" in html
    assert "equivalent at 5.3.2.4 path segment normalization" in html
    assert html.count("class=\"cluster\"") == 5 <= MAX_CLUSTERS
    shot = tmp_path / "report.png"
    r = _browser(binary, tmp_path, "--window-size=1100,1800", f"--screenshot={shot}",
                 report.as_uri())
    assert r.returncode == 0, r.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000  # a page, not a blank
