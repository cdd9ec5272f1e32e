"""Request canonicalization: requests reach the scheduler, and the wire, as canonical URIs.

Three seams, all thin over :func:`iri_scrapy.normalize`, which each request meets
once: the first seam to see a request stamps it (:mod:`iri_scrapy.plugin.stamp`)
and the others, the fingerprinter and the dupefilter read the stamp.

* :class:`IRISpiderMiddleware` (spider middleware, priority 950, next to the
  spider) rewrites every request the spider yields (``start()`` included) to its
  *fetch form* before the scheduler sees it;
* requests that bypassed the spider middleware (made by other middlewares or
  extensions, or with the spider middleware disabled) are rewritten as they
  enter the scheduler (:mod:`iri_scrapy.plugin.entry`), with the
  :class:`Canonicalizer` of this module; nothing re-issues a request from the
  downloader (it would go back through the scheduler and meet the dupefilter
  twice);
* :class:`IRINormalizationMiddleware` (downloader middleware, priority 60) hands
  the spider responses whose ``urljoin()``/``follow()``/``follow_all()`` resolve
  links with the IRI core and build requests with ``meta["verbatim_url"]``, so
  that Scrapy's ``Request()`` (``w3lib.url.safe_url_string``) never sees a
  Unicode host: it encodes hosts with IDNA 2003, which maps ``straße.example`` to
  ``strasse.example``, another domain, and it drops a bare ``?``.

The fetch form is ``normalize(url, Level.SCHEME, form="uri")`` with the fragment
kept (Scrapy never sends it): ASCII, UTS 46 A-label host, %-encoded UTF-8 -- the
same resource, spelled once.  Protocol-level rules (IRI_LEVEL="protocol") are
*not* applied to what is fetched: a learned rule only changes dedup keys, so
no URL is ever fetched that the server did not name.  Opt-in heuristics
(IRI_SORT_QUERY, IRI_DROP_QUERY_PARAMS) and NFC likewise only change keys.

Per request, ``meta["dont_normalize_iri"] = True`` leaves a request alone.  A
rewritten request keeps the spelling it had in ``meta["iri_original"]``.  A URL
with no canonical form (:class:`~iri_scrapy.IRIError`) is passed through
unchanged, counted in ``iri/unnormalizable`` and logged (the first one as a
warning, later ones at debug level); it is never dropped.

Stats: ``iri/normalized`` (rewritten by the spider middleware),
``iri/unnormalizable``, ``iri/follow/joined`` (links resolved by the IRI-aware
responses); ``iri/entry/normalized`` is the entry's.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from scrapy import Request
from scrapy.exceptions import IgnoreRequest
from scrapy.http import HtmlResponse, Response, TextResponse, XmlResponse
from scrapy.http.request import NO_CALLBACK
from scrapy.spidermiddlewares.base import BaseSpiderMiddleware
from w3lib.url import safe_url_string

from iri_scrapy.core.errors import IRIError
from iri_scrapy.core.hrefs import needs_preprocessing
from iri_scrapy.core.ladder import fast_path, retrieval_key
from iri_scrapy.core.query import split_fragment, strip_fragment
from iri_scrapy.core.resolve import resolve
from iri_scrapy.plugin import compat  # checks the installed Scrapy first
from iri_scrapy.plugin.config import (
    META_DONT_NORMALIZE,
    META_ORIGINAL,
    META_SERVER_SPELLING,
    META_SKIPPED,
    META_UNNORMALIZABLE,
    META_VERBATIM,
    IRIConfig,
    setting,
)
from iri_scrapy.plugin.context import CrawlContext
from iri_scrapy.plugin.idna_requests import convert as idna_convert
from iri_scrapy.plugin.idna_requests import enabled as idna_enabled
from iri_scrapy.plugin.links import (
    ResponseState,
    base_url,
    browser_href,
    refusal_reason,
    report_skipped,
    response_state,
    url_refused,
    wire_unsendable,
)
from iri_scrapy.plugin.stamp import Stamper, as_given, fetch_form

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector
    from typing_extensions import Self


logger = logging.getLogger(__name__)

class Canonicalizer:
    """Crawler-scoped helper shared by the spider and downloader middlewares.

    Computes fetch forms and builds rewritten requests.  ``Request()`` runs every
    URL through ``w3lib.url.safe_url_string``; a fetch form it would change (in
    practice only a bare ``?``, which it drops) is set with Scrapy's
    ``meta["verbatim_url"]`` instead, and then without its fragment unless
    ``IRI_KEEP_FRAGMENTS`` (a ``verbatim_url`` request is keyed on its URL as
    given, so that URL must be the retrieval key).  Other requests do not get
    ``verbatim_url``, so the fingerprinter keys them at the configured level.

    The fetch form is the request's stamp's (:mod:`iri_scrapy.plugin.stamp`):
    a request ``follow()`` or the spider middleware stamped is not canonicalized
    again; a rewritten copy carries its original's stamp.  A URL with no
    canonical form is flagged in ``meta["iri_unnormalizable"]`` and passed
    through; the crawler's :class:`~iri_scrapy.plugin.stamp.Stamper`, shared with
    the fingerprinter, counts it in ``iri/unnormalizable`` and logs it (the first
    one as a warning) when it stamps it: each such request is counted once.
    """

    def __init__(
        self, config: IRIConfig, stats: StatsCollector | None, *,
        stamper: Stamper | None = None, warned: set[str] | None = None,
    ) -> None:
        self.config = config
        self.stats = stats
        #: reasons of skipped links logged as a WARNING already (the crawl context's)
        self.warned: set[str] = set() if warned is None else warned
        #: canonicalizes each request once (shared with the crawler's fingerprinter)
        self.stamper = stamper or Stamper(config, stats)
        #: canonical URI (no fragment) -> the spelling its server redirected to
        #: for it (RFC 3987 5.3.4 evidence); requests for it are sent that way.
        self.server_spellings: dict[str, str] = {}
        #: the crawler gives ``Request()`` URLs their IDNA 2008 form (set by :meth:`of`)
        self.idna2008 = False

    @classmethod
    def of(cls, context: CrawlContext) -> Canonicalizer:
        """The crawl's instance (created on first use, kept in *context*)."""
        canon: Canonicalizer | None = context.canon
        if canon is None:
            stamper = Stamper.of(context)
            canon = context.canon = cls(stamper.config, context.stats, stamper=stamper,
                                        warned=context.warned)
            crawler = context.crawler
            canon.idna2008 = crawler is not None and idna_enabled(crawler.settings)
        return canon

    @classmethod
    def for_crawler(cls, crawler: Crawler | None) -> Canonicalizer:
        """The instance of *crawler*'s crawl context (see :meth:`of`)."""
        return cls.of(CrawlContext.of(crawler))

    def inc(self, key: str) -> None:
        """Increment the stat *key* (no-op without a stats collector)."""
        if self.stats is not None:
            self.stats.inc_value(key)

    def verbatim_form(self, uri: str) -> str:
        """The URL to set with ``verbatim_url``: *uri*, without fragment unless kept."""
        return uri if self.config.keep_fragments else strip_fragment(uri)

    def rewrite(self, request: Request, uri: str) -> Request:
        """A copy of *request* for *uri*, which ``Request()`` must not alter.

        ``meta["iri_original"]`` records the URL *request* had; the copy carries
        *request*'s stamp (no second canonicalization).
        """
        meta = dict(request.meta)
        meta[META_ORIGINAL] = request.url
        new = request.replace(url=uri, meta=meta)
        if new.url != uri:  # safe_url_string changed it (a bare "?"): keep it verbatim
            meta[META_VERBATIM] = True
            new = request.replace(url=self.verbatim_form(uri), meta=meta)
        stamp = self.stamper.stamp_of(request)
        if stamp is not None:
            self.stamper.restamp(new, stamp)
        return new

    def fetch_uri(self, request: Request) -> str | None:
        """The fetch form of *request*'s URL if it differs from it, else None.

        None as well for ``dont_normalize_iri`` requests and for URLs with no
        canonical form (flagged in meta, counted and logged once per request).
        The fetch form is the request's stamp's (made now if it has none).
        """
        meta = request.meta
        if meta.get(META_UNNORMALIZABLE) or as_given(meta):
            return None
        url = request.url
        uri = self.stamper.stamp_for(request).wire
        if uri is None:
            meta[META_UNNORMALIZABLE] = True
            return None
        if self.server_spellings:
            head, fragment = split_fragment(uri)
            spelling = self.server_spellings.get(head)
            if spelling is not None:
                uri = spelling + fragment
        if meta.get(META_VERBATIM):  # ours (a bare "?"): keyed on the URL as given
            uri = self.verbatim_form(uri)
        return None if uri == url else uri

    def server_spelling(self, request: Request) -> bool:
        """True if *request* is a redirect to another spelling of its source's resource.

        A server that redirects a request to an alias of the very resource asked
        for (``/pref%C3%A9`` -> ``/pref%c3%a9``, ``/~home`` -> ``/%7Ehome``, a
        meta refresh to ``http://EXAMPLE.test:80/page``) is saying how it wants
        the resource spelled (RFC 3987 5.3.4): the request is sent as written,
        marked with ``meta["iri_server_spelling"]``, and the spelling is
        remembered for later requests for that resource.  Counted in
        ``iri/protocol/server_spelling``.
        """
        meta = request.meta
        redirect_urls = meta.get("redirect_urls")
        if not redirect_urls or meta.get(META_DONT_NORMALIZE):
            return False
        try:
            stamp = self.stamper.stamp_for(request)
            key = strip_fragment(stamp.wire or retrieval_key(request.url))
            if meta.get(META_SERVER_SPELLING) == key:
                return True  # already passed (a re-scheduled request)
            if key != retrieval_key(redirect_urls[-1]):
                meta.pop(META_SERVER_SPELLING, None)  # from an earlier hop: stale
                return False
        except IRIError:
            return False
        meta[META_SERVER_SPELLING] = key
        spelling = strip_fragment(request.url)
        if spelling != key:
            self.server_spellings[key] = spelling
        self.inc("iri/protocol/server_spelling")
        logger.debug(
            "IRI: %(source)s was redirected to its own resource as %(url)s: "
            "fetching the server's spelling", {"source": redirect_urls[-1], "url": request.url},
        )
        return True

    def canonical(self, request: Request) -> Request | None:
        """A replacement for *request* in fetch form, or None if it needs none."""
        uri = self.fetch_uri(request)
        return None if uri is None else self.rewrite(request, uri)


