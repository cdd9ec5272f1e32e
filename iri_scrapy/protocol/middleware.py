"""Redirects seen before Scrapy follows them: canonical ``Location``, protocol learning.

:class:`IRIProtocolMiddleware` (downloader, 650) sees a 3xx before Scrapy's
``RedirectMiddleware`` (600): it rewrites ``Location`` to its canonical URI (as a
browser reads it, IDNA 2008 rather than w3lib's IDNA 2003), at ``IRI_LEVEL =
"protocol"`` learns rules from redirects once their target met the dupefilter,
and follows a redirect to another spelling of the requested resource as the
server wrote it, once.  Follows RFC 3987 section 5.3.4 (protocol-based
normalization).

Design: docs/plugin.md; stats: docs/stats.md.
"""

from __future__ import annotations

import hashlib
import logging
from typing import TYPE_CHECKING

from scrapy import signals
from scrapy.exceptions import DontCloseSpider, IgnoreRequest
from scrapy.http import TextResponse

from iri_scrapy.core.errors import IRIError
from iri_scrapy.core.ladder import Level, normalize, retrieval_key
from iri_scrapy.core.query import strip_fragment
from iri_scrapy.core.resolve import resolve
from iri_scrapy.plugin import compat  # checks the installed Scrapy first
from iri_scrapy.plugin.config import (
    META_DONT_NORMALIZE,
    META_PENDING,
    META_SAMPLE,
    META_SERVER_SPELLING,
)
from iri_scrapy.plugin.context import CrawlContext
from iri_scrapy.plugin.links import browser_href, request_refusal, skip_unusable_redirect
from iri_scrapy.protocol.evidence import (
    EMPTY_DIGEST,
    canonical_from_html,
    canonical_from_link_headers,
    content_digest,
    parse_clean_param,
)
from iri_scrapy.protocol.learned import Learned, learned_of, write_rules

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from typing_extensions import Self

    from iri_scrapy.protocol.rules import ProtocolRules


logger = logging.getLogger(__name__)

#: The statuses Scrapy's RedirectMiddleware follows.
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})


