"""One crawl context per crawler, built by the add-on, read by each component.

The add-on puts the context into the crawler's settings; every component of the
crawler holds that one object (no attribute on the crawler, no registry);
Scrapy's copies of the settings keep it; ``Addon.update_settings`` only edits
settings.  A component named by hand without the add-on works alone, or, when
it needs state shared with another component, refuses the start in one line.
"""

from __future__ import annotations

import copy
import logging
import pickle
from typing import Any

import pytest
from scrapy import Request, Spider
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

from iri_scrapy import Addon
from iri_scrapy.frontier.middlewares import FrontierDownloaderMiddleware
from iri_scrapy.plugin.context import SETTING, CrawlContext
from iri_scrapy.plugin.middleware import Canonicalizer, IRISpiderMiddleware

ADDONS = {"ADDONS": {"iri_scrapy.Addon": 0}}


class _Spider(Spider):
    name = "context"


def test_the_add_on_builds_one_context_that_every_component_holds() -> None:
    crawler = get_crawler(_Spider, {**ADDONS, "IRI_LEVEL": "protocol"})
    context = crawler.settings[SETTING]
    assert isinstance(context, CrawlContext) and context.shared
    assert CrawlContext.of(crawler) is context
    fingerprinter: Any = crawler.request_fingerprinter
    spider_mw = IRISpiderMiddleware.from_crawler(crawler)
    protocol_mw = context.protocol.middleware.from_crawler(crawler)  # iri_scrapy/protocol/
    assert spider_mw.canon is Canonicalizer.for_crawler(crawler) is context.canon
    assert fingerprinter.stamper is spider_mw.canon.stamper is context.stamper
    assert fingerprinter.rules is protocol_mw.rules is context.rules is not None
    assert protocol_mw.learned is context.learned is not None
    assert not [name for name in vars(crawler) if "iri" in name.lower()]


def test_scrapys_copies_of_the_settings_keep_the_context_and_it_is_not_pickled() -> None:
    crawler = get_crawler(_Spider, dict(ADDONS))
    context = crawler.settings[SETTING]
    assert crawler.settings.copy()[SETTING] is context
    assert crawler.settings.frozencopy()[SETTING] is context
    assert copy.copy(context) is context and copy.deepcopy(context) is context
    with pytest.raises(TypeError, match="not pickled"):
        pickle.dumps(context)


def test_a_context_copied_into_another_crawlers_settings_is_not_its_own() -> None:
    first = get_crawler(_Spider, dict(ADDONS))
    other = get_crawler(_Spider, {SETTING: first.settings[SETTING]})  # no add-on
    mine = CrawlContext.of(other)
    assert mine is not first.settings[SETTING] and not mine.shared


def test_update_settings_only_edits_settings() -> None:
    class _Signals:
        def connect(self, *args: Any, **kwargs: Any) -> None:
            raise AssertionError("Addon.update_settings connected a signal")

    class _Crawler:
        signals = _Signals()
        settings = Settings()

    crawler: Any = _Crawler()
    settings = Settings()
    Addon(crawler).update_settings(settings)
    assert settings[SETTING].crawler is crawler
    assert "iri_scrapy.addon.AddonExtension" in str(settings.getdict("EXTENSIONS"))


def test_a_fingerprinter_named_without_the_add_on_works_alone() -> None:
    crawler = get_crawler(_Spider, {
        "REQUEST_FINGERPRINTER_CLASS": "iri_scrapy.IRIRequestFingerprinter"})
    assert SETTING not in crawler.settings
    fp = crawler.request_fingerprinter
    assert fp.fingerprint(Request("http://Example.com/%7Ea")) == fp.fingerprint(
        Request("http://example.com/~a"))


@pytest.mark.parametrize("settings", [
    {"IRI_LEVEL": "protocol",
     "REQUEST_FINGERPRINTER_CLASS": "iri_scrapy.IRIRequestFingerprinter"},
    {"DOWNLOADER_MIDDLEWARES": {FrontierDownloaderMiddleware: -1000}},
], ids=["protocol-rules", "frontier-middleware"])
def test_shared_state_without_the_add_on_refuses_the_start_in_one_line(
    settings: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR):
        crawler = get_crawler(_Spider, settings)
        if "DOWNLOADER_MIDDLEWARES" in settings:
            FrontierDownloaderMiddleware.from_crawler(crawler)
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(lines) == 1, lines
    assert 'ADDONS = {"iri_scrapy.Addon": 0}' in lines[0]
