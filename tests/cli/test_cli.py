"""Tests of the ``iri-scrapy`` command line, its dedupe logic and fingerprint set.

In-process tests call ``main(argv)`` (fast); subprocess tests run the real
console script and ``python -m iri_scrapy`` for exit codes, streams, broken
pipes and Ctrl-C.  ``test_dedupe_one_million_lines`` generates a 1,000,000-line
frontier dump from a seed and checks the exact unique count, the per-rung
report and the memory per distinct URL (RSS of the child, tracemalloc in
process, and the fingerprint table's own size), never the time.
"""

from __future__ import annotations

import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import idna
import pytest

from iri_scrapy import normalize
from iri_scrapy.cli.main import display, main
from iri_scrapy.core.ladder import Level, NormalizeOptions, canonical_and_rungs, rungs_applied
from iri_scrapy.store.dedupe import Deduper, Outcome, fingerprint
from tests.support.generated_urls import KINDS
from tests.support.generated_urls import lines as generated_lines

# --- helpers ---------------------------------------------------------------------------


def script() -> list[str]:
    """The installed console script, next to this interpreter if possible."""
    local = Path(sys.executable).with_name("iri-scrapy")
    if local.exists():
        return [str(local)]
    found = shutil.which("iri-scrapy")
    assert found, "console script iri-scrapy not installed (pip install -e .)"
    return [found]


MODULE = [sys.executable, "-m", "iri_scrapy"]


@pytest.fixture(params=["script", "module"])
def cmd(request: pytest.FixtureRequest) -> list[str]:
    return script() if request.param == "script" else MODULE


def run(
    cmd: list[str], *args: str, stdin: bytes = b"", **kw: Any
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*cmd, *args], input=stdin, capture_output=True, timeout=120, **kw)


class Result:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err


