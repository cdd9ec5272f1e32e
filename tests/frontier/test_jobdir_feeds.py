"""Items in the feed exactly once across ``kill -9`` with ``JOBDIR`` (docs/jobdir.md, "Feeds").

A crawl of a few hundred pages, each yielding one item to a local feed file, is
SIGKILLed at seeded moments and run again with the same command: every page's
item is in the file exactly once and the file is whole (no torn line, a CSV with
one header, a JSON array that parses).  Without the frontier's feed staging the
items in the pipelines and the exporter's buffer at the kill are missing (their
pages were answered and are not fetched again).
"""

from __future__ import annotations

import csv
import json
import random
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from scrapy import Request

from tests.frontier.test_frontier import make_project, run_until, stat_of
from tests.support.bigsite import SlowSiteServer, large_site

PAGES = 400
SEED = 7978


@pytest.fixture(scope="module")
def feed_site() -> Iterator[SlowSiteServer]:
    srv = SlowSiteServer(large_site(PAGES), latency=0.005)
    with srv:
        yield srv


def _titles_jsonl(path: Path) -> list[str]:
    raw = path.read_bytes()
    assert not raw or raw.endswith(b"\n"), raw[-200:]  # no torn last line
    return [json.loads(line)["title"] for line in raw.decode().splitlines()]


def _titles_csv(path: Path) -> list[str]:
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    header = rows[0]
    assert "title" in header
    assert header not in rows[1:]  # one header
    col = header.index("title")
    return [row[col] for row in rows[1:]]


def _titles_json(path: Path) -> list[str]:
    return [item["title"] for item in json.loads(path.read_text(encoding="utf-8"))]


def _titles_xml(path: Path) -> list[str]:
    import xml.etree.ElementTree as ET  # noqa: N817, S405 - our own crawl's output

    root = ET.parse(path).getroot()  # noqa: S314 - one well-formed document, or it fails
    assert root.tag == "items"
    return [item.findtext("title") or "" for item in root.findall("item")]


READ = {"jsonlines": ("items.jsonl", _titles_jsonl), "csv": ("items.csv", _titles_csv),
        "json": ("items.json", _titles_json), "xml": ("items.xml", _titles_xml)}


def _crawl_killed(srv: SlowSiteServer, tmp_path: Path, fmt: str, kills: list[int],
                  extra: str = "") -> tuple[Counter[str], Path]:
    name, _ = READ[fmt]
    srv.reset()
    feeds = f'FEEDS = {{"{tmp_path / name}": {{"format": "{fmt}", "overwrite": False}}}}'
    project = make_project(tmp_path, srv.proxy_url, extra=f"{feeds}\n{extra}")
    run = 0
    for kill_after in [*kills, None]:
        run += 1
        _, killed = run_until(project, srv, run, kill_after)
        assert killed == (kill_after is not None)
    assert "'finish_reason': 'finished'" in (project / f"log{run}.txt").read_text()
    assert set(srv.hits.counts()) == srv.site.keys  # every page fetched
    return Counter(READ[fmt][1](tmp_path / name)), project


def _kills(seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(40, 120), rng.randrange(5, 40), rng.randrange(40, 120)]


def _expected() -> set[str]:
    return {f"Page {i}" for i in range(PAGES)} | {"Frontier home"}


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["jsonlines", "csv", "json", "xml"])
def test_items_exactly_once_across_kill_9(feed_site: SlowSiteServer, tmp_path: Path,
                                          fmt: str) -> None:
    kills = _kills(SEED + len(fmt))
    titles, project = _crawl_killed(feed_site, tmp_path, fmt, kills)
    missing = _expected() - set(titles)
    twice = {t: n for t, n in titles.items() if n > 1}
    print(f"{fmt}: kills after {kills} hits: {len(missing)} items missing, "
          f"{sum(n - 1 for n in twice.values())} duplicated")
    assert not missing, (len(missing), sorted(missing)[:10])
    assert not twice, twice
    assert set(titles) == _expected()
    assert stat_of(project, len(kills) + 1, "iri/frontier/unclean_shutdown") == 1


