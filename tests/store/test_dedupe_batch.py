"""Dedupe as a batch (iri_scrapy/store/dedupe_batch.py, iri_scrapy/core/_batch.c) gives the
streaming path's output, rejects and statistics, byte for byte.

``iri-scrapy dedupe`` is run in this process twice on the same input, once through the
native batch loop and once with it turned off (every line through ``Deduper.process``),
over generated corpora and the inputs of the vector files in tests/data, mutations of
them (the aliases a dump holds, and single-character edits) and the edges of line
reading (CRLF, a byte order mark, a last line without line feed, a lone CR, blank
lines, bytes that are not UTF-8); and once more with
``IRISCRAPY_NATIVE=0`` in a subprocess (the pure-Python path).  The native BLAKE2b and
seen-set are checked against hashlib and ``FingerprintSet``.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from hashlib import blake2b
from pathlib import Path
from typing import Any

import pytest

from iri_scrapy.cli import main as cli
from iri_scrapy.core import native
from iri_scrapy.store import dedupe_batch
from iri_scrapy.store.dedupe import Deduper, fingerprint
from iri_scrapy.store.fpstore import FingerprintSet
from tests.core.test_native import _texts
from tests.support.generated_urls import KINDS, lines

pytestmark = pytest.mark.skipif(native.MODULE is None, reason="native fast path not built")

_ALPHABET = "aZ09:/?#%.@-_~ AFfx\u00e9\t"
_EDGES = [
    b"\xef\xbb\xbfhttp://bom.example/", b"http://crlf.example/\r", b"", b"   ", b"\t",
    b"http://a.example/\r", b"HTTP://A.EXAMPLE/", b"http://a.example:80/", b"http://a.example",
    b"http://a.example/#f", b"http://a.example/#g", b"http://a.example/?q#f",
    b"http://a.example/./x", b"http://a.example/x", b"no scheme", b"http://bad\xc9.example/",
    b"http://a.example/\x00", b" http://a.example/ ", b"http://a.example/%7e", b"http://a.example/~",
    b"http://caf\xc3\xa9.example/", b"http://xn--caf-dma.example/", b"file:///etc/x", b"file:///etc/x",
    b"mailto:a@b.example", b"http://a.example/\r\r", b"http://1.2.3.4/", b"http://a.example:65536/",
]


#: The aliases a frontier dump holds (benchmarks/bench_dedupe.py makes the same kinds).
_ALIASES = (
    lambda u: u.upper(),
    lambda u: u.replace("://", "://WWW.", 1),
    lambda u: u + "#top",
    lambda u: u.replace("/", "/./", 3),
    lambda u: re.sub(r"^(https?://[^/?#]*)", lambda m: m.group(1) + (
        ":443" if u.startswith("https") else ":0080"), u),
    lambda u: re.sub(r"^([a-z]+)://([^/?#]*)/", r"\1://\2/a/../", u),
    lambda u: u.replace("%2F", "%2f").replace("~", "%7e").replace("-", "%2d"),
    lambda u: u.split("://", 1)[0].upper() + "://" + u.split("://", 1)[-1],
)


def _mutate(line: str, rnd: random.Random) -> str:
    roll = rnd.randrange(len(_ALIASES) + 4)
    if roll < len(_ALIASES):
        return _ALIASES[roll](line)  # type: ignore[no-untyped-call]
    i = rnd.randrange(len(line) + 1)
    return line[:i] + rnd.choice(_ALPHABET) + line[i + (roll == len(_ALIASES)):]


def _corpus(tmp_path: Path, n: int = 400) -> Path:
    rnd = random.Random(32)
    base = [u for kind in KINDS for u in lines(kind, n=n)]
    raw = [u.encode("utf-8", "surrogateescape") for u in base]
    raw += [_mutate(u, rnd).encode("utf-8", "surrogateescape") for u in base for _ in range(2)]
    raw += raw[: len(raw) // 3]
    rnd.shuffle(raw)
    path = tmp_path / "urls.txt"
    body = b"\n".join(_EDGES[:1] + raw + _EDGES[1:])
    path.write_bytes(body.replace(b"http://crlf.example/\r", b"http://crlf.example/\r\n"
                                  b"http://crlf2.example/\r") + b"\nhttp://no-line-feed.example/\r")
    return path


def _run(path: Path, tmp_path: Path, name: str, options: list[str]) -> tuple[bytes, bytes, dict]:
    out, rej, rep = (tmp_path / f"{name}.{ext}" for ext in ("out", "rej", "json"))
    status = cli.main(["dedupe", str(path), "-o", str(out), "--rejects", str(rej),
                       "--json-report", str(rep), "-q", *options])
    assert status in (0, 1)
    report = json.loads(rep.read_text())
    for volatile in ("elapsed_seconds", "peak_rss_kib"):
        report.pop(volatile)
    return out.read_bytes(), rej.read_bytes(), report


@pytest.mark.parametrize("options", [
    [], ["--keep-fragment"], ["--canonical"], ["--no-rung-stats"], ["--level", "protocol"],
    ["--canonical", "--keep-fragment", "--max-listed", "1000"],
])
def test_the_batch_path_writes_what_the_streaming_path_writes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, options: list[str]) -> None:
    path = _corpus(tmp_path)
    used: list[bytes] = []
    real_run = dedupe_batch.run

    def counted(deduper: Deduper, block: bytes, *rest: Any) -> None:
        used.append(block)
        real_run(deduper, block, *rest)

    monkeypatch.setattr(dedupe_batch, "run", counted)
    batch = _run(path, tmp_path, "batch", options)
    assert used, "the batch path was not taken"
    monkeypatch.setattr(dedupe_batch, "ready", lambda deduper: False)
    stream = _run(path, tmp_path, "stream", options)
    assert batch[0] == stream[0]
    assert batch[1] == stream[1]
    assert batch[2] == stream[2]
    assert batch[2]["unique"] > 500 and batch[2]["duplicates"] > 500


@pytest.mark.slow
def test_the_vector_files_their_aliases_and_mutations(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The inputs of the vector files in tests/data (the edge cases of many normalizers),
    each with its aliases and a single-character mutation: the same output, rejects and
    report through the batch loop as through the streaming path."""
    rnd = random.Random(3987)
    texts = [t for t in _texts() if "\n" not in t and "\r" not in t][:12_000]
    raw = [t.encode("utf-8", "surrogateescape") for t in texts]
    raw += [_mutate(t, rnd).encode("utf-8", "surrogateescape") for t in texts for _ in range(2)]
    rnd.shuffle(raw)
    path = tmp_path / "vectors.txt"
    path.write_bytes(b"\n".join(raw) + b"\n")
    for options in ([], ["--keep-fragment", "--canonical"]):
        batch = _run(path, tmp_path, "batch", options)
        with monkeypatch.context() as patch:
            patch.setattr(dedupe_batch, "ready", lambda deduper: False)
            stream = _run(path, tmp_path, "stream", options)
        assert batch == stream, options
        assert batch[2]["duplicates_by_rung"]["percent"] > 100


