"""The sample project: ``python -m sample_project`` as the README runs it, and its numbers.

The command runs once (module fixture, a subprocess from the repository root, the
default output directory); its printed table is parsed and checked against the
demo web and the server's own hit counts.  :func:`sample_project.run_demo.run_demo`
runs once more in-process (crawls still in subprocesses) for the numbers behind
the table.  Real crawls of the local demo web; nothing is mocked.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from iri_scrapy import normalize
from sample_project.run_demo import VARIANTS, DemoReport, main, run_demo
from tests.support.site import DEMO_SITE
from tests.support.watch import CEILING, run_watched, size_of

# Every test reads the output of one run of the demo project (seconds).
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
OUTPUT = REPO / "sample_project" / "output"
N_KEYS = len(DEMO_SITE.keys)  # 33: 32 pages and the /docs redirect
N_PAGES = len(DEMO_SITE.page_keys)
STOCK, IRI = "stock Scrapy", "iri_scrapy"
ROW = re.compile(r"^(?P<label>\S.*?|\s+\S.*?)\s{2,}(?P<stock>-|\d+)\s{2,}(?P<iri>-|\d+)$")
RUNG = "  duplicates by rung: "

Rows = dict[str, tuple[str, str]]


@pytest.fixture(scope="module")
def command() -> subprocess.CompletedProcess[str]:
    """``python -m sample_project`` from the repository root, as the README says.

    Bounded by progress (its output, its crawls' CPU time and logs), not by a deadline;
    each of its crawls has the command's own default ``--timeout``."""
    return run_watched(
        [sys.executable, "-m", "sample_project"], *(size_of(OUTPUT / f"crawl-{name}.log")
                                                     for name in VARIANTS),
        what="python -m sample_project", tree=True, cwd=REPO, encoding="utf-8",
        errors="replace", stdin=subprocess.DEVNULL,
        env={**_env(), "PYTHONIOENCODING": "utf-8"},
    )


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != "SCRAPY_SETTINGS_MODULE"}


@pytest.fixture(scope="module")
def out(command: subprocess.CompletedProcess[str]) -> str:
    assert command.returncode == 0, command.stdout[-3000:] + command.stderr[-3000:]
    return command.stdout


@pytest.fixture(scope="module")
def rows(out: str) -> Rows:
    """The table: label -> (stock value, iri_scrapy value)."""
    lines = out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.rstrip().endswith(f"{STOCK}   {IRI}"))
    table: Rows = {}
    for line in lines[head + 2:]:
        if line.startswith("---"):
            break
        m = ROW.match(line)
        assert m, f"not a table row: {line!r}"
        table[m["label"].rstrip()] = (m["stock"], m["iri"])
    return table


def val(rows: Rows, label: str, col: int) -> int:
    return int(rows[label][col])


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> DemoReport:
    # the per-crawl timeout of run_demo is a deadline: the tests' ceiling, not less
    return run_demo(tmp_path_factory.mktemp("demo-out"), timeout=CEILING)