class IRISpiderMiddleware(BaseSpiderMiddleware):
    """Spider middleware: requests from the spider (and ``start()``) leave in fetch form.

    Enabled by the add-on at priority 950 (spider side of every built-in spider
    middleware, so that e.g. ``UrlLengthMiddleware`` measures the URI sent).
    In a crawler with IDNA 2008 ``Request()`` URLs (``IRI_IDNA2008_REQUESTS``) it
    also gives the spider's requests that form first
    (:func:`iri_scrapy.plugin.idna_requests.convert`).

    Start requests: Scrapy's ``Spider.start()`` gives the ``start_urls`` requests
    ``dont_filter=True``, so their keys never reach the dupefilter -- a link
    back to the start page fetches it again, and a resumed ``JOBDIR`` crawl
    fetches every start URL again.  With ``IRI_DEDUPE_START_REQUESTS`` (default
    ``True``) a start request with ``dont_filter=True`` is sent with
    ``dont_filter=False`` and ``meta["allow_offsite"] = True`` instead: it goes
    through the dupefilter (and is recorded there) but is still exempt from
    offsite filtering, as before.  Counted in ``iri/start/deduplicated``.
    Set the setting to ``False`` to keep Scrapy's behaviour.
    """

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        self.canon = Canonicalizer.for_crawler(crawler)
        self.dedupe_start = setting(crawler.settings, "IRI_DEDUPE_START_REQUESTS")
        #: this crawler gives ``Request()`` URLs their IDNA 2008 form
        #: (:mod:`iri_scrapy.plugin.idna_requests`): done here, not in a spider
        #: middleware of its own (each one costs every link a generator layer)
        self.idna2008 = self.canon.idna2008

    def get_processed_request(
        self, request: Request, response: Response | None
    ) -> Request | None:
        """Return *request* in fetch form (the same object if it already is)."""
        if META_SKIPPED in request.meta:
            return None  # response.follow()'s placeholder for a link it could not use
        if response is None and self.dedupe_start and request.dont_filter:
            request.dont_filter = False
            request.meta.setdefault("allow_offsite", True)
            self.canon.inc("iri/start/deduplicated")
        stamp = self.canon.stamper.stamp_of(request)
        if stamp is not None and stamp.wire == request.url:
            return request  # stamped by follow(): already in fetch form (IDNA 2008)
        if self.idna2008:
            idna_convert(request)  # before anything reads it (the spelling Request() had)
        new = self.canon.canonical(request)
        if new is None:
            return request
        self.canon.inc("iri/normalized")
        return new


