"""Load the conformance vectors committed in tests/data (origins: tests/data/README.md).

A missing data file is an error, never a skip: ``load`` raises FileNotFoundError.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).resolve().parents[1] / "data"


def data_file(name: str) -> Path:
    """``tests/data/<name>.jsonl``, or its gzip copy ``<name>.jsonl.gz`` (large files)."""
    for path in (DATA / f"{name}.jsonl", DATA / f"{name}.jsonl.gz"):
        if path.exists():
            return path
    raise FileNotFoundError(f"test data missing: {DATA / name}.jsonl[.gz] (see tests/data/README.md)")


def load(name: str) -> list[dict[str, Any]]:
    """Records of ``tests/data/<name>.jsonl[.gz]``; FileNotFoundError if absent, ValueError if empty."""
    path = data_file(name)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        records = [json.loads(line) for line in f if line.strip()]
    if not records:
        raise ValueError(f"test data file has no records: {path}")
    return records


def params(records: list[dict[str, Any]], name: str) -> list[Any]:
    """pytest params with ids naming the source (section or line) of each record."""
    assert records, f"no records for {name}"
    out = []
    for i, r in enumerate(records):
        src = r.get("source", "")
        where = src.split(" section ")[-1].split(" line ")[0] if " section " in src else src[-40:]
        out.append(pytest.param(r, id=f"{name}-{i}-{r['kind']}-{where}".replace(" ", "_")))
    return out


def vector_inputs(skip: str | None = None) -> list[str]:
    """Every string ``input`` of the JSON Lines files in tests/data (gzipped or not), in
    file-name order; *skip* names a file to leave out."""
    out: list[str] = []
    for path in sorted(DATA.glob("*.jsonl*")):
        if path.name == skip:
            continue
        opener: Any = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    value = json.loads(line).get("input")
                    if isinstance(value, str):
                        out.append(value)
    return out
