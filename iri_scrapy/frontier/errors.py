"""The frontier's error root: a queue back-end that cannot be used.

Every error a frontier scheduler's back-end raises for a store it cannot use (the
``JOBDIR`` locked or its SQLite file unreadable, Redis unreachable past its
deadline or its keys lost) derives from :class:`FrontierError`, itself an
:class:`~iri_scrapy.IRIScrapyError`, so that
:class:`~iri_scrapy.frontier.scheduler.FrontierScheduler` catches one class where
a record could not be pushed (the request is then kept in memory, the crawl
closing loudly), whatever the back-end.
"""

from __future__ import annotations

from iri_scrapy.core.errors import IRIScrapyError


class FrontierError(IRIScrapyError, RuntimeError):
    """A frontier's store (SQLite ``JOBDIR`` or Redis) cannot be used."""
