"""DUPEFILTER_DEBUG shows what was dropped: the spelling written, against the first one seen.

A real crawl of the demo web with the add-on: the spider middleware has made
``request.url`` canonical before the dupefilter sees it, so each debug line must
explain ``meta["iri_original"]`` (what the page wrote), not ``request.url``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from tests.support.crawl import run_crawl
from tests.support.server import SiteServer, serve_site
from tests.support.site import DEMO_SITE

LINE = re.compile(
    r"Filtered duplicate request: <GET (?P<url>\S+)> written as (?P<written>\S+) "
    r"\(referer: .*?; decided by: (?P<rungs>[^;]+); first seen as (?P<first>\S+)\): "
    r"(?P<explain>.*)"
)


@pytest.fixture(scope="module")
def demo() -> Iterator[SiteServer]:
    with serve_site(DEMO_SITE) as srv:
        yield srv


@pytest.mark.slow
def test_debug_lines_explain_the_dropped_spelling(demo: SiteServer) -> None:
    settings = {"ADDONS": {"iri_scrapy.Addon": 0}, "DUPEFILTER_DEBUG": True, "LOG_LEVEL": "DEBUG"}
    result = run_crawl(settings, list(DEMO_SITE.start_urls), demo.proxy_url, timeout=60,
                       env={"IRI_SCRAPY_DEPRECATIONS_AS_ERRORS": "1"})
    assert result.ok, result.stderr[-3000:]
    lines = [m for m in map(LINE.search, result.stderr.splitlines()) if m]
    assert len(lines) == result.stats["dupefilter/filtered"] > 20
    identical = [m for m in lines if "identical URL" in m["explain"]]
    # an identical line is one whose written spelling is the very first one
    assert all(m["written"] == m["first"] for m in identical)
    assert len(identical) < len(lines) / 2, [m.group(0) for m in identical]
    by_written = {m["written"]: m for m in lines}
    # e.g. /%7euser/ dropped after /~user/: percent-encoding, not "identical"
    tilde = [m for w, m in by_written.items() if w.endswith("/%7euser/") or w.endswith("/%7Euser/")]
    assert tilde and all("5.3.2.3 percent-encoding" in m["explain"] for m in tilde)
    shout = by_written.get("HTTP://WWW.Example.TEST/docs/")
    assert shout is not None and "5.3.2.1 case normalization" in shout["explain"]
    for m in lines:
        assert m["first"] != "an", m.group(0)  # the first spelling is known in one run
        if m["written"] != m["first"]:
            assert "equivalent at 5.3" in m["explain"], m.group(0)
