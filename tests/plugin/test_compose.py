"""The add-on composes with scrapy-zyte-api's and scrapy-poet's fingerprinters, and a user's.

Whatever the ``ADDONS`` order, the crawler's fingerprinter keeps apart what
stock canonicalization merges and RFC 3987 does not (``?id=1`` / ``?id=1&``),
merges IRI aliases, and keeps the other fingerprinter's part (Zyte API
parameters).  The real packages are installed (the ``test`` extra); requests that
do not use Zyte API need no service.  See docs/compose.md.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest
from scrapy import Request, Spider
from scrapy.utils.test import get_crawler

from iri_scrapy import IRIRequestFingerprinter
from iri_scrapy.plugin.config import IRIConfig
from iri_scrapy.plugin.fingerprinter import BASE_SETTING, chain_problem
from tests.support.compose_spiders import ALIASES, FALSE_MERGE
from tests.support.watch import run_watched
from tests.support.wire import WireHost, WirePage, WireServer, WireSite

pytest.importorskip("scrapy_zyte_api")
pytest.importorskip("scrapy_poet")

OURS = "iri_scrapy.Addon"
ZYTE = "scrapy_zyte_api.Addon"
POET = "scrapy_poet.Addon"
ZYTE_SETTINGS = {"ZYTE_API_KEY": "a" * 32, "ZYTE_API_TRANSPARENT_MODE": False}
#: name: ADDONS (our add-on first or last)
ORDERS: dict[str, dict[str, int]] = {
    "zyte_after_ours": {OURS: 0, ZYTE: 500},
    "zyte_before_ours": {ZYTE: 0, OURS: 500},
    "poet_after_ours": {OURS: 0, POET: 300},
    "poet_before_ours": {POET: 0, OURS: 500},
    "poet_zyte_ours": {POET: 0, ZYTE: 100, OURS: 500},
    "ours_poet_zyte": {OURS: 0, POET: 100, ZYTE: 500},
}


def _crawler(addons: dict[str, int], **settings: Any) -> Any:
    extra = ZYTE_SETTINGS if ZYTE in addons else {}
    return get_crawler(Spider, settings_dict={"ADDONS": addons, **extra, **settings})


def _same(fp: Any, a: str, b: str) -> bool:
    meta = {"zyte_api_automap": False}
    return bool(fp.fingerprint(Request(a, meta=dict(meta))) == fp.fingerprint(Request(b, meta=dict(meta))))


def _verify_at_open(crawler: Any) -> None:
    """Run the add-on's spider_opened check (the other spider_opened handlers need a reactor)."""
    from iri_scrapy.addon import AddonExtension

    (ext,) = [e for e in crawler.extensions.middlewares if isinstance(e, AddonExtension)]
    ext._verify_fingerprinter()


# ------------------------------------------------------------------- settings, in process

@pytest.mark.parametrize("order", sorted(ORDERS))
def test_every_order_puts_ours_in_the_chain(order: str) -> None:
    crawler = _crawler(ORDERS[order])
    settings = crawler.settings
    top = type(crawler.request_fingerprinter).__name__
    if ZYTE in ORDERS[order]:
        assert top == "ScrapyZyteAPIRequestFingerprinter"
        fallback = settings.get("ZYTE_API_FALLBACK_REQUEST_FINGERPRINTER_CLASS")
        poet = POET in ORDERS[order]
        assert str(fallback).endswith("ScrapyPoetRequestFingerprinter" if poet
                                      else "IRIRequestFingerprinter")
    else:
        assert top == "ScrapyPoetRequestFingerprinter"
    assert settings.get("SCRAPY_POET_REQUEST_FINGERPRINTER_BASE_CLASS") == (
        "iri_scrapy.IRIRequestFingerprinter")
    if POET not in ORDERS[order]:  # scrapy-poet's fingerprinter needs a running engine
        assert chain_problem(crawler.request_fingerprinter, IRIConfig()) is None
        assert not _same(crawler.request_fingerprinter, *FALSE_MERGE)
        assert _same(crawler.request_fingerprinter, *ALIASES)


