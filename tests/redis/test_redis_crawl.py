"""Crawls of the alias web deduplicated through one real redis-server.

Every crawl runs in its own subprocess (``tests.support.crawl.run_crawl``); the
alias-web server counts what was fetched, and is the oracle.  Crawls with Scrapy's
scheduler run with ``ScrapyDeprecationWarning`` as an error in the child.  Crawls with
scrapy-redis's scheduler cannot (it warns on every enqueue on Scrapy 2.19, see
docs/scrapy-redis-notes.md section 3): they record warnings, and the test checks that
every recorded one comes from scrapy_redis itself.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from iri_scrapy.frontier.redis_dupefilter import CLOSE_REASON, DEFAULT_RETRY_SECONDS
from iri_scrapy.plugin.refusal import CLOSESPIDER_AT_OPEN
from tests.support.crawl import DEPRECATIONS_ENV, CrawlResult, run_crawl
from tests.support.redis_support import RedisServer, find_free_port
from tests.support.server import SiteServer, serve_site
from tests.support.site import DEMO_SITE
from tests.support.watch import CEILING, cpu_of, hold_answers, wait_until

pytestmark = [pytest.mark.redis, pytest.mark.slow]  # real crawls, real redis-servers

EN_HOME = "http://www.example.test/"
RU_HOME = "http://пример.испытание/"
STRICT = {DEPRECATIONS_ENV: "1"}
SCRAPY_REDIS_WARNINGS = ("Passing a 'spider' argument", "Spider.log() is deprecated")


@pytest.fixture(scope="module")
def site() -> Iterator[SiteServer]:
    with serve_site(DEMO_SITE) as server:
        yield server


@pytest.fixture
def srv(site: SiteServer) -> SiteServer:
    site.reset()
    return site


def _settings(redis_url: str, **extra: Any) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "ADDONS": {"iri_scrapy.Addon": 0},
        "DUPEFILTER_CLASS": "iri_scrapy.RedisIRIDupeFilter",
        "IRI_REDIS_URL": redis_url,
        # these crawls test the dupefilter under Scrapy's scheduler (and JOBDIR); the
        # add-on's fleet queue (RedisIRIScheduler) is tested in test_redis_fleet.py
        "IRI_REDIS_SCHEDULER": False,
    }
    settings.update(extra)
    return settings


def _scrapy_redis(redis_url: str, **extra: Any) -> dict[str, Any]:
    return _settings(
        redis_url,
        SCHEDULER="scrapy_redis.scheduler.Scheduler",
        SCHEDULER_PERSIST=True,  # else the first process to finish flushes the shared keys
        REDIS_URL=redis_url,
        **extra,
    )


def _parallel(settings: dict[str, Any], starts: Sequence[Sequence[str]], proxy: str,
              env: dict[str, str] | None) -> list[CrawlResult]:
    with ThreadPoolExecutor(len(starts)) as pool:
        futures = [pool.submit(run_crawl, settings, list(s), proxy, env=env) for s in starts]
        return [f.result() for f in futures]


def _total(results: Sequence[CrawlResult], key: str) -> int:
    return sum(int(r.stats.get(key, 0)) for r in results)


def _assert_ok(result: CrawlResult) -> None:
    assert result.ok, (result.finish_reason, result.errors, result.stderr[-3000:])


def _assert_only_scrapy_redis_warnings(result: CrawlResult) -> None:
    for warning in result.warnings:
        assert "scrapy_redis" in warning.split(": ", 1)[0], warning
        assert any(w in warning for w in SCRAPY_REDIS_WARNINGS), warning


def _assert_exactly_once(srv: SiteServer) -> None:
    assert srv.hits.duplicates() == {}
    assert srv.hits.fetched() == DEMO_SITE.keys
    assert srv.hits.not_found() == []


# --------------------------------------------------------------------------- shared crawls


@pytest.mark.slow
def test_two_processes_in_parallel_fetch_each_resource_once(
    redis_server_session: RedisServer, srv: SiteServer
) -> None:
    settings = _settings(redis_server_session.url, DOWNLOAD_DELAY=0.2, CONCURRENT_REQUESTS=4)
    results = _parallel(settings, [[EN_HOME], [RU_HOME]], srv.proxy_url, STRICT)
    for result in results:
        _assert_ok(result)
        assert result.warnings == []
        # each process consulted the shared filter
        assert result.stats.get("dupefilter/filtered", 0) > 0
    _assert_exactly_once(srv)
    hits = len(srv.hits.hits)
    assert _total(results, "downloader/response_count") == hits
    assert _total(results, "scheduler/enqueued") == hits
    # dupefilter/filtered: every request either enqueued once in total or filtered
    assert _total(results, "dupefilter/filtered") == sum(
        v for result in results for k, v in result.stats.items()
        if k.startswith("iri/dupefilter/decided_by/"))


@pytest.mark.slow
def test_two_processes_with_scrapy_redis_scheduler(
    redis_server_session: RedisServer, srv: SiteServer
) -> None:
    settings = _scrapy_redis(redis_server_session.url, DOWNLOAD_DELAY=0.2,
                             CONCURRENT_REQUESTS=4)
    results = _parallel(settings, [[EN_HOME], [RU_HOME]], srv.proxy_url, None)
    for result in results:
        _assert_ok(result)
        _assert_only_scrapy_redis_warnings(result)
    # scrapy-redis's own filter counts none; ours does (in whichever process met the
    # duplicates: on a loaded machine one process may take nearly all the work)
    assert _total(results, "dupefilter/filtered") > 0
    _assert_exactly_once(srv)
    hits = len(srv.hits.hits)
    assert _total(results, "downloader/response_count") == hits
    assert _total(results, "scheduler/dequeued/redis") == hits
    assert _total(results, "scheduler/enqueued/redis") == hits
    client = redis_server_session.client()
    keys = {k.decode() for k in client.keys("*")}
    assert "alias:dupefilter" not in keys  # scrapy-redis's own filter was not used
    assert any(k.startswith("scrapybot:alias:iri-dupefilter:v") for k in keys)


# --------------------------------------------------------------------------- resume


@pytest.mark.slow
def test_resume_against_the_same_redis_fetches_nothing_again(
    redis_server_session: RedisServer, srv: SiteServer, tmp_path: Path
) -> None:
    url = redis_server_session.url
    jobdir = tmp_path / "job"
    # an interrupted crawl resumed from JOBDIR (Scrapy's queue) + Redis (the seen set)
    first = run_crawl(_settings(url, CLOSESPIDER_PAGECOUNT=5, CONCURRENT_REQUESTS=1),
                      [EN_HOME], srv.proxy_url, jobdir=jobdir, env=STRICT)
    assert first.finish_reason == "closespider_pagecount"
    assert len(srv.hits.hits) < len(DEMO_SITE.keys)
    second = run_crawl(_settings(url), [EN_HOME], srv.proxy_url, jobdir=jobdir, env=STRICT)
    _assert_ok(second)
    assert "Resuming crawl" in second.stderr
    _assert_exactly_once(srv)
    # a new crawl of the same site against the same Redis: nothing fetched again
    srv.reset()
    third = run_crawl(_settings(url), [EN_HOME], srv.proxy_url, env=STRICT)
    _assert_ok(third)
    assert srv.hits.hits == []
    assert third.stats.get("dupefilter/filtered") == 1  # the start URL
    assert third.stats.get("downloader/request_count", 0) == 0


@pytest.mark.slow
def test_resume_with_scrapy_redis_scheduler(
    redis_server_session: RedisServer, srv: SiteServer
) -> None:
    url = redis_server_session.url
    first = run_crawl(_scrapy_redis(url, CLOSESPIDER_PAGECOUNT=5, CONCURRENT_REQUESTS=1),
                      [EN_HOME], srv.proxy_url)
    assert first.finish_reason == "closespider_pagecount"
    second = run_crawl(_scrapy_redis(url), [EN_HOME], srv.proxy_url)
    _assert_ok(second)
    _assert_only_scrapy_redis_warnings(second)
    _assert_exactly_once(srv)



@pytest.mark.slow
def test_iri_redis_url_alone_drives_scrapy_redis_scheduler(
    redis_server_session: RedisServer, srv: SiteServer
) -> None:
    """docs/redis-fleet.md's snippet: IRI_REDIS_URL and scrapy-redis's scheduler, no
    REDIS_URL. scrapy-redis reads REDIS_URL only (it went to localhost:6379, three
    tracebacks): the add-on sets it from IRI_REDIS_URL, so queue and seen-set share
    one server and every page is fetched once."""
    settings = _scrapy_redis(redis_server_session.url, IRI_REDIS_KEY="alone:%(spider)s")
    del settings["REDIS_URL"]
    settings["SCHEDULER_QUEUE_KEY"] = "alone:%(spider)s:requests"
    result = run_crawl(settings, [EN_HOME], srv.proxy_url)
    _assert_ok(result)
    _assert_exactly_once(srv)


@pytest.mark.slow
def test_queue_and_seen_set_on_two_servers_are_refused(
    redis_server_session: RedisServer, srv: SiteServer
) -> None:
    """IRI_REDIS_URL and REDIS_URL naming two servers (here two databases of one)
    would put scrapy-redis's queue and the seen-set apart, silently: one ERROR line
    naming both, exit status 1, no page fetched."""
    other = redis_server_session.url.rsplit("/", 1)[0] + "/1"  # another database
    settings = _scrapy_redis(other)
    settings["IRI_REDIS_URL"] = redis_server_session.url
    result = run_crawl(settings, [EN_HOME], srv.proxy_url)
    assert not result.ok and result.returncode == 1
    text = "\n".join(result.errors) + result.stderr
    assert "name one server" in text and other in text, text[-2000:]
    if CLOSESPIDER_AT_OPEN:
        assert result.finish_reason == "iri_bad_setting"
    assert srv.hits.hits == []


# --------------------------------------------------------------------------- faults


@pytest.mark.slow
@pytest.mark.parametrize("scheduler", ["scrapy", "scrapy_redis"])
def test_unreachable_redis_at_start_is_a_clear_error(
    srv: SiteServer, redis_server_session: RedisServer, scheduler: str
) -> None:
    port = find_free_port()
    bad = f"redis://:s3cret@127.0.0.1:{port}/0"
    if scheduler == "scrapy":
        settings, env = _settings(bad), STRICT
    else:  # scrapy-redis's own queue uses the working server; only our filter's URL is bad
        settings, env = _scrapy_redis(redis_server_session.url), None
        settings["IRI_REDIS_URL"] = bad
    result = run_crawl(settings, [EN_HOME], srv.proxy_url, env=env)
    assert not result.ok and result.returncode != 0
    if scheduler == "scrapy" and CLOSESPIDER_AT_OPEN:  # closed before any request
        assert result.finish_reason == "iri_redis_unavailable"
    elif CLOSESPIDER_AT_OPEN:  # scrapy-redis: two servers named, refused before any request
        assert result.finish_reason == "iri_bad_setting"
    else:
        assert result.finish_reason is None  # the crawl never started
    text = "\n".join(result.errors) + result.stderr
    if scheduler == "scrapy":
        assert f"cannot use Redis at redis://:***@127.0.0.1:{port}/0" in text
    else:  # the queue and the seen-set on two servers: refused before either is used
        assert f"at redis://:***@127.0.0.1:{port}/0 (IRI_REDIS_URL): name one server" in text
    assert "s3cret" not in text
    assert srv.hits.hits == []


def _kill_during_crawl(
    server: RedisServer, srv: SiteServer, settings: dict[str, Any], *,
    after_hits: int, down_for: float | None, jobdir: Path | None = None,
) -> CrawlResult:
    """Run a slow crawl; SIGKILL Redis at its *after_hits*-th fetch; with *down_for*,
    start Redis again *down_for* seconds after the crawl has met the outage.

    The server holds its answers from that fetch until Redis is down, so the kill
    comes there (the crawl is not over yet) however slow the machine; and Redis comes
    back only once the crawl has logged the outage, so the outage lasts *down_for*
    at least even when the crawl is slow to send Redis its next command.
    """
    out: dict[str, CrawlResult] = {}
    errors: list[BaseException] = []
    child: dict[str, Any] = {}

    def crawl() -> None:
        try:
            out["result"] = run_crawl(
                settings, [EN_HOME], srv.proxy_url, jobdir=jobdir, env=STRICT,
                started=lambda proc, log: child.update(proc=proc, log=log))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test thread
            errors.append(exc)

    def log() -> str:
        path = child.get("log")
        return path.read_text(encoding="utf-8", errors="replace") if path else ""

    def cpu() -> object:
        return cpu_of(child["proc"].pid)() if "proc" in child else None

    progress = (lambda: len(srv.hits.hits), lambda: len(log()), cpu)
    thread = threading.Thread(target=crawl, daemon=True)
    with hold_answers(srv.hits, after_hits) as held:
        thread.start()
        wait_until(lambda: held.held > 0 or not thread.is_alive(), *progress,
                   what=f"the crawl's fetch {after_hits}")
        if errors:
            raise errors[0]
        assert held.held, f"the crawl ended before fetch {after_hits}"
        server.kill()
    if down_for is not None:
        wait_until(lambda: "unreachable" in log() or not thread.is_alive(), *progress,
                   what="the crawl meeting the outage")
        time.sleep(down_for)
        server.start()  # same port
    thread.join(CEILING + 60)  # run_crawl is bounded (progress, ceiling) by itself
    assert not thread.is_alive()
    if errors:
        raise errors[0]
    return out["result"]


# One request at a time, a little apart: the kill itself comes at a held fetch
# (_kill_during_crawl), so the delay only spaces the requests (0.25 s made each crawl
# of the 33-page site wait about 8 s).
SLOW = {"DOWNLOAD_DELAY": 0.05, "CONCURRENT_REQUESTS": 1}


@pytest.mark.slow
def test_redis_killed_and_restarted_mid_crawl_leaves_nothing_unfetched(
    redis_server: RedisServer, srv: SiteServer
) -> None:
    settings = _settings(redis_server.url, IRI_REDIS_RETRY_SECONDS=30, **SLOW)
    result = _kill_during_crawl(redis_server, srv, settings, after_hits=6, down_for=2.0)
    _assert_ok(result)
    assert result.stats["iri/redis/outages"] >= 1
    assert result.stats["iri/redis/retries"] >= 1
    assert result.stats["iri/redis/outage_seconds"] >= 1.5
    # persistence off: the restarted server forgot what was seen, so some resources are
    # fetched twice -- but none is left unfetched
    assert srv.hits.fetched() == DEMO_SITE.keys
    assert max(srv.hits.counts().values()) <= 2


@pytest.mark.slow
def test_redis_killed_and_restarted_with_aof_fetches_each_resource_once(
    tmp_path: Path, srv: SiteServer
) -> None:
    aof = ("--appendonly", "yes", "--appendfsync", "always")
    with RedisServer(tmp_path / "aof", extra_args=aof) as server:
        settings = _settings(server.url, IRI_REDIS_RETRY_SECONDS=30, **SLOW)
        result = _kill_during_crawl(server, srv, settings, after_hits=6, down_for=2.0)
    _assert_ok(result)
    assert result.stats["iri/redis/outages"] >= 1
    assert srv.hits.fetched() == DEMO_SITE.keys
    # a write whose reply was lost may be fetched once more (counted), nothing else
    extra = sum(n - 1 for n in srv.hits.counts().values())
    assert extra <= result.stats.get("iri/redis/ambiguous_refetch", 0)


@pytest.mark.slow
def test_redis_down_past_the_deadline_stops_loudly_and_jobdir_resumes(
    tmp_path: Path, srv: SiteServer
) -> None:
    aof = ("--appendonly", "yes", "--appendfsync", "always")
    jobdir = tmp_path / "job"
    with RedisServer(tmp_path / "aof", extra_args=aof) as server:
        settings = _settings(server.url, IRI_REDIS_RETRY_SECONDS=2, **SLOW)
        first = _kill_during_crawl(server, srv, settings, after_hits=6, down_for=None,
                                   jobdir=jobdir)
        assert first.finish_reason == CLOSE_REASON
        assert first.returncode == 1  # loud: the crawl did not finish
        assert "run the same command" in first.stderr
        # it retried for its 2 s (as the crawl measured them), not the default 60 s
        assert 2 <= first.stats["iri/redis/outage_seconds"] < DEFAULT_RETRY_SECONDS
        assert first.stats["log_count/ERROR"] >= 1
        assert "closing the crawl" in first.stderr
        unchecked = first.stats["iri/redis/unchecked"]
        assert unchecked >= 1
        assert srv.hits.fetched() != DEMO_SITE.keys
        # Redis is back: the same job resumes, and nothing is lost
        server.start()
        second = run_crawl(_settings(server.url), [EN_HOME], srv.proxy_url, jobdir=jobdir,
                           env=STRICT)
    _assert_ok(second)
    assert srv.hits.fetched() == DEMO_SITE.keys
    # requests enqueued unchecked while Redis was gone may be fetched twice, nothing else
    extra = sum(n - 1 for n in srv.hits.counts().values())
    assert extra <= unchecked


@pytest.mark.slow
def test_fleet_worker_that_gives_up_on_redis_exits_1_and_resumes(
    tmp_path: Path, srv: SiteServer
) -> None:
    """The add-on's fleet queue (RedisIRIScheduler): Redis gone past
    IRI_REDIS_RETRY_SECONDS stops the worker with iri_redis_unavailable and exit
    status 1 (a supervisor reading $? must not see success: it exited 0 once), one
    ERROR line saying what to do; the same command resumes and loses nothing."""
    aof = ("--appendonly", "yes", "--appendfsync", "always")
    # The first worker's leases outlive it: the second waits for them to expire (10 s,
    # as in test_redis_fleet, instead of the default 30 s).
    lease = {"IRI_REDIS_SCHEDULER": True, "IRI_REDIS_LEASE_SECONDS": 10}
    with RedisServer(tmp_path / "aof", extra_args=aof) as server:
        settings = _settings(server.url, IRI_REDIS_RETRY_SECONDS=2, **lease, **SLOW)
        first = _kill_during_crawl(server, srv, settings, after_hits=6, down_for=None)
        assert first.finish_reason == CLOSE_REASON
        assert first.returncode == 1  # loud: the crawl did not finish
        errors = [line for line in first.stderr.splitlines() if "ERROR" in line
                  and "RedisIRIScheduler" in line]
        assert errors and "run the same command" in errors[0], first.stderr[-3000:]
        assert srv.hits.fetched() != DEMO_SITE.keys
        server.start()
        second = run_crawl(_settings(server.url, **lease), [EN_HOME], srv.proxy_url,
                           env=STRICT)
    _assert_ok(second)
    assert srv.hits.fetched() == DEMO_SITE.keys
