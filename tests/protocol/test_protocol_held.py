"""Requests a learned rule skips are frontier state: no page lost across ``kill -9``.

Real crawls (:func:`tests.support.crawl.run_crawl`, a subprocess with
``JOBDIR``) of :class:`~tests.protocol.held_site.HeldSite`, where
``drop-param:ref`` is learned from ``/a/`` and is wrong under ``/b/``.  The crawl is killed (``SIGKILL``) while the rule is in force and run
again with the same command; every resource must have been served (the
server's 200s) and be in the output feed.  Also with the rules file damaged
before the resume, and with the resume itself killed during its start-up.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.protocol.held_site import HeldSite, resources
from tests.support.crawl import CrawlError, CrawlResult, run_crawl

pytestmark = [pytest.mark.slow, pytest.mark.own]

PROTOCOL: dict[str, Any] = {"ADDONS": {"iri_scrapy.Addon": 0}, "IRI_LEVEL": "protocol",
                            "CONCURRENT_REQUESTS": 2, "CONCURRENT_REQUESTS_PER_DOMAIN": 2}


def _settings(feed: Path) -> dict[str, Any]:
    return {**PROTOCOL, "FEEDS": {str(feed): {"format": "jsonlines", "overwrite": False}}}


def _titles(feed: Path) -> set[str]:
    if not feed.exists():
        return set()
    out = set()
    for line in feed.read_text(encoding="utf-8").splitlines():
        with contextlib.suppress(ValueError):
            out.add(json.loads(line)["title"])
    return out


def _kill_when(site: HeldSite, held: int, killed: list[bool]) -> Any:
    """Kill the crawl once *held* pages of ``/c/`` were served (the rule, learned
    on ``/a/`` first, is in force by then and has skipped the ``/b/`` editions
    they link, not yet sampled)."""
    def started(proc: Any, _log: Path) -> None:
        def watch() -> None:
            while proc.poll() is None:  # bounded by the child's life
                if site.served("/c/") >= held:
                    os.kill(proc.pid, signal.SIGKILL)
                    killed.append(True)
                    return
                time.sleep(0.002)

        threading.Thread(target=watch, daemon=True).start()

    return started


def _kill_on_log(text: str, killed: list[bool]) -> Any:
    """Kill the crawl as soon as its log has a line with *text*."""
    def started(proc: Any, log: Path) -> None:
        def watch() -> None:
            while proc.poll() is None:
                with contextlib.suppress(OSError):
                    if text in log.read_text(encoding="utf-8", errors="replace"):
                        os.kill(proc.pid, signal.SIGKILL)
                        killed.append(True)
                        return
                time.sleep(0.002)

        threading.Thread(target=watch, daemon=True).start()

    return started


def _killed_run(site: HeldSite, jobdir: Path, feed: Path, started: Any) -> None:
    with contextlib.suppress(CrawlError):  # killed: no result written
        run_crawl(_settings(feed), site.start_urls, site.proxy_url, jobdir=jobdir,
                  started=started)


def _check_all(site: HeldSite, feed: Path, result: CrawlResult, what: str) -> None:
    lost = site.missed()
    missing = set(resources()) - _titles(feed)
    print(f"\n{what}: {len(lost)} of {len(resources())} resources never served, "
          f"{len(missing)} missing from the feed; finish_reason {result.finish_reason}, "
          f"exit {result.returncode}")
    assert not lost, sorted(lost)
    assert not missing, sorted(missing)
    assert result.finish_reason == "finished" and result.returncode == 0


def test_without_a_kill_the_wrong_rule_loses_nothing(tmp_path: Path) -> None:
    feed = tmp_path / "items.jsonl"
    with HeldSite() as site:
        result = run_crawl(_settings(feed), site.start_urls, site.proxy_url,
                           jobdir=tmp_path / "job")
        stats = result.stats
        assert stats.get("iri/protocol/content/learned", 0) >= 1, stats
        assert stats.get("iri/protocol/content/revoked", 0) >= 1, stats
        _check_all(site, feed, result, "no kill")


def test_kill_9_while_the_wrong_rule_is_in_force_loses_nothing(tmp_path: Path) -> None:
    feed, jobdir = tmp_path / "items.jsonl", tmp_path / "job"
    with HeldSite() as site:
        killed: list[bool] = []
        _killed_run(site, jobdir, feed, _kill_when(site, 6, killed))
        assert killed, "the crawl ended before it could be killed"
        result = run_crawl(_settings(feed), site.start_urls, site.proxy_url, jobdir=jobdir)
        _check_all(site, feed, result, "kill -9, resume")


def test_a_damaged_rules_file_gives_back_what_its_rules_held(tmp_path: Path) -> None:
    feed, jobdir = tmp_path / "items.jsonl", tmp_path / "job"
    with HeldSite() as site:
        killed: list[bool] = []
        _killed_run(site, jobdir, feed, _kill_when(site, 6, killed))
        assert killed, "the crawl ended before it could be killed"
        rules = jobdir / "iri_protocol_rules.json"
        rules.write_text('{"v": 1, "rules": [', encoding="utf-8")
        result = run_crawl(_settings(feed), site.start_urls, site.proxy_url, jobdir=jobdir)
        _check_all(site, feed, result, "kill -9, rules file damaged, resume")


def test_a_kill_during_the_resume_start_up_loses_nothing(tmp_path: Path) -> None:
    feed, jobdir = tmp_path / "items.jsonl", tmp_path / "job"
    with HeldSite() as site:
        killed: list[bool] = []
        _killed_run(site, jobdir, feed, _kill_when(site, 6, killed))
        assert killed, "the crawl ended before it could be killed"
        # damaged rules: the resume gives back what they held, and is killed as it does
        (jobdir / "iri_protocol_rules.json").write_text("{", encoding="utf-8")
        again: list[bool] = []
        _killed_run(site, jobdir, feed, _kill_on_log("scheduled again", again))
        assert again, "the resume ended before it could be killed"
        result = run_crawl(_settings(feed), site.start_urls, site.proxy_url, jobdir=jobdir)
        _check_all(site, feed, result, "kill -9, resume killed at start-up, resume")


def test_a_rule_never_sampled_while_running_is_checked_at_the_close(tmp_path: Path) -> None:
    """Samples one merge in K * 2**j: a rule wrong on another path, merged fewer
    times than that there, is checked when the crawl goes idle (one sample per
    rule and folder with no confirmation), and what it held comes back."""
    feed = tmp_path / "items.jsonl"
    with HeldSite() as site:
        result = run_crawl({**_settings(feed), "IRI_PROTOCOL_SAMPLE_EVERY": 1000},
                           site.start_urls, site.proxy_url, jobdir=tmp_path / "job")
        stats = result.stats
        assert stats.get("iri/protocol/content/sampled", 0) == 0, stats
        assert stats.get("iri/protocol/unstood", 0) >= 1, stats
        assert stats.get("iri/protocol/content/revoked", 0) >= 1, stats
        _check_all(site, feed, result, "no sample while running")
