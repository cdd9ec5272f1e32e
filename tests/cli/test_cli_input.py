"""What the command line reads: a byte order mark and input that is not text.

A file saved by an editor that starts it with a UTF-8 byte order mark is read as
Python's ``utf-8-sig`` codec reads it (the mark skipped), by every command that
reads lines.  A line that is not text (a byte that is not UTF-8, a control
character such as NUL: the rule ``dedupe`` refuses lines by) is reported with its
line number and never written back.  ``main(argv)`` in process: fast.
"""

from __future__ import annotations

import io
import sys

import pytest

from iri_scrapy.cli.main import main

BOM = b"\xef\xbb\xbf"


def run_main(argv: list[str], stdin: bytes, capsysbinary: pytest.CaptureFixture[bytes],
             monkeypatch: pytest.MonkeyPatch) -> tuple[int, bytes, str]:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
    code = main(argv)
    out, err = capsysbinary.readouterr()
    return code, out, err.decode("utf-8", "replace")


BOM_CASES = [  # (argv, stdin, expected stdout)
    (["normalize"], BOM + b"HTTP://A.com/x\nhttp://b.com\n", b"http://a.com/x\nhttp://b.com/\n"),
    (["normalize"], BOM + b"\n", b"\n"),
    (["dedupe", "-q"], BOM + b"http://a.com/x\nhttp://A.com/x\n", b"http://a.com/x\n"),
    (["check"], BOM + b"http://a.com/\n", b"http://a.com/\tok\n"),
]


@pytest.mark.parametrize(("argv", "stdin", "out"), BOM_CASES)
def test_leading_bom_is_skipped(argv: list[str], stdin: bytes, out: bytes,
                                capsysbinary: pytest.CaptureFixture[bytes],
                                monkeypatch: pytest.MonkeyPatch) -> None:
    code, got, err = run_main(argv, stdin, capsysbinary, monkeypatch)
    assert (code, got, err) == (0, out, "")


def test_bom_inside_the_file_is_still_refused(capsysbinary: pytest.CaptureFixture[bytes],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    # Only the file's first bytes are a byte order mark; later it is a character.
    code, out, err = run_main(["dedupe"], b"http://a/\n" + BOM + b"http://b/\n",
                              capsysbinary, monkeypatch)
    assert (code, out) == (1, b"http://a/\n")
    assert "line 2: byte order mark U+FEFF at index 0" in err


NOT_TEXT = [  # (line, message)
    (b"\x89PNG\r", "line 1: invalid UTF-8 byte 0x89 at index 0"),
    (b"http://a/\x00b", "line 1: control character U+0000 (NUL) at index 9"),
    (b"\x7fELF\x02\x01\x01\x00\x00", "line 1: control character U+007F (DEL) at index 0"),
    (b"http://a/caf\xe9", "line 1: invalid UTF-8 byte 0xE9 at index 12"),
]


@pytest.mark.parametrize(("line", "why"), NOT_TEXT)
@pytest.mark.parametrize("on_error", ["keep", "empty", "skip"])
def test_normalize_never_echoes_binary(line: bytes, why: str, on_error: str,
                                       capsysbinary: pytest.CaptureFixture[bytes],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err = run_main(["normalize", "--on-error", on_error],
                              line + b"\nhttp://B/\n", capsysbinary, monkeypatch)
    assert code == 1
    # keep and empty: an empty line keeps the output aligned; skip: nothing.
    assert out == (b"http://b/\n" if on_error == "skip" else b"\nhttp://b/\n")
    assert f"iri-scrapy: normalize: {why}" in err
    assert "1 input(s) could not be normalized" in err


HUGE_HOSTS = {  # 1 MB hosts: many labels (refused by their full stops), one label
    "labels": "é." * 333_333,
    "one-label": "é" * 500_000,
}


@pytest.mark.parametrize("shape", sorted(HUGE_HOSTS))
def test_normalize_memory_of_a_huge_host_is_bounded(shape: str,
                                                    capsysbinary: pytest.CaptureFixture[bytes],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import tracemalloc

    data = f"http://{HUGE_HOSTS[shape]}x.com/\n".encode()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
    tracemalloc.start()
    try:
        code = main(["normalize"])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    out, err = capsysbinary.readouterr()
    assert (code, out) == (1, data)  # text, not a URL: kept as written
    assert len(err) < 2000  # the message quotes a shortened host
    assert peak < 20 * len(data), f"{peak / len(data):.1f} bytes per input byte"
