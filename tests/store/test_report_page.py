"""The report page shows every URL as it is and stays bounded, whatever the report holds.

:mod:`iri_scrapy.store.report_page` renders a crawl's
:class:`~iri_scrapy.store.crawl_report.CrawlReport` (built here in memory, as a
report file read back may hold it) and a dedupe run's samples; the pages are
checked as text (the Chromium rendering is in ``tests/cli/test_report_html.py``).
"""

from __future__ import annotations

import json
import re

import pytest

from iri_scrapy.core.ladder import Rung
from iri_scrapy.store.crawl_report import Alias, Cluster, CrawlReport
from iri_scrapy.store.dedupe import MAX_CLUSTER_SPELLINGS, MAX_CLUSTERS, Deduper
from iri_scrapy.store.report_page import _text_width, render_crawl, render_dedupe


def crawl(clusters: list[tuple[str, list[tuple[str, str]]]], **decided: int) -> CrawlReport:
    """A report with *clusters* (first spelling, [(alias, deciding rung)])."""
    report = CrawlReport()
    for i, (first, aliases) in enumerate(clusters):
        report.clusters[str(i)] = Cluster(first, first, True,
                                          [Alias(a, rung, False) for a, rung in aliases])
        for _, rung in aliases:
            report.decided_by[rung] = report.decided_by.get(rung, 0) + 1
    for rung, n in decided.items():
        report.decided_by[rung] = report.decided_by.get(rung, 0) + n
    report.requests = report.duplicates + len(clusters)
    return report


# --- 6: characters that do not show are shown as escapes, marked ----------------------

HIDDEN = [  # (character, its escape on the page)
    ("\u200b", "\\u200b"),  # ZERO WIDTH SPACE (Cf)
    ("\u00ad", "\\xad"),  # SOFT HYPHEN (Cf)
    ("\ufeff", "\\ufeff"),  # BYTE ORDER MARK (Cf)
    ("\U000e0041", "\\U000e0041"),  # TAG LATIN CAPITAL LETTER A (Cf)
    ("\u202e", "\\u202e"),  # RIGHT-TO-LEFT OVERRIDE (bidi control, Cf)
    ("\u2066", "\\u2066"),  # LEFT-TO-RIGHT ISOLATE (bidi control, Cf)
    ("\u034f", "\\u034f"),  # COMBINING GRAPHEME JOINER (default ignorable, Mn)
    ("\ufe0f", "\\ufe0f"),  # VARIATION SELECTOR-16 (default ignorable, Mn)
    ("\u3164", "\\u3164"),  # HANGUL FILLER (default ignorable, Lo)
    ("\u00a0", "\\xa0"),  # NO-BREAK SPACE (Zs)
    ("\u2028", "\\u2028"),  # LINE SEPARATOR (Zl)
    ("\x85", "\\x85"),  # NEXT LINE (C1 control)
]


@pytest.mark.parametrize(("char", "escape"), HIDDEN)
def test_characters_that_do_not_show_are_escaped_everywhere(char: str, escape: str) -> None:
    first = "http://a.example/x"
    alias = f"http://a.example/{char}x"
    report = crawl([(first, [(alias, "percent")])])
    report.hosts[f"h{char}.example"] = [1, 0]
    page = render_crawl(report, source=f"crawls/run{char}1")
    assert char not in page
    # In the list of spellings, the explain account, the hosts table, the heading.
    assert page.count(f"<span class='esc' title='U+{ord(char):04X} ") >= 4
    assert f">{escape}</span>" in page
    title = re.search("<title>(.*?)</title>", page, re.S)
    assert title is not None and "<span" not in title.group(1)


def test_visible_text_is_left_as_it_is() -> None:
    page = render_crawl(crawl([("http://bücher.example/ü x", [("http://b.example/日本", "case")])]),
                        source="run")
    assert "bücher.example/ü x" in page and "b.example/日本" in page
    assert "class='esc'" not in page


# --- 7: the page is bounded whatever the report holds ---------------------------------


def test_a_large_report_renders_a_bounded_page() -> None:
    long = "x" * 4000
    clusters = [(f"http://h{i}.example/{long}",
                 [(f"http://H{i}.EXAMPLE/{long}/{j}/..", "case") for j in range(10)])
                for i in range(60)]
    report = crawl(clusters)
    size = len(json.dumps(report.to_dict()))  # the report file: 2.6 MB
    page = render_crawl(report, source="run")
    assert size > 2_000_000
    assert len(page) < 600_000 and len(page) < size / 4
    assert "36 more clusters in the report not shown" in page
    assert f"{11 - MAX_CLUSTER_SPELLINGS} more spellings not shown" in page
    assert "cut or shortened; the whole account: iri-scrapy explain --level scheme " in page
    assert page.count("<div class='cluster'>") == MAX_CLUSTERS


