"""A finished crawl's report: ``<JOBDIR>/iri_report.json`` and ``IRI_REPORT_FILE``.

:class:`IRICrawlReport` is an extension the add-on enables.  With ``JOBDIR`` or
``IRI_REPORT_FILE`` set it ties a bounded
:class:`~iri_scrapy.store.crawl_report.CrawlReport` to the crawl's context
(:mod:`iri_scrapy.plugin.context`, which the add-on builds); ``IRIDupeFilter.log``
hands it each duplicate it drops
(:func:`note_duplicate`: the spelling, the first spelling of its resource, the
deciding rung of RFC 3987 section 5.3, whether stock Scrapy would have fetched
it), and ``IRIDupeFilter.close`` (:func:`dupefilter_closed`) has it written: the
JSON into ``JOBDIR`` (atomically), which ``iri-scrapy report JOBDIR -o
FILE.html`` renders later, and the page of ``iri-scrapy dedupe --report``
(:mod:`iri_scrapy.store.report_page`) to ``IRI_REPORT_FILE``.  A report that
cannot be written is one ERROR line and the crawl's outcome is unchanged; an
``IRI_REPORT_FILE`` in a directory that does not exist refuses the start
(``iri_bad_setting``), rather than being lost at the end.  A run that met no
request (a refused start) leaves the previous ``iri_report.json``.  Without either
setting it is not enabled and costs nothing.
"""

from __future__ import annotations

import logging
import os
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import NotConfigured

from iri_scrapy.plugin import compat  # noqa: F401 - checks the installed Scrapy first
from iri_scrapy.plugin.config import setting
from iri_scrapy.plugin.context import ADDON_LINE, CrawlContext
from iri_scrapy.plugin.fingerprinter import spelling
from iri_scrapy.plugin.refusal import REASON_BAD_SETTING, refuse_start
from iri_scrapy.store.crawl_report import (
    CRAWL_STATS,
    FILENAME,
    CrawlReport,
    write_atomically,
)
from iri_scrapy.store.report_page import render_crawl

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from typing_extensions import Self

    from iri_scrapy.plugin.stamp import Stamp


logger = logging.getLogger(__name__)

def _version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("iri-scrapy")
    except PackageNotFoundError:
        return None


