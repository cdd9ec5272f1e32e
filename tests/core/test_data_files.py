"""tests/data/README.md lists every file in tests/data (and nothing else), with its record count."""

from __future__ import annotations

import re

import pytest

from tests.support.vectors import DATA, data_file, load

ROW = re.compile(r"^\| `([^`]+)` \| ([\d,]+) \|", re.MULTILINE)


def listed() -> dict[str, int]:
    text = (DATA / "README.md").read_text(encoding="utf-8")
    return {name: int(count.replace(",", "")) for name, count in ROW.findall(text)}


def test_readme_lists_every_data_file_and_only_those() -> None:
    on_disk = {p.name for p in DATA.iterdir() if p.name != "README.md"}
    in_readme = set(listed())
    assert on_disk - in_readme == set(), "files in tests/data not described in its README"
    assert in_readme - on_disk == set(), "files in tests/data/README.md that are not there"


def test_readme_record_counts_match_the_files() -> None:
    for name, count in listed().items():
        stem = name.removesuffix(".gz").removesuffix(".jsonl")
        assert data_file(stem).name == name
        assert len(load(stem)) == count, name


def test_missing_data_is_an_error_not_a_skip() -> None:
    with pytest.raises(FileNotFoundError, match="no_such_vectors"):
        load("no_such_vectors")