def run_main(
    argv: list[str], capsys: pytest.CaptureFixture[Any], monkeypatch: pytest.MonkeyPatch,
    stdin: bytes = b"",
) -> Result:
    """``main(argv)`` in process with *stdin*; output decoded (bytes kept as escapes)."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
    code = main(argv)
    out, err = capsys.readouterr()
    if isinstance(out, bytes):
        out, err = (x.decode("utf-8", "surrogateescape") for x in (out, err))
    return Result(code, out, err)


# --- normalize -------------------------------------------------------------------------

NORMALIZE_CASES = [
    pytest.param(["HTTP://Example.COM:80/a/./b/%7euser"], "http://example.com/a/b/~user\n", 0,
                 id="scheme-level-default"),
    pytest.param(["http://a/b#frag"], "http://a/b\n", 0, id="fragment-dropped-by-default"),
    pytest.param(["--keep-fragment", "http://a/b#frag"], "http://a/b#frag\n", 0,
                 id="keep-fragment"),
    pytest.param(["--level", "syntax", "http://a:80/b"], "http://a:80/b\n", 0,
                 id="syntax-keeps-default-port"),
    pytest.param(["--level", "simple", "--form", "iri", "HTTP://A/%7e"], "HTTP://A/%7e\n", 0,
                 id="simple-is-identity"),
    pytest.param(["http://bücher.example/ü"], "http://xn--bcher-kva.example/%C3%BC\n", 0,
                 id="uri-form"),
    pytest.param(["--form", "iri", "http://xn--bcher-kva.example/%C3%BC"],
                 "http://bücher.example/ü\n", 0, id="iri-form"),
    pytest.param(["--nfc", "--form", "iri", "http://a/C%CC%A7"], "http://a/Ç\n", 0, id="nfc"),
    pytest.param(["http://a/1", "http://B/2"], "http://a/1\nhttp://b/2\n", 0,
                 id="several-arguments"),
    pytest.param(["http://a:x/", "http://b/"], "http://a:x/\nhttp://b/\n", 1,
                 id="failure-kept-exit-1"),
    pytest.param(["--on-error", "empty", "http://a:x/", "http://b/"], "\nhttp://b/\n", 1,
                 id="failure-empty"),
    pytest.param(["--on-error", "skip", "http://a:x/", "http://b/"], "http://b/\n", 1,
                 id="failure-skipped"),
]


@pytest.mark.parametrize(("argv", "out", "code"), NORMALIZE_CASES)
def test_normalize(argv: list[str], out: str, code: int, capsys: pytest.CaptureFixture[str],
                   monkeypatch: pytest.MonkeyPatch) -> None:
    r = run_main(["normalize", *argv], capsys, monkeypatch)
    assert (r.out, r.code) == (out, code)
    if code:
        assert "argument 1: port: port is not a decimal number" in r.err
        assert "U+0078 at index 9" in r.err
    else:
        assert r.err == ""


def test_normalize_stdin_line_numbers(capsysbinary: pytest.CaptureFixture[bytes],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    data = b"HTTP://A/\n\nhttp://bad:p/\r\nhttp://b/%7e\n\xff\xfe\n"
    r = run_main(["normalize"], capsysbinary, monkeypatch, stdin=data)
    assert r.code == 1
    lines = r.out.split("\n")
    # Blank lines stay blank, failures are kept (a line that is not text as an empty
    # line, never echoed): the output is aligned with the input.
    assert lines == ["http://a/", "", "http://bad:p/", "http://b/~", "", ""]
    assert "line 3: port:" in r.err and "line 5: invalid UTF-8 byte 0xFF at index 0" in r.err
    assert "2 input(s) could not be normalized" in r.err


def test_normalize_output_file(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                               monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out.txt"
    r = run_main(["normalize", "-o", str(out), "HTTP://A/"], capsys, monkeypatch)
    assert r.code == 0 and r.out == ""
    assert out.read_text() == "http://a/\n"


# --- explain ---------------------------------------------------------------------------

EXPLAIN_CASES = [
    pytest.param(["http://a/", "http://a/"], 0, "equivalent at 5.3.1", id="identical"),
    pytest.param(["HTTP://A/", "http://a/"], 0, "equivalent at 5.3.2.1", id="case"),
    pytest.param(["http://a/%7e", "http://a/~"], 0, "equivalent at 5.3.2.3", id="percent"),
    pytest.param(["http://a:80/", "http://a"], 0, "equivalent at 5.3.3", id="scheme"),
    pytest.param(["http://a/#x", "http://a/#y"], 0, "fragments excluded", id="fragments"),
    pytest.param(["--keep-fragment", "http://a/#x", "http://a/#y"], 1, "fragment differs",
                 id="keep-fragment"),
    pytest.param(["--level", "syntax", "http://a:80/", "http://a/"], 1,
                 "different at level syntax", id="level-too-low"),
    pytest.param(["http://a/b", "http://a/c"], 1, "path differs at index 1", id="different"),
]


@pytest.mark.parametrize(("argv", "code", "text"), EXPLAIN_CASES)
def test_explain(argv: list[str], code: int, text: str, capsys: pytest.CaptureFixture[str],
                 monkeypatch: pytest.MonkeyPatch) -> None:
    r = run_main(["explain", *argv], capsys, monkeypatch)
    assert r.code == code
    assert text in r.out
    assert "5.3.1 simple string comparison" in r.out


def test_explain_error_exit_2(capsys: pytest.CaptureFixture[str],
                              monkeypatch: pytest.MonkeyPatch) -> None:
    r = run_main(["explain", "http://a:x/", "http://a/"], capsys, monkeypatch)
    assert r.code == 2 and r.out == ""
    assert r.err.startswith("iri-scrapy: explain: port:") and "U+0078" in r.err


# --- check -----------------------------------------------------------------------------

CHECK_CASES = [
    pytest.param("http://example.com/", 0, ["ok"], id="ok"),
    pytest.param("http://ex\u0430mple.com/", 1, ["host: label", "U+0430 at index 9",
                                                  "[mixed-script]"], id="homograph"),
    pytest.param("http://a.com/x\u202ey", 1, ["path: bidi formatting", "U+202E at index 14"],
                 id="bidi-formatting"),
    pytest.param("http://a.com/\u05d0b", 1, ["[bidi-mixed]", "[bidi-boundary]"], id="mixed-rtl"),
    pytest.param("http://xn--a.com/", 1, ["[idn]"], id="idn"),
    pytest.param("http://a.com/a b", 1, ["path: character not allowed", "[syntax]"],
                 id="validate"),
    pytest.param("http://[::1", 1, ["host: IP literal without its closing ']'",
                                    "U+005B at index 7", "[syntax]"], id="unclosed-ip-literal"),
    pytest.param("http:///x", 1, ["host: empty host", "U+002F at index 7", "[wire]"],
                 id="wire-empty-host"),
]


@pytest.mark.parametrize(("url", "code", "texts"), CHECK_CASES)
def test_check(url: str, code: int, texts: list[str], capsys: pytest.CaptureFixture[str],
               monkeypatch: pytest.MonkeyPatch) -> None:
    r = run_main(["check", url], capsys, monkeypatch)
    assert r.code == code
    for text in texts:
        assert text in r.out
    # Output is one line per finding and never carries a raw bidi control.
    assert not any(c in r.out for c in "\u202e\u200e\u200f")


def test_check_json_and_several(capsys: pytest.CaptureFixture[str],
                                monkeypatch: pytest.MonkeyPatch) -> None:
    r = run_main(["check", "--json", "http://a/", "http://a.com/x\u202ey"], capsys, monkeypatch)
    assert r.code == 1
    docs = [json.loads(line) for line in r.out.splitlines()]
    assert [d["ok"] for d in docs] == [True, False]
    assert docs[1]["url"] == "http://a.com/x\u202ey"
    assert docs[1]["findings"][0] == {
        "kind": "bidi-formatting", "component": "path",
        "message": "bidi formatting character RIGHT-TO-LEFT OVERRIDE not allowed "
        "(RFC 3987 section 4.1)", "codepoint": "U+202E", "index": 14}
    r = run_main(["check"], capsys, monkeypatch, stdin=b"http://a/\n\nhttp://a.com/x\xe2\x80\xaey\n")
    assert r.code == 1
    assert r.out.splitlines()[0] == "http://a/\tok"
    assert r.out.splitlines()[1].startswith("http://a.com/x\\u202ey\tpath: bidi formatting")


def test_display_escapes() -> None:
    assert display("a\u202eb\x1b[2J\udcff") == "a\\u202eb\\x1b[2J\\xff"


# --- usage -----------------------------------------------------------------------------

USAGE_CASES = [
    pytest.param([], id="no-command"),
    pytest.param(["frobnicate"], id="unknown-command"),
    pytest.param(["normalize", "--level", "extreme", "http://a/"], id="bad-level"),
    pytest.param(["normalize", "--form", "urn", "http://a/"], id="bad-form"),
    pytest.param(["explain", "http://a/"], id="explain-one-argument"),
    pytest.param(["dedupe", "--bogus"], id="unknown-option"),
]


@pytest.mark.parametrize("argv", USAGE_CASES)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str],
                             monkeypatch: pytest.MonkeyPatch) -> None:
    r = run_main(argv, capsys, monkeypatch)
    assert r.code == 2
    assert "usage: iri-scrapy" in r.err and r.out == ""


@pytest.mark.parametrize("command", [[], ["normalize"], ["explain"], ["dedupe"], ["check"]],
                         ids=["top", "normalize", "explain", "dedupe", "check"])
def test_help(command: list[str], capsys: pytest.CaptureFixture[str],
              monkeypatch: pytest.MonkeyPatch) -> None:
    r = run_main([*command, "--help"], capsys, monkeypatch)
    assert r.code == 0
    assert r.out.startswith("usage: iri-scrapy")
    if command:
        assert "exit status:" in r.out


# --- dedupe, small -----------------------------------------------------------------------

SMALL_DUMP = (
    "HTTP://Example.COM/a/%7euser\n"  # 1 first spelling of A
    "http://example.com/a/~user\n"  # 2 A again (already canonical: simple)
    "\n"  # 3 blank
    "http://example.com:80/a/./~user#top\n"  # 4 A again (path, scheme; fragment dropped)
    "http://bücher.example/\n"  # 5 first spelling of B
    "http://bad:port/\n"  # 6 reject
    "http://xn--bcher-kva.example\n"  # 7 B again (scheme: empty path, A-label)
    "   \n"  # 8 blank
    "http://example.com/a/~user#other\n"  # 9 A again (fragment dropped)
    "http://example.com/b\n"  # 10 first spelling of C
)


def test_dedupe_small(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                      monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "frontier.txt"
    src.write_bytes(SMALL_DUMP.encode() + b"http://\xff/\n")
    out, rej, rep = tmp_path / "out.txt", tmp_path / "rejects.txt", tmp_path / "report.json"
    r = run_main(["dedupe", str(src), "-o", str(out), "--rejects", str(rej),
                  "--json-report", str(rep)], capsys, monkeypatch)
    assert r.code == 1  # unparseable lines were found
    assert out.read_text().splitlines() == [
        "HTTP://Example.COM/a/%7euser", "http://bücher.example/", "http://example.com/b"]
    assert rej.read_bytes() == b"http://bad:port/\nhttp://\xff/\n"
    report = json.loads(rep.read_text())
    assert {k: report[k] for k in ("lines", "unique", "duplicates", "blank", "unparseable")} == {
        "lines": 11, "unique": 3, "duplicates": 4, "blank": 2, "unparseable": 2}
    assert report["duplicates_by_rung"] == {
        "simple": 1, "case": 0, "character": 0, "percent": 0, "path": 1, "scheme": 2,
        "protocol": 0, "fragment": 2}
    assert [x["line"] for x in report["rejects"]] == [6, 11]
    assert "line 6: port:" in r.err and "line 11: invalid UTF-8 byte 0xFF at index 7" in r.err
    assert "11 lines read: 3 unique, 4 duplicates, 2 blank, 2 unparseable" in r.err
    assert "5.3.2.1  case normalization" in r.err
    assert r.out == ""


def test_dedupe_stdin_to_stdout_canonical_iri(capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    r = run_main(["dedupe", "-", "--canonical", "--form", "iri", "-q"], capsys, monkeypatch,
                 stdin=SMALL_DUMP.replace("http://bad:port/\n", "").encode())
    assert r.code == 0 and r.err == ""
    assert r.out.splitlines() == [
        "http://example.com/a/~user", "http://bücher.example/", "http://example.com/b"]


def test_dedupe_keep_fragment_and_level(capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    data = b"http://a/#x\nhttp://a/#y\nhttp://a:80/\nhttp://a/\n"
    r = run_main(["dedupe", "-q"], capsys, monkeypatch, stdin=data)
    assert r.out.splitlines() == ["http://a/#x"]
    r = run_main(["dedupe", "-q", "--keep-fragment"], capsys, monkeypatch, stdin=data)
    assert r.out.splitlines() == ["http://a/#x", "http://a/#y", "http://a:80/"]
    r = run_main(["dedupe", "-q", "--level", "syntax"], capsys, monkeypatch, stdin=data)
    assert r.out.splitlines() == ["http://a/#x", "http://a:80/"]


def test_dedupe_json_report_to_stdout(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "o.txt"
    r = run_main(["dedupe", "-q", "-o", str(out), "--json-report", "-"], capsys, monkeypatch,
                 stdin=b"http://a/\nhttp://A/\n")
    assert r.code == 0 and json.loads(r.out)["unique"] == 1
    r = run_main(["dedupe", "--json-report", "-"], capsys, monkeypatch, stdin=b"")
    assert r.code == 2 and "needs -o FILE" in r.err


def test_dedupe_io_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                          monkeypatch: pytest.MonkeyPatch) -> None:
    r = run_main(["dedupe", str(tmp_path / "missing.txt")], capsys, monkeypatch)
    assert r.code == 2 and "cannot read" in r.err and "No such file" in r.err
    src = tmp_path / "in.txt"
    src.write_text("http://a/\n")
    r = run_main(["dedupe", str(src), "-o", str(src)], capsys, monkeypatch)
    assert r.code == 2 and "is the input file" in r.err
    assert src.read_text() == "http://a/\n"  # not clobbered
    r = run_main(["dedupe", str(src), "-o", str(tmp_path / "no" / "dir.txt")], capsys,
                 monkeypatch)
    assert r.code == 2 and "cannot write" in r.err


def test_dedupe_empty_input(capsys: pytest.CaptureFixture[str],
                            monkeypatch: pytest.MonkeyPatch) -> None:
    r = run_main(["dedupe"], capsys, monkeypatch, stdin=b"")
    assert r.code == 0 and r.out == ""
    assert "0 lines read: 0 unique" in r.err


@pytest.mark.parametrize("kind", KINDS)
def test_canonical_and_rungs_agree_with_normalize(kind: str) -> None:
    for level in (Level.SYNTAX, Level.SCHEME):
        options = NormalizeOptions(level, keep_fragment=False)
        for line in generated_lines(kind):  # seeded stand-ins for the benchmark corpora
            try:
                expected = normalize(line, level, keep_fragment=False)
            except ValueError as exc:
                with pytest.raises(ValueError) as info:
                    canonical_and_rungs(line, options)
                assert str(info.value) == str(exc)
                continue
            assert canonical_and_rungs(line, options) == (
                expected, rungs_applied(line, level, keep_fragment=False))


def test_deduper_outcomes() -> None:
    d = Deduper(max_rejects=1)
    assert d.process("http://a/") == (Outcome.UNIQUE, "http://a/")
    assert d.process("HTTP://A:80") == (Outcome.DUPLICATE, "")
    assert d.process(" ") == (Outcome.BLANK, "")
    assert d.process("http://a:b/")[0] is Outcome.REJECT
    assert d.process("http://a:c/")[0] is Outcome.REJECT
    stats = d.finish()
    assert (stats.lines, stats.unique, stats.duplicates, stats.blank, stats.unparseable) == (
        5, 1, 1, 1, 2)
    assert [r.line for r in stats.rejects] == [4]  # max_rejects listed, all counted


# --- fingerprints ---------------------------------------------------------------------


def test_fingerprints_bytes_per_entry() -> None:
    d = Deduper()
    for i in range(100_000):
        assert d.process(f"http://example.com/{i}")[0] is Outcome.UNIQUE
    stats = d.finish()
    assert stats.unique == 100_000 == len(d.seen)
    assert stats.fingerprint_bytes / stats.unique <= 24  # 8 bytes / load in [0.375, 0.75]
    assert stats.peak_fingerprint_bytes / stats.unique <= 40
    assert fingerprint("http://a/") != fingerprint("http://b/")
    assert 0 <= fingerprint("http://a/") < 2**64


def test_cli_imports_no_scrapy() -> None:
    code = ("import sys, iri_scrapy.cli.main, iri_scrapy.store.dedupe, iri_scrapy.core.bidi; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('scrapy', 'twisted')))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[]"


# --- subprocess: console script and python -m ---------------------------------------------


def test_console_script_normalize_stdin(cmd: list[str]) -> None:
    p = run(cmd, "normalize", stdin=b"HTTP://A/%7e\nhttp://x:y/\n")
    assert p.returncode == 1
    assert p.stdout == b"http://a/~\nhttp://x:y/\n"
    assert b"iri-scrapy: normalize: line 2: port:" in p.stderr
    assert b"Traceback" not in p.stderr


@pytest.mark.slow
def test_console_script_exit_codes(cmd: list[str], tmp_path: Path) -> None:
    assert run(cmd, "explain", "http://a/", "HTTP://A:80").returncode == 0
    assert run(cmd, "explain", "http://a/", "http://b/").returncode == 1
    assert run(cmd, "check", "http://a/").stdout == b"ok\n"
    assert run(cmd, "check", "http://ex\u0430mple.com/").returncode == 1
    p = run(cmd, "bogus")
    assert p.returncode == 2 and b"usage:" in p.stderr
    src = tmp_path / "in.txt"
    src.write_text("http://a/\nhttp://A/\nhttp://b/\n")
    p = run(cmd, "dedupe", str(src), "-o", "-")
    assert (p.returncode, p.stdout) == (0, b"http://a/\nhttp://b/\n")
    assert b"3 lines read: 2 unique, 1 duplicate, 0 blank" in p.stderr


def test_broken_pipe_is_quiet(tmp_path: Path) -> None:
    src = tmp_path / "big.txt"
    src.write_text("".join(f"http://example.com/{i}\n" for i in range(200_000)))
    proc = subprocess.Popen([*script(), "dedupe", str(src)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline() == b"http://example.com/0\n"
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 141
    assert b"Traceback" not in err and b"BrokenPipe" not in err


def test_ctrl_c_is_quiet() -> None:
    proc = subprocess.Popen([*script(), "dedupe", "--progress", "-o", os.devnull],
                            stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stderr is not None
    proc.stdin.write(b"".join(b"http://example.com/%d\n" % i for i in range(20_000)))
    proc.stdin.flush()
    seen = b""
    deadline = time.monotonic() + 60
    while b"lines/s" not in seen and time.monotonic() < deadline:  # the loop is running
        chunk = os.read(proc.stderr.fileno(), 4096)
        if not chunk:
            break
        seen += chunk
    assert b"lines/s" in seen
    proc.send_signal(signal.SIGINT)
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 130
    assert b"Traceback" not in err and b"KeyboardInterrupt" not in err
    proc.stdin.close()


# --- dedupe, one million lines ------------------------------------------------------------

HOSTS = [f"site{i}.example.com" for i in range(30)] + [f"bücher{i}.beispiel.de" for i in range(10)]
A_LABELS = {h: idna.encode(h, uts46=True).decode() for h in HOSTS}
SPELLINGS = 5


def spelling(k: int, j: int) -> str:
    """Spelling *j* of the five of resource *k*, equivalent at level scheme without fragments."""
    h = HOSTS[k % len(HOSTS)]
    d = k % 97
    seg = f"café-{k}" if k % 3 == 0 else f"item-{k}"
    if j == 0:  # canonical
        return f"http://{A_LABELS[h]}/d{d}/{seg.replace('é', '%C3%A9')}~x?q={k}"
    if j == 1:  # case, percent, scheme
        return f"HTTP://{A_LABELS[h].upper()}:80/d{d}/{seg.replace('é', '%c3%a9')}%7Ex?q={k}"
    if j == 2:  # IRI, dot segments
        return f"http://{h}/d{d}/./z/../{seg}~x?q={k}"
    if j == 3:  # fragment
        return f"http://{A_LABELS[h]}/d{d}/{seg.replace('é', '%C3%A9')}~x?q={k}#frag-{k}"
    return f"http://{h.upper() if h.isascii() else h}/d{d}/{seg}%7ex?q={k}"  # case, percent


def spellings(k: int) -> list[str]:
    return [spelling(k, j) for j in range(SPELLINGS)]


def shape(k: int, j: int) -> tuple[int, bool, bool]:
    """What decides which rungs a spelling needs."""
    return j, k % 3 == 0, not HOSTS[k % len(HOSTS)].isascii()


def generate(path: Path, distinct: int, blanks: int, bad: int, seed: int) -> dict[str, Any]:
    """Write the dump; return the expected output, rejects and per-rung counts."""
    rng = random.Random(seed)
    order = list(range(distinct * SPELLINGS))
    rng.shuffle(order)
    total = len(order) + blanks + bad
    special = rng.sample(range(total), blanks + bad)
    kind = {pos: ("blank" if n < blanks else "bad") for n, pos in enumerate(special)}
    first: list[str] = []
    seen = bytearray(distinct)
    rejects: list[str] = []
    dup_shapes: dict[tuple[int, bool, bool], int] = {}
    shape_example: dict[tuple[int, bool, bool], str] = {}
    items = iter(order)
    with path.open("w", encoding="utf-8") as f:
        for pos in range(total):
            what = kind.get(pos)
            if what == "blank":
                f.write(" \n" if pos % 2 else "\n")
            elif what == "bad":
                line = f"http://bad{pos}.example:po{pos}rt/x"
                rejects.append(line)
                f.write(line + "\n")
            else:
                k, j = divmod(next(items), SPELLINGS)
                line = spelling(k, j)
                if seen[k]:
                    s = shape(k, j)
                    dup_shapes[s] = dup_shapes.get(s, 0) + 1
                    shape_example.setdefault(s, line)
                else:
                    seen[k] = 1
                    first.append(line)
                f.write(line + "\n")
    by_rung = dict.fromkeys(["simple", "case", "character", "percent", "path", "scheme",
                             "protocol", "fragment"], 0)
    for s, count in dup_shapes.items():
        rungs = rungs_applied(shape_example[s], "scheme", keep_fragment=False)
        dropped = ["fragment"] if "#" in shape_example[s] else []  # RFC 3987 5.1
        for key in [r.key for r in rungs] + dropped or ["simple"]:
            by_rung[key] += count
    return {"first": first, "rejects": rejects, "by_rung": by_rung, "total": total}


def test_spellings_are_equivalent() -> None:
    for k in (0, 1, 2, 3, 31, 33, 12345):
        assert len({normalize(s, keep_fragment=False) for s in spellings(k)}) == 1
    assert len({normalize(spellings(k)[0]) for k in range(1000)}) == 1000


@pytest.mark.scale
@pytest.mark.slow  # about a minute: pytest -m "not slow" leaves it out
def test_dedupe_one_million_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    distinct, blanks, bad = 199_000, 4_000, 1_000
    src = tmp_path / "frontier.txt"
    expected = generate(src, distinct, blanks, bad, seed=20240531)
    assert expected["total"] == 1_000_000
    out, rej, rep = tmp_path / "out.txt", tmp_path / "rejects.txt", tmp_path / "report.json"

    # The real console script, in a child that reports its peak RSS (VmHWM) ...
    child = subprocess.Popen(
        [*script(), "dedupe", str(src), "-o", str(out), "--rejects", str(rej),
         "--json-report", str(rep)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    # ... while this process measures with tracemalloc on a 60,000-line head of the
    # same dump (tracemalloc slows Python down several times).
    head = tmp_path / "head.txt"
    with src.open("rb") as f, head.open("wb") as g:
        for _ in range(60_000):
            g.write(f.readline())
    argv = ["dedupe", str(head), "-o", os.devnull, "-q"]
    run_main(argv, capsys, monkeypatch)  # warm the per-host caches
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        code = main([*argv, "--json-report", str(tmp_path / "head.json")])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    head_unique = json.loads((tmp_path / "head.json").read_text())["unique"]
    traced_per_url = (peak - base) / head_unique

    assert child.stderr is not None
    err = child.stderr.read().decode()
    child.wait(timeout=600)

    # Baseline: the same command on a 2,000-line head (imports, caches, buffers).
    small = tmp_path / "small.txt"
    with src.open("rb") as f:
        small.write_bytes(b"".join(f.readline() for _ in range(2000)))
    small_json = tmp_path / "small.json"
    code_small = subprocess.run(
        [*script(), "dedupe", str(small), "-o", os.devnull, "-q", "--json-report",
         str(small_json)], timeout=120).returncode

    assert child.returncode == 1, err  # the bad lines were found
    assert code in (0, 1) and code_small in (0, 1)
    report = json.loads(rep.read_text())
    big_rss, small_rss = report["peak_rss_kib"], json.loads(small_json.read_text())["peak_rss_kib"]
    assert report["lines"] == 1_000_000
    assert report["unique"] == distinct
    assert report["duplicates"] == distinct * (SPELLINGS - 1)
    assert report["blank"] == blanks
    assert report["unparseable"] == bad
    assert report["duplicates_by_rung"] == expected["by_rung"]
    assert out.read_text(encoding="utf-8").splitlines() == expected["first"]
    assert rej.read_text(encoding="utf-8").splitlines() == expected["rejects"]
    assert "1,000,000 lines read: 199,000 unique, 796,000 duplicates" in err
    assert f"(first 20 of {bad:,}; all written to {rej}; positions are 0-based " in err

    table_per_url = report["peak_fingerprint_bytes"] / distinct
    rss_per_url = None if big_rss is None else (big_rss - small_rss) * 1024 / distinct
    print(f"\nmemory per distinct URL: fingerprint table peak {table_per_url:.1f} B, "
          f"tracemalloc {traced_per_url:.1f} B ({head_unique} distinct), "
          f"child peak RSS delta {rss_per_url} B ({big_rss} vs {small_rss} KiB)")
    assert table_per_url <= 40
    assert traced_per_url <= 40
    # A set of Python ints would cost ~70 B per URL, a set of the lines ~150 B.
    if rss_per_url is not None:  # Linux (/proc/self/status)
        assert rss_per_url <= 48
