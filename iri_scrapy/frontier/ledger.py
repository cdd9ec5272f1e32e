"""The in-flight ledger: which requests a frontier scheduler handed out are not yet answered.

Both crash-tolerant schedulers (the SQLite ``JOBDIR`` one in
:mod:`~iri_scrapy.frontier.jobdir`, the Redis fleet queue in
:mod:`~iri_scrapy.frontier.redis_scheduler`) keep a request's durable record (a
pending row, a lease) until the request is *answered*; a :class:`Ledger` follows
the requests out, by the scheduler's key (a row id, a lease), and says when each
is answered.  What the scheduler then does with the key (delete the row, ack the
lease) is its *settle* callback; the ledger itself knows no Scrapy, SQLite or Redis.

* **answered**: nothing more can come of the request, so its record may go.  The
  middlewares report it (the callback's output consumed to the end, so every
  request in it is already stored, and its items out of the item pipelines; a
  download failure with no errback), and so
  does the scheduler (a replacement request reached it while the original was
  still downloading).
* **failed**: the download failed for good and an errback runs, whose output no
  middleware sees.  The request stays out, not counted against the in-flight
  cap, until it is released or the spider goes idle.
* **released**: Scrapy dropped the request object.  The engine holds every
  request it took from the scheduler until it has finished with it (the callback's
  or errback's output processed, or the replacement scheduled), so a request that
  became garbage is answered, never early.  A weak reference's callback only
  notes the key; it is answered at the next :meth:`Ledger.reap`, never from
  inside the garbage collector.  A failure's traceback is a reference cycle that
  keeps its request alive: :meth:`Ledger.sweep` collects the young generations
  while failed requests are out.
* **idle**: the spider is idle (nothing in the downloader or the scraper), so
  every request still out was answered (:meth:`Ledger.drain`).

The middlewares find the scheduler answering for their crawler in the crawl's
context (:attr:`iri_scrapy.plugin.context.CrawlContext.frontier`, which the
add-on builds); a scheduler puts itself there while it is open.
"""

from __future__ import annotations

import gc
import time
import weakref
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

if TYPE_CHECKING:
    from scrapy import Request


K = TypeVar("K", bound=Hashable)

# states of a request out
_DOWNLOADING = 0
_RESPONDED = 1
_FAILED = 2

#: Seconds without an answer (and between two collections) before :meth:`Ledger.at_cap`
#: collects reference cycles.
LEAK_SECONDS = 1.0


def _on_release(released: list[Any], key: Any) -> Callable[[Any], None]:
    """A weak reference callback that only records *key* (no I/O inside the GC)."""

    def callback(_: Any) -> None:
        released.append(key)

    return callback


