"""The protocol rung on a messy site and on a site where every candidate rule is wrong.

Real crawls (:func:`tests.support.crawl.run_crawl`) of :class:`MessySite`, whose
server knows which URLs are one resource: stock Scrapy and the add-on at level
``protocol`` side by side, each against a fresh server.  The promise: no
reachable resource missed, in either mode; far fewer fetches than stock on the
messy site; on the wrong site no more than the default level fetches, plus the
sampling.  Figures are printed (``-s``) for the closing note; the bounds are
loose enough for a busy machine's crawl order.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.crawl import CrawlError, run_crawl
from tests.support.messy_site import MessySite

pytestmark = pytest.mark.slow

ADDON: dict[str, Any] = {"ADDONS": {"iri_scrapy.Addon": 0}, "ROBOTSTXT_OBEY": True}
PROTOCOL = {**ADDON, "IRI_LEVEL": "protocol"}
STOCK = {"ROBOTSTXT_OBEY": True}


def crawl(mode: str, settings: dict[str, Any], **kwargs: Any) -> tuple[MessySite, Any]:
    with MessySite(mode) as site:
        result = run_crawl(settings, site.start_urls, site.proxy_url, **kwargs)
        return site, result


@pytest.mark.own  # a figure of the level: once, at the newest releases
def test_messy_site_fetched_about_once_per_resource() -> None:
    stock, _ = crawl("messy", STOCK)
    site, result = crawl("messy", PROTOCOL)
    print(f"\nstock: {stock.summary()}\nprotocol: {site.summary()}")
    assert stock.missed() == set()
    assert site.missed() == set(), sorted(site.missed())
    assert result.finish_reason == "finished"
    assert stock.ratio() >= 3.0
    # the target is 1.15. With the near-duplicate measure: 1.21-1.70, the
    # faster the crawl the more (more aliases in flight before their rules are learned:
    # 1.2-1.4 on a loaded machine, 1.5-1.7 on a quiet one), of which about 10 fetches
    # are the calibration (each site's first page fetched twice more); stock 4.00
    stats = result.stats
    calibration = stats.get("iri/protocol/calibration/fetched", 0)
    assert calibration <= 2 * 8, calibration  # two per site, at most 8 sections
    assert site.ratio() <= 2.0, site.summary()
    for source in ("content", "canonical", "clean-param", "redirect"):
        assert stats.get(f"iri/protocol/{source}/nominated", 0) >= 1, source
    assert stats["iri/protocol/content/learned"] >= 2  # (3 in most runs)
    # the tag pages' canonical (to the home page) merges nothing: each was fetched
    hit = site.hits()
    assert all(hit[r] >= 1 for r in site.reachable() if "/tag/" in r)
    # what the dupefilter dropped by a learned rule is counted, by source
    applied = sum(v for k, v in stats.items() if k.endswith("/applied"))
    assert applied >= 50


@pytest.mark.own
def test_wrong_site_costs_at_most_the_sampling() -> None:
    default, _ = crawl("wrong", ADDON)
    site, result = crawl("wrong", PROTOCOL)
    print(f"\ndefault: {default.summary()}\nprotocol: {site.summary()}")
    assert site.missed() == set(), sorted(site.missed())
    assert result.finish_reason == "finished"
    assert site.total_hits() <= default.total_hits() * 1.05 + 2, site.summary()
    assert result.stats.get("iri/protocol/counterexamples", 0) >= 1


@pytest.mark.own
def test_a_recrawl_starts_with_the_rules_learned(tmp_path: Path) -> None:
    rules_file = tmp_path / "rules.json"
    first, _ = crawl("messy", {**PROTOCOL, "IRI_PROTOCOL_RULES_FILE": str(rules_file)})
    document = json.loads(rules_file.read_text(encoding="utf-8"))
    assert document["v"] == 1 and document["rules"]
    again, result = crawl("messy", {**PROTOCOL, "IRI_PROTOCOL_RULES_FILE": str(rules_file)})
    print(f"\nfirst: {first.summary()}\nagain: {again.summary()}")
    assert again.missed() == set()
    # 1.09-1.30 measured: the first pages compared before the
    # site's calibration lands can revoke rules for a while (the calibration is not kept
    # with the rules; their counterexamples are withdrawn once it lands); stock 4.00
    assert again.ratio() <= 2.0, again.summary()
    applied = sum(v for k, v in result.stats.items()
                  if k.startswith("iri/protocol/") and k.endswith("/applied"))
    assert applied > 0, result.stats


def test_a_damaged_rules_file_refuses_the_start(tmp_path: Path) -> None:
    rules_file = tmp_path / "rules.json"
    rules_file.write_text('{"v": 1, "min_evidence": 2, "exact": "cat /etc/passwd"}',
                          encoding="utf-8")
    site, result = crawl("messy", {**PROTOCOL, "IRI_PROTOCOL_RULES_FILE": str(rules_file)})
    assert result.returncode == 1
    assert result.finish_reason in (None, "iri_bad_setting")
    assert site.total_hits() == 0
    errors = [line for line in result.stderr.splitlines() if "IRI_PROTOCOL_RULES_FILE" in line]
    assert errors and "Traceback" not in result.stderr, result.stderr[-2000:]


def _kill_after(site: MessySite, hits: int, killed: list[bool]) -> Any:
    def started(proc: Any, _log: Path) -> None:
        def watch() -> None:
            while proc.poll() is None:  # bounded by the child's life
                if site.total_hits() >= hits:
                    os.kill(proc.pid, signal.SIGKILL)
                    killed.append(True)
                    return
                time.sleep(0.005)

        threading.Thread(target=watch, daemon=True).start()

    return started


def test_kill_9_and_resume_keep_the_rules_and_lose_nothing(tmp_path: Path) -> None:
    jobdir = tmp_path / "job"
    with MessySite("messy") as site:
        killed: list[bool] = []
        with contextlib.suppress(CrawlError):  # killed: no result written
            run_crawl(PROTOCOL, site.start_urls, site.proxy_url, jobdir=jobdir,
                      started=_kill_after(site, 120, killed))
        assert killed, "the crawl ended before it could be killed"
        with contextlib.closing(sqlite3.connect(jobdir / "iri_frontier.sqlite3")) as db:
            kinds = {kind for (kind,) in db.execute("SELECT DISTINCT kind FROM protocol")}
        assert "page" in kinds  # the pages' digests, what samples compare with
        before = site.total_hits()
        result = run_crawl(PROTOCOL, site.start_urls, site.proxy_url, jobdir=jobdir)
        print(f"\nkilled after {before} hits; in all: {site.summary()}")
        assert result.finish_reason == "finished"
        assert site.missed() == set(), sorted(site.missed())
        rules = json.loads((jobdir / "iri_protocol_rules.json").read_text(encoding="utf-8"))
        assert rules["rules"]
        # killed before the first rules file was written, the resume learns again
        # (2.61 once on the oldest floors): still fewer than stock's 4.00 without a kill
        assert site.ratio() < 4.0, site.summary()
