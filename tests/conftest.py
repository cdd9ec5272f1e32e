"""Shared pytest configuration.

Hypothesis profiles: ``dev`` (100 examples a property, the quick loop) and
``ci`` (1,500 examples a property, what the core properties had before, and
reproduction blobs printed), chosen by the environment variable
``HYPOTHESIS_PROFILE`` (``HYPOTHESIS_PROFILE=ci``); when it is unset, ``ci`` if
``CI`` is set (.ci/run sets CI=true), else ``dev``.  Core properties take their
number of examples from the profile; tests with a fixed ``max_examples`` (slow
examples: real Scrapy or Redis) keep it.

Slow tests are marked ``@pytest.mark.slow``: ``pytest -m "not slow"`` is the
quick loop.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from tests.support.paths import PATHS

settings.register_profile(
    "dev", max_examples=100, deadline=None, suppress_health_check=list(HealthCheck)
)
settings.register_profile(
    "ci", max_examples=1500, deadline=None, suppress_health_check=list(HealthCheck),
    print_blob=True,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))

pytest_plugins = ["tests.support.redis_support"]


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
    if "iri_scrapy.plugin.compat" in sys.modules:
        compat = sys.modules["iri_scrapy.plugin.compat"]
        while compat.idna2008_installed():
            compat.uninstall_idna2008()


@pytest.fixture(params=PATHS)
def path(request: pytest.FixtureRequest) -> str:
    """Each code path of ``normalize`` in turn (tests/support/paths.py): climb, fused, fast."""
    return str(request.param)


#: A test that takes longer than this (setup, call and teardown) belongs in the
#: slow set; the quick loop (``-m "not slow"``) is meant to take about a minute.
SLOW_SECONDS = 2.0
_durations: dict[str, float] = {}
_unmarked: set[str] = set()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _durations[report.nodeid] = _durations.get(report.nodeid, 0.0) + report.duration
    if "slow" not in report.keywords:
        _unmarked.add(report.nodeid)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Name the tests that took over SLOW_SECONDS without the ``slow`` marker (a
    reminder, not a failure: a busy machine makes any test slow)."""
    over = sorted(((d, n) for n, d in _durations.items() if n in _unmarked and d > SLOW_SECONDS),
                  reverse=True)
    if over:
        terminalreporter.write_sep("-", f"unmarked tests over {SLOW_SECONDS:.0f} s (mark them slow?)")
        for seconds, nodeid in over[:20]:
            terminalreporter.write_line(f"{seconds:6.2f}s {nodeid}")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Slow tests first (stable: the order within each group stays). Under ``-n 2`` the
    longest tests then start while short ones remain to fill in, instead of the whole
    run waiting at its end for a few real crawls on one core.  This needs
    ``--dist worksteal`` (pyproject.toml's ``addopts``): with xdist's default
    scheduling the first worker's fixed first batch held every slow test."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
