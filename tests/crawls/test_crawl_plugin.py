"""End-to-end crawls of the local alias web with the plugin (real Scrapy, subprocesses).

Every crawl goes through :func:`tests.support.crawl.run_crawl` with
``ScrapyDeprecationWarning`` turned into errors in the child; the server's hit
log is the oracle (it resolves every request target on its own, without the
IRI core).  Crawls are module-scoped fixtures shared between assertions.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.crawl import CrawlResult, run_crawl
from tests.support.server import HitLog, SiteServer, serve_site
from tests.support.site import DEMO_SITE, Host, Link, Resource, ResourceKey, Site

Crawl = tuple[CrawlResult, HitLog]
ADDON = {"ADDONS": {"iri_scrapy.Addon": 0}}
STRICT = {"IRI_SCRAPY_DEPRECATIONS_AS_ERRORS": "1"}
START = list(DEMO_SITE.start_urls)

# A second, small web for the traps that need resources the demo web lacks:
# a redirect whose target has the same key as its source under IRI_SORT_QUERY
# (scrapy#1225), and a "faß" host (IDNA 2003 maps it to "fass", another domain).
TRAP = Host("trap.example", "en")
FASS = Host("faß.example", "de")
TRAP_SITE = Site(
    hosts=(TRAP, FASS),
    resources=(
        Resource("t-home", TRAP, "/", None, "Trap home", "", (
            Link("/moved?b=2&a=1", "t-moved"),
            Link("http://faß.example/", "f-home"),
            Link("http://FASS.example/seite", "f-page"),  # "FASS" is another host: 404
        )),
        Resource("t-moved", TRAP, "/moved", "b=2&a=1", redirect_to="t-target"),
        Resource("t-target", TRAP, "/moved", "a=1&b=2", "Target", "", ()),
        Resource("f-home", FASS, "/", None, "Faß", "", (Link("seite", "f-page"),)),
        Resource("f-page", FASS, "/seite", None, "Seite", "", (Link("./", "f-home"),)),
    ),
    start_urls=("http://trap.example/",),
)
FASS_KEY = ResourceKey("xn--fa-hia.example", "/", None)


def crawl(srv: SiteServer, settings: dict[str, Any], start: list[str] | None = None,
          env_path: Path | None = None, **kwargs: Any) -> CrawlResult:
    """Reset the hit log, crawl (strict about deprecations) and check it ran.

    *env_path* is added to the child's PYTHONPATH (for test-only middlewares).
    """
    srv.reset()
    env = {**STRICT, **({"PYTHONPATH": str(env_path)} if env_path else {})}
    result = run_crawl(settings, start or START, srv.proxy_url, env=env, **kwargs)
    assert result.errors == [], result.errors
    assert result.warnings == []
    return result


def snapshot(srv: SiteServer) -> HitLog:
    """A copy of the server's hit log (the server's own is reset by the next crawl)."""
    log = HitLog()
    for hit in srv.hits.hits:
        log.record(hit)
    return log


@pytest.fixture(scope="module")
def demo() -> Iterator[SiteServer]:
    with serve_site(DEMO_SITE) as server:
        yield server


@pytest.fixture(scope="module")
def trap() -> Iterator[SiteServer]:
    with serve_site(TRAP_SITE) as server:
        yield server


@pytest.fixture(scope="module")
def plugin(demo: SiteServer) -> Crawl:
    """The add-on alone, default settings."""
    result = crawl(demo, ADDON)
    return result, snapshot(demo)


@pytest.fixture(scope="module")
def stock(demo: SiteServer) -> Crawl:
    result = crawl(demo, {})
    return result, snapshot(demo)


# --------------------------------------------------------------------------- the add-on


@pytest.mark.slow
def test_addon_alone_fetches_every_resource_exactly_once(plugin: Crawl) -> None:
    result, hits = plugin
    assert result.ok, result.stderr[-2000:]
    counts = hits.counts()
    assert set(counts) == DEMO_SITE.keys  # everything, traps included, nothing else
    assert {k: n for k, n in counts.items() if n != 1} == {}
    assert hits.not_found() == []
    assert result.stats["downloader/request_count"] == len(DEMO_SITE.keys)
    assert len(result.items) == len(DEMO_SITE.page_keys)
    assert result.stats["iri/start/deduplicated"] == 1
    assert "iri/unnormalizable" not in result.stats


@pytest.mark.slow
def test_stock_fetches_duplicates_and_misses_traps(stock: Crawl) -> None:
    result, hits = stock
    assert result.ok
    assert hits.duplicates()  # e.g. the home page, /docs/ ...
    assert DEMO_SITE.trap_keys("idna2008", "empty-query") <= DEMO_SITE.keys - hits.fetched()
    assert result.stats["downloader/request_count"] > len(DEMO_SITE.keys)


@pytest.mark.slow
def test_resources_that_differ_are_all_fetched(plugin: Crawl) -> None:
    _, hits = plugin
    fetched = hits.fetched()
    for a, b in [("en-ab", "en-a2fb"), ("en-page", "en-Page"), ("en-search", "en-search-empty"),
                 ("en-list-ab", "en-list-ba"), ("en-q-escaped", "en-q-amp"),
                 ("de-cafe-nfc", "de-cafe-nfd"), ("el-page", "el-Page")]:
        assert {DEMO_SITE.get(a).key, DEMO_SITE.get(b).key} <= fetched, (a, b)


def test_wire_form_is_canonical_uri(plugin: Crawl) -> None:
    result, hits = plugin
    targets = hits.targets
    assert all(t.isascii() and t.startswith("http://") for t in targets)
    assert "http://xn--strae-oqa.example/" in targets  # UTS 46, not IDNA 2003's strasse
    assert not any("strasse" in t for t in targets)
    assert "http://www.example.test/search?" in targets  # bare "?" kept (verbatim_url)
    assert not any(":80" in t or "/./" in t or "%7e" in t.lower() for t in targets)
    by_url = {i["url"]: i for i in result.items}
    assert by_url["http://xn--strae-oqa.example/karte"]["title"] == "Stadtkarte"
    originals = [i.get("iri_original") for i in result.items if i.get("iri_original")]
    assert any("straße.example" in o for o in originals)


def test_per_rung_stats_add_up(plugin: Crawl) -> None:
    """The dupefilter's rule: each dropped request counts one rung, the one that decided."""
    stats = plugin[0].stats
    filtered = stats["dupefilter/filtered"]
    assert filtered > 0
    rungs = {k: v for k, v in stats.items() if k.startswith("iri/dupefilter/decided_by/")}
    assert rungs
    assert sum(rungs.values()) == filtered
    assert all(0 < v <= filtered for v in rungs.values())