class HeaderFingerprinter:
    """A user's own fingerprinter: Scrapy's, with the Accept-Language header."""

    def __init__(self) -> None:
        from scrapy.utils.request import RequestFingerprinter

        self.inner = RequestFingerprinter()

    @classmethod
    def from_crawler(cls, crawler: Any) -> HeaderFingerprinter:
        return cls()

    def fingerprint(self, request: Request) -> bytes:
        from scrapy.utils.request import fingerprint

        return fingerprint(request, include_headers=["Accept-Language"])


USER_FP = f"{__name__}.HeaderFingerprinter"


def test_a_users_fingerprinter_is_composed_with_ours_and_said(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="iri_scrapy.addon"):
        crawler = _crawler({OURS: 0}, REQUEST_FINGERPRINTER_CLASS=USER_FP)
    assert [r.getMessage() for r in caplog.records if "is composed with" in r.getMessage()]
    fp = crawler.request_fingerprinter
    assert isinstance(fp, IRIRequestFingerprinter)
    assert isinstance(fp.base, HeaderFingerprinter)
    assert crawler.settings.get(BASE_SETTING) == USER_FP
    # ours: no false merge, aliases merged
    assert not _same(fp, *FALSE_MERGE)
    assert _same(fp, *ALIASES)
    # theirs: the header still tells requests apart
    url = "http://shop.test/a"
    de = fp.fingerprint(Request(url, headers={"Accept-Language": "de"}))
    fr = fp.fingerprint(Request(url, headers={"Accept-Language": "fr"}))
    assert de != fr
    assert chain_problem(fp, IRIConfig()) is None


def test_an_explicit_base_setting_is_not_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="iri_scrapy.addon"):
        crawler = _crawler({OURS: 0}, **{BASE_SETTING: USER_FP})
    assert caplog.records == []
    assert isinstance(crawler.request_fingerprinter.base, HeaderFingerprinter)


def test_a_users_fingerprinter_as_zyte_fallback_is_kept_as_our_base() -> None:
    crawler = _crawler({ZYTE: 0, OURS: 500}, REQUEST_FINGERPRINTER_CLASS=USER_FP)
    settings = crawler.settings
    # scrapy-zyte-api moved the user's class to its fallback; we take the fallback's
    # place and keep the user's class as our base: nothing is dropped
    assert settings.get("ZYTE_API_FALLBACK_REQUEST_FINGERPRINTER_CLASS") == (
        "iri_scrapy.IRIRequestFingerprinter")
    assert settings.get(BASE_SETTING) == USER_FP
    assert chain_problem(crawler.request_fingerprinter, IRIConfig()) is None


@pytest.mark.parametrize("addons", [{OURS: 0, ZYTE: 500}, {ZYTE: 0, OURS: 500}],
                         ids=["ours_first", "zyte_first"])
def test_a_users_fingerprinter_with_zyte_in_either_order(addons: dict[str, int]) -> None:
    """scrapy-zyte-api's fingerprinter on top, ours its fallback, the user's ours' base."""
    crawler = _crawler(addons, REQUEST_FINGERPRINTER_CLASS=USER_FP)
    fp = crawler.request_fingerprinter
    assert type(fp).__name__ == "ScrapyZyteAPIRequestFingerprinter"
    assert crawler.settings.get("ZYTE_API_FALLBACK_REQUEST_FINGERPRINTER_CLASS") == (
        "iri_scrapy.IRIRequestFingerprinter")
    assert crawler.settings.get(BASE_SETTING) == USER_FP
    assert chain_problem(fp, IRIConfig()) is None  # (Zyte API requests need an engine)


def test_a_chain_without_ours_is_said_loudly_at_start(caplog: pytest.LogCaptureFixture) -> None:
    crawler = _crawler({ZYTE: 0, OURS: 500}, ZYTE_API_FALLBACK_REQUEST_FINGERPRINTER_CLASS=(
        "scrapy.utils.request.RequestFingerprinter"))
    assert "merges" in str(chain_problem(crawler.request_fingerprinter, IRIConfig()))
    with caplog.at_level(logging.WARNING, logger="iri_scrapy.addon"):
        _verify_at_open(crawler)
    lines = [r.getMessage() for r in caplog.records if "IRI deduplication is OFF" in r.getMessage()]
    assert len(lines) == 1 and "\n" not in lines[0]


