"""scrapy-redis's scheduler with the add-on and no DUPEFILTER_CLASS: the seen-set is in Redis.

scrapy-redis's ``Scheduler`` builds its dupefilter from ``DUPEFILTER_CLASS``
(docs/scrapy-redis-notes.md section 2).  The add-on used to leave its local
``IRIDupeFilter`` there: the seen-set lived in the process's memory, nothing
reached Redis, and a second run fetched everything again.  The add-on now sets
``RedisIRIDupeFilter`` when ``SCHEDULER`` is scrapy-redis's (with scrapy-redis's
own ``REDIS_URL``), and says it in one line when an explicit local filter stays.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from scrapy import Spider
from scrapy.utils.test import get_crawler

from iri_scrapy.addon import REDIS_DUPEFILTER
from tests.support.crawl import run_crawl
from tests.support.redis_support import RedisServer
from tests.support.server import SiteServer, serve_site
from tests.support.site import DEMO_SITE

SCRAPY_REDIS = "scrapy_redis.scheduler.Scheduler"
EN_HOME = "http://www.example.test/"


def test_the_addon_gives_scrapy_redis_our_redis_filter() -> None:
    crawler = get_crawler(Spider, settings_dict={
        "ADDONS": {"iri_scrapy.Addon": 0}, "SCHEDULER": SCRAPY_REDIS})
    assert crawler.settings.get("DUPEFILTER_CLASS") == REDIS_DUPEFILTER
    # without scrapy-redis's scheduler: the local filter, as before
    plain = get_crawler(Spider, settings_dict={"ADDONS": {"iri_scrapy.Addon": 0}})
    assert plain.settings.get("DUPEFILTER_CLASS") == "iri_scrapy.IRIDupeFilter"


def test_an_explicit_local_filter_under_scrapy_redis_is_said(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="iri_scrapy.addon"):
        crawler = get_crawler(Spider, settings_dict={
            "ADDONS": {"iri_scrapy.Addon": 0}, "SCHEDULER": SCRAPY_REDIS,
            "DUPEFILTER_CLASS": "iri_scrapy.IRIDupeFilter"})
    assert crawler.settings.get("DUPEFILTER_CLASS") == "iri_scrapy.IRIDupeFilter"
    lines = [r.getMessage() for r in caplog.records if "second run" in r.getMessage()]
    assert len(lines) == 1 and "\n" not in lines[0]


@pytest.fixture(scope="module")
def site() -> Iterator[SiteServer]:
    with serve_site(DEMO_SITE) as server:
        yield server


@pytest.mark.redis
@pytest.mark.slow
def test_a_second_run_refetches_nothing(redis_server_session: RedisServer,
                                        site: SiteServer) -> None:
    site.reset()
    settings: dict[str, Any] = {
        "ADDONS": {"iri_scrapy.Addon": 0},
        "SCHEDULER": SCRAPY_REDIS,
        "SCHEDULER_PERSIST": True,
        "REDIS_URL": redis_server_session.url,  # scrapy-redis's own setting only
    }
    first = run_crawl(settings, [EN_HOME], site.proxy_url)
    assert first.ok, (first.finish_reason, first.errors, first.stderr[-3000:])
    assert site.hits.fetched() == DEMO_SITE.keys
    assert site.hits.duplicates() == {}
    keys = {k.decode() for k in redis_server_session.client().keys("*")}
    assert any(":iri-dupefilter:v" in k for k in keys), keys
    site.reset()
    second = run_crawl(settings, [EN_HOME], site.proxy_url)
    assert second.ok, (second.finish_reason, second.errors, second.stderr[-3000:])
    assert site.hits.hits == []
    assert second.stats.get("downloader/request_count", 0) == 0
