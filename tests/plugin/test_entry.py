"""The scheduler's entry (plugin/entry.py), through Scrapy's real scheduler and the frontier's.

A request made by another component (a redirect, a downloader middleware, an
extension's ``engine.crawl()``) enters the scheduler in fetch form, once; a second
spelling of it is a duplicate like any other; nothing is re-issued.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from scrapy import Request, Spider
from scrapy.core.scheduler import Scheduler
from scrapy.utils.test import get_crawler

from iri_scrapy.addon import ENTRY_SCHEDULER, FRONTIER_SCHEDULER
from iri_scrapy.plugin.entry import STAT_ENTRY_NORMALIZED, IRIEntryMixin, IRIScheduler, enter
from iri_scrapy.plugin.middleware import Canonicalizer, IRISpiderMiddleware

ADDON = {
    "ADDONS": {"iri_scrapy.Addon": 0},
    # the default DownloaderAwarePriorityQueue needs a running engine
    "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.ScrapyPriorityQueue",
}


class _Spider(Spider):
    name = "entry-test"


def _open(settings: dict[str, Any]) -> tuple[Any, Any]:
    crawler = get_crawler(_Spider, {**ADDON, **settings})  # add-ons applied
    crawler.spider = _Spider.from_crawler(crawler)
    crawler.stats.open_spider()
    from scrapy.utils.misc import build_from_crawler, load_object

    scheduler = build_from_crawler(load_object(crawler.settings["SCHEDULER"]), crawler)
    scheduler.open(crawler.spider)
    return crawler, scheduler


def _drain(scheduler: Any) -> list[Request]:
    out = []
    while (request := scheduler.next_request()) is not None:
        out.append(request)
    return out


def test_addon_sets_the_entry_scheduler(caplog: pytest.LogCaptureFixture) -> None:
    assert get_crawler(settings_dict=ADDON).settings["SCHEDULER"] == ENTRY_SCHEDULER
    with caplog.at_level(logging.WARNING, logger="iri_scrapy.addon"):
        mine = get_crawler(settings_dict={**ADDON, "SCHEDULER": "scrapy.core.scheduler.Scheduler"})
    assert mine.settings["SCHEDULER"] == "scrapy.core.scheduler.Scheduler"  # the user's wins
    lines = [r.getMessage() for r in caplog.records if "fetch form as they enter" in r.getMessage()]
    assert len(lines) == 1 and "IRIEntryMixin" in lines[0]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="iri_scrapy.addon"):
        get_crawler(settings_dict={**ADDON, "SCHEDULER": _WithEntry})
    assert not [r for r in caplog.records if "fetch form as they enter" in r.getMessage()]


class _WithEntry(IRIEntryMixin, Scheduler):
    """Another scheduler, given the entry by the mixin."""


@pytest.mark.parametrize("how", ["plain", "mixin", "jobdir"])
def test_unstamped_request_enters_in_fetch_form_once(how: str, tmp_path: Path) -> None:
    settings: dict[str, Any] = {
        "plain": {}, "mixin": {"SCHEDULER": _WithEntry}, "jobdir": {"JOBDIR": str(tmp_path)},
    }[how]
    crawler, scheduler = _open(settings)
    assert type(scheduler).__name__ == {"plain": "IRIScheduler", "mixin": "_WithEntry",
                                        "jobdir": FRONTIER_SCHEDULER.rsplit(".", 1)[1]}[how]
    made = Request("http://www.example.test:80/./page", meta={"redirect_urls": [
        "http://www.example.test/old"], "redirect_reasons": [301]})  # a redirect's
    assert scheduler.enqueue_request(made)
    # another spelling of the same resource (an extension's engine.crawl()): a duplicate
    assert not scheduler.enqueue_request(Request("HTTP://WWW.Example.TEST/%70age#x"))
    # the spider's request, already in fetch form: enters as it is
    spider_mw = IRISpiderMiddleware(crawler)
    other = spider_mw.get_processed_request(Request("http://www.example.test/other"), None)
    assert scheduler.enqueue_request(other)
    out = _drain(scheduler)
    assert sorted(r.url for r in out) == ["http://www.example.test/other",
                                          "http://www.example.test/page"]
    page = next(r for r in out if r.url.endswith("/page"))
    assert page.meta["iri_original"] == "http://www.example.test:80/./page"
    assert "iri_server_spelling" not in page.meta  # the redirect went elsewhere
    stats = crawler.stats
    assert stats.get_value(STAT_ENTRY_NORMALIZED) == 2  # the two made ones, not the spider's
    assert stats.get_value("dupefilter/filtered") == 1
    assert stats.get_value("iri/dupefilter/decided_by/scheme") == 1
    scheduler.close("finished")


def test_a_redirect_to_its_own_resource_enters_as_the_server_wrote_it() -> None:
    crawler = get_crawler(settings_dict=ADDON)
    canon = Canonicalizer.for_crawler(crawler)
    redirected = Request("http://example.test/pref%c3%a9", meta={
        "redirect_urls": ["http://example.test/pref%C3%A9"], "redirect_reasons": [301]})
    assert enter(redirected, canon) is redirected
    assert redirected.meta["iri_server_spelling"] == "http://example.test/pref%C3%A9"
    # a dont_filter request for it, made later, goes out the way the server asked
    later = enter(Request("http://EXAMPLE.test:80/pref%C3%A9#top", dont_filter=True), canon)
    assert later.url == "http://example.test/pref%c3%a9#top"


def test_bare_query_enters_verbatim() -> None:
    canon = Canonicalizer.for_crawler(get_crawler(settings_dict=ADDON))
    req = Request("http://www.example.test/search?#x", meta={"verbatim_url": True,
                                                              "iri_original": "x"})
    new = enter(req, canon)
    assert new.url == "http://www.example.test/search?"  # verbatim URL is the retrieval key
    assert new.meta["verbatim_url"] is True
    user = Request("http://WWW.example.test/x", meta={"verbatim_url": True})
    assert enter(user, canon) is user  # the user's own verbatim_url is respected
    opted_out = Request("http://WWW.example.test/x", meta={"dont_normalize_iri": True})
    assert enter(opted_out, canon) is opted_out


def test_entry_gives_idna2008_hosts_first() -> None:
    crawler = get_crawler(settings_dict=ADDON)
    canon = Canonicalizer.for_crawler(crawler)
    assert canon.idna2008
    made = Request("http://straße.example/karte")  # another component's Request()
    assert made.url == "http://strasse.example/karte"  # IDNA 2003: another domain
    assert enter(made, canon).url == "http://xn--strae-oqa.example/karte"


def test_iri_scheduler_is_scrapys() -> None:
    assert issubclass(IRIScheduler, Scheduler)
