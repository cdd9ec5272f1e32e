"""Loud stops: one clear ERROR line, a ``finish_reason``, exit status 1.

Two ways a crawl stops loudly, each written once here: :func:`refuse_start`
(before any request) and :func:`stop_crawl` (mid-crawl: a store that cannot be
written or read, Redis gone past its deadline, the frontier lost).  Both make
``scrapy crawl`` exit with status 1, so a supervisor reading ``$?`` never sees
success when pages may be missing.

When the plugin cannot start safely (a ``JOBDIR`` written with other ``IRI_*``
options, Redis unreachable, the ``redis`` package missing) the crawl must end
before any request, saying what is wrong and what to do.  Raised while Scrapy
builds the scheduler, the error is buried: Scrapy 2.19 logs an asyncio "Task
exception was never retrieved" block and a second traceback,
``RuntimeError: Engine slot not assigned``.

Scrapy 2.18+ lets a component that fails to start ask for the spider to be
closed: :class:`~scrapy.exceptions.CloseSpider` raised from a ``spider_opened``
handler closes the spider cleanly, before any request, with that reason as
``finish_reason`` (raised from the scheduler's ``open()`` it would skip the
scraper's start and log a "Scraper close failure").  :func:`refuse_start` logs
the one line and installs such a handler.  The crawl then has not
bootstrapped: once the spider is closed (``spider_closed``), ``crawler.spider``
is unset, which is how a
``CrawlerProcess`` tells a crawl that failed to start (its ``bootstrap_failed``,
so ``scrapy crawl`` exits with 1).

On Scrapy 2.17 (which does not honour ``CloseSpider`` there) the original error
is raised instead: the crawl still does not start and exits with 1, with
Scrapy's traceback.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import scrapy
from scrapy import signals
from scrapy.exceptions import CloseSpider

from iri_scrapy.plugin import compat  # noqa: F401 - checks the installed Scrapy first

if TYPE_CHECKING:
    from scrapy.crawler import Crawler


logger = logging.getLogger(__name__)

#: ``finish_reason`` values of the refusals.
REASON_JOBDIR_MISMATCH = "iri_jobdir_mismatch"
#: An ``IRI_*`` setting that cannot be used (``IRI_LEVEL = "bogus"``,
#: ``IRI_PROTOCOL_MIN_EVIDENCE = 0``).
REASON_BAD_SETTING = "iri_bad_setting"
REASON_REDIS_UNAVAILABLE = "iri_redis_unavailable"
REASON_REDIS_NOT_INSTALLED = "iri_redis_not_installed"
#: Another crawl holds the ``JOBDIR``'s lock (``iri_scrapy.frontier.jobdir``).
REASON_JOBDIR_LOCKED = "iri_jobdir_locked"
#: Not a start-up refusal: the frontier store could not be written for
#: ``IRI_FRONTIER_WRITE_RETRY`` seconds (disk full...), the crawl closed.
REASON_FRONTIER_WRITE_FAILED = "iri_frontier_write_failed"


def _version(text: str) -> tuple[int, ...]:
    parts = []
    for part in text.split(".")[:2]:
        digits = "".join(c for c in part if c.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


#: Scrapy 2.18+ closes the spider with the reason of a ``CloseSpider`` raised
#: from the scheduler's ``open()`` (2.17 lets it escape as an error).
CLOSESPIDER_AT_OPEN = _version(scrapy.__version__) >= (2, 18)


def refuse_start(
    crawler: Crawler | None, reason: str, message: str, error: Exception, *, log: bool = True
) -> None:
    """Refuse to start the crawl; call from a dupefilter's ``open()``.

    Logs *message* as one ERROR line (say what is wrong and what to do) and
    has the spider closed with *reason* as soon as it is open, before any
    request (Scrapy 2.18+, see the module docstring).  On an older Scrapy, or
    without a *crawler*, logs the line and raises *error*.  ``log=False``: the caller has
    logged it.
    """
    if log:
        logger.error("%s", message)
    if crawler is None or not CLOSESPIDER_AT_OPEN:
        raise error  # after the line that says what to do (Scrapy adds its traceback)

    def close_at_once(**_: Any) -> None:
        raise CloseSpider(reason)

    def failed_to_start(**_: Any) -> None:
        crawler.spider = None  # the crawl did not bootstrap: non-zero exit code

    # weak=False: the signal manager keeps these closures alive
    crawler.signals.connect(close_at_once, signal=signals.spider_opened, weak=False)
    crawler.signals.connect(failed_to_start, signal=signals.spider_closed, weak=False)


def exit_status_one_on(crawler: Crawler, reason: str) -> None:
    """Make ``scrapy crawl`` exit with status 1 when the spider closes with *reason*.

    As :func:`refuse_start` does: a crawler whose ``spider`` is unset after the
    crawl in a ``CrawlerProcess`` counts as failed (``bootstrap_failed``, exit
    status 1).
    """

    def closed(spider: Any = None, reason: str = "", **_: Any) -> None:
        if reason == wanted:
            crawler.spider = None

    wanted = reason
    # weak=False: the signal manager keeps the closure alive
    crawler.signals.connect(closed, signal=signals.spider_closed, weak=False)


def stop_crawl(crawler: Crawler | None, reason: str, component: str) -> Any:
    """Close the running crawl with *reason* and exit status 1 (the caller has logged
    its one ERROR line).  Returns the closing Deferred, or None when no crawl runs
    (before the engine exists: nothing was fetched, nothing to close)."""
    if crawler is None:
        return None
    exit_status_one_on(crawler, reason)
    engine = compat.running_engine(crawler)
    if engine is None:
        return None
    from scrapy.utils.defer import deferred_from_coro

    d = deferred_from_coro(engine.close_spider_async(reason=reason))
    d.addErrback(lambda f: logger.error("%s: closing the spider failed: %s", component, f.value))
    return d
