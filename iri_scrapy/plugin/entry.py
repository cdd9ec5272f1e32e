"""Entry: a request is put in fetch form once, as it enters the scheduler.

The order of one request is entry, stamp, fingerprint, dupefilter, and nothing
goes round again.  The spider's requests are in fetch form already (the spider
middleware and ``response.follow()`` made it); a request another component made
-- a redirect (``RedirectMiddleware``, ``MetaRefreshMiddleware``), a retry, a
request a downloader middleware returns, one an extension gives
``engine.crawl()``, or any request when the spider middleware is disabled --
enters here unstamped and is rewritten to its fetch form (RFC 3987 section
5.3.3 and 3.1: the same resource, spelled once) by :func:`enter` before the
dupefilter sees it.  A redirect to another spelling of its source's resource is
the exception: it is sent as the server wrote it (RFC 3987 section 5.3.4,
:meth:`~iri_scrapy.plugin.middleware.Canonicalizer.server_spelling`).

Nothing downstream re-issues a request: a request returned from a downloader
middleware's ``process_request`` goes back through the scheduler, where the
dupefilter would meet it twice.  :class:`IRIScheduler` (Scrapy's scheduler with
this entry) is what the add-on sets as ``SCHEDULER`` when the setting is Scrapy's
default; the frontier schedulers call :func:`enter` first thing in their
``enqueue_request``.  Another scheduler gets the entry from
:class:`IRIEntryMixin` (``class S(IRIEntryMixin, TheirScheduler)``); without it
the add-on warns once: requests made by other components then go on the wire as
given (their dedup keys are canonical all the same).  Requests that never enter
a scheduler (``engine.download_async()``: media pipelines, robots.txt) are sent
as given.  Counted in ``iri/entry/normalized``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy.core.scheduler import Scheduler

from iri_scrapy.plugin import compat  # checks the installed Scrapy first
from iri_scrapy.plugin.idna_requests import convert as idna_convert
from iri_scrapy.plugin.middleware import Canonicalizer

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

__all__ = ["IRIEntryMixin", "IRIScheduler"]

logger = logging.getLogger(__name__)

#: Requests rewritten to their fetch form as they entered the scheduler.
STAT_ENTRY_NORMALIZED = "iri/entry/normalized"


def enter(request: Request, canon: Canonicalizer) -> Request:
    """*request* as it enters the scheduler: itself, or a copy in fetch form.

    In a crawler with IDNA 2008 ``Request()`` URLs its host gets that form first
    (in place).  A redirect to another spelling of its source's resource, a
    request already in fetch form, one with ``dont_normalize_iri`` or with no
    canonical form are returned as they are.
    """
    if canon.idna2008 and compat.pending_idna2008():
        idna_convert(request)  # before anything reads its URL
    if canon.server_spelling(request):
        return request
    new = canon.canonical(request)
    if new is None:
        return request
    canon.inc(STAT_ENTRY_NORMALIZED)
    logger.debug("IRI: %(old)s enters the scheduler as %(new)s", {"old": request, "new": new})
    return new


class IRIEntryMixin:
    """A scheduler whose ``enqueue_request`` takes requests through :func:`enter` first.

    Put it before the scheduler class: ``class S(IRIEntryMixin, TheirScheduler)``;
    built with the scheduler's own ``from_crawler``.
    """

    _iri_canon: Canonicalizer | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Any:
        scheduler = super().from_crawler(crawler)  # type: ignore[misc]
        scheduler._iri_canon = Canonicalizer.for_crawler(crawler)
        return scheduler

    def enqueue_request(self, request: Request) -> bool:
        canon = self._iri_canon
        if canon is None:  # built without from_crawler
            canon = self._iri_canon = Canonicalizer.for_crawler(getattr(self, "crawler", None))
        return super().enqueue_request(enter(request, canon))  # type: ignore[misc,no-any-return]


class IRIScheduler(IRIEntryMixin, Scheduler):
    """Scrapy's scheduler, with the entry of this module (the add-on's default ``SCHEDULER``)."""