# --------------------------------------------------------------------------- traps


_ALIAS_MODULE = '''
from urllib.parse import urlsplit, urlunsplit

from scrapy import Request, signals

from iri_scrapy import normalize


def _alias(o):
    """Another spelling of a request: ":80" and a "/./" segment."""
    if not isinstance(o, Request) or o.meta.get("verbatim_url"):
        return o
    p = urlsplit(o.url)
    if p.port or (not p.query and "?" in o.url):  # urlunsplit would drop a bare "?"
        return o
    return o.replace(url=urlunsplit((p.scheme, p.hostname + ":80", "/." + p.path,
                                     p.query, p.fragment)))


class AliasingSpiderMiddleware:
    """Engine side of IRISpiderMiddleware: its requests reach the scheduler non-canonical."""

    def process_spider_output(self, response, result):
        for o in result:
            yield _alias(o)

    async def process_spider_output_async(self, response, result):
        async for o in result:
            yield _alias(o)


class AliasLocationMiddleware:
    """Downloader middleware between the protocol and the redirect middlewares: every
    redirect's Location becomes another spelling of its target."""

    def process_response(self, request, response):
        location = response.headers.get(b"Location")
        if 300 <= response.status < 400 and location:
            alias = _alias(Request(response.urljoin(location.decode())))
            response.headers[b"Location"] = alias.url.encode()
        return response


class CrawlAliasesExtension:
    """Extension: on the first response, engine.crawl() each URL of ALIAS_URLS; counts
    those the scheduler dropped (request_dropped gives the object crawl() was given)."""

    def __init__(self, crawler):
        self.crawler = crawler
        self.urls = crawler.settings.getlist("ALIAS_URLS")
        self.mine = []
        crawler.signals.connect(self.response_received, signals.response_received)
        crawler.signals.connect(self.request_dropped, signals.request_dropped)

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler)

    def response_received(self, **kwargs):
        urls, self.urls = self.urls, []
        for url in urls:
            request = Request(url)
            self.mine.append(request)
            self.crawler.stats.inc_value("test/alias/crawled")
            self.crawler.engine.crawl(request)

    def request_dropped(self, request, **kwargs):
        if any(r is request for r in self.mine):
            self.crawler.stats.inc_value("test/alias/dropped")


class NaiveCanonicalMiddleware:
    """What the trap looks like: re-issue in canonical form, nothing else."""

    def process_request(self, request):
        url = normalize(request.url)
        if url != request.url:
            return request.replace(url=url)
        return None
'''


