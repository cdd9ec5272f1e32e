"""One canonicalization per request: a real crawl of the demo web counts them.

The crawl subprocess runs :class:`tests.support.counting.CountCanonicalizations`,
which wraps :func:`iri_scrapy.core.ladder.normalize` wherever the package bound
it and writes the count to the crawl's stats.  Every request that enters the
crawl (``scheduler/enqueued`` plus ``dupefilter/filtered``) is canonicalized
once, when it is stamped (:mod:`iri_scrapy.plugin.stamp`); links already
canonical take the fast path and cost none.  Before the stamp, this crawl of
103 requests made 178 ``normalize`` calls.  The same crawl checks the
dupefilter's ``decided_by`` stats and its close line.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.crawl import CrawlResult, run_crawl
from tests.support.server import serve_site
from tests.support.site import DEMO_SITE

COUNTER = {"tests.support.counting.CountCanonicalizations": 0}


@pytest.fixture(scope="module")
def counted() -> Iterator[CrawlResult]:
    with serve_site(DEMO_SITE) as srv:
        result = run_crawl(
            {"ADDONS": {"iri_scrapy.Addon": 0}, "EXTENSIONS": COUNTER},
            list(DEMO_SITE.start_urls), srv.proxy_url,
            env={"IRI_SCRAPY_DEPRECATIONS_AS_ERRORS": "1"},
        )
    assert result.ok, result.stderr[-3000:]
    yield result


@pytest.mark.slow
def test_at_most_one_normalize_per_request(counted: CrawlResult) -> None:
    stats = counted.stats
    requests = stats["scheduler/enqueued"] + stats["dupefilter/filtered"]
    assert requests > 50
    assert 0 < stats["test/normalize"] <= requests, stats
    assert stats.get("test/climb", 0) == 0  # no per-rung climb on the crawl path


@pytest.mark.slow
def test_decided_by_sums_to_filtered_and_close_line(counted: CrawlResult) -> None:
    stats = counted.stats
    decided = {k: v for k, v in stats.items() if k.startswith("iri/dupefilter/decided_by/")}
    assert sum(decided.values()) == stats["dupefilter/filtered"] > 20
    # the demo web has aliases at several rungs, and exact repeats
    assert {"simple", "percent", "scheme"} <= {k.rsplit("/", 1)[1] for k in decided}
    assert not any(k.startswith("iri/dupefilter/rung/") for k in stats)
    aliases = stats.get("iri/dupefilter/stock_aliases", 0)
    assert 0 < aliases < stats["dupefilter/filtered"]
    lines = [line for line in counted.stderr.splitlines() if "IRI dupefilter:" in line]
    assert len(lines) == 1, lines
    assert (f"{stats['dupefilter/filtered']} duplicates dropped (decided by: " in lines[0]
            and f"stock Scrapy's fingerprint would have made {aliases} more fetches"
            in lines[0]), lines[0]
