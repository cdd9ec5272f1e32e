"""Redirects seen before Scrapy follows them: their ``Location``, canonical.

:class:`IRILocationMiddleware` (downloader, 650) sees a 3xx before Scrapy's
``RedirectMiddleware`` (600): it rewrites ``Location`` to its canonical URI (as a
browser reads it, IDNA 2008 rather than w3lib's IDNA 2003), and follows a
redirect to another spelling of the requested resource as the server wrote it,
once (a loop of such redirects, or of meta refreshes, is stopped).  At every
level; at ``IRI_LEVEL = "protocol"`` the add-on uses its subclass
:class:`iri_scrapy.protocol.middleware.IRIProtocolMiddleware`, which also learns
from what servers answer (RFC 3987 section 5.3.4) through the hooks
:meth:`~IRILocationMiddleware._redirected`, :meth:`~IRILocationMiddleware._served`
and :meth:`~IRILocationMiddleware._done`.

Design: docs/plugin.md; stats: docs/stats.md.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy.http import TextResponse

from iri_scrapy.core.errors import IRIError
from iri_scrapy.core.ladder import Level, normalize, retrieval_key
from iri_scrapy.core.query import strip_fragment
from iri_scrapy.core.resolve import resolve
from iri_scrapy.plugin import compat  # checks the installed Scrapy first
from iri_scrapy.plugin.config import META_DONT_NORMALIZE, META_SERVER_SPELLING
from iri_scrapy.plugin.context import CrawlContext
from iri_scrapy.plugin.links import browser_href, request_refusal, skip_unusable_redirect

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from typing_extensions import Self


logger = logging.getLogger(__name__)

#: The statuses Scrapy's RedirectMiddleware follows.
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})


def decode_location(raw: bytes) -> str:
    """A ``Location`` (or ``Link``) header's text: UTF-8, else Latin-1."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


class IRILocationMiddleware:
    """Downloader middleware (priority 650): canonical redirect targets."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        context = CrawlContext.of(crawler)
        self.config = context.config
        self.warned = context.warned
        self.stats = crawler.stats
        self.meta_refresh = crawler.settings.getbool("METAREFRESH_ENABLED", True)
        self.meta_refresh_ignore = crawler.settings.getlist("METAREFRESH_IGNORE_TAGS")

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        """Build for *crawler*."""
        return cls(crawler)

    def _inc(self, key: str) -> None:
        if self.stats is not None:
            self.stats.inc_value(key)

    def _will_redirect(self, request: Request, response: Response) -> bool:
        """Whether RedirectMiddleware will follow this response (its own conditions)."""
        meta = request.meta
        if meta.get("dont_redirect") or meta.get("handle_httpstatus_all"):
            return False
        status = response.status
        if status in meta.get("handle_httpstatus_list", ()):
            return False
        spider = self.crawler.spider
        return status not in getattr(spider, "handle_httpstatus_list", ())

    def process_response(self, request: Request, response: Response) -> Response:
        """Rewrite a redirect's Location to its canonical URI (and learn, see the subclass)."""
        try:
            return self._response(request, response)
        finally:
            self._done(request)

    def process_exception(self, request: Request, exception: Exception) -> None:
        """A fetch that failed is done too (see :meth:`_done`)."""
        self._done(request)

    def _done(self, request: Request) -> None:
        """Hook: the fetch of *request* is over (answered or failed)."""

    def _served(self, request: Request, response: Response) -> None:
        """Hook: *response* is a 2xx answer to *request*."""

    def _redirected(self, request: Request, response: Response, target: str) -> None:
        """Hook: *response* redirects *request* to the canonical *target*."""

    def _response(self, request: Request, response: Response) -> Response:
        status = response.status
        if status in REDIRECT_STATUSES and b"Location" in response.headers:
            self._redirect(request, response)
        else:
            if META_SERVER_SPELLING in request.meta and 200 <= status < 300:
                self._refresh_loop(request, response)
            if 200 <= status < 300:
                self._served(request, response)
        # a target Request() refuses
        skip_unusable_redirect(request, response, self.stats, self.warned)
        return response

    def _same_resource(self, request: Request, target: str) -> bool:
        """True if the canonical *target* is the resource *request* asked for."""
        if request.meta.get(META_DONT_NORMALIZE):
            return False
        try:
            return strip_fragment(target) == retrieval_key(request.url)
        except IRIError:
            return False

    def _server_spelling(
        self, request: Request, response: Response, location: str, written: str
    ) -> None:
        """A redirect to another spelling of the requested resource (see the module doc)."""
        if request.meta.get(META_SERVER_SPELLING) == retrieval_key(request.url):
            self._stop_loop(request)
            return
        if not location.isascii():  # as written, but never an IDNA 2003 host
            response.headers[b"Location"] = compat.idna2008_safe_url_string(location).encode(
                "ascii"
            )
        elif location != written:  # as a browser reads it ("\\" as "/", no tab)
            response.headers[b"Location"] = location.encode("ascii")

    def _stop_loop(self, request: Request) -> None:
        request.meta["dont_redirect"] = True
        self._inc("iri/protocol/server_spelling_loop")
        logger.info(
            "IRI: %(url)s, the spelling its server asked for, is redirected to the same "
            "resource again; not following the loop", {"url": request.url},
        )

    def _refresh_loop(self, request: Request, response: Response) -> None:
        """Stop a meta refresh from the server's spelling to the same resource again."""
        if (
            not self.meta_refresh
            or not isinstance(response, TextResponse)
            or request.meta.get("dont_redirect")
            or b"refresh" not in response.body[:8192].lower()
        ):
            return
        try:
            _, url = compat.get_meta_refresh(
                response.text[0:4096], response.url, response.encoding,
                ignore_tags=self.meta_refresh_ignore,
            )
        except ValueError:
            return
        try:
            same = bool(url) and self._same_resource(request, retrieval_key(str(url)))
        except IRIError:
            return
        if same:
            self._stop_loop(request)

    def _redirect(self, request: Request, response: Response) -> None:
        raw = response.headers.get(b"Location")
        if not raw:
            return
        written = decode_location(raw).strip()
        location = browser_href(written, request.url)  # as a browser reads it
        try:
            target = normalize(resolve(request.url, location), Level.SCHEME, form="uri")
        except IRIError:
            return  # RedirectMiddleware handles it as stock Scrapy does
        if self._same_resource(request, target) and self._will_redirect(request, response):
            self._server_spelling(request, response, location, written)
            return
        if (
            target != written
            and request_refusal(target) is None
            and not request.meta.get(META_DONT_NORMALIZE)
            and self._will_redirect(request, response)
        ):
            response.headers[b"Location"] = target.encode("ascii")
            self._inc("iri/redirect/location_canonicalized")
        self._redirected(request, response, target)