@pytest.fixture(scope="module")
def alias_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("alias_mw")
    (path / "alias_mw.py").write_text(textwrap.dedent(_ALIAS_MODULE))
    return path


def _aliasing(extra: dict[str, Any] | None = None) -> dict[str, Any]:
    return {**ADDON, "SPIDER_MIDDLEWARES": {"alias_mw.AliasingSpiderMiddleware": 100},
            **(extra or {})}


@pytest.mark.slow
def test_requests_enter_the_scheduler_in_fetch_form(demo: SiteServer, alias_path: Path) -> None:
    """Requests reaching the scheduler non-canonical enter it in fetch form: none is lost,
    none fetched twice, none sent as written."""
    result = crawl(demo, _aliasing(), env_path=alias_path)
    assert result.ok
    counts = demo.hits.counts()
    assert set(counts) == DEMO_SITE.keys
    assert {k: n for k, n in counts.items() if n != 1} == {}
    assert result.stats["iri/entry/normalized"] > 10
    assert not any(":80" in t or "/./" in t for t in demo.hits.targets)
    # the dupefilter saw the aliases: the rungs that decided show in the stats
    assert result.stats.get("iri/dupefilter/decided_by/scheme", 0) > 0


@pytest.mark.slow
def test_redirects_and_engine_crawl_enter_in_fetch_form(
    demo: SiteServer, alias_path: Path
) -> None:
    """A redirect a downloader middleware spelled otherwise, and requests an extension
    gives engine.crawl(), go on the wire in fetch form, once; a second spelling is dropped."""
    aliases = ["http://www.example.test:80/./docs/guide/intro",
               "HTTP://WWW.Example.TEST/docs/guide/%69ntro#x"]
    settings = {**ADDON, "ALIAS_URLS": aliases,
                "DOWNLOADER_MIDDLEWARES": {"alias_mw.AliasLocationMiddleware": 620},
                "EXTENSIONS": {"alias_mw.CrawlAliasesExtension": 500}}
    result = crawl(demo, settings, env_path=alias_path)
    assert result.ok
    counts = demo.hits.counts()
    assert set(counts) == DEMO_SITE.keys
    assert {k: n for k, n in counts.items() if n != 1} == {}
    assert not any(":80" in t or "/./" in t or "WWW" in t for t in demo.hits.targets)
    assert result.stats["test/alias/crawled"] == 2
    assert result.stats["test/alias/dropped"] >= 1  # one resource: at most one passes
    redirects = result.stats["downloader/response_status_count/301"]
    assert result.stats["iri/entry/normalized"] >= redirects + 2


