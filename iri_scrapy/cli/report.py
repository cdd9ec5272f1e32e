"""The report pages of the CLI: ``dedupe --report FILE.html`` and ``report JOBDIR``.

Both are drawn by one renderer, :mod:`iri_scrapy.store.report_page` (the plugin's
``IRI_REPORT_FILE`` uses it too): a self-contained HTML file, no script, nothing
fetched.  ``iri-scrapy report`` reads the ``iri_report.json`` a crawl with the
add-on left in its ``JOBDIR`` (:mod:`iri_scrapy.store.crawl_report`) as data,
every field checked; a file that is not such a report is refused in one line.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from iri_scrapy.core.ladder import Rung
from iri_scrapy.store.crawl_report import FILENAME, CrawlReport
from iri_scrapy.store.dedupe import DedupeStats, Samples
from iri_scrapy.store.report_page import render_crawl, render_dedupe
from iri_scrapy.version import __version__


def render(
    stats: DedupeStats,
    samples: Samples,
    *,
    source: str,
    level: str,
    keep_fragment: bool,
    nfc: bool,
    rungs: Sequence[Rung],
    elapsed: float,
) -> str:
    """The report page of a dedupe run, as one HTML document."""
    return render_dedupe(stats, samples, source=source, level=level,
                         keep_fragment=keep_fragment, nfc=nfc, rungs=rungs, elapsed=elapsed,
                         version=__version__)


def crawl_report_path(path: str) -> str:
    """``<path>/iri_report.json`` for a directory (a ``JOBDIR``), else *path* itself."""
    return os.path.join(path, FILENAME) if os.path.isdir(path) else path


def render_crawl_page(report: CrawlReport, *, source: str) -> str:
    """The page of a crawl's report (read with :meth:`CrawlReport.read`, which refuses a
    file that is not one), *source* naming where it came from."""
    return render_crawl(report, source=source, version=__version__)
