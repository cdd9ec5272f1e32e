"""Shared pytest configuration."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

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


@pytest.fixture(autouse=True)
def _no_leftover_request_seam() -> Iterator[None]:
    """A crawler built with the add-on in a test (``get_crawler``) installs the
    process-wide IDNA 2008 ``Request()`` seam and never stops its engine: undo it
    after each test so that the next one starts from Scrapy's own ``Request()``."""
    yield
    if "iri_scrapy.adapters.compat" in sys.modules:
        compat = sys.modules["iri_scrapy.adapters.compat"]
        while compat.idna2008_installed():
            compat.uninstall_idna2008()