@pytest.mark.slow
def test_entry_with_stock_dupefilter(demo: SiteServer, alias_path: Path) -> None:
    """With another dupefilter the entry is the same: nothing lost, nothing sent as written."""
    result = crawl(demo, _aliasing({"DUPEFILTER_CLASS": "scrapy.dupefilters.RFPDupeFilter"}),
                   env_path=alias_path)
    assert result.ok
    assert demo.hits.fetched() == DEMO_SITE.keys
    assert not any(":80" in t or "/./" in t for t in demo.hits.targets)


@pytest.mark.slow
def test_naive_reissue_loses_pages(demo: SiteServer, alias_path: Path) -> None:
    """Why nothing re-issues: a request returned from process_request goes back through
    the scheduler and is dropped as a duplicate of itself."""
    settings = _aliasing({
        "DOWNLOADER_MIDDLEWARES": {"alias_mw.NaiveCanonicalMiddleware": 60},
        "SCHEDULER": "scrapy.core.scheduler.Scheduler",  # no entry: the aliases reach it
    })
    result = crawl(demo, settings, env_path=alias_path)
    assert len(demo.hits.fetched()) < len(DEMO_SITE.keys) // 2
    assert result.stats["dupefilter/filtered"] > 0


@pytest.fixture(scope="module")
def trap_plugin(trap: SiteServer) -> Crawl:
    result = crawl(trap, {**ADDON, "IRI_SORT_QUERY": True}, list(TRAP_SITE.start_urls))
    return result, snapshot(trap)


@pytest.mark.slow
def test_redirect_to_same_key_is_fetched(trap_plugin: Crawl) -> None:
    """scrapy#1225: /moved?b=2&a=1 -> 301 -> /moved?a=1&b=2, one key under IRI_SORT_QUERY."""
    result, hits = trap_plugin
    assert result.ok
    target = TRAP_SITE.get("t-target").key
    assert hits.count(target) == 1
    assert hits.count(TRAP_SITE.get("t-moved").key) == 1
    assert result.stats["iri/dupefilter/redirect_same_key"] == 1


@pytest.mark.slow
def test_redirect_same_key_trap_is_real(trap: SiteServer) -> None:
    """Without the IRI dupefilter's rule the redirect target is dropped."""
    result = crawl(trap, {
        "REQUEST_FINGERPRINTER_CLASS": "iri_scrapy.IRIRequestFingerprinter",
        "IRI_SORT_QUERY": True,
    }, list(TRAP_SITE.start_urls))
    assert result.ok
    assert TRAP_SITE.get("t-target").key not in trap.hits.fetched()


def test_idna2003_trap_goes_on_the_wire_as_uts46(trap_plugin: Crawl) -> None:
    _, hits = trap_plugin
    assert "http://xn--fa-hia.example/" in hits.targets
    assert hits.count(FASS_KEY) == 1
    assert hits.count(TRAP_SITE.get("f-page").key) == 1
    # "FASS.example" is another host, and only it reaches fass.example
    assert [h.key for h in hits.not_found()] == [ResourceKey("fass.example", "/seite", None)]


@pytest.mark.slow
def test_idna2003_trap_stock(trap: SiteServer) -> None:
    crawl(trap, {}, list(TRAP_SITE.start_urls))
    assert FASS_KEY not in trap.hits.counts()
    assert ResourceKey("fass.example", "/", None) in {h.key for h in trap.hits.not_found()}


# --------------------------------------------------------------------------- offsite


ALLOWED = ["WWW.Example.TEST", "Пример.Испытание", "BÜCHER.example"]
ALLOWED_HOSTS = {"www.example.test", "xn--e1afmkfd.xn--80akhbyknj4f", "xn--bcher-kva.example"}


@pytest.mark.slow
def test_offsite_idn_and_uppercase_allowed_domains(demo: SiteServer) -> None:
    result = crawl(demo, ADDON, spider_kwargs={"allowed_domains": ALLOWED})
    assert result.ok
    fetched = demo.hits.fetched()
    want = {k for k in DEMO_SITE.keys if k.host in ALLOWED_HOSTS}
    assert fetched == want
    assert result.stats["offsite/filtered"] > 0