def test_the_check_passes_quietly_with_ours(caplog: pytest.LogCaptureFixture) -> None:
    crawler = _crawler({ZYTE: 500, OURS: 0})
    with caplog.at_level(logging.WARNING, logger="iri_scrapy.addon"):
        _verify_at_open(crawler)
    assert caplog.records == []


# ------------------------------------------------------------- real crawls, one process

def _host(i: int) -> WireHost:
    return WireHost(f"shop{i}.test")


def _site(n: int) -> WireSite:
    pages = []
    for i in range(n):
        h = _host(i)
        links = ("/item?id=1", "/item?id=1&", "/a/./b/%7euser",
                 f"HTTP://SHOP{i}.TEST:80/a/b/%7Euser", "/a/b/~user")
        pages += [WirePage(h, "/", None, links), WirePage(h, "/item", "id=1"),
                  WirePage(h, "/item", "id=1&"), WirePage(h, "/a/b/~user")]
    return WireSite(hosts=tuple(_host(i) for i in range(n)), pages=tuple(pages))


def run_multi(tmp: Path, proxy: str, phases: list[list[dict[str, Any]]]) -> dict[str, Any]:
    config, result = tmp / "config.json", tmp / "result.json"
    config.write_text(json.dumps({"proxy": proxy, "phases": phases}), encoding="utf-8")
    root = Path(__file__).resolve().parents[2]
    proc = run_watched([sys.executable, "-m", "tests.support.multi_crawl", str(config),
                        str(result)], what="multi_crawl", cwd=str(root))
    assert proc.returncode == 0, proc.stderr[-4000:]
    return {"log": proc.stderr, **json.loads(result.read_text(encoding="utf-8"))}


@pytest.mark.slow
def test_real_crawls_in_every_order_lose_no_page(tmp_path: Path) -> None:
    names = sorted(ORDERS)
    site = _site(len(names))
    with WireServer(site) as srv:
        phases = [[{
            "name": name, "spider": "tests.support.compose_spiders.ProbeSpider",
            "settings": {"ADDONS": ORDERS[name], **(ZYTE_SETTINGS if ZYTE in ORDERS[name] else {})},
            "kwargs": {"start_urls": [f"http://shop{i}.test/"]},
        }] for i, name in enumerate(names)]
        out = run_multi(tmp_path, srv.proxy_url, phases)
        hits = srv.hits
    assert hits.not_found() == [], hits.targets
    assert hits.duplicates() == {}, hits.targets
    for i, name in enumerate(names):
        r = out[name]
        assert r["errors"] == [], r["errors"]
        rec = r["record"]
        # stock merges the pair (the page lost), ours keeps it apart; aliases: the reverse
        assert rec["stock_false_merge_same"] and not rec["stock_aliases_same"]
        assert rec["false_merge_same"] is False, (name, rec)
        assert rec["aliases_same"] is True, (name, rec)
        if ZYTE in ORDERS[name]:
            assert rec["zyte_params_same"] is False  # their part of the fingerprint kept
            assert rec["zyte_vs_plain_same"] is False
            # a request sent through Zyte API: theirs merges ?id=1& with ?id=1 (w3lib's
            # canonicalize_url), the dupefilter keeps them apart (our key folded in)
            assert rec["zyte_chain_false_merge_same"] is True
            assert rec["zyte_keyed_false_merge_same"] is False
            assert rec["zyte_keyed_params_same"] is False
            assert rec["zyte_keyed_plain_is_chain"] is True
        host = _host(i).alabel
        fetched = {k for k in hits.fetched() if k.host == host}
        assert len(fetched) == 4, (name, fetched)  # "/", both items, the alias page once
    assert "IRI deduplication is OFF" not in out["log"]