class Ledger(Generic[K]):
    """The requests handed out and not answered, by key (module docstring).

    *settle* is called with the keys answered, once per key: a list of one for
    each single answer, the whole list at :meth:`drain`.  *on_reaped* is called
    with each key answered because Scrapy released its request (after *settle*).
    *clock* and *collect* are :func:`time.monotonic` and :func:`gc.collect`
    (replaceable for tests).
    """

    def __init__(
        self,
        settle: Callable[[list[K]], None],
        *,
        on_reaped: Callable[[K], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        collect: Callable[..., Any] = gc.collect,
    ) -> None:
        self._settle = settle
        self._on_reaped = on_reaped
        self._clock = clock
        self._collect = collect
        #: key -> state, for requests handed out and not answered.
        self._inflight: dict[K, int] = {}
        #: key -> weak reference to the request handed out (see reap).
        self._refs: dict[K, weakref.ref[Any]] = {}
        #: keys whose request object was released (appended by weakref callbacks).
        self._released: list[K] = []
        self._failed = 0
        self._responded = 0
        self._last_progress = clock()
        self._last_gc = 0.0
        #: The most requests out at once so far.
        self.inflight_max = 0

    # --- views -----------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._inflight)

    def __contains__(self, key: object) -> bool:
        return key in self._inflight

    def keys(self) -> list[K]:
        """The keys out, in the order they were handed out."""
        return list(self._inflight)

    @property
    def failing(self) -> int:
        """Requests out whose download failed and whose errback may be running."""
        return self._failed

    @property
    def outstanding(self) -> int:
        """Requests out that count against the in-flight cap (not the failing ones)."""
        return len(self._inflight) - self._failed

    @property
    def in_downloader(self) -> int:
        """Requests out whose response or failure has not been seen yet."""
        return len(self._inflight) - self._failed - self._responded

    def downloading(self, key: K | None) -> bool:
        """True if *key* is out and neither its response nor its failure has been seen
        (a request carrying it is then a replacement: a redirect, a retry)."""
        return key is not None and self._inflight.get(key) == _DOWNLOADING

    # --- events ----------------------------------------------------------------

    def hand_out(self, key: K, request: object) -> None:
        """*request* goes out under *key*; watched until answered or released."""
        self._inflight[key] = _DOWNLOADING
        self._refs[key] = weakref.ref(request, _on_release(self._released, key))
        if len(self._inflight) > self.inflight_max:
            self.inflight_max = len(self._inflight)

    def responded(self, key: K | None) -> None:
        """The response of *key* reached the engine (it is no longer downloading)."""
        if key is not None and self._inflight.get(key) == _DOWNLOADING:
            self._inflight[key] = _RESPONDED
            self._responded += 1

    def answered(self, key: K | None) -> bool:
        """*key* is answered: settled now.  False if it was not out (None, or answered)."""
        if key is None:
            return False
        state = self._inflight.pop(key, None)
        if state is None:
            return False
        if state == _FAILED:
            self._failed -= 1
        elif state == _RESPONDED:
            self._responded -= 1
        self._refs.pop(key, None)
        self._last_progress = self._clock()
        self._settle([key])
        return True

    def failed(self, key: K | None, *, errback: bool) -> None:
        """The download of *key* failed for good: answered now without an *errback*;
        with one, whose output is not observable, answered once released (or idle)."""
        if key is None or key not in self._inflight:
            return
        if not errback:
            self.answered(key)
        elif self._inflight[key] != _FAILED:
            if self._inflight[key] == _RESPONDED:
                self._responded -= 1
            self._inflight[key] = _FAILED
            self._failed += 1

    def reap(self) -> int:
        """Answer the requests Scrapy has released without an answer being seen;
        how many.  Cheap when none was released."""
        released = self._released
        count = 0
        while released:
            key = released.pop()
            if self.answered(key):
                count += 1
                if self._on_reaped is not None:
                    self._on_reaped(key)
        return count

    def drain(self) -> list[K]:
        """The spider is idle: every request out is answered, settled in one call; the keys."""
        self._released.clear()
        keys = list(self._inflight)
        self._inflight.clear()
        self._refs.clear()
        self._failed = 0
        self._responded = 0
        if keys:
            self._last_progress = self._clock()
            self._settle(keys)
        return keys

    def forget(self) -> None:
        """Drop every request out without settling it (the scheduler is closing)."""
        self._released.clear()
        self._inflight.clear()
        self._refs.clear()
        self._failed = 0
        self._responded = 0

    def sweep(self) -> None:
        """Periodically: collect the young generations while failed requests are out
        (so that those whose errback has run are released), then :meth:`reap`."""
        if self._failed:
            self._collect(1)
        self.reap()

    # --- the in-flight cap -------------------------------------------------------

    def at_cap(self, limit: int, *, downloading: bool = False) -> bool:
        """True if *limit* (``0``: no cap) requests are outstanding (*downloading*:
        only those whose response has not been seen, as Scrapy's downloader counts
        them), even after answering the released ones (and collecting reference
        cycles, when nothing was answered for a second: a failure's traceback holds
        its request)."""
        count = (lambda: self.in_downloader) if downloading else (lambda: self.outstanding)
        if not limit or count() < limit:
            return False
        now = self._clock()
        if now - self._last_progress > LEAK_SECONDS and now - self._last_gc > LEAK_SECONDS:
            self._last_gc = now
            self._collect()
        self.reap()
        return count() >= limit

    def stalled(self, seconds: float) -> bool:
        """True if no request was answered for more than *seconds*."""
        return self._clock() - self._last_progress > seconds


# --------------------------------------------------------------------------- who answers


class Answering(Protocol):
    """What the frontier middlewares report to: a frontier scheduler."""

    def answered(self, request: Request) -> None: ...

    def failed(self, request: Request) -> None: ...
