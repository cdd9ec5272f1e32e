"""A finished crawl's report: ``<JOBDIR>/iri_report.json``, ``iri-scrapy report``, ``IRI_REPORT_FILE``.

One real crawl of the demo alias web with the add-on, ``JOBDIR`` and
``IRI_REPORT_FILE`` (a ``scrapy crawl`` subprocess through
:func:`tests.support.crawl.run_crawl`); its stats are the oracle.  The JSON's
totals must be the stats' (duplicates by deciding rung sum to
``dupefilter/filtered``), ``iri-scrapy report JOBDIR -o out.html`` runs as a
subprocess and its page is rendered in a real headless Chromium
(:func:`tests.cli.test_report_html.chromium`: skipped without it, failed when
it is required), and the page ``IRI_REPORT_FILE`` wrote shows the same totals.
A damaged ``iri_report.json`` is refused in one line, exit status 2.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from iri_scrapy.store.crawl_report import FILENAME, CrawlReport
from iri_scrapy.store.dedupe import MAX_CLUSTERS
from tests.cli.test_cli import run_main
from tests.cli.test_report_html import _browser, chromium
from tests.support.crawl import CrawlResult, run_crawl
from tests.support.server import serve_site
from tests.support.site import DEMO_SITE
from tests.support.watch import run_watched

ADDON = {"ADDONS": {"iri_scrapy.Addon": 0}}
STRICT = {"IRI_SCRAPY_DEPRECATIONS_AS_ERRORS": "1"}
MODULE = [sys.executable, "-m", "iri_scrapy"]
CARD = re.compile(r"""id=["']total-(\w+)["']><div class=["']n["']>([\d,]+)<""")


@dataclass
class Crawled:
    result: CrawlResult
    jobdir: Path
    page: Path


@pytest.fixture(scope="module")
def crawled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Crawled]:
    tmp = tmp_path_factory.mktemp("crawl_report")
    jobdir, page = tmp / "job", tmp / "pages" / "crawl.html"
    page.parent.mkdir()
    with serve_site(DEMO_SITE) as srv:
        result = run_crawl({**ADDON, "IRI_REPORT_FILE": str(page)}, list(DEMO_SITE.start_urls),
                           srv.proxy_url, jobdir=jobdir, env=STRICT)
    assert result.ok, result.stderr[-3000:]
    yield Crawled(result, jobdir, page)


def report_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_watched([*MODULE, "report", *args], what="iri-scrapy report",
                       encoding="utf-8", errors="replace", stdin=subprocess.DEVNULL)


def cards(html: str) -> dict[str, int]:
    return {k: int(v.replace(",", "")) for k, v in CARD.findall(html)}


# --- the JSON in JOBDIR ---------------------------------------------------------------


@pytest.mark.slow
def test_the_json_totals_are_the_crawls_stats(crawled: Crawled) -> None:
    stats = crawled.result.stats
    doc = json.loads((crawled.jobdir / FILENAME).read_text(encoding="utf-8"))
    decided = {k.rsplit("/", 1)[1]: v for k, v in stats.items()
               if k.startswith("iri/dupefilter/decided_by/")}
    assert doc["duplicates_by_rung"] == decided
    assert sum(decided.values()) == doc["totals"]["duplicates"] == stats["dupefilter/filtered"] > 20
    assert doc["totals"]["stock_aliases"] == stats["iri/dupefilter/stock_aliases"] > 0
    assert sum(doc["stock_aliases_by_rung"].values()) == doc["totals"]["stock_aliases"]
    # every request the dupefilter met is either enqueued or dropped (none passed twice here)
    assert doc["totals"]["requests"] == stats["scheduler/enqueued"] + stats["dupefilter/filtered"]
    assert doc["crawl_stats"]["downloader/response_count"] == stats["downloader/response_count"]
    assert doc["finish_reason"] == "finished" and doc["spider"]
    assert doc["options"] == {"level": "scheme", "keep_fragment": False, "nfc": False}
    assert 0 < len(doc["clusters"]) <= MAX_CLUSTERS
    for cluster in doc["clusters"]:
        assert cluster["aliases"] and all(a["spelling"] != cluster["first"]
                                          for a in cluster["aliases"])
    hosts = {h["host"]: h["aliases"] for h in doc["hosts"]}
    assert "www.example.test" in hosts and sum(hosts.values()) == sum(
        n for k, n in decided.items() if k != "simple")
    assert not list(crawled.jobdir.glob(f".{FILENAME}.*"))  # no temporary file left
    CrawlReport.from_dict(doc)  # what the CLI accepts


