"""The crawl report's collector stays bounded, and its file is written atomically.

:class:`iri_scrapy.store.crawl_report.CrawlReport` is fed one duplicate at a
time by the dupefilter for a whole crawl: its counters are exact, its samples
(hosts, clusters, spellings) bounded whatever the crawl's size.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from iri_scrapy.store.crawl_report import (
    CLUSTERS_PER_RUNG,
    FILENAME,
    CrawlReport,
    ReportError,
)
from iri_scrapy.store.dedupe import MAX_CLUSTER_SPELLINGS, MAX_CLUSTERS, MAX_HOSTS

RUNGS = ("case", "percent", "path", "scheme", "fragment")


def test_counters_exact_samples_bounded() -> None:
    report = CrawlReport()
    n = 0
    for i in range(MAX_HOSTS + 500):
        host = f"h{i}.example"
        key = f"http://{host}/p"
        for j, rung in enumerate(RUNGS * 2):
            written = f"http://{host.upper()}/p?{j}" if rung != "simple" else key
            report.duplicate(f"t{i}", key, written, None, rung, j % 3 == 0)
            n += 1
        report.duplicate(f"t{i}", key, key, None, "simple", False)
        n += 1
    assert report.duplicates == n
    assert report.decided_by["simple"] == MAX_HOSTS + 500
    assert report.stock_aliases == sum(1 for _ in range(MAX_HOSTS + 500) for j in range(10)
                                       if j % 3 == 0)
    assert len(report.hosts) <= MAX_HOSTS and report.hosts_pruned
    assert len(report.clusters) <= MAX_CLUSTERS
    for cluster in report.clusters.values():
        assert 1 <= len(cluster.aliases) <= MAX_CLUSTER_SPELLINGS - 1
        assert all(a.spelling != cluster.first for a in cluster.aliases)
    opened = [c.aliases[0].decided_by for c in report.clusters.values()]
    assert max(opened.count(r) for r in set(opened)) <= CLUSTERS_PER_RUNG


def test_long_spellings_are_counted_not_sampled() -> None:
    report = CrawlReport()
    long = "http://a.example/" + "x" * 5000
    report.duplicate("t", "http://a.example/x", long, None, "path", False)
    assert report.duplicates == 1 and report.hosts == {"a.example": [1, 0]}
    assert report.clusters == {}


def test_write_is_atomic_and_round_trips(tmp_path: Path) -> None:
    report = CrawlReport(requests=3, spider="s")
    report.duplicate("t", "http://a.example/", "HTTP://A.EXAMPLE/", "http://a.example/",
                     "case", False)
    (tmp_path / FILENAME).write_text("old", encoding="utf-8")
    path = report.write(tmp_path)
    assert path == tmp_path / FILENAME
    assert sorted(os.listdir(tmp_path)) == [FILENAME]  # the temporary file was renamed
    assert CrawlReport.read(path).to_dict() == report.to_dict()


def test_an_oversized_file_is_refused_before_parsing(tmp_path: Path) -> None:
    path = tmp_path / FILENAME
    path.write_bytes(b"[" + b"0," * (5 * 2**20) + b"0]")
    with pytest.raises(ReportError, match="larger than 8 MiB"):
        CrawlReport.read(path)


def test_deep_nesting_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / FILENAME
    path.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    with pytest.raises(ReportError) as info:
        CrawlReport.read(path)
    assert "\n" not in str(info.value)


def test_stock_aliases_beyond_duplicates_refused() -> None:
    report = CrawlReport()
    report.duplicate("t", "http://a.example/", "HTTP://A.EXAMPLE/", None, "case", True)
    doc = report.to_dict()
    doc["stock_aliases_by_rung"] = {"case": 1, "scheme": 1}
    doc["totals"]["stock_aliases"] = 2
    with pytest.raises(ReportError, match=r"stock_aliases_by_rung\.scheme"):
        CrawlReport.from_dict(json.loads(json.dumps(doc)))


def test_every_host_counter_is_written_for_a_resumed_job(tmp_path: Path) -> None:
    """A resumed job reads the report back and goes on: every host counter is in the
    file (not only the first page's worth)."""
    report = CrawlReport()
    for i in range(300):
        report.duplicate(f"t{i}", f"http://h{i}.example/p", f"http://H{i}.example/p", None,
                         "case", True)
    again = CrawlReport.read(report.write(tmp_path))
    assert again.hosts == report.hosts and len(again.hosts) == 300


def test_stock_seen_keeps_what_the_report_stands_for(tmp_path: Path) -> None:
    """The stock fingerprints counted after the report's last write (a ``kill -9``) are
    cut on resume, so that they are counted again with the counts that were lost."""
    from iri_scrapy.store.report_state import FILENAME as STOCK
    from iri_scrapy.store.report_state import MAGIC, StockSeen

    seen = StockSeen(tmp_path)
    records = [i.to_bytes(8, "big") for i in range(1, 6)]
    assert [seen.add(r) for r in records[:3] + records[:1]] == [True] * 3 + [False]
    assert seen.flush() == 3  # the report written now says stock_records = 3
    assert all(seen.add(r) for r in records[3:])
    seen.flush()  # written, but killed before the report was
    assert (tmp_path / STOCK).stat().st_size == len(MAGIC) + 5 * 8
    resumed = StockSeen(tmp_path, keep=3)
    assert len(resumed) == resumed.records == 3
    assert (tmp_path / STOCK).stat().st_size == len(MAGIC) + 3 * 8
    assert not resumed.add(records[0]) and resumed.add(records[4])
    assert resumed.flush() == 4
    assert len(StockSeen(tmp_path, keep=0)) == 0  # a report started anew: none counted
    assert len(StockSeen(None)) == 0 and StockSeen(None).flush() == 0
