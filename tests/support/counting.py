"""A Scrapy extension that counts the canonicalizations a crawl performs.

Installed in the crawl subprocess (``EXTENSIONS = {"tests.support.counting.
CountCanonicalizations": 0}``), it wraps the core's entry points, wherever a
module of the package bound them by name, and writes the counts to the crawl's
stats at close: ``test/normalize`` (calls of :func:`iri_scrapy.core.ladder.normalize`
from outside the core, recursion not counted) and ``test/climb`` (calls of
:func:`iri_scrapy.core.ladder.canonical_and_rungs`, the rung-recording climb,
which ``rungs_applied`` uses) and ``test/explain`` (calls of
:func:`iri_scrapy.core.explain.explain`, two climbs each).  Test support only.
"""

from __future__ import annotations

import sys
from collections import Counter
from typing import TYPE_CHECKING, Any

from scrapy import signals

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

__all__ = ["CountCanonicalizations", "COUNTS"]

COUNTS: Counter[str] = Counter()
_WRAPPED: dict[str, Any] = {}


def _wrap(module: Any, name: str, stat: str) -> Any:
    original = getattr(module, name)
    if getattr(original, "_counting", False):
        return original
    depth = [0]

    def counting(*args: Any, **kwargs: Any) -> Any:
        if not depth[0]:
            COUNTS[stat] += 1
        depth[0] += 1
        try:
            return original(*args, **kwargs)
        finally:
            depth[0] -= 1

    counting._counting = True  # type: ignore[attr-defined]
    counting._original = original  # type: ignore[attr-defined]
    return counting


def install() -> None:
    """Rebind the counting wrappers in every loaded ``iri_scrapy`` module (idempotent)."""
    from iri_scrapy.core import explain, ladder

    for module, name, stat in ((ladder, "normalize", "test/normalize"),
                               (ladder, "canonical_and_rungs", "test/climb"),
                               (explain, "explain", "test/explain")):
        wrapper = _WRAPPED.get(name) or _wrap(module, name, stat)
        _WRAPPED[name] = wrapper
        original = wrapper._original
        for modname, module in list(sys.modules.items()):
            if not modname.startswith("iri_scrapy") or module is None:
                continue
            for attr, value in list(vars(module).items()):
                if value is original:
                    setattr(module, attr, wrapper)
        setattr(module, name, wrapper)


class CountCanonicalizations:
    """Counts canonicalizations from spider open to close into the crawl's stats."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        install()
        crawler.signals.connect(self.opened, signal=signals.spider_opened)
        crawler.signals.connect(self.closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CountCanonicalizations:
        return cls(crawler)

    def opened(self, **_: Any) -> None:
        install()  # every component is built by now: catch late imports too
        COUNTS.clear()

    def closed(self, **_: Any) -> None:
        stats = self.crawler.stats
        if stats is not None:
            for key, value in COUNTS.items():
                stats.set_value(key, value)