# --- iri-scrapy report JOBDIR, rendered -----------------------------------------------


@pytest.mark.slow
def test_report_command_page_renders_in_headless_chromium(crawled: Crawled,
                                                          tmp_path: Path) -> None:
    binary = chromium()
    stats = crawled.result.stats
    out = tmp_path / "out.html"
    r = report_cli(str(crawled.jobdir), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""
    assert r.stderr.count("\n") == 1 and (
        f"{stats['dupefilter/filtered']:,} duplicates dropped; stock Scrapy's fingerprint "
        f"would have made {stats['iri/dupefilter/stock_aliases']:,} more fetches") in r.stderr
    text = out.read_text(encoding="utf-8")
    assert "<script" not in text and not re.search(r"(?:src|href)\s*=|@import|url\(", text)

    dom = _browser(binary, tmp_path, "--dump-dom", out.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout
    doc = json.loads((crawled.jobdir / FILENAME).read_text(encoding="utf-8"))
    assert cards(html) == {
        "requests": doc["totals"]["requests"],
        "duplicates": stats["dupefilter/filtered"],
        "stock_aliases": stats["iri/dupefilter/stock_aliases"],
        "responses": stats["downloader/response_count"],
        "items": stats["item_scraped_count"],
    }
    # the chart: one row per rung, its figures "stock aliases + the rest" add up to the stats
    rows = dict(re.findall(r'id="rung-(\w+)".*?>([\d,]+ \+ [\d,]+)</text></g>', html))
    for rung in ("simple", "case", "percent", "path", "scheme", "fragment"):
        assert rung in rows, rows
    for rung, figures in rows.items():
        stock, rest = (int(x.replace(",", "")) for x in figures.split(" + "))
        assert stock + rest == stats.get(f"iri/dupefilter/decided_by/{rung}", 0), rung
        assert stock == doc["stock_aliases_by_rung"].get(rung, 0), rung
    assert re.search(r'id="hosts".*www\.example\.test', html, re.S)
    assert "bücher.example" in html or "xn--" not in html  # IDN hosts shown readable
    assert 0 < html.count('class="cluster"') <= MAX_CLUSTERS
    assert "equivalent at 5.3" in html and "decided by" in html

    shot = tmp_path / "report.png"
    r = _browser(binary, tmp_path, "--window-size=1100,2200", f"--screenshot={shot}",
                 out.as_uri())
    assert r.returncode == 0, r.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000  # a page, not a blank


@pytest.mark.slow
def test_iri_report_file_is_the_same_page(crawled: Crawled, tmp_path: Path) -> None:
    stats = crawled.result.stats
    text = crawled.page.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and text.rstrip().endswith("</html>")
    assert "<script" not in text and not re.search(r"(?:src|href)\s*=|@import|url\(", text)
    got = cards(text)
    assert got["duplicates"] == stats["dupefilter/filtered"]
    assert got["stock_aliases"] == stats["iri/dupefilter/stock_aliases"]
    out = tmp_path / "again.html"
    assert report_cli(str(crawled.jobdir / FILENAME), "-o", str(out)).returncode == 0
    assert cards(out.read_text(encoding="utf-8")) == got  # the JSON file itself works too
    assert "IRI crawl report: page written to" in crawled.result.stderr
    assert not list(crawled.page.parent.glob(".*.tmp"))


@pytest.mark.slow
def test_unusable_report_file_refuses_the_start(tmp_path: Path) -> None:
    missing = tmp_path / "no such dir" / "r.html"
    with serve_site(DEMO_SITE) as srv:
        result = run_crawl({**ADDON, "IRI_REPORT_FILE": str(missing)},
                           list(DEMO_SITE.start_urls), srv.proxy_url, env=STRICT)
    # Scrapy 2.17 raises a start refusal (no finish_reason), later ones close the spider
    assert result.returncode == 1, result.stderr[-2000:]
    assert result.finish_reason in (None, "iri_bad_setting"), result.stderr[-2000:]
    assert result.stats.get("downloader/request_count", 0) == 0
    errors = [line for line in result.stderr.splitlines() if "ERROR" in line]
    assert len(errors) == 1 and "IRI_REPORT_FILE: the directory of" in errors[0], errors
    assert "Traceback" not in result.stderr


# --- a damaged iri_report.json: one line, exit 2 --------------------------------------


def _good() -> dict[str, Any]:
    report = CrawlReport(requests=5, spider="s", finish_reason="finished")
    report.duplicate("t", "http://a.example/x", "HTTP://A.example/x", None, "case", True)
    report.duplicate("t", "http://a.example/x", "http://a.example/x", None, "simple", False)
    return report.to_dict()


def _with(path: str, value: Any) -> dict[str, Any]:
    doc = _good()
    *parents, last = path.split(".")
    node: Any = doc
    for p in parents:
        node = node[int(p)] if isinstance(node, list) else node[p]
    node[last] = value
    return doc


DAMAGED: list[tuple[str, bytes, str]] = [
    ("truncated", json.dumps(_good()).encode()[:80], "not JSON: "),
    ("empty", b"", "not JSON: "),
    ("pickle", b"\x80\x04\x95\x05\x00\x00\x00\x00\x00\x00\x00]\x94.", "not UTF-8"),
    ("list", b"[1, 2]", "the file: expected an object, got a list"),
    ("other format", json.dumps({"format": "x"}).encode(), "not an iri-scrapy crawl report"),
    ("string count", json.dumps(_with("totals.requests", "5")).encode(),
     "totals.requests: expected a count (an integer, 0 or more), got a string"),
    ("negative", json.dumps(_with("duplicates_by_rung", {"case": -1, "simple": 3})).encode(),
     "duplicates_by_rung.case: expected a count"),
    ("sum", json.dumps(_with("totals.duplicates", 7)).encode(),
     "duplicates_by_rung sums to 2, totals.duplicates is 7"),
    ("bool flag", json.dumps(_with("options.nfc", 0)).encode(),
     "options.nfc: expected true or false, got an integer"),
    ("level", json.dumps(_with("options.level", "semantic")).encode(),
     "options.level: unknown level 'semantic'"),
    ("alias", json.dumps(_with("clusters.0.aliases.0.spelling", None)).encode(),
     "clusters[0].aliases[0].spelling: expected a string, got null"),
    ("version", json.dumps(_with("format_version", 9)).encode(), "format_version 9"),
    ("missing", json.dumps({k: v for k, v in _good().items() if k != "hosts"}).encode(),
     "hosts: missing"),
    ("bad rung name", json.dumps(_with("duplicates_by_rung", {"<b>": 2})).encode(),
     "is not a name"),
]


def test_a_good_file_round_trips(tmp_path: Path) -> None:
    (tmp_path / FILENAME).write_text(json.dumps(_good()), encoding="utf-8")
    report = CrawlReport.read(tmp_path / FILENAME)
    assert report.to_dict() == _good()


@pytest.mark.parametrize(("name", "data", "message"), DAMAGED, ids=[d[0] for d in DAMAGED])
def test_a_damaged_report_is_refused_in_one_line(
    tmp_path: Path, name: str, data: bytes, message: str, capsys: pytest.CaptureFixture[Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (tmp_path / FILENAME).write_bytes(data)
    out = tmp_path / "out.html"
    r = run_main(["report", str(tmp_path), "-o", str(out)], capsys, monkeypatch)
    assert r.code == 2, r.err
    assert r.out == "" and r.err.count("\n") == 1, r.err
    assert r.err.startswith(f"iri-scrapy: report: {tmp_path / FILENAME}: "), r.err
    assert message in r.err, r.err
    assert not out.exists()


def test_a_damaged_report_is_refused_by_the_command(tmp_path: Path) -> None:
    """The same as a subprocess: one line, no traceback, exit status 2."""
    (tmp_path / FILENAME).write_bytes(DAMAGED[0][1])
    out = tmp_path / "out.html"
    proc = subprocess.run([*MODULE, "report", str(tmp_path), "-o", str(out)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2
    assert proc.stdout == "" and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith(f"iri-scrapy: report: {tmp_path / FILENAME}: not JSON: ")
    assert not out.exists()


def test_a_jobdir_without_a_report_is_refused_in_one_line(tmp_path: Path) -> None:
    proc = subprocess.run([*MODULE, "report", str(tmp_path), "-o", str(tmp_path / "o.html")],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2
    assert proc.stderr == (f"iri-scrapy: report: no {FILENAME} in {tmp_path}: a crawl with the "
                           "add-on (iri_scrapy.Addon) and this JOBDIR writes it when it closes\n")


# --- a JOBDIR job stopped and resumed: one report for the whole job --------------------


def _stop_when(srv: Any, hits: int, sig: int, jobdir: Path | None, seen: dict[str, Any]) -> Any:
    """``run_crawl(started=...)``: send *sig* once the server has had *hits* hits (and,
    with *jobdir*, once the report has been written there while the crawl runs: its
    requests are then in *seen*)."""
    import os
    import threading
    import time

    def started(proc: Any, _log: Path) -> None:
        def watch() -> None:
            while proc.poll() is None:  # bounded by the child's life
                written = jobdir is not None and (jobdir / FILENAME).exists()
                if len(srv.hits.hits) >= hits and (jobdir is None or written):
                    if jobdir is not None:
                        doc = json.loads((jobdir / FILENAME).read_text(encoding="utf-8"))
                        seen["requests"] = doc["totals"]["requests"]
                    os.kill(proc.pid, sig)
                    seen["sent"] = True
                    return
                time.sleep(0.005)

        threading.Thread(target=watch, daemon=True).start()

    return started


def _met(result: CrawlResult) -> int:
    """The requests the dupefilter met in one run (its close line)."""
    found = re.findall(r"IRI dupefilter: (\d+) requests", result.stderr)
    assert len(found) == 1, result.stderr[-2000:]
    return int(found[0])


@pytest.mark.slow
@pytest.mark.parametrize("stop", ["sigint", "kill-9"])
def test_a_resumed_job_has_one_report_of_all_its_runs(tmp_path: Path, stop: str) -> None:
    """Stopped (a clean SIGINT stop, or ``kill -9`` once the report has been written
    while the crawl ran) and resumed with the same JOBDIR: the report counts the
    requests of both runs and says it covers two."""
    import signal
    from contextlib import suppress

    from tests.support.bigsite import SlowSiteServer, large_site
    from tests.support.crawl import CrawlError

    jobdir, page = tmp_path / "job", tmp_path / "crawl.html"
    settings = {**ADDON, "IRI_REPORT_FILE": str(page)}
    site = large_site(300)
    seen: dict[str, Any] = {}
    with SlowSiteServer(site, latency=0.05) as srv:
        if stop == "sigint":
            first = run_crawl(settings, list(site.start_urls), srv.proxy_url, jobdir=jobdir,
                              env=STRICT, started=_stop_when(srv, 60, signal.SIGINT, None,
                                                             seen))
            assert seen.get("sent") and first.finish_reason == "shutdown", first.stderr[-2000:]
            before = _met(first)
            doc = json.loads((jobdir / FILENAME).read_text(encoding="utf-8"))
            assert (doc["runs"], doc["totals"]["requests"]) == (1, before)
        else:
            with suppress(CrawlError):  # killed: no result written
                run_crawl(settings, list(site.start_urls), srv.proxy_url, jobdir=jobdir,
                          env=STRICT, started=_stop_when(srv, 60, signal.SIGKILL, jobdir, seen))
            assert seen.get("sent"), "the crawl ended before it could be killed"
            before = seen["requests"]
        second = run_crawl(settings, list(site.start_urls), srv.proxy_url, jobdir=jobdir,
                           env=STRICT)
    assert second.ok, second.stderr[-3000:]
    doc = json.loads((jobdir / FILENAME).read_text(encoding="utf-8"))
    print(f"\n{stop}: run 1 {before} requests (in its report), run 2 {_met(second)}; the "
          f"report: {doc['totals']['requests']} over {doc['runs']} runs")
    assert doc["runs"] == 2
    assert doc["totals"]["requests"] == before + _met(second) > _met(second)
    assert doc["finish_reason"] == "finished"
    report = CrawlReport.from_dict(doc)
    assert report.stock_aliases <= report.duplicates
    html = page.read_text(encoding="utf-8")
    assert "covers the job&#x27;s 2 runs" in html or "covers the job's 2 runs" in html
    assert cards(html)["requests"] == doc["totals"]["requests"]
    r = report_cli(str(jobdir), "-o", str(tmp_path / "out.html"))
    assert r.returncode == 0 and "requests over 2 runs" in r.stderr, r.stderr