class IRINormalizationMiddleware:
    """Downloader middleware: the spider gets IRI-aware responses.

    Enabled by the add-on at priority 60 (just after offsite filtering at 50).

    ``process_request`` returns no request: a request is put in fetch form as it
    enters the scheduler (:mod:`iri_scrapy.plugin.entry`), and one that reached
    the downloader without entering a scheduler (``engine.download_async()``:
    media pipelines, robots.txt; or a scheduler without the entry) is sent as
    given.  It drops ``response.follow()``'s placeholder for a link it could not
    use, and marks a redirect to another spelling of its source's resource
    (:meth:`Canonicalizer.server_spelling`) when the entry did not.

    ``process_response``: the response is handed on as an IRI-aware subclass of
    its class (see :func:`iri_response_class`), so links the spider follows
    with ``response.follow()`` are resolved by the IRI core.  It is built with
    Scrapy's public ``response.replace(cls=...)``: a new object sharing the
    body (not copied); its text is decoded again if a middleware before had
    decoded it (meta refresh), and with the IDNA 2008 ``Request()`` the
    ``<base href>`` Scrapy's readers get is set again for the new object
    (:func:`~iri_scrapy.plugin.compat.prime_response_caches`).
    """

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.canon = Canonicalizer.for_crawler(crawler)
        #: the add-on's IDNA 2008 Request(): the new response's <base href> for
        #: Scrapy's readers as IDNA2008ResponseMiddleware set it for the old one
        self.idna2008 = self.canon.idna2008
        self.refresh_ignore_tags = crawler.settings.getlist("METAREFRESH_IGNORE_TAGS")

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        """Build for *crawler*."""
        return cls(crawler)

    def process_request(self, request: Request) -> None:
        """Drop a skipped link's placeholder; mark a spelling redirect; nothing else."""
        if META_SKIPPED in request.meta:
            raise IgnoreRequest(f"IRI: skipped link {request.meta[META_SKIPPED]['href']!r}")
        self.canon.server_spelling(request)

    def process_response(self, request: Request, response: Response) -> Response:
        """Hand the spider an IRI-aware response (a copy, as a subclass of its class)."""
        if request.meta.get(META_DONT_NORMALIZE) or isinstance(response, IRIFollowMixin):
            return response
        response = response.replace(cls=iri_response_class(type(response)))
        response_state(response).canon = self.canon
        if self.idna2008 and isinstance(response, HtmlResponse):
            compat.prime_response_caches(response, self.refresh_ignore_tags)
        if isinstance(response, TextResponse) and b"\\" in response.body[:16384]:
            # a <base href> with "\\": Scrapy's own readers of the base URL (forms,
            # selectors, LinkExtractor) read it as follow() does (plugin/links.py)
            compat.set_base_url(response, base_url(response))
        return response


