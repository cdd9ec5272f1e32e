"""The aliases web applications make, learned and revoked in real crawls.

Real crawls (:func:`tests.support.crawl.run_crawl`, a subprocess) of
:class:`~tests.protocol.app_site.AppSite`: a query in two normal forms
(``query-form``), a parameter at its default value (``drop-pair``) and a
section under two paths (``alias-path``).  Honest, each kind is learned from
content and merges the aliases linked after it (fewer server hits than stock
Scrapy, every resource served); lying past the first items, each kind is
learned, refuted by a sample, revoked, and what it skipped is fetched (every
resource served).  The rules file written at the close says which rules stood.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.protocol.app_site import AppSite, resources
from tests.support.crawl import run_crawl

pytestmark = [pytest.mark.slow, pytest.mark.own]

KINDS = ("query-form", "drop-pair", "alias-path")
PROTOCOL: dict[str, Any] = {"ADDONS": {"iri_scrapy.Addon": 0}, "IRI_LEVEL": "protocol",
                            "IRI_PROTOCOL_SAMPLE_EVERY": 2,
                            "CONCURRENT_REQUESTS": 2, "CONCURRENT_REQUESTS_PER_DOMAIN": 2}


def _rules(path: Path) -> dict[str, list[dict[str, Any]]]:
    """The host rules of the rules file, per kind of the three."""
    out: dict[str, list[dict[str, Any]]] = {kind: [] for kind in KINDS}
    for entry in json.loads(path.read_text(encoding="utf-8"))["rules"]:
        if entry["rule"][1] in out:
            out[entry["rule"][1]].append(entry)
    return out


def _crawl(tmp_path: Path, lie: bool, alias_first: bool = False,
           gzip: bool = False) -> tuple[AppSite, dict[str, Any], Path]:
    rules = tmp_path / "rules.json"
    with AppSite(lie=lie, alias_first=alias_first, gzip=gzip) as site:
        result = run_crawl({**PROTOCOL, "IRI_PROTOCOL_RULES_FILE": str(rules)},
                           site.start_urls, site.proxy_url)
        assert result.ok, result.stderr[-2000:]
        assert not site.missed(), sorted(site.missed())
    return site, result.stats, rules


def test_each_kind_is_learned_and_merges_what_follows(tmp_path: Path) -> None:
    """The site compresses its pages, as most do: the content evidence reads them as
    the spider gets them (the protocol middleware runs before Scrapy decodes them)."""
    with AppSite(gzip=True) as site:
        stock = run_crawl({"CONCURRENT_REQUESTS": 2}, site.start_urls, site.proxy_url)
        assert stock.ok and not site.missed()
        stock_hits = site.hits
    site, stats, path = _crawl(tmp_path, lie=False, gzip=True)
    rules = _rules(path)
    print(f"\nhonest: stock {stock_hits} hits, protocol {site.hits}, "
          f"{len(resources(False))} resources; {stats}")
    for kind in KINDS:
        standing = [e for e in rules[kind] if _bad(e) == 0 and len(e["confirmed"]) >= 2]
        assert standing, (kind, rules[kind])
    assert site.hits < stock_hits
    # the first page once, and once more at once to calibrate: every answer is
    # stamped with the time it was served, so that fetch showed what changes by
    # chance and no third fetch is made a few seconds later
    assert site.ok["/"] == 2, (site.ok["/"], stats)
    assert stats.get("iri/dupefilter/decided_by/protocol", 0) + stats.get(
        "iri/protocol/skipped_at_download", 0) >= 3, stats


def _bad(entry: dict[str, Any]) -> int:
    """A rule's content counterexamples in a rules document: those counted (``bad``)
    and those named by their two pages (``refuted``, merged as a set in a fleet)."""
    return int(entry["bad"]) + len(entry.get("refuted", ()))


@pytest.mark.parametrize("alias_first", [False, True])
def test_each_kind_lied_to_is_revoked_and_gives_back_what_it_skipped(
        tmp_path: Path, alias_first: bool) -> None:
    site, stats, path = _crawl(tmp_path, lie=True, alias_first=alias_first)
    rules = _rules(path)
    print(f"\nlying: protocol {site.hits} hits, {len(resources(True))} resources; {stats}")
    for kind in KINDS:
        assert rules[kind] and all(_bad(e) >= 1 for e in rules[kind]), (kind, rules[kind])
    assert stats.get("iri/protocol/content/revoked", 0) >= len(KINDS), stats
