"""Media pipelines name files by resource: two real crawls, links in reverse order.

``FilesPipeline`` names a file by the SHA-1 of the first spelling it meets; a
second run that meets another spelling first downloads the file again under
another name.  With the add-on (``IRIFilesPipeline`` in place of the stock
class) the stored path depends only on the resource.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from scrapy import Request, Spider

from iri_scrapy.plugin.media import IRIFilesPipeline, IRIImagesPipeline, keyed_request
from tests.support.crawl import CrawlResult, run_crawl
from tests.support.server import SiteServer, serve_site
from tests.support.site import Host, Resource, Site

MODULE = "tests.plugin.test_media_pipelines"  # what the crawl subprocess imports (cwd: the checkout)
FILES = Host("files.test", "en")
# three spellings of each of four resources
SPELLINGS = {
    "doc": ["http://files.test/doc.pdf", "HTTP://FILES.TEST/doc.pdf",
            "http://files.test:80/doc.pdf"],
    "pic": ["http://files.test/img/pic.png", "http://files.test/img/./pic.png",
            "http://files.test/%69mg/pic.png"],
    "csv": ["http://files.test/data/table.csv", "http://files.test/data/table.csv#top",
            "http://files.test/data/x/../table.csv"],
    "uber": ["http://files.test/über.txt", "http://files.test/%C3%BCber.txt",
             "http://files.test/%c3%bcber.txt"],
}
HREFS = [spellings[i] for i in range(3) for spellings in SPELLINGS.values()]


def _list_page(name: str, hrefs: list[str]) -> Resource:
    links = "".join(f'<a href="{h}">{h}</a>\n' for h in hrefs)
    return Resource(name, FILES, f"/{name}", html=f"<!DOCTYPE html><html><body>{links}</body></html>")


MEDIA_SITE = Site(
    hosts=(FILES,),
    resources=(
        _list_page("forward", HREFS),
        _list_page("reverse", HREFS[::-1]),
        Resource("doc", FILES, "/doc.pdf", None, "doc"),
        Resource("pic", FILES, "/img/pic.png", None, "pic"),
        Resource("csv", FILES, "/data/table.csv", None, "csv"),
        Resource("uber", FILES, "/über.txt", None, "über"),
    ),
    start_urls=("http://files.test/forward",),
)


class FilesSpider(Spider):
    """One item per page: every ``href`` on it, as written, in ``file_urls``."""

    name = "files"

    def parse(self, response: Any, **kwargs: Any) -> Any:
        yield {"file_urls": response.css("a::attr(href)").getall()}


@pytest.fixture(scope="module")
def server() -> Iterator[SiteServer]:
    with serve_site(MEDIA_SITE) as srv:
        yield srv


def crawl(srv: SiteServer, store: Path, page: str, **settings: Any) -> CrawlResult:
    merged = {
        "ADDONS": {"iri_scrapy.Addon": 0},
        "ITEM_PIPELINES": {"scrapy.pipelines.files.FilesPipeline": 1},
        "FILES_STORE": str(store),
        **settings,
    }
    result = run_crawl(merged, [f"http://files.test/{page}"], srv.proxy_url, timeout=60,
                       env={"IRI_SCRAPY_DEPRECATIONS_AS_ERRORS": "1"},
                       spider=f"{MODULE}.FilesSpider")
    assert result.ok, result.stderr[-3000:]
    return result


def stored(store: Path) -> list[str]:
    return sorted(p.name for p in (store / "full").iterdir())


@pytest.mark.slow
def test_two_runs_in_reverse_order_store_one_file_per_resource(
    server: SiteServer, tmp_path: Path
) -> None:
    first = crawl(server, tmp_path, "forward")
    assert len(stored(tmp_path)) == len(SPELLINGS)
    paths = {f["path"] for f in first.items[0]["files"]}
    second = crawl(server, tmp_path, "reverse")
    assert len(stored(tmp_path)) == len(SPELLINGS)  # the same files, one per resource
    assert {f["path"] for f in second.items[0]["files"]} == paths
    assert second.stats.get("file_status_count/uptodate") == len(SPELLINGS)
    assert "file_status_count/downloaded" not in second.stats  # nothing fetched again


@pytest.mark.slow
def test_stock_pipeline_stores_a_resource_twice(server: SiteServer, tmp_path: Path) -> None:
    """What IRIFilesPipeline fixes (the add-on's opt-out keeps Scrapy's class)."""
    crawl(server, tmp_path, "forward", IRI_MEDIA_PIPELINES=False)
    crawl(server, tmp_path, "reverse", IRI_MEDIA_PIPELINES=False)
    assert len(stored(tmp_path)) > len(SPELLINGS)


def test_every_spelling_gets_one_path_and_distinct_resources_keep_theirs() -> None:
    files = IRIFilesPipeline.__new__(IRIFilesPipeline)  # file_path() reads no state
    images = IRIImagesPipeline.__new__(IRIImagesPipeline)  # (and needs no Pillow then)
    for spellings in SPELLINGS.values():
        assert len({files.file_path(Request(u)) for u in spellings}) == 1
        assert len({images.file_path(Request(u)) for u in spellings}) == 1
        assert len({images.thumb_path(Request(u), "small") for u in spellings}) == 1
    assert files.file_path(Request("http://files.test/doc.pdf")).endswith(".pdf")
    distinct = ["http://h.test/a%2Fb", "http://h.test/a/b", "http://h.test/Page",
                "http://h.test/page", "http://h.test/f?", "http://h.test/f"]
    requests = [keyed_request(Request(u, meta={"verbatim_url": True})) for u in distinct]
    assert len({files.file_path(r) for r in requests}) == len(distinct)


def test_addon_swaps_only_the_stock_classes() -> None:
    from scrapy.settings import Settings

    from iri_scrapy import Addon

    def swapped(pipelines: dict[str, Any], **extra: Any) -> dict[Any, Any]:
        settings = Settings({"ITEM_PIPELINES": pipelines, **extra})
        Addon().update_settings(settings)
        return dict(settings.getdict("ITEM_PIPELINES"))

    assert swapped({"scrapy.pipelines.files.FilesPipeline": 1,
                    "scrapy.pipelines.images.ImagesPipeline": 2}) == {
        IRIFilesPipeline: 1, IRIImagesPipeline: 2}
    assert swapped({"scrapy.pipelines.files.FilesPipeline": 1}, IRI_MEDIA_PIPELINES=False) == {
        "scrapy.pipelines.files.FilesPipeline": 1}
    assert swapped({"scrapy.pipelines.files.FilesPipeline": None}) == {
        "scrapy.pipelines.files.FilesPipeline": None}
    assert swapped({}) == {}