def test_the_loop_keeps_the_common_aliases(monkeypatch: pytest.MonkeyPatch) -> None:
    """Case, default and padded ports, escapes, dot segments, an empty path: decided in
    the loop, counted under their rungs as the streaming path counts them."""
    lines_in = [b"http://a.example/~x/y", b"HTTP://A.EXAMPLE:80/%7ex/./y#f",
                b"http://a.example:0080/z/../~x/y", b"https://b.example", b"https://B.example:443/",
                b"http://a.example/%2fq?%7e", b"http://a.example/%2Fq?~"]
    missed: list[bytes] = []
    batch = Deduper()
    dedupe_batch.run(batch, b"\n".join(lines_in) + b"\n", lambda out: None, missed.append)
    assert missed == []
    stream = Deduper()
    for line in lines_in:
        stream.process(line.decode())
    assert batch.stats == stream.stats
    assert batch.stats.unique == 3 and batch.stats.first_by_rung["scheme"] == 1
    assert batch.stats.by_rung == {**dict.fromkeys(batch.stats.by_rung, 0), "simple": 1,
                                   "case": 2, "percent": 1, "path": 2, "scheme": 3, "fragment": 1}


def test_blocks_cut_at_line_feeds_and_drop_the_bom_once(tmp_path: Path) -> None:
    data = b"\xef\xbb\xbfa\nb\r\n\xef\xbb\xbfc\n" + b"x" * 10 + b"\nlast"
    path = tmp_path / "in.txt"
    path.write_bytes(data)
    for size in (1, 2, 3, 5, 1 << 20):
        with open(path, "rb") as f:
            got = list(dedupe_batch.blocks(f, size))
        assert b"".join(got) == data[3:]
        assert all(block.endswith(b"\n") for block in got[:-1])


