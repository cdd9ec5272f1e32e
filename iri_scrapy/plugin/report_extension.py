"""A finished crawl's report: ``<JOBDIR>/iri_report.json`` and ``IRI_REPORT_FILE``.

:class:`IRICrawlReport` is an extension the add-on enables.  With ``JOBDIR`` or
``IRI_REPORT_FILE`` set it ties a bounded
:class:`~iri_scrapy.store.crawl_report.CrawlReport` to the crawl's context
(:mod:`iri_scrapy.plugin.context`, which the add-on builds); ``IRIDupeFilter.log``
hands it each duplicate it drops
(:func:`note_duplicate`: the spelling, the first spelling of its resource, the
deciding rung of RFC 3987 section 5.3, the stock fingerprint if stock Scrapy
would have fetched it), and ``IRIDupeFilter.close`` (:func:`dupefilter_closed`)
has it written: the JSON into ``JOBDIR`` (atomically), which ``iri-scrapy report
JOBDIR -o FILE.html`` renders later, and the page of ``iri-scrapy dedupe
--report`` (:mod:`iri_scrapy.store.report_page`) to ``IRI_REPORT_FILE``.

With ``JOBDIR`` the report covers the whole job: the JSON is also written every
:data:`CHECKPOINT_SECONDS` while the crawl runs, and a resumed run reads it back
(as data, :meth:`CrawlReport.read`) and goes on counting (``runs`` one more; the
stock fingerprints already counted in :mod:`iri_scrapy.store.report_state`).  After
a ``kill -9`` what the killed run did after its last write is missing.  A report
of other options (or one that cannot be read: a WARNING) is started anew.

A report that cannot be written is one ERROR line and the crawl's outcome is
unchanged; an ``IRI_REPORT_FILE`` in a directory that does not exist refuses the
start (``iri_bad_setting``), rather than being lost at the end.  A run that met no
request (a refused start) leaves the previous ``iri_report.json`` as it was.
Without either setting it is not enabled and costs nothing.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
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
    ReportError,
    write_atomically,
)
from iri_scrapy.store.report_page import render_crawl
from iri_scrapy.store.report_state import StockSeen

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from twisted.internet.task import LoopingCall
    from typing_extensions import Self

    from iri_scrapy.plugin.stamp import Stamp


logger = logging.getLogger(__name__)

#: How often the report is written into ``JOBDIR`` while the crawl runs.
CHECKPOINT_SECONDS = 5.0


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
        #: the earlier runs' part (requests, seconds, crawl stats), once read back
        self._before: tuple[int, float, dict[str, int]] | None = None
        self.stock: StockSeen | None = None
        #: the dupefilter's count of the requests it met in this run
        self._requests: Callable[[], int] = lambda: 0
        self._checkpoint: LoopingCall | None = None
        self._written_at: tuple[int, int] = (0, 0)
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

    # --- the job so far ----------------------------------------------------------------

    def _resume(self) -> StockSeen:
        """Read the earlier runs' report back (once, when this run first counts: a run
        refused at start touches nothing); the set of stock fingerprints counted."""
        if self.stock is not None:
            return self.stock
        report, keep = self.report, 0
        earlier = None
        if self.jobdir is not None:
            for tmp in Path(self.jobdir).glob(f".{FILENAME}.*.tmp"):  # a write cut by a kill
                with contextlib.suppress(OSError):
                    tmp.unlink()
            earlier = self._earlier()
        if earlier is not None:
            earlier.runs += 1
            self.report = report = earlier
            keep = earlier.stock_records
        self._before = (report.requests, report.elapsed_seconds, dict(report.crawl_stats))
        self.stock = StockSeen(self.jobdir, keep)
        return self.stock

    def _earlier(self) -> CrawlReport | None:
        """The report of this job's earlier runs in ``JOBDIR``, if it is one to go on."""
        assert self.jobdir is not None
        path = os.path.join(self.jobdir, FILENAME)
        if not os.path.exists(path):
            return None
        try:
            earlier = CrawlReport.read(path)
        except (OSError, ReportError) as exc:
            logger.warning("IRI crawl report: the report of the earlier runs (%s) cannot be "
                           "read (%s): this report covers the runs from this one on", path,
                           getattr(exc, "strerror", None) or exc)
            return None
        mine = self.report
        if (earlier.level, earlier.keep_fragment, earlier.nfc) != (
                mine.level, mine.keep_fragment, mine.nfc):
            logger.info("IRI crawl report: %s was written with other options (level %s): "
                        "this report starts anew", path, earlier.level)
            return None
        return earlier

    def opened(self, requests: Callable[[], int]) -> None:
        """The dupefilter opened: *requests* counts what it meets; with ``JOBDIR`` the
        report is written every :data:`CHECKPOINT_SECONDS` from now on."""
        self._requests = requests
        if self.jobdir is None or "twisted.internet.reactor" not in sys.modules:
            return
        from twisted.internet.task import LoopingCall

        self._checkpoint = LoopingCall(self.checkpoint)
        self._checkpoint.start(CHECKPOINT_SECONDS, now=False)

    def checkpoint(self) -> None:
        """Write the report so far into ``JOBDIR`` (if this run has counted anything new)."""
        requests = self._requests()
        if self.jobdir is None or not requests:
            return
        if (requests, self.report.duplicates) == self._written_at:
            return
        self._fill(requests, "")
        self._write_json()

    # --- collecting and writing ------------------------------------------------------------

    def duplicate(self, request: Request, record: bytes, stamp: Stamp | None, first: str | None,
                  rung: str, stock: bytes | None) -> None:
        """One request the dupefilter dropped (see :func:`note_duplicate`)."""
        seen = self._resume()
        written = spelling(request, stamp)
        key = stamp.base if stamp is not None and stamp.base else request.url
        self.report.duplicate(record.hex(), key, written, first, rung, stock is not None,
                              stock is not None and seen.add(stock))

    def _fill(self, requests: int, reason: str) -> None:
        """The totals of the job so far: the earlier runs' and this one's."""
        stock = self._resume()
        assert self._before is not None
        before_requests, before_seconds, before_stats = self._before
        report = self.report
        crawler = self.crawler
        stats = crawler.stats.get_stats() if crawler.stats is not None else {}
        now = datetime.now(timezone.utc)
        report.requests = before_requests + requests
        report.finish_reason = reason
        spider = getattr(crawler, "spider", None)
        report.spider = str(getattr(spider, "name", "") or "") or report.spider
        start = stats.get("start_time")
        report.elapsed_seconds = before_seconds
        if isinstance(start, datetime):
            if start.tzinfo is None:
                start = start.replace(tzinfo=timezone.utc)
            report.started = report.started or _iso(start)
            report.elapsed_seconds += max((now - start).total_seconds(), 0.0)
        report.finished = _iso(now)
        mine = {k: stats[k] for k in CRAWL_STATS if type(stats.get(k)) is int and stats[k] >= 0}
        report.crawl_stats = {k: before_stats.get(k, 0) + mine.get(k, 0)
                              for k in CRAWL_STATS if k in before_stats or k in mine}
        report.stock_records = stock.flush()

    def _write_json(self) -> bool:
        """Write ``iri_report.json`` into ``JOBDIR``; False (one WARNING) if it cannot be."""
        assert self.jobdir is not None
        try:
            self.report.write(self.jobdir)
        except OSError as exc:
            # a WARNING: the report is a by-product (on a full disk the
            # frontier's own ERROR line says what to do)
            logger.warning("IRI crawl report: cannot write %s into JOBDIR %s: %s "
                           "(the crawl itself is not affected)", FILENAME,
                           self.jobdir, exc.strerror or exc)
            return False
        self._written_at = (self._requests(), self.report.duplicates)
        return True

    def close(self, requests: int, reason: str) -> None:
        """Fill in the totals and write the report (the JSON, the page)."""
        if self._checkpoint is not None and self._checkpoint.running:
            self._checkpoint.stop()
        self.written = True
        if self.jobdir is not None and not requests:
            # a refused start (locked or mismatched JOBDIR: another crawl may own it) or
            # nothing left to crawl: the earlier runs' report is worth more than one of
            # zeros, and nothing in JOBDIR is touched
            logger.info("IRI crawl report: no request met the dupefilter; %s in JOBDIR %s "
                        "left as it was", FILENAME, self.jobdir)
            if self.page is not None:
                self._write_page(self._earlier() or self.report)
            return
        self._fill(requests, reason)
        if self.jobdir is not None and self._write_json():
            runs = self.report.runs
            logger.info("IRI crawl report%s: %s (iri-scrapy report %s -o report.html)",
                        "" if runs == 1 else f" (the job's {runs} runs)",
                        os.path.join(self.jobdir, FILENAME), self.jobdir)
        if self.page is not None:
            self._write_page(self.report)

    def _write_page(self, report: CrawlReport) -> None:
        """Write the page of *report* to ``IRI_REPORT_FILE`` (one ERROR line if it cannot)."""
        assert self.page is not None
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
        if self._checkpoint is not None and self._checkpoint.running:
            self._checkpoint.stop()
        if not self.written:
            logger.warning(
                "IRI crawl report not written: no IRIDupeFilter was closed in this crawl "
                "(DUPEFILTER_CLASS = %(df)r); the report comes from iri_scrapy's dupefilter, "
                "which hands it over through the add-on's crawl context%(addon)s",
                {"df": self.crawler.settings.get("DUPEFILTER_CLASS"),
                 "addon": "" if self.shared else f" ({ADDON_LINE})"})


def dupefilter_opened(context: CrawlContext, requests: Callable[[], int]) -> None:
    """``IRIDupeFilter.open``: *requests* counts the requests it meets in this run."""
    hook: IRICrawlReport | None = context.report
    if hook is not None:
        hook.opened(requests)


def note_duplicate(context: CrawlContext, request: Request, record: bytes,
                   stamp: Stamp | None, first: str | None, rung: str,
                   stock: bytes | None) -> None:
    """``IRIDupeFilter.log``: a dropped duplicate, for the crawl's report if there is one
    (*stock*: its stock fingerprint if stock Scrapy would have fetched it as another page)."""
    hook: IRICrawlReport | None = context.report
    if hook is not None:
        hook.duplicate(request, record, stamp, first, rung, stock)


def dupefilter_closed(context: CrawlContext, requests: int, reason: str) -> None:
    """``IRIDupeFilter.close``: write the crawl's report if there is one."""
    hook: IRICrawlReport | None = context.report
    if hook is not None:
        hook.close(requests, reason)
