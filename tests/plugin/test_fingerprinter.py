"""IRIRequestFingerprinter with real Scrapy crawlers, requests and components."""

from __future__ import annotations

import gc
import hashlib
import json
import logging
import warnings

import pytest
from scrapy import Request, Spider
from scrapy.dupefilters import RFPDupeFilter
from scrapy.extensions.httpcache import FilesystemCacheStorage
from scrapy.http import HtmlResponse
from scrapy.utils.request import fingerprint as scrapy_fingerprint
from scrapy.utils.test import get_crawler

from iri_scrapy import IRIRequestFingerprinter
from iri_scrapy.core.ladder import Level
from iri_scrapy.plugin.config import IRIConfig
from iri_scrapy.plugin.context import CrawlContext
from iri_scrapy.plugin.fingerprinter import rung_keys
from iri_scrapy.plugin.links import STAT_UNNORMALIZABLE

FP_CLASS = "iri_scrapy.IRIRequestFingerprinter"
BAD_HOST = "http://\u2488.com/page"  # U+2488 fails UTS 46: no canonical form


class _Spider(Spider):
    name = "fp-test"


def crawler_for(**settings):
    return get_crawler(_Spider, {"REQUEST_FINGERPRINTER_CLASS": FP_CLASS, **settings})


def fp(url: str, **settings) -> bytes:
    return crawler_for(**settings).request_fingerprinter.fingerprint(Request(url))


# (id, url a, url b): one resource, so one fingerprint at the default level (scheme).
ALIASES = [
    ("percent-unreserved", "http://example.com/~a", "http://example.com/%7Ea"),
    ("percent-lowercase-hex", "http://example.com/%7ea", "http://example.com/~a"),
    ("hex-case-reserved", "http://example.com/a%2fb", "http://example.com/a%2Fb"),
    ("host-case", "http://EXAMPLE.com/a", "http://example.com/a"),
    ("default-port", "http://example.com:80/a", "http://example.com/a"),
    ("https-default-port", "https://example.com:443/", "https://example.com/"),
    ("empty-path", "http://example.com", "http://example.com/"),
    ("dot-segments", "http://example.com/a/./b/../c", "http://example.com/a/c"),
    ("fragment", "http://example.com/a#section", "http://example.com/a"),
    ("fragments-differ", "http://example.com/a#x", "http://example.com/a#y"),
    ("idn-host", "http://b\u00fccher.de/", "http://xn--bcher-kva.de/"),
    ("iri-path", "http://example.com/\u00fc", "http://example.com/%C3%BC"),
    ("iri-path-lower-hex", "http://example.com/%c3%bc", "http://example.com/\u00fc"),
    ("leading-zero-port", "http://example.com:0080/", "http://example.com/"),
]

# (id, url a, url b): different resources (or not provably the same): never merged.
NEAR_MISSES = [
    ("encoded-slash", "http://example.com/a%2Fb", "http://example.com/a/b"),
    ("path-case", "http://example.com/A", "http://example.com/a"),
    ("empty-query-param", "http://example.com/a?x", "http://example.com/a?x="),
    ("port", "http://example.com:8080/a", "http://example.com/a"),
    ("scheme", "https://example.com/a", "http://example.com/a"),
    ("swapped-query", "http://example.com/?a=1&b=2", "http://example.com/?b=2&a=1"),
    ("trailing-slash", "http://example.com/a/", "http://example.com/a"),
    ("query-case", "http://example.com/?q=A", "http://example.com/?q=a"),
    ("encoded-equals", "http://example.com/?a%3D1", "http://example.com/?a=1"),
    ("subdomain", "http://www.example.com/", "http://example.com/"),
]


@pytest.mark.parametrize(("a", "b"), [c[1:] for c in ALIASES], ids=[c[0] for c in ALIASES])
def test_aliases_share_a_fingerprint(a: str, b: str) -> None:
    fingerprinter = crawler_for().request_fingerprinter
    assert fingerprinter.fingerprint(Request(a)) == fingerprinter.fingerprint(Request(b))


@pytest.mark.parametrize(
    ("a", "b"), [c[1:] for c in NEAR_MISSES], ids=[c[0] for c in NEAR_MISSES]
)
def test_near_misses_differ(a: str, b: str) -> None:
    fingerprinter = crawler_for().request_fingerprinter
    assert fingerprinter.fingerprint(Request(a)) != fingerprinter.fingerprint(Request(b))


@pytest.mark.parametrize(
    ("a", "b", "level", "equal"),
    [
        ("http://example.com:80/a", "http://example.com/a", "syntax", False),
        ("http://example.com/%7Ea", "http://example.com/~a", "syntax", True),
        ("http://example.com/%7Ea", "http://example.com/~a", "simple", False),
        ("http://example.com/a/./b", "http://example.com/a/b", "simple", False),
        ("http://example.com/a/./b", "http://example.com/a/b", "protocol", True),
    ],
    ids=["syntax-keeps-port", "syntax-percent", "simple-percent", "simple-dots", "protocol"],
)
def test_level_setting(a: str, b: str, level: str, equal: bool) -> None:
    assert (fp(a, IRI_LEVEL=level) == fp(b, IRI_LEVEL=level)) is equal