def _items(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


# --------------------------------------------------------------------------- the command


def test_command_prints_title_aligned_table_and_ok_verdict(out: str, rows: Rows) -> None:
    lines = out.splitlines()
    assert lines[0] == ("iri_scrapy sample project: the demo web (7 hosts, "
                        f"{N_KEYS} resources) crawled twice")
    assert set(lines[1]) == {"="}
    verdicts = [line for line in lines if line.startswith("Verdict:")]
    assert verdicts == [lines[-1]]
    assert lines[-1].startswith(f"Verdict: OK -- iri_scrapy fetched each of the {N_KEYS} "
                                "resources exactly once")
    # aligned: every table line has the same length, numbers right-aligned under the headings
    head = next(i for i, line in enumerate(lines) if line.endswith(f"{STOCK}   {IRI}"))
    table = lines[head:head + 2 + len(rows) + 1]
    assert len({len(line) for line in table}) == 1
    assert len(rows) >= 10


def test_plugin_fetches_every_resource_exactly_once(rows: Rows) -> None:
    def iri(label: str) -> int:
        return val(rows, label, 1)

    assert iri("requests sent (Scrapy downloader)") == N_KEYS
    assert iri("pages fetched (server hits)") == N_KEYS
    assert iri(f"distinct resources fetched (of {N_KEYS})") == N_KEYS
    assert iri("duplicate fetches") == 0
    assert iri("resources missed") == 0
    assert iri("404 Not Found") == 0
    assert iri("items scraped") == N_PAGES
    assert iri("duplicate requests dropped (dupefilter)") > 0


def test_stock_fetches_duplicates_and_misses_the_traps(out: str, rows: Rows) -> None:
    def stock(label: str) -> int:
        return val(rows, label, 0)

    sent = stock("requests sent (Scrapy downloader)")
    distinct = stock(f"distinct resources fetched (of {N_KEYS})")
    dups = stock("duplicate fetches")
    assert sent == stock("pages fetched (server hits)") > N_KEYS
    assert dups > 0
    assert stock("resources missed") == N_KEYS - distinct >= 4
    assert sent == distinct + dups + stock("404 Not Found")  # every hit accounted for
    assert stock("items scraped") > N_PAGES  # the duplicates were scraped again

    lines = out.splitlines()
    start = lines.index("Missed by stock Scrapy:")
    missed = [line.split()[0] for line in lines[start + 1:start + 1 + stock("resources missed")]]
    assert set(missed) >= {"http://straße.example/", "http://straße.example/karte",
                           "http://www.example.test/search?",
                           "http://www.example.test/list?b=2&a=1"}
    assert "404s of stock Scrapy: http://strasse.example/" in out  # IDNA 2003's other domain
    assert "Missed by iri_scrapy" not in out
    assert "Fetched more than once by iri_scrapy" not in out
    # NFC and NFD café look alike: the NFD one is shown with its combining mark escaped
    assert "http://bücher.example/cafe\\u0301 (decomposed, not NFC) x2" in out
    assert "http://bücher.example/café x2" in out


def test_the_numbers_are_explained(out: str, rows: Rows) -> None:
    """33 resources but 32 items: the redirect; stock's items: pages scraped again."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("The numbers: "))
    head, iri, stock = lines[start:start + 3]
    assert head == (f"The numbers: the demo web has {N_KEYS} resources, {N_PAGES} HTML pages "
                    "(one item each) and 1 redirect (http://www.example.test/docs: a 301, "
                    "no item).")
    assert iri == (f"  iri_scrapy: {N_KEYS} requests = {N_KEYS} resources once each; "
                   f"{N_PAGES} items = one per page.")

    def stock_row(label: str) -> int:
        return val(rows, label, 0)

    sent, items = stock_row("requests sent (Scrapy downloader)"), stock_row("items scraped")
    distinct = stock_row(f"distinct resources fetched (of {N_KEYS})")
    m = re.fullmatch(r"  stock Scrapy: (\d+) requests = (\d+) resources \+ (\d+) duplicate "
                     r"fetches \+ (\d+) 404s; (\d+) items = (\d+) distinct pages \+ (\d+) "
                     r"scraped again\.", stock)
    assert m, stock
    n = [int(x) for x in m.groups()]
    assert n[:5] == [sent, distinct, stock_row("duplicate fetches"), stock_row("404 Not Found"),
                     items]
    assert n[0] == n[1] + n[2] + n[3] and n[4] == n[5] + n[6]
    assert n[5] == len({i["url"] for i in _items(OUTPUT / "items-stock.jsonl")})


def test_rung_rows_present_and_summing_as_printed(rows: Rows) -> None:
    rungs = {k[len(RUNG):]: v for k, v in rows.items() if k.startswith(RUNG)}
    assert "total" in rungs
    total = rungs.pop("total")
    assert rungs, "no per-rung rows"
    assert all(s == "-" for s, _ in [*rungs.values(), total])  # stock has no rung stats
    per_rung = [int(i) for _, i in rungs.values()]
    assert all(n > 0 for n in per_rung)
    assert sum(per_rung) == int(total[1])
    # each dropped request counts at least one rung
    assert int(total[1]) >= val(rows, "duplicate requests dropped (dupefilter)", 1)
    assert set(rungs) <= {"simple", "case", "character", "percent", "path", "scheme",
                          "protocol", "fragment", "heuristics"}


def test_jsonl_items_have_canonical_uri_and_readable_iri(out: str, rows: Rows) -> None:
    iri_items = _items(OUTPUT / "items-iri.jsonl")
    stock_items = _items(OUTPUT / "items-stock.jsonl")
    assert len(iri_items) == val(rows, "items scraped", 1) == N_PAGES
    assert len(stock_items) == val(rows, "items scraped", 0)
    assert "sample_project/output/items-iri.jsonl (32 lines)" in out

    pages = {normalize(r.url): r for r in DEMO_SITE if not r.is_redirect}
    assert sorted(i["url"] for i in iri_items) == sorted(pages)  # each page once
    idn = 0
    for item in iri_items:
        res = pages[item["url"]]
        assert item["url"].isascii()
        assert item["iri"] == normalize(item["url"], form="iri")
        assert normalize(item["iri"]) == item["url"]
        assert item["title"] == res.title
        assert item["lang"] == res.host.lang
        if not res.host.name.isascii():
            idn += 1
            assert item["url"].startswith(f"http://{res.host.alabel}/")
            assert not item["iri"].isascii()
            assert item["iri"].startswith(f"http://{res.host.name}/")
    assert idn >= 12
    by_url = {i["url"]: i for i in iri_items}
    ss = by_url["http://xn--strae-oqa.example/karte"]
    assert ss["iri"] == "http://straße.example/karte"
    assert ss["title"] == "Stadtkarte"
    assert any("original" in i and not i["original"].isascii() for i in iri_items)
    # stock items are canonicalized the same way: their duplicates show as repeated URLs
    assert len({i["url"] for i in stock_items}) < len(stock_items)
    assert all(i["url"].isascii() and "iri" in i for i in stock_items)
    assert not any("original" in i for i in stock_items)


# --------------------------------------------------------------------------- the function


def test_run_demo_returns_the_printed_numbers(report: DemoReport, rows: Rows) -> None:
    assert report.ok, report.problems()
    # The per-rung split depends on which spelling of a page the crawl meets first
    # (concurrent requests), so it may differ between two runs; every other row may not.
    got = {label.rstrip(): (s, i) for label, s, i in report.rows()}
    steady = {k: v for k, v in rows.items() if not k.startswith(RUNG.rstrip())}
    assert {k: v for k, v in got.items() if not k.startswith(RUNG.rstrip())} == steady
    iri = report.iri
    assert set(iri.counts) == DEMO_SITE.keys
    assert set(iri.counts.values()) == {1}
    assert iri.items_path.exists() and iri.items_path.parent != OUTPUT
    stock = report.stock
    assert stock.duplicates
    missed = {r.key for r in stock.missed}
    assert DEMO_SITE.trap_keys("idna2008", "empty-query", "query-order") <= missed
    assert iri.rungs and sum(iri.rungs.values()) >= iri.dupefilter_filtered
    assert stock.rungs is None


def test_failures_are_reported(report: DemoReport) -> None:
    """A run that fetches duplicates and misses pages (stock's, in the plugin's column) fails."""
    bad = DemoReport(stock=report.stock, iri=report.stock)
    problems = bad.problems()
    assert not bad.ok
    assert any("fetched http://www.example.test/ 3 times" in p for p in problems)
    assert any("never fetched http://straße.example/ (ss-home)" in p for p in problems)
    assert any("404 for http://strasse.example/" in p for p in problems)
    assert bad.verdict().startswith("Verdict: FAILED -- ")


def test_crawl_timeout_exits_2_with_a_message(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--output-dir", str(tmp_path), "--timeout", "0.2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: stock Scrapy crawl ran longer than 0.2s and was stopped")
