"""The in-flight ledger shared by both frontier schedulers (iri_scrapy.frontier.ledger).

Vectors: a sequence of events on a fresh ledger -> the keys settled (one list a
call), the keys answered on release, and the counters after.  Events:
``out k`` (hand out a request under k), ``resp k`` (its response arrived),
``ans k`` (answered), ``fail k`` (download failed, no errback), ``fail+eb k``
(failed, with an errback), ``drop k`` (Scrapy let go of the request object),
``reap``, ``sweep``, ``idle`` (drain), ``forget``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from iri_scrapy.frontier.ledger import Ledger
from iri_scrapy.plugin.context import CrawlContext


class _Request:
    """A stand-in for a Scrapy request: only its lifetime matters."""


@dataclass
class Run:
    """A ledger with recording callbacks, a clock of its own and a fake collector."""

    settled: list[list[int]] = field(default_factory=list)
    reaped: list[int] = field(default_factory=list)
    collected: list[tuple[Any, ...]] = field(default_factory=list)
    now: float = 100.0
    held: dict[int, _Request] = field(default_factory=dict)
    ledger: Ledger[int] = field(init=False)

    def __post_init__(self) -> None:
        self.ledger = Ledger(self.settled.append, on_reaped=self.reaped.append,
                             clock=lambda: self.now,
                             collect=lambda *args: self.collected.append(args))

    def play(self, events: str) -> Run:
        for event in filter(None, (e.strip() for e in events.split(","))):
            verb, _, arg = event.partition(" ")
            key = int(arg) if arg else None
            if verb == "out":
                assert key is not None
                self.held[key] = _Request()
                self.ledger.hand_out(key, self.held[key])
            elif verb == "resp":
                self.ledger.responded(key)
            elif verb == "ans":
                self.ledger.answered(key)
            elif verb == "fail":
                self.ledger.failed(key, errback=False)
            elif verb == "fail+eb":
                self.ledger.failed(key, errback=True)
            elif verb == "drop":
                assert key is not None
                del self.held[key]  # CPython: the weak reference's callback runs now
            elif verb == "reap":
                self.ledger.reap()
            elif verb == "sweep":
                self.ledger.sweep()
            elif verb == "idle":
                self.ledger.drain()
            elif verb == "forget":
                self.ledger.forget()
            else:
                raise AssertionError(f"unknown event {event!r}")
        return self


# events, settled, reaped, out after, failing after, inflight_max
VECTORS: list[tuple[str, list[list[int]], list[int], list[int], int, int]] = [
    ("", [], [], [], 0, 0),
    ("out 1, out 2", [], [], [1, 2], 0, 2),
    ("out 1, out 2, ans 1", [[1]], [], [2], 0, 2),
    ("out 1, ans 1, ans 1", [[1]], [], [], 0, 1),  # answered once
    ("out 1, ans 2, ans", [], [], [1], 0, 1),  # not out, or no key: ignored
    ("out 1, ans 1, out 2, out 3", [[1]], [], [2, 3], 0, 2),
    ("out 1, resp 1, ans 1", [[1]], [], [], 0, 1),
    # a download failure without errback is an answer
    ("out 1, fail 1", [[1]], [], [], 0, 1),
    ("out 1, resp 1, fail 1", [[1]], [], [], 0, 1),
    ("fail 1, fail+eb 2, fail", [], [], [], 0, 0),
    # with an errback: out until released or idle, counted once
    ("out 1, fail+eb 1", [], [], [1], 1, 1),
    ("out 1, fail+eb 1, fail+eb 1", [], [], [1], 1, 1),
    ("out 1, fail+eb 1, fail 1", [[1]], [], [], 0, 1),  # no errback this time: answered
    ("out 1, fail+eb 1, ans 1", [[1]], [], [], 0, 1),
    ("out 1, fail+eb 1, idle", [[1]], [], [], 0, 1),
    ("out 1, fail+eb 1, drop 1", [], [], [1], 1, 1),  # noted, not yet reaped
    ("out 1, fail+eb 1, drop 1, reap", [[1]], [1], [], 0, 1),
    ("out 1, out 2, fail+eb 1, fail+eb 2, drop 2, sweep", [[2]], [2], [1], 1, 2),
    # released: answered at the next reap, in reverse order of release
    ("out 1, drop 1", [], [], [1], 0, 1),
    ("out 1, drop 1, reap", [[1]], [1], [], 0, 1),
    ("out 1, drop 1, reap, reap", [[1]], [1], [], 0, 1),
    ("out 1, out 2, out 3, drop 1, drop 3, reap", [[3], [1]], [3, 1], [2], 0, 3),
    ("out 1, ans 1, drop 1, reap", [[1]], [], [], 0, 1),  # answered first: not reaped
    ("out 1, drop 1, ans 1, reap", [[1]], [], [], 0, 1),
    # idle: every request out answered, in one call; releases noted before are void
    ("idle", [], [], [], 0, 0),
    ("out 1, out 2, out 3, ans 2, idle", [[2], [1, 3]], [], [], 0, 3),
    ("out 1, out 2, drop 1, idle, reap", [[1, 2]], [], [], 0, 2),
    ("out 1, idle, out 2, idle", [[1], [2]], [], [], 0, 1),
    # forget (closing): nothing settled
    ("out 1, out 2, fail+eb 2, drop 1, forget, reap, idle", [], [], [], 0, 2),
]


@pytest.mark.parametrize(("events", "settled", "reaped", "out", "failing", "most"), VECTORS,
                         ids=[v[0] or "nothing" for v in VECTORS])
def test_vectors(events: str, settled: list[list[int]], reaped: list[int], out: list[int],
                 failing: int, most: int) -> None:
    run = Run().play(events)
    ledger = run.ledger
    assert run.settled == settled
    assert run.reaped == reaped
    assert ledger.keys() == out
    assert len(ledger) == len(out)
    assert all(key in ledger for key in out)
    assert ledger.failing == failing
    assert ledger.outstanding == len(out) - failing
    assert ledger.inflight_max == most


# events -> is key 1 still downloading (a request carrying it is a replacement)?
DOWNLOADING = [
    ("", False),
    ("out 1", True),
    ("out 1, resp 1", False),
    ("out 1, fail+eb 1", False),
    ("out 1, fail 1", False),
    ("out 1, ans 1", False),
    ("out 1, drop 1", True),  # released but not reaped yet: still out
    ("out 1, drop 1, reap", False),
    ("out 1, idle", False),
    ("out 2, resp 2", False),
    ("resp 1", False),
]


@pytest.mark.parametrize(("events", "downloading"), DOWNLOADING,
                         ids=[v[0] or "nothing" for v in DOWNLOADING])
def test_downloading(events: str, downloading: bool) -> None:
    ledger = Run().play(events).ledger
    assert ledger.downloading(1) is downloading
    assert ledger.downloading(None) is False


def test_answered_says_whether_the_key_was_out() -> None:
    run = Run().play("out 1")
    assert run.ledger.answered(1) is True
    assert run.ledger.answered(1) is False
    assert run.ledger.answered(None) is False


def test_reap_and_drain_return_what_they_answered() -> None:
    run = Run().play("out 1, out 2, out 3, drop 2")
    assert run.ledger.reap() == 1
    assert run.ledger.reap() == 0
    assert run.ledger.drain() == [1, 3]
    assert run.ledger.drain() == []


# --------------------------------------------------------------------- the collector


def test_sweep_collects_the_young_generations_only_while_requests_failed() -> None:
    run = Run().play("out 1, sweep")
    assert run.collected == []
    run.play("fail+eb 1, sweep")
    assert run.collected == [(1,)]
    run.play("drop 1, sweep")  # reaped by this sweep, after its collection
    assert run.collected == [(1,), (1,)] and run.settled == [[1]]
    run.play("sweep")
    assert run.collected == [(1,), (1,)]


# --------------------------------------------------------------------- the in-flight cap


def test_no_cap() -> None:
    run = Run().play("out 1, out 2, out 3")
    assert run.ledger.at_cap(0) is False


def test_at_cap_counts_outstanding_requests_not_failing_ones() -> None:
    run = Run().play("out 1, out 2")
    assert run.ledger.at_cap(3) is False
    assert run.ledger.at_cap(2) is True
    run.play("fail+eb 2")
    assert run.ledger.at_cap(2) is False
    assert run.ledger.at_cap(1) is True
    run.play("ans 1")
    assert run.ledger.at_cap(1) is False


def test_at_cap_reaps_released_requests() -> None:
    run = Run().play("out 1, out 2, drop 1")
    assert run.ledger.at_cap(2) is False
    assert run.settled == [[1]] and run.reaped == [1]
    assert run.collected == []  # an answer was recent: no full collection


def test_at_cap_collects_cycles_after_a_second_without_progress_at_most_once_a_second() -> None:
    run = Run().play("out 1, out 2")
    assert run.ledger.at_cap(2) and run.collected == []
    run.now += 1.5
    assert run.ledger.at_cap(2) and run.collected == [()]
    run.now += 0.5
    assert run.ledger.at_cap(2) and run.collected == [()]  # last collection < 1 s ago
    run.now += 0.6
    assert run.ledger.at_cap(2) and run.collected == [(), ()]
    # below the cap nothing is collected, however long since progress
    run.now += 10
    assert not run.ledger.at_cap(3) and run.collected == [(), ()]


def test_stalled_since_the_last_answer() -> None:
    run = Run().play("out 1, out 2")
    assert not run.ledger.stalled(5.0)
    run.now += 5.0
    assert not run.ledger.stalled(5.0)
    run.now += 0.1
    assert run.ledger.stalled(5.0)
    run.play("ans 1")
    assert not run.ledger.stalled(5.0)
    run.now += 6
    run.play("fail+eb 2")  # a failure is no answer
    assert run.ledger.stalled(5.0)
    run.play("idle")
    assert not run.ledger.stalled(5.0)
    run.now += 6
    run.play("idle")  # nothing out: no progress either
    assert run.ledger.stalled(5.0)


# --------------------------------------------------------------------- the registry


class _Scheduler:
    def answered(self, request: Any) -> None:
        pass

    def failed(self, request: Any) -> None:
        pass


def test_the_context_says_who_answers() -> None:
    context = CrawlContext()
    mine, theirs = _Scheduler(), _Scheduler()
    assert context.frontier is None
    context.register_frontier(mine)
    assert context.frontier is mine
    assert CrawlContext().frontier is None  # another crawl's
    context.unregister_frontier(theirs)  # not the one registered: no-op
    assert context.frontier is mine
    context.unregister_frontier(mine)
    assert context.frontier is None
    context.unregister_frontier(mine)  # twice: no-op