def test_bare_question_mark_is_kept_apart() -> None:
    # Request() drops a bare "?" (w3lib safe_url_string); the normalization
    # middleware sends such URLs with verbatim_url, already in canonical form.
    f = crawler_for().request_fingerprinter
    assert f.canonical_url("http://example.com/a?") == "http://example.com/a?"
    with_q = Request("http://example.com/a?", meta={"verbatim_url": True})
    assert with_q.url == "http://example.com/a?"
    assert f.fingerprint(with_q) != f.fingerprint(Request("http://example.com/a"))


def test_method_and_body_count() -> None:
    f = crawler_for().request_fingerprinter
    url = "http://example.com/a"
    get, post = Request(url), Request(url, method="POST")
    post_b = Request(url, method="POST", body=b"x=1")
    assert len({f.fingerprint(get), f.fingerprint(post), f.fingerprint(post_b)}) == 3


def test_same_bytes_as_scrapy_for_a_url_both_leave_alone() -> None:
    # canonicalize_url and the ladder agree on this URL, so the JSON documents
    # and hence the SHA-1 digests are identical: the serialization is Scrapy's.
    r = Request("http://example.com/a?x=1", method="POST", body=b"\x00data")
    f = crawler_for().request_fingerprinter
    assert f.fingerprint(r) == scrapy_fingerprint(r)
    assert len(f.fingerprint(r)) == 20 and isinstance(f.fingerprint(r), bytes)


def test_include_headers_like_scrapy() -> None:
    r = Request("http://example.com/a", headers={"Accept": ["a", "b"], "X-Y": "z"})
    f = IRIRequestFingerprinter(include_headers=["x-y", "Accept", "Absent"])
    assert f.fingerprint(r) == scrapy_fingerprint(r, include_headers=["x-y", "Accept", "Absent"])
    assert f.fingerprint(r) != IRIRequestFingerprinter().fingerprint(r)


def test_keep_fragments_setting() -> None:
    a, b = "http://example.com/a#x", "http://example.com/a#y"
    assert fp(a, IRI_KEEP_FRAGMENTS=True) != fp(b, IRI_KEEP_FRAGMENTS=True)
    assert fp(a, IRI_KEEP_FRAGMENTS=True) == fp("http://example.com/a#%78", IRI_KEEP_FRAGMENTS=True)
    assert fp(a) == fp(b)


@pytest.mark.parametrize(
    ("settings", "a", "b"),
    [
        ({"IRI_SORT_QUERY": True}, "http://e.com/?b=2&a=1", "http://e.com/?a=1&b=2"),
        ({"IRI_DROP_QUERY_PARAMS": ["utm_*"]}, "http://e.com/?utm_source=x&id=3",
         "http://e.com/?id=3"),
        ({"IRI_DROP_QUERY_PARAMS": "utm_*,ref"}, "http://e.com/p?ref=1", "http://e.com/p"),
    ],
    ids=["sort-query", "drop-utm", "drop-all-params"],
)
def test_heuristics_are_opt_in(settings: dict, a: str, b: str) -> None:
    assert fp(a) != fp(b)  # off by default: not RFC 3987
    assert fp(a, **settings) == fp(b, **settings)


def test_dont_normalize_iri_keys_the_url_as_given() -> None:
    f = crawler_for().request_fingerprinter
    raw = Request("http://example.com/%7Ea#x", meta={"dont_normalize_iri": True})
    assert f.fingerprint(raw) != f.fingerprint(Request("http://example.com/~a"))
    # exactly Scrapy's fingerprint of the URL taken verbatim
    same = Request("http://example.com/%7Ea#x", meta={"verbatim_url": True})
    assert f.fingerprint(raw) == scrapy_fingerprint(same)
    assert f.fingerprint(same) == f.fingerprint(raw)


def test_cache_follows_meta_changes() -> None:
    f = crawler_for().request_fingerprinter
    r = Request("http://example.com/%7Ea")
    normal = f.fingerprint(r)
    assert f.fingerprint(r) is normal  # cached per request
    r.meta["dont_normalize_iri"] = True
    assert f.fingerprint(r) != normal
    del r.meta["dont_normalize_iri"]
    assert f.fingerprint(r) == normal


def test_per_request_cache_is_weak_and_read_once_per_fingerprint() -> None:
    """The crawl's per-request cache (stamp and key) goes with the request, and the
    fingerprint of a new request looks it up once (it was five look-ups along the
    dupefilter's path: request_seen fell from 2.6x RFPDupeFilter to 1.6x)."""
    f = crawler_for().request_fingerprinter
    stamper = f.stamper
    stamper._cache = cache = _CountingDict()
    stamper._forget = lambda gone: cache.pop(gone, None)
    r = Request("http://Example.com/%7Ea#top")
    f.fingerprint(r)
    assert cache.lookups == 1
    assert f.fingerprint(r) == f.fingerprint(Request("http://example.com/~a"))
    assert len(cache) == 1  # the second request is gone already
    del r
    gc.collect()
    assert len(cache) == 0


