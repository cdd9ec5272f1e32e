"""Every refusal of the ``iri-scrapy`` command line reads clearly.

The real CLI on real files: ``python -m iri_scrapy`` in a subprocess (exit
codes, stdout kept for results only, stderr for messages and progress), or
``main(argv)`` in process where only the text matters.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from iri_scrapy.cli.main import main
from iri_scrapy.store.fpstore import FingerprintSet

MODULE = [sys.executable, "-m", "iri_scrapy"]
CLI_DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def run(*args: str | bytes, stdin: Any = b"") -> subprocess.CompletedProcess[bytes]:
    kw: dict[str, Any] = {"stdin": stdin} if not isinstance(stdin, bytes) else {"input": stdin}
    return subprocess.run([*MODULE, *args], capture_output=True, timeout=120, **kw)


# --- dedupe: garbage is refused, with a reason, never accepted or dropped ---------------

GARBAGE = [  # (line as given, refusal in the report, or None if it is a URL)
    (b"http://a/", None),
    # A byte order mark starts the file only on line 1 (skipped there); later it is refused.
    (b"\xef\xbb\xbfhttp://a/", "byte order mark U+FEFF at index 0: not part of a URL"),
    (b"\xc9\xff\x00abc", "invalid UTF-8 byte 0xC9 at index 0"),
    (b"http://caf\xc3\xa9.example/\xff", "invalid UTF-8 byte 0xFF at index 20"),  # characters
    (b"http://a/\x00b", "control character U+0000 (NUL) at index 9"),
    (b"http://a/x\ty", "control character U+0009 (tab) at index 10"),
    (b"http://a/\x7f", "control character U+007F (DEL) at index 9"),
    (b"\x1b[2Jhttp://a/", "control character U+001B (escape) at index 0"),
    (b"http://\xc3\xa9/\xc2\x85", "control character U+0085 at index 9"),  # C1, UTF-8
    (b"junk line", "no scheme: not an absolute URL"),
    (b"//host/path", "no scheme: not an absolute URL"),
    (b"/relative?q", "no scheme: not an absolute URL"),
    (b"\x89PNG\r", "invalid UTF-8 byte 0x89 at index 0"),
    (b"\x1a", "control character U+001A at index 0"),
    (b" \thttp://b/ \t", None),  # white space around a line is not data
    (b"http://c/\r", None),  # CRLF line end
    (b"mailto:someone@example.com", None),
]


def test_dedupe_refuses_garbage_with_reasons(tmp_path: Path) -> None:
    src, rej = tmp_path / "dump.bin", tmp_path / "rejects.bin"
    src.write_bytes(b"".join(line + b"\n" for line, _ in GARBAGE))
    p = run("dedupe", str(src), "--rejects", str(rej), "--json-report",
            str(tmp_path / "r.json"))
    err = p.stderr.decode()
    assert p.returncode == 1, err
    assert "lone surrogate" not in err and "U+DC" not in err
    accepted = [line.rstrip(b"\r") for line, why in GARBAGE if why is None]
    refused = [(n, line, why) for n, (line, why) in enumerate(GARBAGE, 1) if why is not None]
    assert p.stdout == b"".join(line + b"\n" for line in accepted)
    assert rej.read_bytes() == b"".join(line + b"\n" for _, line, _ in refused)
    for n, _, why in refused:
        assert f"    line {n}: {why}" in err
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["unparseable"] == len(refused) and report["unique"] == len(accepted)
    assert [r["line"] for r in report["rejects"]] == [n for n, _, _ in refused]
    assert f"{len(GARBAGE)} lines read: {len(accepted)} unique, 0 duplicates, 0 blank, " \
           f"{len(refused)} unparseable" in err


def test_dedupe_random_bytes_are_all_refused(tmp_path: Path) -> None:
    data = random.Random(3987).randbytes(20_000)
    src, rej = tmp_path / "random.bin", tmp_path / "rejects.bin"
    src.write_bytes(data)
    p = run("dedupe", str(src), "--rejects", str(rej), "--json-report", str(tmp_path / "r.json"),
            "--max-listed", "1000")
    report = json.loads((tmp_path / "r.json").read_text())
    assert p.stdout == b"" and report["unique"] == 0
    assert report["unparseable"] == report["lines"] - report["blank"] > 50
    kept = [line for line in data.split(b"\n") if line.strip(b" \t\r")]
    assert rej.read_bytes().split(b"\n")[:-1] == kept  # every one, byte for byte
    reasons = {re.sub(r"[0-9A-F]{2,4} .*", "", r["error"]) for r in report["rejects"]}
    assert reasons <= {"invalid UTF-8 byte 0x", "control character U+", "no scheme: not an "
                       "absolute URL"}, reasons
    assert p.returncode == 1


# --- normalize and explain: exit status and the same wording ------------------------------


@pytest.mark.slow
def test_normalize_refusal_argument_stdin_and_skip() -> None:
    bad = b"http://a/caf\xc3\xa9\xff"  # the invalid byte is byte 15, character index 13
    why = b"invalid UTF-8 byte 0xFF at index 13"
    p = run("normalize", b"HTTP://A/", bad)
    assert p.returncode == 1
    assert p.stdout == b"http://a/\n\n"  # not text: an empty line, aligned with the input
    assert b"iri-scrapy: normalize: argument 2: " + why + b"\n" in p.stderr
    assert b"1 input(s) could not be normalized" in p.stderr
    p = run("normalize", stdin=b"HTTP://A/\n" + bad + b"\n")
    assert p.returncode == 1
    assert b"iri-scrapy: normalize: line 2: " + why + b"\n" in p.stderr
    for on_error, out in (("skip", b"http://a/\n"), ("empty", b"http://a/\n\n")):
        p = run("normalize", "--on-error", on_error, stdin=b"HTTP://A/\n" + bad + b"\n")
        assert (p.returncode, p.stdout) == (1, out)
        assert b"line 2: " + why in p.stderr
        p = run("normalize", "--on-error", on_error, "http://a:x/")
        assert (p.returncode, p.stdout) == (1, out[len(b"http://a/\n"):])
        assert b"argument 1: port: port is not a decimal number" in p.stderr
    p = run("explain", bad, "http://a/")
    assert p.returncode == 2 and p.stdout == b""
    assert p.stderr == b"iri-scrapy: explain: A: " + why + b"\n"


def test_normalize_help_exit_status(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["normalize", "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    assert "1 some input could not be normalized (each reported on stderr, with any " \
           "--on-error)" in help_text
    assert "invalid UTF-8 byte 0xC9 at index N', N the 0-based character index" in help_text


# --- dedupe: memory figures only when they mean something, one figure everywhere ----------


def test_dedupe_memory_line_only_for_enough_urls(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "small.txt"
    src.write_text("http://a/\nhttp://b/\n")
    assert main(["dedupe", str(src), "-o", str(tmp_path / "o.txt")]) == 0
    err = capsys.readouterr().err
    assert "2 unique" in err and "fingerprints" not in err and "per unique URL" not in err
    n = 10_000  # the documented threshold
    src.write_text("".join(f"http://example.com/{i}\n" for i in range(n)))
    assert main(["dedupe", str(src), "-o", str(tmp_path / "o.txt")]) == 0
    err = capsys.readouterr().err
    m = re.search(r"fingerprints: [\d.]+ MiB \(([\d.]+) bytes per unique URL", err)
    assert m is not None, err
    assert 10.6 <= float(m.group(1)) <= 21.4


@pytest.mark.slow
def test_memory_figure_is_measured_and_said_once() -> None:
    # The table after 1,000,000 distinct URLs, and its peak (a segment's old and new
    # tables alive while it grows); tracemalloc on a real dedupe run gives the same.
    import random

    rng = random.Random(1)
    table = FingerprintSet()
    for _ in range(1_000_000):
        table.add(rng.getrandbits(64))
    after, peak = table.nbytes / 1e6, table.peak_nbytes / 1e6
    figure = (f"{after:.0f} bytes per distinct URL, {peak:.0f} at the peak while a segment "
              "of the table grows, measured with tracemalloc on 1,000,000 distinct URLs (11 "
              "to 17 at other sizes from 10,000 on, as the table's 4096 segments grow one "
              "at a time)")
    assert figure.startswith("12 bytes per distinct URL, 12 at the peak")
    p = run("dedupe", "--help")
    assert figure in " ".join(p.stdout.decode().split())
    assert figure in " ".join(CLI_DOC.read_text(encoding="utf-8").split())


# --- dedupe: progress with percentage and time left, on stderr only -------------------------

PROGRESS = re.compile(r"\r *(\d+\.\d)% \[[#-]{20}\] (\d+:\d\d(:\d\d)?|\?) left  [\d,]+ lines  "
                      r"[\d,]+ lines/s  [\d,]+ unique\x1b\[K")


@pytest.fixture
def dump(tmp_path: Path) -> tuple[Path, bytes]:
    # Aliases (an upper-case host): lines the native loop cannot answer, so that the run
    # lasts long enough to draw its progress line.
    urls = b"".join(b"http://EXAMPLE.com/%d\n" % i for i in range(40_000))
    src = tmp_path / "dump.txt"
    src.write_bytes(urls)
    return src, urls


@pytest.mark.slow
def test_dedupe_progress_percentage_and_time_left(dump: tuple[Path, bytes]) -> None:
    src, urls = dump
    p = run("dedupe", str(src), "--progress", "-q")
    assert p.returncode == 0
    assert p.stdout == urls  # stdout carries the results only
    err = p.stderr.decode()
    found = PROGRESS.findall(err)
    assert found, repr(err[:300])
    assert all(0 < float(pct) < 100 for pct, _, _ in found)
    assert err.endswith("\r\x1b[K")  # the line is cleared at the end
    with src.open("rb") as f:  # stdin redirected from a file: its size is known too
        p = run("dedupe", "--progress", "-q", stdin=f)
    assert p.stdout == urls and PROGRESS.search(p.stderr.decode())


@pytest.mark.slow
def test_dedupe_progress_without_size_or_terminal(dump: tuple[Path, bytes]) -> None:
    _, urls = dump
    p = run("dedupe", "--progress", "-q", stdin=urls)  # a pipe: no size, no percentage
    err = p.stderr.decode()
    assert p.stdout == urls and "lines/s" in err and "%" not in err and "left" not in err
    p = run("dedupe", "-q", stdin=urls)  # stderr is not a terminal: no progress
    assert p.stdout == urls and p.stderr == b""
