"""``iri-scrapy frontier salvage``: stdlib sqlite3 only, counts what it saves and loses.

The stores here are written with :mod:`sqlite3` and the schema of
``iri_scrapy.store.frontier_file`` (no Scrapy in this process's work); the real
crawls that end in a salvage are in ``tests/frontier/test_jobdir_faults.py``.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from iri_scrapy.cli.main import main
from iri_scrapy.store.frontier_file import (
    FILENAME,
    FORMAT_VERSION,
    PENDING_DDL,
    PENDING_INDEX,
    PROTOCOL_DDL,
    order_key,
)


def _store(job: Path, count: int, fmt: int = FORMAT_VERSION) -> Path:
    job.mkdir(parents=True, exist_ok=True)
    path = job / FILENAME
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute("CREATE TABLE seen (fp INTEGER NOT NULL)")
        if fmt == 1:
            conn.execute("CREATE TABLE pending (id INTEGER PRIMARY KEY AUTOINCREMENT, "
                         "request BLOB NOT NULL)")
        else:
            conn.execute(PENDING_DDL)
            conn.execute(PENDING_INDEX)
        conn.executemany("INSERT INTO meta VALUES (?, ?)", [
            ("format", str(fmt)), ("canonicalization", "3"), ("tag", "t"), ("clean", "1")])
        for i in range(1, count + 1):
            record = json.dumps({"v": 1, "url": f"http://e.com/{i}", "priority": i % 3,
                                 "pad": "x" * 300}).encode()
            conn.execute("INSERT INTO seen VALUES (?)", (i * 7919,))
            if fmt == 1:
                conn.execute("INSERT INTO pending VALUES (?, ?)", (i, record))
            else:
                conn.execute("INSERT INTO pending VALUES (?, ?, ?, ?, ?, ?)",
                             (i, record, *order_key(i, i % 3, False), ""))
    conn.close()
    return path


def test_whole_store_left_untouched(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _store(tmp_path / "job", 400)
    before = path.read_bytes()
    assert main(["frontier", "salvage", str(tmp_path / "job")]) == 0
    out = capsys.readouterr().out
    assert out == f"{path} is readable and whole (SQLite quick_check ok, its options and " \
                  "format in place): nothing to salvage, left untouched\n"
    assert path.read_bytes() == before
    assert sorted(p.name for p in (tmp_path / "job").iterdir()) == [
        "iri_frontier.lock", FILENAME]


def test_intact_store_everything_saved(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _store(tmp_path / "job", 400)
    assert main(["frontier", "salvage", str(tmp_path / "job"), "--out",
                 str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "pending requests: 400 saved, 0 ids unreadable" in out
    assert "seen fingerprints: 400 saved, 0 rows unreadable" in out
    with sqlite3.connect(tmp_path / "out" / FILENAME) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone() == (
            str(FORMAT_VERSION),)
        assert conn.execute("SELECT seq FROM sqlite_sequence").fetchone() == (400,)
    conn.close()


def test_the_requests_learned_rules_hold_back_are_saved(tmp_path: Path) -> None:
    """The ``protocol`` table (level protocol: requests held back by a learned rule,
    whose keys the seen-set holds) is copied, or they would never be fetched."""
    path = _store(tmp_path / "job", 3)
    rows = [("held", "http://e.com/1?ref=z", b"{}"), ("page", "http://e.com/1", b"d" * 16)]
    with sqlite3.connect(path) as conn:
        conn.execute(PROTOCOL_DDL)
        conn.executemany("INSERT INTO protocol VALUES (?, ?, ?)", rows)
    conn.close()
    assert main(["frontier", "salvage", str(tmp_path / "job"), "--out",
                 str(tmp_path / "out")]) == 0
    with sqlite3.connect(tmp_path / "out" / FILENAME) as conn:
        assert sorted(conn.execute("SELECT kind, key, value FROM protocol")) == rows
    conn.close()


def test_format_1_gets_the_order_columns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _store(tmp_path / "job", 30, fmt=1)
    assert main(["frontier", "salvage", str(tmp_path / "job"), "--out",
                 str(tmp_path / "out")]) == 0
    with sqlite3.connect(tmp_path / "out" / FILENAME) as conn:
        first = conn.execute("SELECT id FROM pending ORDER BY np, kind, ord LIMIT 2").fetchall()
    conn.close()
    assert first == [(29,), (26,)]  # priority 2, newest first


def test_damaged_pages_counted_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _store(tmp_path / "job", 2000)
    with sqlite3.connect(path) as conn:
        pages = [row[0] for row in conn.execute(
            "SELECT pageno FROM dbstat WHERE name = 'pending' AND pagetype = 'leaf' "
            "ORDER BY path")]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    with path.open("r+b") as f:
        f.seek((pages[len(pages) // 2] - 1) * size)
        f.write(b"\xff" * size)
    assert main(["frontier", "salvage", str(tmp_path / "job")]) == 1
    out = capsys.readouterr().out
    saved = int(out.split("pending requests: ")[1].split(" saved")[0])
    lost = int(out.split("saved, ")[1].split(" ids")[0])
    assert 0 < lost < 100 and saved + lost == 2000


def test_errors_are_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["frontier", "salvage", str(tmp_path / "none")]) == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / FILENAME).write_bytes(b"garbage" * 500)
    assert main(["frontier", "salvage", str(tmp_path / "job")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nothing can be salvaged" in err


def test_salvage_loads_no_scrapy(tmp_path: Path) -> None:
    _store(tmp_path / "job", 10)
    code = ("import sys\nfrom iri_scrapy.cli.main import main\n"
            f"assert main(['frontier', 'salvage', {str(tmp_path / 'job')!r}]) == 0\n"
            "bad = [m for m in ('scrapy', 'twisted', 'w3lib') if m in sys.modules]\n"
            "assert not bad, bad\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr
