"""IRIDupeFilter and its fingerprint store, through Scrapy's real scheduler."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scrapy import Request, Spider
from scrapy.core.scheduler import Scheduler
from scrapy.downloadermiddlewares.redirect import RedirectMiddleware
from scrapy.http import Response
from scrapy.utils.test import get_crawler

from iri_scrapy import CANONICALIZATION_VERSION, IRIDupeFilter
from iri_scrapy.plugin.dupefilter import (
    STAT_DECIDED_BY_PREFIX,
    STAT_FILTERED,
    STAT_LOADED,
    STAT_REDIRECT_SAME_KEY,
    STAT_STOCK_ALIASES,
)
from iri_scrapy.store.fpstore import (
    FILENAME,
    FingerprintFile,
    FingerprintFileError,
    FingerprintFileMismatch,
    FingerprintSet,
    fp64,
)

ROOT = Path(__file__).resolve().parents[2]
BASE = {
    "REQUEST_FINGERPRINTER_CLASS": "iri_scrapy.IRIRequestFingerprinter",
    "DUPEFILTER_CLASS": "iri_scrapy.IRIDupeFilter",
    # the default DownloaderAwarePriorityQueue needs a running engine
    "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.ScrapyPriorityQueue",
}


class _Spider(Spider):
    name = "df-test"


def crawler_for(**extra):
    return get_crawler(_Spider, {**BASE, **extra})


def build(crawler):
    """The filter built directly (from_crawler defers a JOBDIR refusal to open())."""
    return IRIDupeFilter(**IRIDupeFilter.kwargs_from_crawler(crawler))


def open_scheduler(crawler):
    spider = _Spider.from_crawler(crawler)
    scheduler = Scheduler.from_crawler(crawler)
    scheduler.open(spider)
    return scheduler


def rung_stats(crawler) -> dict[str, int]:
    """``iri/dupefilter/decided_by/*``: one count per duplicate, the rung that decided."""
    return {
        k[len(STAT_DECIDED_BY_PREFIX):]: v
        for k, v in crawler.stats.get_stats().items()
        if k.startswith(STAT_DECIDED_BY_PREFIX)
    }


# (id, first URL, later URL, the rung at which the later one became equal to the first)
DUPLICATES = [
    ("identical", "http://e.com/a", "http://e.com/a", {"simple": 1}),
    ("percent", "http://e.com/~a", "http://e.com/%7Ea", {"percent": 1}),
    ("case-and-percent", "http://e.com/~a", "http://e.com/%7ea", {"percent": 1}),
    ("case-between-aliases", "http://e.com/%7Ea", "http://e.com/%7ea", {"case": 1}),
    ("canonical-after-alias", "http://e.com/%7Ea", "http://e.com/~a", {"percent": 1}),
    ("fragment-only", "http://e.com/a", "http://e.com/a#x", {"fragment": 1}),
    ("percent-and-fragment", "http://e.com/~a", "http://e.com/%7Ea#top", {"percent": 1}),
    ("path", "http://e.com/a/b", "http://e.com/a/./c/../b", {"path": 1}),
    ("default-port", "http://e.com/a", "http://e.com:80/a", {"scheme": 1}),
    ("empty-path", "http://e.com/", "http://e.com", {"scheme": 1}),
    ("iri-lowercase-hex", "http://e.com/\u00fc", "http://e.com/%c3%bc", {"case": 1}),
]


@pytest.mark.parametrize(
    ("first", "later", "rungs"), [d[1:] for d in DUPLICATES], ids=[d[0] for d in DUPLICATES]
)
def test_duplicate_dropped_and_counted_per_rung(first: str, later: str, rungs: dict) -> None:
    crawler = crawler_for()
    scheduler = open_scheduler(crawler)
    assert scheduler.enqueue_request(Request(first))
    assert not scheduler.enqueue_request(Request(later))
    assert crawler.stats.get_value(STAT_FILTERED) == 1
    assert rung_stats(crawler) == rungs
    scheduler.close("finished")


def test_rung_counters_add_up_over_a_crawl() -> None:
    crawler = crawler_for()
    scheduler = open_scheduler(crawler)
    urls = ["http://e.com/~a", "http://e.com/%7Ea", "http://e.com/%7ea#x", "http://e.com/b",
            "http://e.com:80/b", "http://e.com/b#y", "http://e.com/c", "http://e.com/~a"]
    passed = [u for u in urls if scheduler.enqueue_request(Request(u))]
    assert passed == ["http://e.com/~a", "http://e.com/b", "http://e.com/c"]
    assert crawler.stats.get_value(STAT_FILTERED) == 5
    assert rung_stats(crawler) == {"percent": 2, "fragment": 1, "scheme": 1, "simple": 1}
    assert sum(rung_stats(crawler).values()) == crawler.stats.get_value(STAT_FILTERED)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("http://e.com/a%2Fb", "http://e.com/a/b"),
        ("http://e.com/A", "http://e.com/a"),
        ("http://e.com:8080/", "http://e.com/"),
        ("https://e.com/", "http://e.com/"),
        ("http://e.com/?a=1&b=2", "http://e.com/?b=2&a=1"),
    ],
    ids=["encoded-slash", "path-case", "port", "scheme", "swapped-query"],
)
def test_near_misses_both_pass(a: str, b: str) -> None:
    scheduler = open_scheduler(crawler_for())
    assert scheduler.enqueue_request(Request(a))
    assert scheduler.enqueue_request(Request(b))


def test_dont_filter_passes_and_counts_nothing() -> None:
    crawler = crawler_for()
    scheduler = open_scheduler(crawler)
    assert scheduler.enqueue_request(Request("http://e.com/~a"))
    assert scheduler.enqueue_request(Request("http://e.com/%7Ea", dont_filter=True))
    assert crawler.stats.get_value(STAT_FILTERED) is None


def test_dont_normalize_iri_request_is_keyed_as_given() -> None:
    crawler = crawler_for()
    scheduler = open_scheduler(crawler)
    assert scheduler.enqueue_request(Request("http://e.com/~a"))
    raw = {"dont_normalize_iri": True}
    assert scheduler.enqueue_request(Request("http://e.com/%7Ea", meta=raw))
    assert not scheduler.enqueue_request(Request("http://e.com/%7Ea", meta=raw))
    assert rung_stats(crawler) == {"simple": 1}


def test_unnormalizable_url_passes_once_then_is_a_simple_duplicate() -> None:
    crawler = crawler_for()
    scheduler = open_scheduler(crawler)
    bad = "http://\u2488.com/x"
    assert scheduler.enqueue_request(Request(bad))
    assert not scheduler.enqueue_request(Request(bad))
    assert rung_stats(crawler) == {"simple": 1}
    assert crawler.stats.get_value("iri/unnormalizable") == 2


def redirect(mw: RedirectMiddleware, request: Request, location: str, status: int = 301):
    response = Response(request.url, status=status, headers={"Location": location},
                        request=request)
    out = mw.process_response(request, response)
    assert isinstance(out, Request)
    return out


@pytest.mark.parametrize(
    ("source", "location"),
    [
        ("http://e.com/a", "http://e.com/a#x"),
        ("http://e.com/%7Ea", "http://e.com/~a"),
        ("http://e.com/a", "/a"),
        ("http://e.com:80/p", "http://E.com/p"),
    ],
    ids=["adds-fragment", "decodes-tilde", "same-url", "port-and-case"],
)
def test_redirect_to_the_same_key_is_not_lost(source: str, location: str) -> None:
    # scrapy#1225: with a plain dupefilter the target is dropped and the page lost.
    crawler = crawler_for()
    scheduler = open_scheduler(crawler)
    mw = RedirectMiddleware.from_crawler(crawler)
    first = Request(source)
    assert scheduler.enqueue_request(first)
    target = redirect(mw, first, location)
    assert scheduler.enqueue_request(target)
    assert crawler.stats.get_value(STAT_REDIRECT_SAME_KEY) == 1
    assert crawler.stats.get_value(STAT_FILTERED) is None
    # an ordinary alias of the same key is still a duplicate
    assert not scheduler.enqueue_request(Request(target.url))


def test_redirect_to_another_seen_key_is_still_dropped() -> None:
    crawler = crawler_for()
    scheduler = open_scheduler(crawler)
    mw = RedirectMiddleware.from_crawler(crawler)
    assert scheduler.enqueue_request(Request("http://e.com/b"))
    a = Request("http://e.com/a")
    assert scheduler.enqueue_request(a)
    assert not scheduler.enqueue_request(redirect(mw, a, "http://e.com/%62"))
    assert crawler.stats.get_value(STAT_REDIRECT_SAME_KEY) is None


def test_debug_logs_every_duplicate_with_explain(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="iri_scrapy.plugin.dupefilter")
    scheduler = open_scheduler(crawler_for(DUPEFILTER_DEBUG=True))
    for url in ("http://e.com/~a", "http://e.com/%7Ea", "http://e.com:80/~a#f"):
        scheduler.enqueue_request(Request(url))
    messages = [r.getMessage() for r in caplog.records if "duplicate" in r.getMessage()]
    assert len(messages) == 2
    assert "first seen as http://e.com/~a" in messages[0]
    assert "5.3.2.3 percent-encoding normalization" in messages[0]
    assert "5.3.3 scheme-based normalization" in messages[1]
    assert "fragments excluded" in messages[1]


def test_without_debug_only_the_first_duplicate_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="iri_scrapy.plugin.dupefilter")
    scheduler = open_scheduler(crawler_for())
    for url in ("http://e.com/~a", "http://e.com/%7Ea", "http://e.com/%7ea"):
        scheduler.enqueue_request(Request(url))
    messages = [r.getMessage() for r in caplog.records if "duplicate" in r.getMessage()]
    assert len(messages) == 1
    assert "DUPEFILTER_DEBUG" in messages[0] and "percent" in messages[0]


def test_no_deprecation_warning_through_the_scheduler() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        crawler = crawler_for(DUPEFILTER_DEBUG=True)
        scheduler = open_scheduler(crawler)
        assert scheduler.enqueue_request(Request("http://e.com/"))
        assert not scheduler.enqueue_request(Request("http://e.com"))  # calls df.log()
        scheduler.close("finished")


def test_works_with_scrapys_default_fingerprinter() -> None:
    crawler = get_crawler(_Spider, {"DUPEFILTER_CLASS": "iri_scrapy.IRIDupeFilter"})
    df = IRIDupeFilter.from_crawler(crawler)
    assert "fingerprinter=scrapy.utils.request.RequestFingerprinter" in df.options_tag()
    assert not df.request_seen(Request("http://e.com/?b=1&a=2"))
    assert df.request_seen(Request("http://e.com/?a=2&b=1"))  # w3lib sorts queries
    df.log(Request("http://e.com/?a=2&b=1"))
    assert crawler.stats.get_value(STAT_FILTERED) == 1


def test_from_spider_for_scrapy_redis() -> None:
    crawler = crawler_for()
    df = IRIDupeFilter.from_spider(_Spider.from_crawler(crawler))
    assert isinstance(df, IRIDupeFilter)
    assert df.fingerprinter is crawler.request_fingerprinter
    assert df.stats is crawler.stats


def test_clear_and_len() -> None:
    df = IRIDupeFilter()
    assert not df.request_seen(Request("http://e.com/a"))
    assert Request("http://e.com/a#x") in df and len(df) == 1
    df.clear()
    assert len(df) == 0 and not df.request_seen(Request("http://e.com/a"))


# --- JOBDIR -------------------------------------------------------------------------


def test_jobdir_resume(tmp_path: Path) -> None:
    crawler = crawler_for(JOBDIR=str(tmp_path))
    df = IRIDupeFilter.from_crawler(crawler)
    df.open()
    urls = [f"http://e.com/p{i}" for i in range(2500)]
    for url in urls:
        assert not df.request_seen(Request(url))
    df.close("shutdown")
    size = (tmp_path / FILENAME).stat().st_size
    assert (size - 8 * 2500) % 8 == 0 and size > 8 * 2500

    crawler2 = crawler_for(JOBDIR=str(tmp_path))
    df2 = IRIDupeFilter.from_crawler(crawler2)
    assert crawler2.stats.get_value(STAT_LOADED) == 2500
    assert all(df2.request_seen(Request(u.replace("/p", "/%70"))) for u in urls)
    assert not df2.request_seen(Request("http://e.com/new"))
    df2.close("finished")


@pytest.mark.parametrize(
    "settings_change",
    [{"IRI_LEVEL": "syntax"}, {"IRI_KEEP_FRAGMENTS": True}, {"IRI_SORT_QUERY": True},
     {"REQUEST_FINGERPRINTER_CLASS": "scrapy.utils.request.RequestFingerprinter"}],
    ids=["level", "fragments", "heuristic", "fingerprinter"],
)
def test_jobdir_refuses_other_options(tmp_path: Path, settings_change: dict) -> None:
    df = IRIDupeFilter.from_crawler(crawler_for(JOBDIR=str(tmp_path)))
    df.request_seen(Request("http://e.com/a"))
    df.close("shutdown")
    with pytest.raises(FingerprintFileMismatch, match="refusing to mix keys"):
        build(crawler_for(JOBDIR=str(tmp_path), **settings_change))
    # through from_crawler (Scrapy's scheduler), refused at open(): test_start_refusals.py
    # allowed: the old file is set aside and a new one started
    crawler = crawler_for(JOBDIR=str(tmp_path), IRI_JOBDIR_ALLOW_RESET=True, **settings_change)
    df2 = IRIDupeFilter.from_crawler(crawler)
    assert len(df2) == 0 and df2.file is not None and df2.file.reset_from is not None
    assert df2.file.reset_from.exists()
    df2.close("finished")


def test_jobdir_refuses_other_canonicalization_version(tmp_path: Path) -> None:
    tag = IRIDupeFilter.from_crawler(crawler_for()).options_tag()
    old = FingerprintFile(tmp_path / FILENAME, tag=tag,
                          canonicalization_version=CANONICALIZATION_VERSION + 1)
    old.add(b"12345678")
    old.close()
    with pytest.raises(FingerprintFileMismatch, match="canonicalization version"):
        build(crawler_for(JOBDIR=str(tmp_path)))


def test_jobdir_refuses_a_foreign_file(tmp_path: Path) -> None:
    (tmp_path / FILENAME).write_bytes(b"not ours at all")
    with pytest.raises(FingerprintFileError, match="not an iri_scrapy fingerprint file"):
        IRIDupeFilter.from_crawler(crawler_for(JOBDIR=str(tmp_path)))


def test_torn_record_is_ignored_and_truncated(tmp_path: Path) -> None:
    path = tmp_path / FILENAME
    f = FingerprintFile(path, canonicalization_version=1, tag="t")
    for i in range(1, 11):
        assert f.add(i.to_bytes(8, "big"))
    f.close()
    whole = path.stat().st_size
    with path.open("ab") as raw:
        raw.write(b"\x01\x02\x03")  # a record cut short by a crash
    g = FingerprintFile(path, canonicalization_version=1, tag="t")
    assert g.loaded == 10 and g.truncated_bytes == 3
    assert path.stat().st_size == whole
    assert all(i.to_bytes(8, "big") in g for i in range(1, 11))
    assert g.add(b"\x00\x00\x00\x00\x00\x00\x00\x0b")
    g.close()
    assert path.stat().st_size == whole + 8


CHILD = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {root!r})
    from scrapy import Request
    from iri_scrapy import IRIDupeFilter
    df = IRIDupeFilter(jobdir={jobdir!r})
    reported = 0
    i = 0
    while True:
        df.request_seen(Request(f"http://e.com/page/{{i}}"))
        i += 1
        if df.file.flushed != reported:
            reported = df.file.flushed
            print(reported, flush=True)
    """
)


def test_kill_9_loses_no_flushed_record(tmp_path: Path) -> None:
    """A real crash: the child adds records forever and is SIGKILLed mid-stream."""
    script = CHILD.format(root=str(ROOT), jobdir=str(tmp_path))
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    flushed = 0
    try:
        for line in child.stdout:
            flushed = int(line)
            if flushed >= 5000:
                break
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    assert flushed >= 5000
    df = IRIDupeFilter(jobdir=tmp_path)
    assert df.file is not None
    assert df.file.loaded >= flushed  # every record reported written is there
    assert all(df.request_seen(Request(f"http://e.com/page/{i}")) for i in range(flushed))
    assert not df.request_seen(Request("http://e.com/page/-1"))
    df.close("finished")


# --- FingerprintSet -------------------------------------------------------------------

U64 = st.integers(min_value=0, max_value=2**64 - 1)
# values sharing their low 12 bits land in one slot of the smallest table: long probes
CLUSTERED = st.integers(min_value=0, max_value=40).map(lambda k: (k << 12) | 5)
VALUES = st.one_of(U64, CLUSTERED, st.sampled_from([0, 1, 2**64 - 1]))


@pytest.mark.slow
@given(st.lists(st.tuples(st.sampled_from(["add", "in"]), VALUES), max_size=300))
@settings(max_examples=300, deadline=None)
def test_fingerprint_set_has_set_semantics(ops: list[tuple[str, int]]) -> None:
    ours, model = FingerprintSet(), set()
    for op, value in ops:
        key = value or 1  # 0 marks an empty slot: stored as 1
        if op == "add":
            assert ours.add(value) == (key not in model)
            model.add(key)
        else:
            assert (value in ours) == (key in model)
        assert len(ours) == len(model)
    assert set(ours) == model


def test_fingerprint_set_grows_and_keeps_everything() -> None:
    import random

    rng = random.Random(7)
    values = [rng.getrandbits(64) for _ in range(20000)] + [(k << 12) | 5 for k in range(3000)]
    ours, model = FingerprintSet(), set()
    for v in values:
        assert ours.add(v) == (v not in model)
        model.add(v)
    assert ours.slots >= len(model) / 0.75 and len(ours) == len(model)
    assert set(ours) == model and all(v in ours for v in model)
    assert ours.nbytes == 8 * ours.slots
    assert "x" not in ours


@given(st.lists(st.binary(min_size=8, max_size=8), max_size=200))
@settings(max_examples=50, deadline=None)
def test_fingerprint_file_round_trip(records: list[bytes]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / FILENAME
        f = FingerprintFile(path, canonicalization_version=1, tag="t", flush_records=7)
        new = [f.add(r) for r in records]
        f.close()
        g = FingerprintFile(path, canonicalization_version=1, tag="t")
        assert g.loaded == sum(new)
        assert set(g.seen) == {int.from_bytes(r, "big") or 1 for r in records}
        g.close()


def test_fp64() -> None:
    digest = bytes(range(20))
    assert fp64(digest) == digest[:8]
    assert len(fp64(b"short")) == 8 and fp64(b"short") != fp64(b"other")


def test_stock_aliases_and_the_close_line(caplog: pytest.LogCaptureFixture) -> None:
    """Duplicates stock Scrapy's fingerprint tells apart are counted, and the close
    line sums up requests, duplicates by rung and those aliases."""
    crawler = crawler_for()
    scheduler = open_scheduler(crawler)
    urls = ["http://e.com/a", "http://e.com:80/a", "http://e.com/a#x", "http://e.com/~b",
            "http://e.com/%7Eb", "http://e.com/a"]
    passed = [u for u in urls if scheduler.enqueue_request(Request(u))]
    assert passed == ["http://e.com/a", "http://e.com/~b"]
    assert rung_stats(crawler) == {"scheme": 1, "fragment": 1, "percent": 1, "simple": 1}
    # stock Scrapy merges /a#x, /%7Eb and /a with their first spellings, not :80/a
    assert crawler.stats.get_value(STAT_STOCK_ALIASES) == 1
    with caplog.at_level(logging.INFO, logger="iri_scrapy"):
        scheduler.close("finished")
    lines = [r.getMessage() for r in caplog.records if "IRI dupefilter:" in r.getMessage()]
    assert lines == [
        "IRI dupefilter: 6 requests, 4 duplicates dropped (decided by: fragment 1, percent 1,"
        " scheme 1, simple 1); stock Scrapy's fingerprint would have made 1 more fetches"
    ]


def test_stock_fetches_count_each_stock_fingerprint_once() -> None:
    """The fetches stock Scrapy would have made: an alias linked three times is one
    fetch stock would have made, not three (it had the first in its seen-set)."""
    crawler = crawler_for()
    scheduler = open_scheduler(crawler)
    urls = ["http://e.com/a", *["http://e.com:80/a"] * 3, "http://e.com:0080/a",
            "http://e.com:80/a#x", "http://e.com/b", "http://e.com:80/b"]
    passed = [u for u in urls if scheduler.enqueue_request(Request(u))]
    assert passed == ["http://e.com/a", "http://e.com/b"]
    assert crawler.stats.get_value(STAT_FILTERED) == 6
    # stock keys :80/a, :0080/a and :80/a#x alike (one fetch), apart from /a; :80/b too
    assert crawler.stats.get_value(STAT_STOCK_ALIASES) == 2