# ------------------------------------------------------------------------- responses

class IRIFollowMixin:
    """Link resolution with the IRI core for :class:`~scrapy.http.Response` classes.

    ``urljoin(href)`` reads *href* as a browser reads it
    (:func:`~iri_scrapy.plugin.links.browser_href`), resolves it (RFC 3986 5.2
    on the IRI itself, RFC 3987 section 6.5) against the response's base URL
    and returns the fetch form of the result, its
    http(s) query in the response's charset (RFC 3987 section 3.1 note:
    ``?q=привет`` on a windows-1251 page is ``?q=%EF%F0%E8%E2%E5%F2``, as
    browsers and stock Scrapy send it); ``follow()`` and ``follow_all()``
    (which call ``urljoin``) make sure ``Request()`` keeps that URI
    (``verbatim_url`` where it would alter it), record the resolved IRI in
    ``meta["iri_original"]`` and stamp the request (its one canonicalization).
    With ``meta={"dont_normalize_iri": True}`` (or *meta* given positionally)
    they behave as stock Scrapy's.  An href with no canonical form is joined
    the stock way and made ASCII by ``safe_url_string``, as Scrapy does.

    A link no request can be made for is skipped: when building its request
    fails with ``ValueError`` once the link was resolved (so: the URL, not a
    bad argument), the stock spelling is tried; if that fails too,
    ``follow()`` returns a placeholder request for this page with
    ``meta["iri_skipped_link"]`` and ``callback=NO_CALLBACK``, which
    :class:`~iri_scrapy.IRISpiderMiddleware` drops (and
    :class:`~iri_scrapy.IRINormalizationMiddleware` ignores, should it get
    there), and ``follow_all()`` leaves it out.  Per-response state: a
    :class:`~iri_scrapy.plugin.links.ResponseState`.  One class, one
    ``follow``/``urljoin`` override each: they run for every link of every page.
    """

    __slots__ = ()

    def urljoin(self, url: str) -> str:
        """Resolve *url* against this response's base URL; the fetch form of the result."""
        state = response_state(self)
        state.tried = url
        state.joined = state.last = None
        if (not state.stock and isinstance(url, str) and url.isascii()
                and fast_path(url, True) is not None):
            # an absolute URI already in fetch form (what the idiom
            # ``follow(urljoin(href))`` hands back, most absolute links): one native
            # call.  The browser's reading, the resolution (RFC 3986 5.2.2: an absolute
            # reference without dot segments is its own target) and the fetch form
            # leave it as it is (tests/core/test_native.py, both paths).
            state.joined = url
            state.last = (url, url)
            return url
        if isinstance(url, str) and not state.as_written and needs_preprocessing(url):
            url = browser_href(url, base_url(self) if isinstance(self, TextResponse)
                               else str(self.url))  # type: ignore[attr-defined]
        if state.stock:
            joined: str = super().urljoin(url)  # type: ignore[misc]
        else:
            base = base_url(self) if isinstance(self, TextResponse) else self.url  # type: ignore[attr-defined]
            try:
                iri = resolve(base, url.strip(" \t\n\r\f"))
                joined = fetch_form(iri, getattr(self, "encoding", None))
            except (IRIError, ValueError, TypeError):
                joined = safe_url_string(super().urljoin(url))  # type: ignore[misc]
            else:
                state.last = (iri, joined)
        state.joined = joined
        return joined

    def follow(self, url: Any, *args: Any, **kwargs: Any) -> Request:
        """``Response.follow`` with IRI-core link resolution; a placeholder request
        for a link it cannot use (see the class docstring)."""
        state = response_state(self)
        meta = kwargs.get("meta") or {}
        state.as_written = state.stock = len(args) >= 6 or bool(meta.get(META_DONT_NORMALIZE))
        try:
            return self._follow(state, url, args, kwargs)
        finally:
            state.as_written = state.stock = False

    def follow_all(self, *args: Any, **kwargs: Any) -> Iterable[Request]:
        """``Response.follow_all`` without the links it cannot use (see :meth:`follow`)."""
        requests = super().follow_all(*args, **kwargs)  # type: ignore[misc]
        return (r for r in requests if META_SKIPPED not in r.meta)

    def _build(self, state: ResponseState, url: Any, args: Any, kwargs: Any
               ) -> tuple[Request, bool]:
        """``Response.follow``, and the stamp of what ``urljoin`` resolved; whether
        the request's URL is that fetch form (so it can go on the wire: the fetch
        form refuses what cannot, :class:`~iri_scrapy.core.hosts.WireHostError`)."""
        request: Request = super().follow(url, *args, **kwargs)  # type: ignore[misc]
        last, state.last = state.last, None
        if last is None:
            return request, False
        joined, uri = last
        canon = state.canon or Canonicalizer(IRIConfig(), None)
        if request.url != uri:  # Request() altered the fetch form (a bare "?")
            request = canon.rewrite(request, uri)
            if joined != request.url:
                request.meta[META_ORIGINAL] = joined
            canon.stamper.stamp(request, joined, uri if request.url == uri else request.url)
            return request, request.url == uri
        if joined != uri:
            request.meta[META_ORIGINAL] = joined
        # the one canonicalization of this request: urljoin() has just made it
        canon.stamper.stamp_link(request, joined, uri)
        return request, True

    def _follow(self, state: ResponseState, url: Any, args: Any, kwargs: Any) -> Request:
        state.tried = None
        error: Exception
        try:
            request, sendable = self._build(state, url, args, kwargs)
            if sendable:
                return request
            wire = wire_unsendable(request)
            if wire is None:
                return request
            href, error = state.tried, ValueError(wire)
        except ValueError as exc:
            href = state.tried
            if not url_refused(state):  # not about the URL: the caller's error
                raise
            error = exc
        if not state.stock:
            state.stock = True
            try:
                request = self._build(state, url, args, kwargs)[0]
                wire = wire_unsendable(request)
                if wire is None:
                    return request
                error = ValueError(wire)
            except ValueError as exc:
                if not url_refused(state):
                    raise
                error = exc
            finally:
                state.stock = False
        reason = refusal_reason(state.joined or str(href).strip(" \t\n\r\f"))
        page = str(self.url)  # type: ignore[attr-defined]
        canon = state.canon
        report_skipped(getattr(canon, "stats", None), page, str(href), reason, str(error),
                       getattr(canon, "warned", None))
        return Request(
            page,
            callback=NO_CALLBACK,
            dont_filter=False,
            meta={META_SKIPPED: {"href": str(href), "page": page, "reason": reason,
                                 "error": str(error)}},
        )


