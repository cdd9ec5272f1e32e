"""The crawl report of a resumed ``JOBDIR`` job goes on from the earlier runs' report.

In process: :class:`~iri_scrapy.plugin.report_extension.IRICrawlReport` reads
``<JOBDIR>/iri_report.json`` back when its run first counts, adds one run and
goes on with the earlier counts; a report of other options, or one that cannot
be read (a WARNING), is started anew.  The real stop-and-resume crawls are in
``tests/cli/test_crawl_report.py``.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from scrapy import Request, Spider
from scrapy.utils.test import get_crawler

from iri_scrapy.plugin.report_extension import IRICrawlReport
from iri_scrapy.store.crawl_report import FILENAME, CrawlReport


class _Spider(Spider):
    name = "report-resume"


def extension(jobdir: Path, **settings: object) -> IRICrawlReport:
    crawler = get_crawler(_Spider, {"JOBDIR": str(jobdir), **settings})
    return IRICrawlReport.from_crawler(crawler)


def earlier(jobdir: Path, level: str = "scheme") -> None:
    report = CrawlReport(level=level, requests=40, runs=1, finish_reason="shutdown",
                         started="2026-01-01T00:00:00Z", elapsed_seconds=12.0,
                         crawl_stats={"downloader/response_count": 30})
    report.duplicate("ab12", "http://a.example/x", "http://A.example/x", None, "case", True)
    report.write(jobdir)


def test_a_resumed_run_goes_on_counting(tmp_path: Path) -> None:
    earlier(tmp_path)
    ext = extension(tmp_path)
    ext.opened(lambda: 5)
    ext.duplicate(Request("http://a.example/y"), b"\x01" * 8, None, None, "simple", None)
    ext.close(5, "finished")
    doc = CrawlReport.read(tmp_path / FILENAME)
    assert (doc.runs, doc.requests, doc.duplicates, doc.finish_reason) == (2, 45, 2, "finished")
    assert doc.started == "2026-01-01T00:00:00Z" and doc.elapsed_seconds >= 12.0
    assert doc.crawl_stats["downloader/response_count"] == 30


@pytest.mark.parametrize("case", ["other options", "damaged"])
def test_a_report_it_cannot_go_on_from_is_started_anew(
        tmp_path: Path, case: str, caplog: pytest.LogCaptureFixture) -> None:
    if case == "damaged":
        (tmp_path / FILENAME).write_bytes(b"\x80\x04 not a report")
    else:
        earlier(tmp_path, level="syntax")
    ext = extension(tmp_path)
    with caplog.at_level(logging.INFO, logger="iri_scrapy"):
        ext.close(3, "finished")
    doc = CrawlReport.read(tmp_path / FILENAME)
    assert (doc.runs, doc.requests, doc.duplicates) == (1, 3, 0)
    level = logging.WARNING if case == "damaged" else logging.INFO
    assert any(r.levelno == level and "IRI crawl report" in r.getMessage()
               for r in caplog.records), caplog.text


def test_a_run_that_met_no_request_leaves_the_report(tmp_path: Path) -> None:
    earlier(tmp_path)
    before = (tmp_path / FILENAME).read_bytes()
    extension(tmp_path).close(0, "iri_jobdir_locked")
    assert (tmp_path / FILENAME).read_bytes() == before
    assert not (tmp_path / "iri_report_stock.bin").exists()  # nothing touched


def test_a_run_that_met_no_request_draws_the_earlier_report(tmp_path: Path) -> None:
    """``IRI_REPORT_FILE`` on a run refused at start: the page of the earlier runs,
    and nothing in JOBDIR touched (another crawl may hold it)."""
    job, page = tmp_path / "job", tmp_path / "page.html"
    job.mkdir()
    earlier(job)
    (job / "iri_report_stock.bin").write_bytes(b"IRIRSTK1" + b"\x01" * 16)
    before = {p.name: p.read_bytes() for p in job.iterdir()}
    extension(job, IRI_REPORT_FILE=str(page)).close(0, "iri_jobdir_locked")
    assert {p.name: p.read_bytes() for p in job.iterdir()} == before
    assert "finish reason shutdown" in page.read_text(encoding="utf-8")


def test_a_write_cut_by_a_kill_leaves_no_temporary_file(tmp_path: Path) -> None:
    earlier(tmp_path)
    (tmp_path / f".{FILENAME}.abc123.tmp").write_text('{"format": ', encoding="utf-8")
    extension(tmp_path).close(2, "finished")
    assert sorted(p.name for p in tmp_path.iterdir()) == [FILENAME, "iri_report_stock.bin"]
