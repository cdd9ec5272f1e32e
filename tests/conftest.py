"""Shared pytest configuration."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.paths import PATHS

pytest_plugins = ["tests.redis_support"]


def pytest_configure() -> None:
    """With ``IRI_SCRAPY_EXPECT_INSTALLED=1`` (CI's wheel environments), refuse to run
    unless ``iri_scrapy`` is the installed package, not a source tree on the path."""
    if os.environ.get("IRI_SCRAPY_EXPECT_INSTALLED") != "1":
        return
    import iri_scrapy

    where = Path(iri_scrapy.__file__).resolve()
    if "site-packages" not in where.parts:
        raise RuntimeError(f"iri_scrapy imported from {where}, not from site-packages")


@pytest.fixture(params=PATHS)
def path(request: pytest.FixtureRequest) -> str:
    """Each code path of ``normalize`` in turn (tests/paths.py): climb, fused, fast."""
    return str(request.param)
