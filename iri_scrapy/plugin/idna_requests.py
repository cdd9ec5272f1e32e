"""IDNA 2008 ``Request()`` URLs for the add-on's crawler, and for no other crawler.

``Request()`` runs its URL through ``w3lib.url.safe_url_string``, whose IDNA 2003
maps ``straße.test`` to ``strasse.test`` (another domain, UTS 46 section 4:
non-transitional processing keeps the ß, IDNA 2008 / RFC 5891) and drops a bare
``?`` (another resource, RFC 3987 section 5.3.3).  The add-on used to rebind
that name process-wide, so every crawler of the process, with the add-on or not,
got IDNA 2008 hosts while an add-on crawler ran.  Now every ``Request`` keeps the
URL Scrapy gives it; :mod:`~iri_scrapy.plugin.compat` only remembers the
spelling of the few URLs whose IDNA 2008 form may differ, and these components,
installed by the add-on in its crawler only, give such a request its IDNA 2008
URL (:func:`~iri_scrapy.plugin.compat.apply_idna2008`, in place) before anything
of that crawler reads it:

* :class:`~iri_scrapy.IRISpiderMiddleware` (spider middleware 950, spider side of
  every built-in one): requests from ``start()`` and callbacks (a spider
  middleware of its own would cost every link one more generator layer);
* :class:`IDNA2008DownloaderMiddleware` (downloader middleware, before offsite
  filtering): requests made by other components (media pipelines, ``scrapy
  shell``, other middlewares); those that go through the scheduler are converted
  first by :class:`~iri_scrapy.IRIRequestFingerprinter`, before it keys them;
* :class:`IDNA2008ResponseMiddleware` (downloader middleware, before
  ``MetaRefreshMiddleware``): a ``<base href>`` or meta refresh URL with a
  non-ASCII host is read with IDNA 2008 hosts into Scrapy's per-response caches.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.http import HtmlResponse

from iri_scrapy.plugin import compat  # checks the installed Scrapy first

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.settings import BaseSettings
    from typing_extensions import Self

__all__ = ["IDNA2008DownloaderMiddleware", "IDNA2008ResponseMiddleware"]


def convert(request: Request) -> None:
    """Give *request* its IDNA 2008 URL (in place).

    ``meta["dont_normalize_iri"]`` does not turn it off: it is what ``Request()``
    gives in this crawler (``IRI_IDNA2008_REQUESTS``), not a canonicalization.
    """
    compat.apply_idna2008(request)


_convert = convert


class IDNA2008DownloaderMiddleware:
    """Requests that did not come from the spider get their IDNA 2008 URL before download.

    (Media pipelines, ``scrapy shell``, other components.)  Those that go through
    the scheduler get it earlier, from :class:`~iri_scrapy.IRIRequestFingerprinter`
    before it keys them, in this crawler only (:func:`enabled`); a
    ``request_scheduled`` handler would cost every request a signal dispatch
    (about 16 microseconds).
    """

    def process_request(self, request: Request) -> None:
        _convert(request)


def enabled(settings: BaseSettings) -> bool:
    """True if *settings* (a crawler's) list :class:`IDNA2008DownloaderMiddleware` enabled."""
    for key, value in settings.getwithbase("DOWNLOADER_MIDDLEWARES").items():
        if value is not None and (key is IDNA2008DownloaderMiddleware or key == _PATH):
            return True
    return False


_PATH = f"{__name__}.IDNA2008DownloaderMiddleware"


class IDNA2008ResponseMiddleware:
    """``<base href>`` and meta refresh URLs are read with IDNA 2008 hosts (see module doc)."""

    def __init__(self, ignore_tags: list[str]) -> None:
        self.ignore_tags = ignore_tags

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler.settings.getlist("METAREFRESH_IGNORE_TAGS"))

    def process_response(self, request: Request, response: Response) -> Response:
        if isinstance(response, HtmlResponse):
            compat.prime_response_caches(response, self.ignore_tags)
        return response