class _CountingDict(dict):
    """A dict counting ``get`` calls (the stamper's cache is read with ``get``)."""

    lookups = 0

    def get(self, key, default=None):
        self.lookups += 1
        return super().get(key, default)


def test_unnormalizable_passes_counted_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    crawler = crawler_for()
    f = crawler.request_fingerprinter
    caplog.set_level(logging.WARNING, logger="iri_scrapy")
    r1, r2 = Request(BAD_HOST), Request(BAD_HOST + "?2")
    fp1 = f.fingerprint(r1)
    assert fp1 == scrapy_fingerprint(Request(BAD_HOST, meta={"verbatim_url": True}))
    assert f.fingerprint(r2) != fp1
    assert f.fingerprint(r1) == fp1  # cached: not counted again
    assert crawler.stats.get_value(STAT_UNNORMALIZABLE) == 2
    warnings_logged = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings_logged) == 1
    message = warnings_logged[0].getMessage()
    assert BAD_HOST in message and "IDNA" in message
    assert f.rungs(r1) == ()
    assert f.key_url(r1) == BAD_HOST


def test_key_url_and_rungs() -> None:
    f = crawler_for().request_fingerprinter
    r = Request("http://example.com:80/%7ea/./b#frag")
    assert f.key_url(r) == "http://example.com/~a/b"
    assert f.rungs(r) == ("case", "percent", "path", "scheme", "fragment")
    assert f.rungs(Request("http://example.com/a")) == ()
    assert f.canonical_url("HTTP://Example.com") == "http://example.com/"


@pytest.mark.parametrize(
    ("url", "config", "expected"),
    [
        ("http://example.com/a", IRIConfig(), ()),
        ("http://example.com/a#x", IRIConfig(), ("fragment",)),
        ("http://example.com/a#x", IRIConfig(keep_fragments=True), ()),
        ("http://example.com/a#%7e", IRIConfig(), ("fragment",)),
        ("http://example.com/?b&a", IRIConfig(sort_query=True), ("heuristics",)),
        ("http://Example.com/%7e", IRIConfig(level=Level.SYNTAX), ("case", "percent")),
        ("http://example.com/caf\u00e9", IRIConfig(), ("percent",)),
    ],
    ids=["canonical", "fragment", "kept-fragment", "fragment-only-rungs-ignored",
         "heuristics", "syntax", "iri-to-uri"],
)
def test_rung_keys(url: str, config: IRIConfig, expected: tuple[str, ...]) -> None:
    assert rung_keys(url, config) == expected


def test_protocol_rules_learned_later_change_cached_fingerprints() -> None:
    crawler = crawler_for(IRI_LEVEL="protocol", ADDONS={"iri_scrapy.Addon": 0})
    f = crawler.request_fingerprinter
    rules = CrawlContext.of(crawler).rules
    assert rules is not None and f.rules is rules
    early = Request("http://example.com/data")
    before = f.fingerprint(early)
    slash = f.fingerprint(Request("http://example.com/data/"))
    assert before != slash
    assert rules.observe_redirect("http://example.com/data", "http://example.com/data/", 301)
    assert f.fingerprint(early) == slash  # the cache did not keep the stale key
    assert f.key_url(early) == "http://example.com/data/"
    assert "protocol" in f.rungs(early)


def test_stock_rfpdupefilter_follows_the_fingerprinter() -> None:
    df = RFPDupeFilter.from_crawler(crawler_for())
    assert not df.request_seen(Request("http://example.com/~a"))
    assert df.request_seen(Request("http://EXAMPLE.com:80/%7ea#top"))
    assert not df.request_seen(Request("http://example.com/%7Eb"))


def test_http_cache_follows_the_fingerprinter(tmp_path) -> None:
    crawler = crawler_for(HTTPCACHE_DIR=str(tmp_path))
    spider = _Spider.from_crawler(crawler)
    storage = FilesystemCacheStorage(crawler.settings)
    storage.open_spider(spider)
    request = Request("http://example.com/~a")
    response = HtmlResponse(request.url, body=b"<p>cached</p>", request=request)
    storage.store_response(spider, request, response)
    hit = storage.retrieve_response(spider, Request("http://example.com/%7Ea#x"))
    assert hit is not None and hit.body == b"<p>cached</p>"
    assert storage.retrieve_response(spider, Request("http://example.com/a")) is None


def test_no_deprecation_warning_on_any_path() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        crawler = crawler_for(IRI_LEVEL="protocol", IRI_SORT_QUERY=True)
        f = crawler.request_fingerprinter
        for url in ("http://example.com/a?b=1&a=2#x", BAD_HOST):
            r = Request(url)
            f.fingerprint(r)
            f.key_url(r)
            f.rungs(r)


def test_hash_is_sha1_of_scrapys_json_document() -> None:
    r = Request("http://example.com/%7Ea?q=\"x\"", method="PUT", body=b"\xff")
    f = IRIRequestFingerprinter()
    document = json.dumps(
        {"method": "PUT", "url": f.key_url(r), "body": "ff", "headers": {}}, sort_keys=True
    )
    assert f.fingerprint(r) == hashlib.sha1(document.encode()).digest()