def _iso(moment: datetime) -> str:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class IRICrawlReport:
    """The extension behind ``iri_report.json`` and ``IRI_REPORT_FILE`` (module docstring)."""

    def __init__(self, crawler: Crawler, jobdir: str | None, page: str | None) -> None:
        context = CrawlContext.of(crawler)
        config = context.config
        #: the add-on built the context (the dupefilter reaches this report through it)
        self.shared = context.shared
        self.crawler = crawler
        self.jobdir = jobdir
        self.page = page
        self.report = CrawlReport(level=config.level.name.lower(),
                                  keep_fragment=config.keep_fragments, nfc=config.nfc)
        self.written = False
        crawler.signals.connect(self._spider_closed, signal=signals.spider_closed)
        context.report = self

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        """Enabled with ``JOBDIR`` or ``IRI_REPORT_FILE``; else ``NotConfigured``."""
        settings = crawler.settings
        jobdir = settings.get("JOBDIR") or None
        page: Any = setting(settings, "IRI_REPORT_FILE")
        if not jobdir and not page:
            raise NotConfigured  # no message: Scrapy would log it as a WARNING
        if page is not None:
            problem = None
            if not isinstance(page, (str, os.PathLike)) or not os.fspath(page):
                problem = f"expected a file path, got {page!r}"
            elif not os.path.isdir(os.path.dirname(os.path.abspath(page))):
                problem = (f"the directory of {os.fspath(page)!s} does not exist: create it "
                           "or choose another path")
            if problem is not None:
                error = ValueError(f"IRI_REPORT_FILE: {problem}")
                refuse_start(crawler, REASON_BAD_SETTING, f"{error} (docs/settings.md)", error)
                page = None
            else:
                page = os.fspath(page)
        return cls(crawler, str(jobdir) if jobdir else None, page)

    def duplicate(self, request: Request, record: bytes, stamp: Stamp | None, first: str | None,
                  rung: str, stock_alias: bool) -> None:
        """One request the dupefilter dropped (see :func:`note_duplicate`)."""
        written = spelling(request, stamp)
        key = stamp.base if stamp is not None and stamp.base else request.url
        self.report.duplicate(record.hex(), key, written, first, rung, stock_alias)

    def close(self, requests: int, reason: str) -> None:
        """Fill in the totals and write the report (the JSON, the page)."""
        report = self.report
        crawler = self.crawler
        stats = crawler.stats.get_stats() if crawler.stats is not None else {}
        now = datetime.now(timezone.utc)
        report.requests = requests
        report.finish_reason = reason
        spider = getattr(crawler, "spider", None)
        report.spider = str(getattr(spider, "name", "") or "")
        start = stats.get("start_time")
        if isinstance(start, datetime):
            report.started = _iso(start)
            if start.tzinfo is None:
                start = start.replace(tzinfo=timezone.utc)
            report.elapsed_seconds = max((now - start).total_seconds(), 0.0)
        report.finished = _iso(now)
        report.crawl_stats = {k: stats[k] for k in CRAWL_STATS
                              if type(stats.get(k)) is int and stats[k] >= 0}
        self.written = True
        if self.jobdir is not None and not requests:
            # a refused start (locked or mismatched JOBDIR) or nothing left to crawl: the
            # previous run's report is worth more than one of zeros
            logger.info("IRI crawl report: no request met the dupefilter; %s in JOBDIR %s "
                        "left as it was", FILENAME, self.jobdir)
        elif self.jobdir is not None:
            try:
                path = report.write(self.jobdir)
            except OSError as exc:
                # a WARNING: the report is a by-product (on a full disk the
                # frontier's own ERROR line says what to do)
                logger.warning("IRI crawl report: cannot write %s into JOBDIR %s: %s "
                               "(the crawl itself is not affected)", FILENAME,
                               self.jobdir, exc.strerror or exc)
            else:
                logger.info("IRI crawl report: %s (iri-scrapy report %s -o report.html)",
                            path, self.jobdir)
        if self.page is not None:
            source = self.jobdir or report.spider or "crawl"
            try:
                write_atomically(self.page, render_crawl(report, source=source,
                                                         version=_version()))
            except OSError as exc:
                logger.error("IRI crawl report: cannot write IRI_REPORT_FILE %s: %s",
                             self.page, exc.strerror or exc)
            else:
                logger.info("IRI crawl report: page written to %s", self.page)

    def _spider_closed(self, reason: str = "") -> None:
        if not self.written:
            logger.warning(
                "IRI crawl report not written: no IRIDupeFilter was closed in this crawl "
                "(DUPEFILTER_CLASS = %(df)r); the report comes from iri_scrapy's dupefilter, "
                "which hands it over through the add-on's crawl context%(addon)s",
                {"df": self.crawler.settings.get("DUPEFILTER_CLASS"),
                 "addon": "" if self.shared else f" ({ADDON_LINE})"})


def note_duplicate(context: CrawlContext, request: Request, record: bytes,
                   stamp: Stamp | None, first: str | None, rung: str, stock_alias: bool) -> None:
    """``IRIDupeFilter.log``: a dropped duplicate, for the crawl's report if there is one."""
    hook: IRICrawlReport | None = context.report
    if hook is not None:
        hook.duplicate(request, record, stamp, first, rung, stock_alias)


def dupefilter_closed(context: CrawlContext, requests: int, reason: str) -> None:
    """``IRIDupeFilter.close``: write the crawl's report if there is one."""
    hook: IRICrawlReport | None = context.report
    if hook is not None:
        hook.close(requests, reason)