class IRIResponse(IRIFollowMixin, Response):
    """:class:`~scrapy.http.Response` with IRI-core ``urljoin``/``follow``."""

    __slots__ = ("_iri_state",)  # its ResponseState (plugin/links.py)


class IRITextResponse(IRIFollowMixin, TextResponse):
    """:class:`~scrapy.http.TextResponse` with IRI-core ``urljoin``/``follow``."""

    __slots__ = ("_iri_state",)  # its ResponseState (plugin/links.py)


class IRIHtmlResponse(IRIFollowMixin, HtmlResponse):
    """:class:`~scrapy.http.HtmlResponse` with IRI-core ``urljoin``/``follow``."""

    __slots__ = ("_iri_state",)  # its ResponseState (plugin/links.py)


class IRIXmlResponse(IRIFollowMixin, XmlResponse):
    """:class:`~scrapy.http.XmlResponse` with IRI-core ``urljoin``/``follow``."""

    __slots__ = ("_iri_state",)  # its ResponseState (plugin/links.py)


_RESPONSE_CLASSES: dict[type[Response], type[Response]] = {
    Response: IRIResponse,
    TextResponse: IRITextResponse,
    HtmlResponse: IRIHtmlResponse,
    XmlResponse: IRIXmlResponse,
}


def iri_response_class(cls: type[Response]) -> type[Response]:
    """The IRI-aware subclass of the response class *cls* (made once per class)."""
    sub = _RESPONSE_CLASSES.get(cls)
    if sub is None:
        if issubclass(cls, IRIFollowMixin):
            return cls
        sub = type(f"IRI{cls.__name__}", (IRIFollowMixin, cls), {
            "__slots__": ("_iri_state",),  # its ResponseState (plugin/links.py)
            "__module__": __name__,
            "__doc__": f"{cls.__name__} with IRI-core ``urljoin``/``follow``.",
        })
        _RESPONSE_CLASSES[cls] = sub
    return sub