def _decode_location(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


class IRIProtocolMiddleware:
    """Downloader middleware (priority 650): canonical redirect targets, 5.3.4 learning."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        context = CrawlContext.of(crawler)
        self.config = context.config
        self.rules: ProtocolRules | None = context.rules
        self.learned: Learned | None = learned_of(context)
        self.warned = context.warned
        self.stats = crawler.stats
        self.meta_refresh = crawler.settings.getbool("METAREFRESH_ENABLED", True)
        self.meta_refresh_ignore = crawler.settings.getlist("METAREFRESH_IGNORE_TAGS")

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        """Build for *crawler* (shares the crawler's ProtocolRules)."""
        mw = cls(crawler)
        if mw.rules is not None:
            crawler.signals.connect(mw.request_dropped, signal=signals.request_dropped)
            crawler.signals.connect(mw.spider_closed, signal=signals.spider_closed)
            crawler.signals.connect(mw.spider_idle, signal=signals.spider_idle)
        return mw

    def spider_closed(self) -> None:
        """Publish the learner's stats; save the rules to ``IRI_PROTOCOL_RULES_FILE``."""
        assert self.rules is not None and self.learned is not None
        self.learned.publish()
        path = self.config.protocol_rules_file
        if path is None:
            return
        try:
            write_rules(path, self.rules.to_data())
        except OSError as exc:
            logger.error("IRI_PROTOCOL_RULES_FILE %s cannot be written (%s): the rules "
                         "learned in this crawl are not saved", path, exc)
        else:
            logger.info("IRI protocol: %(n)d learned rule(s) saved to %(path)s",
                        {"n": len(self.rules.to_data()["rules"]), "path": path})

    def process_request(self, request: Request) -> None:
        """Learn the redirect that led to *request* (it has passed the dupefilter);
        skip it if rules learned since it was scheduled merge it with a page served;
        defer it while the fetches that decide a rule it would only re-confirm are
        in flight (:meth:`Learned.defer`)."""
        if self.rules is None:
            return
        if META_PENDING in request.meta:
            self._learn(request.meta.pop(META_PENDING))
        assert self.learned is not None
        if self.learned.stale(request):
            self._inc("iri/protocol/skipped_at_download")
            raise IgnoreRequest(f"IRI protocol: {request.url} merged with a page already "
                                "served by a rule learned after it was scheduled")
        if self.learned.defer(request):
            raise IgnoreRequest(f"IRI protocol: {request.url} deferred until the rule "
                                "being learned that would merge it is decided")

    def spider_idle(self) -> None:
        """Give back every deferred request before the crawl may end."""
        assert self.learned is not None
        if self.learned.give_back(self.learned.settle(everything=True)):
            raise DontCloseSpider

    def request_dropped(self, request: Request) -> None:
        """Learn the redirect that led to *request*, dropped by the scheduler."""
        if self.rules is not None and META_PENDING in request.meta:
            self._learn(request.meta.pop(META_PENDING))

    def _learn(self, pending: list[object]) -> None:
        assert self.rules is not None
        source, target, status = str(pending[0]), str(pending[1]), int(str(pending[2]))
        revoked = dict(self.rules.revoked)
        kind = self.rules.observe_redirect(source, target, status)
        if kind is not None:
            self._inc("iri/protocol/learned")
            self._inc(f"iri/protocol/redirect/{kind}/learned")
            logger.debug(
                "IRI protocol rule learned (%(kind)s): %(source)s -> %(target)s (%(status)d)",
                {"kind": kind, "source": source, "target": target, "status": status},
            )
        self._revoked(revoked, f"the redirect {source} -> {target}")

    def _revoked(self, before: dict[str, int], evidence: str) -> None:
        """Count the rules revoked since *before* (``rules.revoked`` then), per kind."""
        assert self.rules is not None
        for kind, total in self.rules.revoked.items():
            count = total - before.get(kind, 0)
            if count and self.stats is not None:
                self.stats.inc_value("iri/protocol/revoked", count)
                self.stats.inc_value(f"iri/protocol/redirect/{kind}/revoked", count)
            if count:
                logger.debug("IRI protocol rule revoked (%(kind)s) by %(evidence)s",
                             {"kind": kind, "evidence": evidence})

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
        """Rewrite a redirect's Location to its canonical URI; learn from 3xx and 2xx."""
        try:
            return self._response(request, response)
        finally:
            if self.learned is not None:
                self.learned.fetched(request)
                self.learned.give_back(self.learned.settle())

    def process_exception(self, request: Request, exception: Exception) -> None:
        """A fetch that failed is done too (what was deferred on it is looked at)."""
        if self.learned is not None:
            self.learned.fetched(request)
            self.learned.give_back(self.learned.settle())

    def _response(self, request: Request, response: Response) -> Response:
        status = response.status
        if status in REDIRECT_STATUSES and b"Location" in response.headers:
            self._redirect(request, response)
        else:
            if META_SERVER_SPELLING in request.meta and 200 <= status < 300:
                self._refresh_loop(request, response)
            if 200 <= status < 300 and self.rules is not None:
                try:
                    served = retrieval_key(response.url)
                except IRIError:
                    pass
                else:
                    self._inc("iri/protocol/contrary")
                    revoked = dict(self.rules.revoked)
                    if self.rules.observe_contrary(served):
                        self._revoked(revoked, f"{served} served with status {status}")
                    self._observe(served, request, response)
        # a target Request() refuses
        skip_unusable_redirect(request, response, self.stats, self.warned)
        return response

    def _observe(self, served: str, request: Request, response: Response) -> None:
        """Content, canonical link and Clean-param evidence of a 2xx response (5.3.4).

        A sample (``meta["iri_protocol_sample"]``) whose content confirmed its
        rules is dropped here (``IgnoreRequest``): the spider has had that
        resource.  One that did not confirm them goes on to the spider.
        """
        assert self.rules is not None and self.learned is not None
        rules = self.rules
        text = response.text if isinstance(response, TextResponse) else None
        digest = (content_digest(text) if text is not None
                  else hashlib.blake2b(response.body, digest_size=16).digest())
        if digest != EMPTY_DIGEST:  # an empty page says nothing about the resource
            rules.observe_content(served, digest)
        if served.endswith("/robots.txt") and text is not None:
            for clean in parse_clean_param(text):
                rules.observe_clean_param(served, clean.params, clean.prefix)
        href = canonical_from_link_headers(
            _decode_location(value) for value in response.headers.getlist(b"Link"))
        if href is None and text is not None and b"canonical" in response.body[:65536].lower():
            href = canonical_from_html(text)
        if href:
            try:
                target = normalize(resolve(response.url, browser_href(href, response.url)),
                                   Level.SCHEME, form="uri")
            except IRIError:
                target = None
            if target is not None:
                rules.observe_canonical(served, target)
        self.learned.requeue()
        if request.meta.get(META_SAMPLE) and digest != EMPTY_DIGEST and rules.same_content(
                served, digest):
            self._inc("iri/protocol/sample_dropped")
            raise IgnoreRequest(f"IRI protocol: {served} served the content of "
                                f"{rules.apply(served)} (a sample that confirmed its rule)")

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
        written = _decode_location(raw).strip()
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
        if self.rules is None:
            return
        try:
            source = retrieval_key(request.url)
        except IRIError:
            return
        self._inc("iri/protocol/redirects")
        pending = [source, strip_fragment(target), response.status]
        if self._will_redirect(request, response):
            request.meta[META_PENDING] = pending  # copied into the redirected request
        else:
            self._learn(pending)