def test_offsite_stock_filters_everything(demo: SiteServer) -> None:
    crawl(demo, {}, spider_kwargs={"allowed_domains": ALLOWED})
    assert len(demo.hits.fetched()) == 1  # the start URL (dont_filter) only


# --------------------------------------------------------------------------- levels, JOBDIR


@pytest.mark.slow
@pytest.mark.parametrize("level", ["protocol"])
def test_iri_levels(demo: SiteServer, level: str) -> None:
    result = crawl(demo, {**ADDON, "IRI_LEVEL": level})
    assert result.ok
    counts = demo.hits.counts()
    assert set(counts) == DEMO_SITE.keys  # nothing lost at any level
    # fetched once each, but for the calibration of content evidence: each site's
    # first page fetched twice more (what changes by chance there)
    calibrated = result.stats.get("iri/protocol/calibration/fetched", 0)
    assert sum(n - 1 for n in counts.values()) == calibrated
    assert {k: n for k, n in counts.items() if n not in (1, 3)} == {}
    if level == "protocol":
        # /docs -> 301 -> /docs/ taught a rule; the target was not fetched twice
        assert result.stats["iri/protocol/learned"] == 1
        assert result.stats["iri/protocol/redirects"] == 1


@pytest.mark.slow
def test_lower_levels_are_honoured(demo: SiteServer) -> None:
    """IRI_LEVEL below "scheme" keys on the spelling the spider wrote, at that level.

    The URL on the wire is still the SCHEME-canonical URI (ASCII, A-label host),
    but aliases that only a higher rung would merge are fetched again: "simple"
    merges exact repeats only, "syntax" also case/percent/dot-segment spellings.
    Nothing is lost at any level.
    """
    totals = {}
    for level in ("simple", "syntax", "scheme"):
        result = crawl(demo, {**ADDON, "IRI_LEVEL": level})
        assert result.ok
        counts = demo.hits.counts()
        assert set(counts) == DEMO_SITE.keys, level
        totals[level] = sum(counts.values())
    assert totals["scheme"] == len(DEMO_SITE.keys)
    assert totals["simple"] > totals["syntax"] > totals["scheme"]


@pytest.mark.slow
def test_protocol_level_redirect_target_first(demo: SiteServer) -> None:
    """Start at the redirect: the learned rule never drops the redirect target itself."""
    start = ["http://www.example.test/docs"]
    result = crawl(demo, {**ADDON, "IRI_LEVEL": "protocol"}, start)
    assert result.ok
    docs = DEMO_SITE.get("en-docs").key
    # once, and twice more as its site's first page (the calibration of content evidence)
    calibrated = result.stats.get("iri/protocol/calibration/fetched", 0)
    assert demo.hits.count(docs) == 3 and calibrated >= 2
    assert sum(n - 1 for n in demo.hits.counts().values()) == calibrated
    assert demo.hits.count(DEMO_SITE.get("en-docs-redirect").key) == 1
    assert set(demo.hits.counts()) == DEMO_SITE.keys


@pytest.mark.slow
def test_jobdir_resume_fetches_nothing_twice(demo: SiteServer, tmp_path: Path) -> None:
    jobdir = tmp_path / "job"
    demo.reset()
    first = run_crawl({**ADDON, "CLOSESPIDER_PAGECOUNT": 5, "CONCURRENT_REQUESTS": 1}, START,
                      demo.proxy_url, jobdir=jobdir, env=STRICT)
    assert first.finish_reason == "closespider_pagecount"
    after_first = sum(demo.hits.counts().values())
    assert 5 <= after_first < len(DEMO_SITE.keys)
    second = run_crawl(ADDON, START, demo.proxy_url, jobdir=jobdir, env=STRICT)
    assert second.ok, second.stderr[-2000:]
    assert "Resuming crawl" in second.stderr
    counts = demo.hits.counts()
    assert {k: n for k, n in counts.items() if n != 1} == {}
    assert set(counts) <= DEMO_SITE.keys
    assert len(counts) >= len(DEMO_SITE.keys) - 2  # at most the links of the cut page
