"""The add-on's IDNA 2008 ``Request()`` URLs stay in its crawler: no process-wide leak.

Two crawlers in one process (:mod:`tests.support.multi_crawl`), one with the
add-on and one without, the add-on's crawler held open until the other has
closed; then a third crawler without the add-on, after the add-on's stopped.
The crawlers without the add-on must behave exactly as stock Scrapy: the URLs
``Request()`` and w3lib's ``<base href>``/meta refresh parsers give them, and
the hosts they contact (``straße.test`` is ``strasse.test`` for IDNA 2003),
while the add-on's crawler fetches ``xn--strae-oqa.test``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from w3lib.html import get_base_url, get_meta_refresh
from w3lib.url import safe_url_string

from tests.support.watch import run_watched
from tests.support.wire import WireHost, WirePage, WireServer, WireSite

pytestmark = pytest.mark.slow  # three real crawls in one subprocess

URLS = ["http://straße.test/s?", "http://σοφός.test/", "http://example.test/search?",
        "http://क्\u200dष.test/"]
STR, STRASSE = WireHost("straße.test"), WireHost("strasse.test")
SITE = WireSite(hosts=(STR, STRASSE), pages=tuple(
    WirePage(h, p) for h in (STR, STRASSE) for p in ("/a", "/b", "/c")))
SPIDER = "tests.support.compose_spiders.UrlSpider"


def _stock() -> dict[str, list[Any]]:
    """What stock Scrapy gives (w3lib's functions: Request() runs safe_url_string)."""
    return {
        "request": [safe_url_string(u) for u in URLS],
        "base_href": [get_base_url(f'<base href="{u}">', "http://plain.test/") for u in URLS],
        "meta_refresh": [get_meta_refresh(f'<meta http-equiv="refresh" content="0; url={u}">',
                                          "http://plain.test/")[1] for u in URLS],
    }


def test_a_crawler_without_the_addon_is_stock_during_and_after(tmp_path: Path) -> None:
    def spec(name: str, page: str, addon: bool, **extra: Any) -> dict[str, Any]:
        return {"name": name, "spider": SPIDER,
                "settings": {"ADDONS": {"iri_scrapy.Addon": 0}} if addon else {},
                "kwargs": {"urls": URLS, "fetch": [f"http://straße.test/{page}"]}, **extra}

    phases = [[spec("addon", "a", True, hold_until_closed="plain"), spec("plain", "b", False)],
              [spec("after", "c", False)]]
    with WireServer(SITE) as srv:
        config, result = tmp_path / "config.json", tmp_path / "result.json"
        config.write_text(json.dumps({"proxy": srv.proxy_url, "phases": phases}),
                          encoding="utf-8")
        proc = run_watched([sys.executable, "-m", "tests.support.multi_crawl", str(config),
                            str(result)], what="multi_crawl",
                           cwd=str(Path(__file__).resolve().parents[2]))
        assert proc.returncode == 0, proc.stderr[-4000:]
        out = json.loads(result.read_text(encoding="utf-8"))
        targets = sorted(srv.hits.targets)
    assert srv.hits.not_found() == [], targets
    # the add-on's crawler went to the IDNA 2008 host, the others where stock goes
    assert targets == ["http://strasse.test/b", "http://strasse.test/c",
                       "http://xn--strae-oqa.test/a"]
    stock = _stock()
    assert stock["request"][0] == "http://strasse.test/s"  # IDNA 2003, and the "?" dropped
    for name in ("plain", "after"):
        record = out[name]["record"]
        assert record["at_start"] == stock, name
        assert record["in_callback"] == stock, name
        assert out[name]["stats"].get("downloader/response_status_count/200") == 1
    # the add-on's crawler held until the plain one closed: they overlapped
    assert out["addon"]["stats"]["finish_time"] > out["plain"]["stats"]["finish_time"]
