"""The one retry policy of the Redis dupefilter and scheduler (frontier/redis_client.py).

Vectors run :class:`RetryPolicy` on a fake clock (``sleep`` advances it) with a call
that fails N times then succeeds, or never; one test kills a real ``redis-server``
mid-call and starts it again.
"""

from __future__ import annotations

import logging
import threading
import time

import pytest

from iri_scrapy.frontier.redis_client import (
    BACKOFF_FIRST,
    BACKOFF_MAX,
    IRIRedisError,
    RedisRetryExhausted,
    RetryPolicy,
    connection_errors,
    new_client,
    retryable_errors,
)
from tests.support.redis_support import RedisServer

pytestmark = pytest.mark.redis

NEVER = -1


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.sleeps.append(round(seconds, 6))
        self.now += seconds


class Flaky:
    """Fails *failures* times (NEVER: always) with ConnectionError, then returns 'ok'."""

    def __init__(self, failures: int, error: type[BaseException] = ConnectionError) -> None:
        self.failures = failures
        self.error = error
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.failures == NEVER or self.calls <= self.failures:
            raise self.error(f"down (call {self.calls})")
        return "ok"


def _policy(clock: FakeClock, retry_seconds: float = 60.0,
            counted: list[tuple[str, float]] | None = None) -> RetryPolicy:
    return RetryPolicy(
        "redis://h:1/0", retry_seconds, retryable=(ConnectionError, TimeoutError),
        log=logging.getLogger("tests.retry"), label="T: ",
        on_count=None if counted is None else lambda name, value: counted.append((name, value)),
        clock=clock, sleep=clock.sleep,
    )


# failures, retry_seconds -> retries, outages, sleeps, outcome
VECTORS = [
    (0, 60.0, 0, 0, [], "ok"),
    (1, 60.0, 1, 1, [0.05], "ok"),
    (2, 60.0, 2, 1, [0.05, 0.1], "ok"),
    (5, 60.0, 5, 1, [0.05, 0.1, 0.2, 0.4, 0.8], "ok"),
    (8, 60.0, 8, 1, [0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0], "ok"),
    # the last pause ends at the deadline, and the call runs once more there
    (NEVER, 2.0, 6, 1, [0.05, 0.1, 0.2, 0.4, 0.8, 0.45], "exhausted"),
    (NEVER, 1.0, 5, 1, [0.05, 0.1, 0.2, 0.4, 0.25], "exhausted"),
    (6, 2.0, 6, 1, [0.05, 0.1, 0.2, 0.4, 0.8, 0.45], "ok"),  # answered at the deadline
    (7, 2.0, 6, 1, [0.05, 0.1, 0.2, 0.4, 0.8, 0.45], "exhausted"),
    (NEVER, 0.0, 0, 1, [], "exhausted"),  # IRI_REDIS_RETRY_SECONDS = 0: no retry
]


@pytest.mark.parametrize(("failures", "retry_seconds", "retries", "outages", "sleeps", "outcome"),
                         VECTORS)
def test_retry_vectors(failures: int, retry_seconds: float, retries: int, outages: int,
                       sleeps: list[float], outcome: str) -> None:
    clock = FakeClock()
    counted: list[tuple[str, float]] = []
    policy = _policy(clock, retry_seconds, counted)
    call = Flaky(failures)
    if outcome == "ok":
        assert policy.call(call) == "ok"
    else:
        with pytest.raises(RedisRetryExhausted) as info:
            policy.call(call)
        assert isinstance(info.value, IRIRedisError)
        assert str(info.value) == f"Redis at redis://h:1/0 unusable: down (call {call.calls})"
        assert isinstance(info.value.last, ConnectionError)
        assert info.value.__cause__ is info.value.last
        assert info.value.waited == pytest.approx(retry_seconds)
    assert clock.sleeps == pytest.approx(sleeps)
    assert call.calls == 1 + retries
    assert (policy.retries, policy.outages) == (retries, outages)
    assert [n for n, _ in counted] == ["outages"] * outages + ["retries"] * retries + \
        ["outage_seconds"] * outages
    if outages:
        assert policy.longest_outage == pytest.approx(sum(sleeps))
        assert counted[-1] == ("outage_seconds", pytest.approx(sum(sleeps)))


def test_backoff_constants() -> None:
    assert (BACKOFF_FIRST, BACKOFF_MAX) == (0.05, 1.0)


