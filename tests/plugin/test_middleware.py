"""The plugin's Scrapy components in-process, with real Scrapy crawler/settings objects."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from scrapy import Request, Spider
from scrapy.downloadermiddlewares.offsite import OffsiteMiddleware
from scrapy.http import HtmlResponse
from scrapy.utils.test import get_crawler

from iri_scrapy.addon import PRIORITIES, Addon
from iri_scrapy.plugin import compat
from iri_scrapy.plugin.location import IRILocationMiddleware
from iri_scrapy.plugin.middleware import (
    Canonicalizer,
    IRINormalizationMiddleware,
    IRISpiderMiddleware,
    iri_response_class,
)
from iri_scrapy.plugin.offsite import IRIOffsiteMiddleware, canonical_domain

ADDON = {"ADDONS": {"iri_scrapy.Addon": 0}}


def _components(crawler: Any, name: str) -> dict[Any, Any]:
    from scrapy.utils.misc import load_object

    out = {}
    for key, value in crawler.settings.getdict(name).items():
        out[load_object(key) if isinstance(key, str) else key] = value
    return out


# --------------------------------------------------------------------------- add-on


def test_addon_sets_everything() -> None:
    crawler = get_crawler(settings_dict=ADDON)
    s = crawler.settings
    assert s["REQUEST_FINGERPRINTER_CLASS"] == "iri_scrapy.IRIRequestFingerprinter"
    assert s["DUPEFILTER_CLASS"] == "iri_scrapy.IRIDupeFilter"
    assert s.getpriority("DUPEFILTER_CLASS") == 15  # "addon"
    dl = _components(crawler, "DOWNLOADER_MIDDLEWARES")
    assert dl[OffsiteMiddleware] is None
    assert dl[IRIOffsiteMiddleware] == PRIORITIES["offsite"] == 50
    assert dl[IRINormalizationMiddleware] == 60
    # before RedirectMiddleware's process_response: the protocol level's, else the plugin's
    (redirects,) = [c for c in dl if isinstance(c, type) and issubclass(c, IRILocationMiddleware)]
    assert dl[redirects] == 650 > 600
    assert _components(crawler, "SPIDER_MIDDLEWARES")[IRISpiderMiddleware] == 950


def test_addon_keeps_explicit_user_values(caplog: pytest.LogCaptureFixture) -> None:
    settings = {
        **ADDON,
        "DUPEFILTER_CLASS": "scrapy.dupefilters.RFPDupeFilter",
        "DOWNLOADER_MIDDLEWARES": {
            "iri_scrapy.IRINormalizationMiddleware": 123,
            "scrapy.downloadermiddlewares.offsite.OffsiteMiddleware": 50,
        },
        "SPIDER_MIDDLEWARES": {IRISpiderMiddleware: None},
    }
    with caplog.at_level(logging.WARNING):
        crawler = get_crawler(settings_dict=settings)
    assert crawler.settings["DUPEFILTER_CLASS"] == "scrapy.dupefilters.RFPDupeFilter"
    assert "DUPEFILTER_CLASS" in caplog.text
    dl = _components(crawler, "DOWNLOADER_MIDDLEWARES")
    assert dl[IRINormalizationMiddleware] == 123
    assert dl[OffsiteMiddleware] == 50 and IRIOffsiteMiddleware not in dl  # user's choice
    assert _components(crawler, "SPIDER_MIDDLEWARES")[IRISpiderMiddleware] is None


def test_addon_rejects_bad_level() -> None:
    """The settings are read once per crawler; an unusable one names itself."""
    from scrapy.settings import Settings

    from iri_scrapy.plugin.config import IRIConfig

    with pytest.raises(ValueError, match="IRI_LEVEL: unknown level"):
        IRIConfig.from_settings(Settings({"IRI_LEVEL": "semantic"}))
    with pytest.raises(ValueError, match="IRI_PROTOCOL_MIN_EVIDENCE: .*>= 1"):
        IRIConfig.from_settings(Settings({"IRI_PROTOCOL_MIN_EVIDENCE": 0}))


def test_addon_without_crawler() -> None:
    from scrapy.settings import Settings

    settings = Settings()
    Addon().update_settings(settings)
    assert settings["DUPEFILTER_CLASS"] == "iri_scrapy.IRIDupeFilter"


# --------------------------------------------------------------------------- spider side


@pytest.fixture
def spider_mw() -> IRISpiderMiddleware:
    return IRISpiderMiddleware(get_crawler(settings_dict=ADDON))


def test_spider_mw_rewrites_to_fetch_form(spider_mw: IRISpiderMiddleware) -> None:
    req = Request("HTTP://WWW.Example.TEST:80/a/./b/%7euser#frag")
    out = spider_mw.get_processed_request(req, None)
    assert out.url == "http://www.example.test/a/b/~user#frag"
    assert out.meta["iri_original"] == req.url
    assert "verbatim_url" not in out.meta  # keyed by the fingerprinter at its level
    same = Request("http://www.example.test/x")
    assert spider_mw.get_processed_request(same, None) is same


def test_spider_mw_start_requests_are_deduplicated(spider_mw: IRISpiderMiddleware) -> None:
    start = Request("http://www.example.test/", dont_filter=True)
    out = spider_mw.get_processed_request(start, None)
    assert out.dont_filter is False and out.meta["allow_offsite"] is True
    crawler = get_crawler(settings_dict={**ADDON, "IRI_DEDUPE_START_REQUESTS": False})
    kept = IRISpiderMiddleware(crawler).get_processed_request(
        Request("http://www.example.test/", dont_filter=True), None
    )
    assert kept.dont_filter is True


def test_spider_mw_opt_out_and_unnormalizable(spider_mw: IRISpiderMiddleware) -> None:
    opt_out = Request("http://WWW.Example.TEST/", meta={"dont_normalize_iri": True})
    assert spider_mw.get_processed_request(opt_out, Any) is opt_out  # type: ignore[arg-type]
    bad = Request("http://a\u2488.test/")  # U+2488 fails UTS 46; Scrapy keeps it
    out = spider_mw.get_processed_request(bad, None)
    assert out is bad and out.url == "http://a\u2488.test/"  # passed through, not dropped
    assert out.meta["iri_unnormalizable"] is True


def test_unnormalizable_counted_once_without_iri_fingerprinter(
    caplog: pytest.LogCaptureFixture,
) -> None:
    crawler = get_crawler(settings_dict={**ADDON, "REQUEST_FINGERPRINTER_CLASS":
                                         "scrapy.utils.request.RequestFingerprinter"})
    crawler.stats.open_spider()
    spider_mw, dl_mw = IRISpiderMiddleware(crawler), IRINormalizationMiddleware(crawler)
    with caplog.at_level(logging.DEBUG, logger="iri_scrapy"):
        for _ in range(2):
            req = spider_mw.get_processed_request(Request("http://a\u2488.test/"), None)
            assert dl_mw.process_request(req) is None
    assert crawler.stats.get_value("iri/unnormalizable") == 2
    warnings = [r for r in caplog.records
                if r.levelno == logging.WARNING and r.name.endswith((".middleware", ".stamp"))]
    assert len(warnings) == 1 and "no canonical form" in warnings[0].getMessage()


# --------------------------------------------------------------------------- downloader side


def test_downloader_mw_returns_no_request() -> None:
    """Nothing is re-issued from the downloader (requests enter the scheduler in fetch
    form, plugin/entry.py): one that did not is sent as given."""
    mw = IRINormalizationMiddleware(get_crawler(settings_dict=ADDON))
    req = Request("http://www.example.test:80/./page")
    assert mw.process_request(req) is None
    assert req.url == "http://www.example.test:80/./page"


def _page(url: str, body: str) -> HtmlResponse:
    return HtmlResponse(url, body=body.encode(), encoding="utf-8",
                        request=Request(url))


def test_iri_response_follow_defeats_idna2003() -> None:
    crawler = get_crawler(settings_dict=ADDON)
    mw = IRINormalizationMiddleware(crawler)
    page = _page("http://xn--bcher-kva.example/", '<a href="http://straße.example/karte">')
    # a stock response under the add-on: Request() gives stock's URL (every crawler of the
    # process does); the add-on's middlewares then set its IDNA 2008 URL, in this crawler only
    stock = page.follow("http://straße.example/karte")
    assert stock.url == "http://strasse.example/karte"
    assert compat.apply_idna2008(stock) and stock.url == "http://xn--strae-oqa.example/karte"
    ours = mw.process_response(page.request, page)  # type: ignore[arg-type]
    assert isinstance(ours, HtmlResponse) and type(ours) is iri_response_class(HtmlResponse)
    assert ours.body is page.body  # a new response of the subclass, its body not copied
    req = ours.follow("http://straße.example/karte")
    assert req.url == "http://xn--strae-oqa.example/karte"
    assert req.meta["iri_original"] == "http://straße.example/karte"
    sel = ours.css("a")[0]
    assert ours.follow(sel).url == "http://xn--strae-oqa.example/karte"
    assert [r.url for r in ours.follow_all(["/café", "/search?", "über?q=ä#f"])] == [
        "http://xn--bcher-kva.example/caf%C3%A9",
        "http://xn--bcher-kva.example/search?",
        "http://xn--bcher-kva.example/%C3%BCber?q=%C3%A4#f",
    ]
    stock = ours.follow("http://straße.example/", meta={"dont_normalize_iri": True})
    # joined the stock way; Request()'s URL is then the add-on's (IRI_IDNA2008_REQUESTS),
    # set by its middlewares in this crawler
    assert stock.url == "http://strasse.example/"
    assert compat.apply_idna2008(stock) and stock.url == "http://xn--strae-oqa.example/"
    assert ours.urljoin("HTTP://WWW.Example.TEST:80/") == "http://www.example.test/"


def test_a_canonical_absolute_link_takes_one_fast_path_call(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``follow(urljoin(href))``: the second ``urljoin`` (of the fetch form the first one
    gave) and the link extractor's second resolution are one fast-path call, not a
    resolution and a fetch form again; the request, its stamp and its key are the same
    (tests/core/test_native.py proves a canonical absolute link is its own resolution)."""
    from iri_scrapy.plugin import linkextractor, middleware

    crawler = get_crawler(settings_dict=ADDON)
    page = _page("http://docs.example/library/os.html",
                 '<a href="../reference/Datamodel.html#object">x</a><a href="#top">y</a>')
    ours = IRINormalizationMiddleware(crawler).process_response(page.request, page)
    joined = [ours.urljoin(h) for h in ("../reference/Datamodel.html#object", "#top")]
    assert joined == ["http://docs.example/reference/Datamodel.html#object",
                      "http://docs.example/library/os.html#top"]
    extracted = linkextractor.IRILinkExtractor().extract_links(ours)

    def no_resolution(*args: Any) -> str:
        raise AssertionError("resolved again")

    monkeypatch.setattr(middleware, "resolve", no_resolution)
    monkeypatch.setattr(middleware, "fetch_form", no_resolution)
    requests = [ours.follow(url) for url in joined]
    assert [r.url for r in requests] == joined
    assert all("iri_original" not in r.meta for r in requests)
    stamper = Canonicalizer.for_crawler(crawler).stamper
    stamp = stamper.stamp_of(requests[1])
    assert stamp is not None and stamp.spelling == stamp.wire == joined[1]
    assert stamp.base == "http://docs.example/library/os.html"
    monkeypatch.setattr(linkextractor, "fetch_form", no_resolution)
    assert linkextractor.IRILinkExtractor().extract_links(ours) == extracted


# --------------------------------------------------------------------------- offsite, protocol


class _Spider(Spider):
    name = "s"
    allowed_domains = ["Пример.Испытание", "WWW.Example.TEST", "BÜCHER.example."]


def test_offsite_canonical_domains() -> None:
    assert canonical_domain("BÜCHER.example.") == "xn--bcher-kva.example"
    crawler = get_crawler(_Spider, settings_dict=ADDON)
    mw = IRIOffsiteMiddleware.from_crawler(crawler)
    spider = _Spider()
    ok = ["http://xn--e1afmkfd.xn--80akhbyknj4f/", "http://www.example.test/a",
          "http://sub.xn--bcher-kva.example/"]
    for url in ok:
        assert mw.should_follow(Request(url), spider), url
    for url in ["http://example.test/", "http://xn--fsqu00a.xn--0zwm56d/"]:
        assert not mw.should_follow(Request(url), spider), url
    stock = OffsiteMiddleware.from_crawler(crawler)
    stock.spider_opened(spider)  # older Scrapy builds its regex only there
    assert not any(stock.should_follow(Request(u), spider) for u in ok[:1] + ok[2:])