@pytest.mark.slow
def test_batches_continue_across_kill_9(feed_site: SlowSiteServer, tmp_path: Path) -> None:
    """FEED_EXPORT_BATCH_ITEM_COUNT: every item once over the batch files, batch ids
    continued (1..n, no file started again at 1), no batch over its size."""
    srv = feed_site
    srv.reset()
    size = 40
    template = tmp_path / "items-%(batch_id)d.jsonl"
    feeds = (f'FEEDS = {{"{template}": {{"format": "jsonlines", "overwrite": False, '
             f'"batch_item_count": {size}}}}}')
    project = make_project(tmp_path, srv.proxy_url, extra=feeds)
    kills = _kills(SEED + 1)
    for run, kill_after in enumerate([*kills, None], 1):
        _, killed = run_until(project, srv, run, kill_after)
        assert killed == (kill_after is not None)
    files = sorted(tmp_path.glob("items-*.jsonl"), key=lambda p: int(p.stem.split("-")[1]))
    ids = [int(p.stem.split("-")[1]) for p in files]
    assert ids == list(range(1, len(ids) + 1)), ids
    per_file = [_titles_jsonl(p) for p in files]
    assert all(len(titles) <= size for titles in per_file), [len(t) for t in per_file]
    titles = Counter(t for batch in per_file for t in batch)
    print(f"batches: kills after {kills} hits: {len(files)} files, sizes "
          f"{[len(t) for t in per_file]}")
    assert set(titles) == _expected()
    assert not {t: n for t, n in titles.items() if n > 1}


STATE_SPIDER = '''
from tests.support.spider import AliasSpider


class FrontierSpider(AliasSpider):
    name = "frontier"

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("start_urls", ["http://frontier.example/"])
        super().__init__(*args, **kwargs)

    def parse(self, response, **kwargs):
        self.state["pages"] = self.state.get("pages", 0) + 1
        if {extra}:
            self.state["odd"] = {{1, 2}}  # not JSON
        yield from super().parse(response, **kwargs)
'''


def _final_state(project: Path) -> dict[str, object]:
    import pickle

    # the test reads the pickle its own crawl wrote (Scrapy's SpiderState, clean close)
    state: dict[str, object] = pickle.loads((project / "job" / "spider.state").read_bytes())
    return state


@pytest.mark.slow
def test_spider_state_survives_kill_9(feed_site: SlowSiteServer, tmp_path: Path) -> None:
    """Every page answered before a kill is counted in the resumed ``spider.state``
    (Scrapy's own pickle, written at a clean close only, starts the last run empty)."""
    srv = feed_site
    srv.reset()
    project = make_project(tmp_path, srv.proxy_url, spider=STATE_SPIDER.format(extra=False))
    kills = _kills(SEED)
    for run, kill_after in enumerate([*kills, None], 1):
        _, killed = run_until(project, srv, run, kill_after)
        assert killed == (kill_after is not None)
    pages = _final_state(project)["pages"]
    assert isinstance(pages, int)
    refetched = sum(n - 1 for n in srv.hits.counts().values())
    # each page once, plus the pages fetched again after a kill (their callbacks ran
    # twice when they had run before the kill): the state is the last commit's
    assert PAGES + 1 <= pages <= PAGES + 1 + refetched, (pages, refetched)