def test_each_outage_is_counted_once_and_logged_twice(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    policy = _policy(clock)
    with caplog.at_level(logging.WARNING, logger="tests.retry"):
        assert policy.call(Flaky(3)) == "ok"
        assert policy.call(Flaky(0)) == "ok"  # no outage: nothing logged
        assert policy.call(Flaky(1)) == "ok"
    assert (policy.outages, policy.retries) == (2, 4)
    assert policy.longest_outage == pytest.approx(0.35)
    assert caplog.messages == [
        "T: Redis at redis://h:1/0 unreachable (down (call 1)): retrying for up to 60 s "
        "(IRI_REDIS_RETRY_SECONDS); the crawl is stalled meanwhile",
        "T: Redis at redis://h:1/0 answers again after 0.35 s (3 retries): crawl continues",
        "T: Redis at redis://h:1/0 unreachable (down (call 1)): retrying for up to 60 s "
        "(IRI_REDIS_RETRY_SECONDS); the crawl is stalled meanwhile",
        "T: Redis at redis://h:1/0 answers again after 0.05 s (1 retries): crawl continues",
    ]


def test_the_dupefilter_and_scheduler_wordings(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    log = logging.getLogger("tests.retry")
    df = RetryPolicy("u", 5, retryable=(ConnectionError,), log=log,
                     action="request_seen retries", clock=clock, sleep=clock.sleep)
    sched = RetryPolicy("u", 5, retryable=(ConnectionError,), log=log,
                        label="RedisIRIScheduler: ", say_retries=False,
                        clock=clock, sleep=clock.sleep)
    with caplog.at_level(logging.WARNING, logger="tests.retry"):
        df.call(Flaky(1))
        sched.call(Flaky(1))
    assert caplog.messages == [
        "Redis at u unreachable (down (call 1)): request_seen retries for up to 5 s "
        "(IRI_REDIS_RETRY_SECONDS); the crawl is stalled meanwhile",
        "Redis at u answers again after 0.05 s (1 retries): crawl continues",
        "RedisIRIScheduler: Redis at u unreachable (down (call 1)): retrying for up to 5 s "
        "(IRI_REDIS_RETRY_SECONDS); the crawl is stalled meanwhile",
        "RedisIRIScheduler: Redis at u answers again after 0.05 s: crawl continues",
    ]


def test_other_errors_are_not_retried() -> None:
    clock = FakeClock()
    policy = _policy(clock)
    call = Flaky(NEVER, ValueError)
    with pytest.raises(ValueError):
        policy.call(call)
    assert (call.calls, policy.outages, clock.sleeps) == (1, 0, [])


def test_an_other_error_during_an_outage_ends_it() -> None:
    clock = FakeClock()
    policy = _policy(clock)
    errors = iter([ConnectionError("down"), ConnectionError("down"), ValueError("OOM")])

    def call() -> None:
        raise next(errors)

    with pytest.raises(ValueError, match="OOM"):
        policy.call(call)
    assert (policy.outages, policy.retries) == (1, 2)
    assert policy.waited == pytest.approx(0.15)  # for the caller's give-up


def test_retry_after_the_callers_own_first_attempt() -> None:
    clock = FakeClock()
    policy = _policy(clock)
    call = Flaky(2)
    call.calls = 1  # the caller's attempt failed (the first failure)
    assert policy.retry(call, ConnectionError("first")) == "ok"
    assert (call.calls, policy.retries, clock.sleeps) == (3, 2, [0.05, 0.1])


def test_scheduler_and_dupefilter_retry_what_they_did() -> None:
    import redis.exceptions as e

    assert set(connection_errors()) == {e.ConnectionError, e.TimeoutError, OSError}
    assert set(retryable_errors()) == set(connection_errors()) | {
        e.ReadOnlyError, e.ClusterDownError, e.TryAgainError, e.RedisClusterException}
    assert issubclass(e.BusyLoadingError, connection_errors())


# ----------------------------------------------------------- a real server killed mid-call


@pytest.mark.slow
def test_real_redis_killed_and_restarted_mid_call(redis_server: RedisServer) -> None:
    client = new_client(redis_server.url, 0.5, {}, cluster=False)
    assert client.execute_command("SET", "k", "before")
    redis_server.kill()

    def restart_later() -> None:
        time.sleep(0.8)
        redis_server.start()

    thread = threading.Thread(target=restart_later, daemon=True)
    counted: list[tuple[str, float]] = []
    policy = RetryPolicy("u", 20, retryable=connection_errors(),
                         log=logging.getLogger("tests.retry"),
                         on_count=lambda n, v: counted.append((n, v)))
    thread.start()
    t0 = time.monotonic()
    try:
        assert policy.call(lambda: client.execute_command("SET", "k", "after")) is True
    finally:
        thread.join(30)
        client.close()
    waited = time.monotonic() - t0
    assert 0.7 <= waited < 20
    assert policy.outages == 1 and policy.retries >= 3
    assert 0.7 <= policy.longest_outage <= waited
    assert [n for n, _ in counted].count("outages") == 1
    assert redis_server.client().get("k") == b"after"  # persistence off: only the retry


def test_real_redis_down_past_the_deadline(redis_server: RedisServer) -> None:
    client = new_client(redis_server.url, 0.5, {}, cluster=False)
    redis_server.kill()
    policy = RetryPolicy("u", 0.5, retryable=connection_errors(),
                         log=logging.getLogger("tests.retry"))
    t0 = time.monotonic()
    with pytest.raises(RedisRetryExhausted, match="Redis at u unusable"):
        policy.call(lambda: client.ping())
    assert 0.45 <= time.monotonic() - t0 < 5
    assert policy.retries >= 3
    client.close()


def test_both_components_read_the_connection_settings_in_one_place() -> None:
    import inspect

    from scrapy.settings import Settings

    from iri_scrapy.frontier.redis_client import client_kwargs_from_settings
    from iri_scrapy.frontier.redis_dupefilter import RedisIRIDupeFilter
    from iri_scrapy.frontier.redis_scheduler import RedisIRIScheduler

    params = {"username": "u"}
    kwargs = client_kwargs_from_settings(Settings({
        "REDIS_URL": "redis://example:6390/2", "IRI_REDIS_RETRY_SECONDS": 7,
        "IRI_REDIS_SOCKET_TIMEOUT": 3, "IRI_REDIS_PARAMS": params, "IRI_REDIS_CLUSTER": True}))
    assert kwargs == {"redis_url": "redis://example:6390/2", "retry_seconds": 7,
                      "socket_timeout": 3, "redis_params": params, "cluster": True}
    assert kwargs["redis_params"] is not params  # a copy
    for component in (RedisIRIDupeFilter, RedisIRIScheduler):
        assert set(kwargs) <= set(inspect.signature(component.__init__).parameters)
    df = RedisIRIDupeFilter(**kwargs)  # builds without connecting
    assert (df.redis_url, df.retry_seconds, df.socket_timeout, df.cluster) == (
        "redis://example:6390/2", 7.0, 3.0, True)
