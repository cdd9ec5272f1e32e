"""Load the peers' conformance vectors from ../shared/vectors (skip if absent)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

VECTORS = Path(__file__).resolve().parents[2] / "shared" / "vectors"
CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"


def load(name: str) -> list[dict[str, Any]]:
    """Records of ``<name>.jsonl``; an empty list if the vectors are not there."""
    path = VECTORS / f"{name}.jsonl"
    if not path.exists():
        return []
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def params(records: list[dict[str, Any]], name: str) -> list[Any]:
    """pytest params with ids naming the source (section or line) of each record."""
    if not records:
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"{VECTORS} has no {name}"))]
    out = []
    for i, r in enumerate(records):
        src = r.get("source", "")
        where = src.split(" section ")[-1].split(" line ")[0] if " section " in src else src[-40:]
        out.append(pytest.param(r, id=f"{name}-{i}-{r['kind']}-{where}".replace(" ", "_")))
    return out


def corpus(name: str) -> list[str]:
    path = CORPUS / name
    if not path.exists():
        pytest.skip(f"corpus {path} not found")
    with path.open(encoding="utf-8") as f:
        return [line.strip().lstrip("\ufeff") for line in f if line.strip()]
