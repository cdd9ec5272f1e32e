"""The protocol level on a generated messy site of held-out noise (:mod:`tests.support.gen_site`).

One real crawl of a seed used neither for tuning nor for the benchmark's figures,
its noise drawn from the held-out kinds: nothing missed (the gallery whose items
are only in ``href``/``data-src``, the listing whose names are only in
``title=``, the pages that differ only in a part number, an order number, a UUID,
a time or a date), and fewer server hits than stock Scrapy's (about 2.7 per
resource on these sites).  Figures: ``benchmarks/bench_protocol_heldout.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.crawl import run_crawl
from tests.support.gen_site import HELDOUT_NOISE, TUNING_NOISE, GenSite

pytestmark = pytest.mark.slow

PROTOCOL: dict[str, Any] = {"ADDONS": {"iri_scrapy.Addon": 0}, "ROBOTSTXT_OBEY": True,
                            "IRI_LEVEL": "protocol"}


def test_a_held_out_site_loses_nothing_and_saves_fetches() -> None:
    noise = (*HELDOUT_NOISE[:4], TUNING_NOISE[0])
    with GenSite(201, noise) as site:
        result = run_crawl(PROTOCOL, site.start_urls, site.proxy_url)
        print(f"\n{site.summary()}")
        assert result.finish_reason == "finished"
        assert site.missed() == set(), site.family_missed()
        assert site.ratio() < 2.3, site.summary()
        stats = result.stats
        assert stats["iri/protocol/calibration/fetched"] >= 2
        assert stats.get("iri/protocol/content/learned", 0) >= 1