def test_the_options_the_loop_does_not_know_take_the_streaming_path() -> None:
    assert dedupe_batch.ready(Deduper())
    for kwargs in ({"level": "syntax"}, {"nfc": True}, {"sort_query": True},
                   {"drop_query_params": ["utm_*"]}, {"samples": True},
                   {"canonical": True, "form": "iri"}):
        assert not dedupe_batch.ready(Deduper(**kwargs)), kwargs  # type: ignore[arg-type]


def test_the_native_fingerprint_is_blake2b_read_big_endian() -> None:
    assert native.MODULE is not None
    rnd = random.Random(7693)
    for n in [*range(300), 1000, 4096, 65537]:
        data = rnd.randbytes(n)
        want = int.from_bytes(blake2b(data, digest_size=8).digest(), "big")
        assert native.MODULE.fingerprint(data) == want, n


def test_the_native_table_is_the_fingerprint_set() -> None:
    table, reference = native.fingerprint_table(), FingerprintSet()
    assert table is not None
    rnd = random.Random(12)
    values = [rnd.getrandbits(64) for _ in range(200_000)] + [0, 1, 2**64 - 1]
    values += rnd.sample(values, 5000)
    for value in values:
        assert table.add(value) == reference.add(value)
    assert len(table) == len(reference)
    assert table.nbytes == reference.nbytes and table.peak_nbytes == reference.peak_nbytes
    assert all(v in table for v in values[:1000]) and 12345 not in table
    assert -1 not in table and 2**64 not in table and "x" not in table


@pytest.mark.slow
def test_the_pure_python_path_writes_the_same(tmp_path: Path) -> None:
    path = _corpus(tmp_path, n=300)
    outs = []
    for flag in ("1", "0"):
        env = dict(os.environ, IRISCRAPY_NATIVE=flag)
        proc = subprocess.run(
            [sys.executable, "-m", "iri_scrapy", "dedupe", str(path), "--json-report", "-",
             "-o", str(tmp_path / f"out{flag}"), "-q"],
            env=env, capture_output=True, check=False)
        assert proc.returncode == 1, proc.stderr  # the rejects
        report = json.loads(proc.stdout)
        for volatile in ("elapsed_seconds", "peak_rss_kib"):
            report.pop(volatile)
        outs.append(((tmp_path / f"out{flag}").read_bytes(), report))
    assert outs[0] == outs[1]


def test_the_record_mode_answers_each_line_as_classify_and_add(tmp_path: Path) -> None:
    """``records`` (the Spark pass's entry point, a row per line): each line it answers
    has the fingerprint, key and rungs ``Deduper.classify`` gives it and is first of its
    resource exactly when ``Deduper.add`` says so; its counts are those of the CLI's
    loop; the lines it leaves are the ones the CLI's loop leaves."""
    block = _corpus(tmp_path).read_bytes() + b"\n".join(_EDGES[1:]) + b"\n"
    keys = dedupe_batch.rung_keys()
    for keep in (False, True):
        batch, reference = Deduper(keep_fragment=keep), Deduper(keep_fragment=keep)
        lines = block.split(b"\n")[:-1]
        row = answered = 0
        for got in dedupe_batch.records(batch, block, True):
            key_lines = got.keys.split(b"\n")[:-1]
            fps = [int.from_bytes(got.fps[i:i + 8], sys.byteorder)
                   for i in range(0, len(got.fps), 8)]
            assert len(fps) == len(got.rungs) == len(got.added) == len(key_lines)
            for fp, bits, added, key in zip(fps, got.rungs, got.added, key_lines, strict=True):
                line = lines[row].decode().removesuffix("\r")
                outcome, text, rungs, _ = reference.classify(line)
                assert outcome is None and fp == fingerprint(text) and key == text.encode()
                assert rungs == tuple(k for i, k in enumerate(keys[1:]) if bits >> i & 1)
                assert added == reference.add(fp, rungs)
                row += 1
            answered += len(fps)
            dedupe_batch.count(batch, got.first, got.duplicates, got.first_rungs,
                               got.duplicate_rungs)
            if got.miss:  # the line the CLI's loop leaves too
                outcome, text, rungs, _ = reference.classify(
                    lines[row].decode("utf-8", "surrogateescape"))
                if outcome is None:
                    fp = fingerprint(text)
                    assert batch.add(fp, rungs) == reference.add(fp, rungs)
                row += 1
        assert row == len(lines) and answered > len(lines) // 4
        assert batch.stats.by_rung == reference.stats.by_rung
        assert batch.stats.first_by_rung == reference.stats.first_by_rung