@pytest.mark.slow
def test_state_not_json_and_feeds_not_staged_each_warn_once(feed_site: SlowSiteServer,
                                                            tmp_path: Path) -> None:
    srv = feed_site
    srv.reset()
    gz = tmp_path / "items.jsonl.gz"
    feeds = (f'FEEDS = {{"{gz}": {{"format": "jsonlines", "postprocessing": '
             f'["scrapy.extensions.postprocessing.GzipPlugin"]}}, '
             f'"stdout:": {{"format": "jsonlines"}}}}')
    project = make_project(tmp_path, srv.proxy_url, extra=feeds,
                           spider=STATE_SPIDER.format(extra=True))
    run_until(project, srv, 1, None)
    log = (project / "log1.txt").read_text()
    assert log.count("spider.state cannot be kept as JSON data") == 1, log[-3000:]
    assert _final_state(project)["odd"] == {1, 2}  # Scrapy's pickle, as without the plugin
    warnings = [line for line in log.splitlines() if "not staged" in line]
    assert len(warnings) == 1, warnings
    assert f"{gz} (postprocessing)" in warnings[0] and "stdout: (stdout storage" in warnings[0]
    import gzip

    lines = gzip.decompress(gz.read_bytes()).decode().splitlines()
    assert len(lines) == PAGES + 1  # written by Scrapy as usual


def test_feeds_that_cannot_take_part_are_named(tmp_path: Path) -> None:
    from scrapy import Spider
    from scrapy.utils.test import get_crawler

    from iri_scrapy.frontier.feeds import STORAGE_PATH, unstaged_feeds

    feeds = {
        str(tmp_path / "a.jsonl"): {"format": "jsonlines"},
        "file:///tmp/b.csv": {"format": "csv"},
        str(tmp_path / "d-%(batch_id)d.jsonl"): {"format": "jsonlines", "batch_item_count": 5},
        str(tmp_path / "c.xml"): {"format": "xml"},
        str(tmp_path / "g.txt"): {"format": "myformat"},
        str(tmp_path / "e.jsonl.gz"): {"format": "jsonlines",
                                       "postprocessing": ["scrapy.extensions.postprocessing.GzipPlugin"]},
        "stdout:": {"format": "jsonlines"},
        "s3://bucket/f.jsonl": {"format": "jsonlines"},
    }
    crawler = get_crawler(Spider, {"ADDONS": {"iri_scrapy.Addon": 0}, "JOBDIR": str(tmp_path),
                                   "FEEDS": feeds})
    named = unstaged_feeds(crawler.settings)
    assert [n.split(" ")[0] for n in named] == list(feeds)[4:], named
    assert "(format 'myformat')" in named[0]
    assert "postprocessing" in named[1] and "StdoutFeedStorage" in named[2]
    assert "S3FeedStorage" in named[3]
    storages = crawler.settings.getwithbase("FEED_STORAGES")
    assert storages["file"] == storages[""] == STORAGE_PATH
    # without JOBDIR nothing changes
    plain = get_crawler(Spider, {"ADDONS": {"iri_scrapy.Addon": 0}, "FEEDS": feeds})
    assert plain.settings.getwithbase("FEED_STORAGES")["file"] != STORAGE_PATH


def test_no_commit_puts_an_answer_on_disk_without_its_state(tmp_path: Path) -> None:
    """The commit that ``next_request`` makes before handing out another request (and the
    sync loop's) takes ``spider.state`` too: an answer on disk always comes with the
    state its callback left, so a kill right after it loses no count."""
    import sqlite3

    from iri_scrapy.frontier.sqlite_schema import meta_get
    from iri_scrapy.store.frontier_file import FILENAME
    from tests.frontier.test_frontier import open_scheduler

    crawler, scheduler = open_scheduler(tmp_path, IRI_FRONTIER_MAX_INFLIGHT=0)
    spider = crawler.spider
    spider.state = {}
    for i in range(3):
        assert scheduler.enqueue_request(Request(f"http://e.com/{i}"))
    first = scheduler.next_request()
    assert first is not None
    spider.state["pages"] = 1  # its callback ran
    scheduler.answered(first)
    assert scheduler.next_request() is not None  # commits the answer first
    conn = sqlite3.connect(tmp_path / FILENAME)
    try:
        assert json.loads(meta_get(conn, "spider_state") or "null") == {"pages": 1}
    finally:
        conn.close()
        scheduler.close("shutdown")
