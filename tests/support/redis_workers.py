"""Several ``RedisIRIScheduler`` objects on one redis-server, standing for workers.

Each has its own crawler, worker id and Redis connection; a worker "dies" by
being dropped without ``close()``.  Shared by the scheduler's and the protocol
rules' unit tests (tests/redis/test_redis_scheduler.py, tests/protocol/test_redis_protocol.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from scrapy import Spider
from scrapy.utils.test import get_crawler

from iri_scrapy.addon import REDIS_SCHEDULER
from iri_scrapy.frontier.redis_scheduler import RedisIRIScheduler

__all__ = ["WorkerSpider", "open_worker", "reactor"]


class WorkerSpider(Spider):
    """A spider that parses nothing: the scheduler is what is tested."""

    name = "fleet-unit"

    def parse(self, response: Any, **kwargs: Any) -> Any:
        return None


@pytest.fixture(scope="module")
def reactor() -> None:
    """Scrapy's asyncio reactor, as a crawl installs it (module scope)."""
    from scrapy.utils.reactor import install_reactor, is_reactor_installed

    if not is_reactor_installed():
        install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")


def open_worker(url: str, *, lease: float = 1, **extra: Any) -> tuple[Any, RedisIRIScheduler]:
    """A worker on the Redis at *url* (the add-on, ``IRI_REDIS_LEASE_SECONDS`` *lease*,
    settings *extra*): its crawler and its opened scheduler."""
    settings = {"ADDONS": {"iri_scrapy.Addon": 0}, "IRI_REDIS_URL": url,
                "IRI_REDIS_LEASE_SECONDS": lease, **extra}
    crawler = get_crawler(WorkerSpider, settings)  # add-ons applied (Scrapy 2.17+)
    spider = WorkerSpider.from_crawler(crawler)
    crawler.spider = spider
    assert crawler.settings["SCHEDULER"] == REDIS_SCHEDULER
    scheduler = RedisIRIScheduler.from_crawler(crawler)
    scheduler.open(spider)
    return crawler, scheduler