# --- 8: the chart has room for its longest label and figures --------------------------


def _chart_room(page: str) -> tuple[float, float, float]:
    """(left edge of the bars, viewBox width, right end of the longest bar) of the chart."""
    svg = page[page.index("<svg"):page.index("</svg>")]
    width = float(re.search(r"viewBox='0 0 (\d+) ", svg).group(1))  # type: ignore[union-attr]
    xs = [float(x) for x in re.findall(r"<rect x='([\d.]+)'", svg)]
    ends = [float(x) + float(w) for x, w in
            re.findall(r"<rect x='([\d.]+)' y='\d+' width='([\d.]+)'", svg)]
    return min(xs), width, max(ends)


def test_the_chart_has_room_for_the_longest_label_and_figures() -> None:
    rung = "w" * 32  # a rung name a report file may hold: the longest label
    report = crawl([], **{rung: 12_345_678, "case": 98_765_432})
    page = render_crawl(report, source="run")
    left, width, right = _chart_room(page)
    assert left >= _text_width(rung, 14) > 0.6 * 14 * 32  # no font draws it narrower
    figures = "0 + 98,765,432"
    assert width - right - 8 >= _text_width(figures, 13) > 0.5 * 13 * len(figures)


def test_the_dedupe_chart_has_room_for_every_rung_title_and_figures() -> None:
    d = Deduper("protocol", nfc=True, samples=True)
    for line in ("http://a.example/%7e", "http://A.example/~"):
        d.process(line)
    stats = d.finish()
    stats.by_rung["percent"], stats.first_by_rung["percent"] = 98_765_432, 12_345_678
    page = render_dedupe(stats, d.samples, source="in.txt",  # type: ignore[arg-type]
                         level="protocol", keep_fragment=False, nfc=True, rungs=tuple(Rung),
                         elapsed=0.1)
    left, width, right = _chart_room(page)
    assert left >= max(_text_width(f"{r.section} {r.title}", 14) for r in Rung)
    assert width - right - 8 >= _text_width("98,765,432 + 12,345,678", 13)


# --- 10: each distinct explain account once per cluster -------------------------------


def test_each_distinct_account_is_shown_once_per_cluster() -> None:
    first = "http://a.example/x"
    same = [(f"{first}#{i}", "fragment") for i in range(1, 5)]  # one account for all four
    report = crawl([(first, same),
                    (first, [(f"{first}#1", "fragment"), ("HTTP://a.example/x", "case")])])
    page = render_crawl(report, source="run")
    one, two = page.split("<div class='cluster'>")[1:3]
    assert one.count("<pre>") == 1
    assert "every later spelling against the first (the same account)" in one
    assert two.count("<pre>") == 2
    assert "spelling 2 against the first" in two and "spelling 3 against the first" in two


# --- 9: fragment-only duplicates under one heading in both reports --------------------


def _row_label(page: str, key: str) -> tuple[str, str]:
    """The label and the figures of the chart's row *key*."""
    m = re.search(f"<g id='rung-{key}'><text [^>]*>([^<]*)</text>.*?<text [^>]*>([^<]*)</text>"
                  "</g>", page)
    assert m is not None, key
    return m.group(1), m.group(2)


def test_fragment_only_duplicates_have_one_heading_in_both_reports() -> None:
    d = Deduper("scheme", samples=True)
    for line in ("http://a.example/x", "http://a.example/x#top", "http://a.example/x#end"):
        d.process(line)
    stats = d.finish()
    assert stats.by_rung["fragment"] == 2 and stats.by_rung["simple"] == 0
    dedupe_page = render_dedupe(stats, d.samples,  # type: ignore[arg-type]
                                source="in.txt", level="scheme", keep_fragment=False,
                                nfc=False, rungs=(Rung.SIMPLE, Rung.CASE), elapsed=0.1)
    crawl_page = render_crawl(crawl([("http://a.example/x",
                                      [("http://a.example/x#top", "fragment"),
                                       ("http://a.example/x#end", "fragment")])]),
                              source="run")
    label, figures = _row_label(dedupe_page, "fragment")
    assert (label, figures) == ("5.1 fragment dropped (retrieval key)", "2 + 0")
    # stock Scrapy would have fetched none of them: 0 + 2
    assert _row_label(crawl_page, "fragment") == (label, "0 + 2")
    assert _row_label(dedupe_page, "simple")[1] == "0 + 1"  # the first spelling only


def test_requests_rules_merged_before_download_are_named_at_level_protocol() -> None:
    report = CrawlReport(level="protocol", requests=10, crawl_stats={
        "iri/protocol/skipped_at_download": 7, "iri/protocol/alias-first": 2})
    assert "learned rules merged 9 requests with a page already served" in render_crawl(
        report, source="job")
    report.crawl_stats = {}
    assert "learned rules merged" not in render_crawl(report, source="job")
