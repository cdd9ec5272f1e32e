"""A real crawl with ``DEPTH_LIMIT`` and ``JOBDIR``: the frontier fetches what stock Scrapy does.

Under ``DEPTH_LIMIT`` the order of the crawl decides which pages are fetched: a
page first reached at the deepest level is fetched there, its links dropped by
``DepthMiddleware``, and when it is reached again at a shallower level it is a
duplicate, so its links are never followed.  The site here is made of such
pages: two hosts (``DownloaderAwarePriorityQueue``, Scrapy's default, takes them
in turns), a ``DEPTH_PRIORITY`` crawl and a LIFO one.  Stock Scrapy with
``JOBDIR`` and the add-on with ``JOBDIR`` (the crash-safe frontier) crawl it
with ``CONCURRENT_REQUESTS = 1``: the same pages, in the same order.  Then a
``SCHEDULER_PRIORITY_QUEUE`` whose order the frontier does not know refuses the
start (one ERROR line, its own finish_reason, exit status 1).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from tests.support.bigsite import SlowSiteServer
from tests.support.crawl import run_crawl
from tests.support.server import SiteServer
from tests.support.site import Host, Link, Resource, Site

HOSTS = (Host("wiki.example", "en"), Host("media.example", "en"))


def wiki_site(pages: int = 40, seed: int = 3) -> Site:
    """*pages* pages over two hosts, each linking to three others at random (the
    same seed, the same site), the home page to four."""
    rng = random.Random(seed)
    resources = []
    for i in range(pages):
        host = HOSTS[i % 7 == 3]
        targets = rng.sample([j for j in range(1, pages) if j != i], 4 if i == 0 else 3)
        links = tuple(Link(f"http://{HOSTS[j % 7 == 3].name}/w/{j}", f"p{j}")
                      for j in targets)
        resources.append(Resource(f"p{i}", host, f"/w/{i}", None, f"Page {i}", "", links))
    return Site(hosts=HOSTS, resources=tuple(resources), start_urls=("http://wiki.example/w/0",))


SETTINGS: dict[str, Any] = {"CONCURRENT_REQUESTS": 1, "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
                            "DEPTH_LIMIT": 3}


def crawl(srv: SiteServer, site: Site, jobdir: Path, extra: dict[str, Any]) -> list[str]:
    srv.reset()
    result = run_crawl({**SETTINGS, **extra}, list(site.start_urls), srv.proxy_url,
                       jobdir=jobdir)
    assert result.ok, (result.finish_reason, result.stderr[-2000:])
    return [f"{hit.key.host}{hit.key.path}" for hit in srv.hits.hits if hit.key is not None]


@pytest.mark.slow
@pytest.mark.parametrize("order", [{}, {"DEPTH_PRIORITY": 1}])
def test_the_frontier_fetches_the_pages_stock_scrapy_does(tmp_path: Path,
                                                          order: dict[str, Any]) -> None:
    site = wiki_site()
    with SlowSiteServer(site, latency=0.0) as srv:
        stock = crawl(srv, site, tmp_path / "stock", order)
        ours = crawl(srv, site, tmp_path / "ours", {"ADDONS": {"iri_scrapy.Addon": 0}, **order})
    assert len(set(stock)) < len(site.resources)  # the depth limit leaves pages out
    assert sorted(ours) == sorted(stock)  # the same pages...
    assert ours == stock  # ...in the same order


@pytest.mark.slow
def test_an_unknown_priority_queue_refuses_the_start(tmp_path: Path) -> None:
    site = wiki_site(pages=5)
    with SlowSiteServer(site, latency=0.0) as srv:
        result = run_crawl({"ADDONS": {"iri_scrapy.Addon": 0},
                            "SCHEDULER_PRIORITY_QUEUE": "tests.crawls.test_jobdir_order.OwnQueue"},
                           list(site.start_urls), srv.proxy_url, jobdir=tmp_path / "job")
        assert srv.hits.hits == []
    assert result.finish_reason == "iri_frontier_priority_queue"
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if "] ERROR:" in line]
    assert len(errors) == 1 and "SCHEDULER_PRIORITY_QUEUE" in errors[0], errors


def _own_queue() -> type:
    from scrapy.pqueues import ScrapyPriorityQueue

    class OwnQueue(ScrapyPriorityQueue):
        """A priority queue of one's own: its order is not Scrapy's."""

    OwnQueue.__module__ = __name__
    OwnQueue.__qualname__ = "OwnQueue"
    return OwnQueue


OwnQueue = _own_queue()
