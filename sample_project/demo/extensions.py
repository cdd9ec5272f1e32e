"""Write the crawl's final stats as JSON (used by ``run_demo.py`` to build its table)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from scrapy import signals
from scrapy.exceptions import NotConfigured

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from typing_extensions import Self


class StatsToJson:
    """On ``engine_stopped`` write ``crawler.stats`` to ``DEMO_STATS_FILE`` (if set).

    ``engine_stopped`` comes after the stats collector has closed, so the file holds
    the same numbers as Scrapy's "Dumping Scrapy stats" log line, ``finish_reason``
    included.
    """

    def __init__(self, crawler: Crawler, path: Path) -> None:
        self.crawler = crawler
        self.path = path

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        """Enabled only when ``DEMO_STATS_FILE`` is set."""
        path = crawler.settings.get("DEMO_STATS_FILE")
        if not path:
            raise NotConfigured("DEMO_STATS_FILE not set")
        ext = cls(crawler, Path(path))
        crawler.signals.connect(ext.engine_stopped, signal=signals.engine_stopped)
        return ext

    def engine_stopped(self) -> None:
        """Dump the stats."""
        stats = self.crawler.stats.get_stats() if self.crawler.stats is not None else {}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(stats, default=str, ensure_ascii=False, indent=1),
                             encoding="utf-8")
