"""One canonicalization per request: the stamp a request carries from entry to the dupefilter.

Every request that enters the crawl is canonicalized once, by whichever of the
plugin's components meets it first: ``response.follow()`` (which has just
resolved the link), the spider middleware (``start()`` and ``Request()``\\ s the
spider builds), the scheduler's entry (a request another component made: a
redirect, a retry; :mod:`iri_scrapy.plugin.entry`) or the fingerprinter (one
that entered no scheduler).  The result is a
:class:`Stamp` kept beside the request, not in it:

* ``url``: ``request.url`` when it was stamped.  A stamp whose ``url`` is not the
  request's URL any more (``_set_url`` in place, a ``replace(url=...)`` that
  reused nothing) is stale and ignored: the request is stamped again.
* ``spelling``: the URL as written (the resolved href, or the URL the spider gave).
* ``wire``: its fetch form, ``normalize(spelling, "scheme", form="uri")`` with the
  fragment kept (what is sent; RFC 3987 section 5.3.3 and 3.1), or ``None`` when
  it has no canonical form.
* ``base``: the dedup key before the learned protocol rules (5.3.4) and the
  opt-in query heuristics, which the fingerprinter applies per call since rules
  change during the crawl.  At level ``scheme`` and up without NFC it is ``wire``
  less its fragment (RFC 3987 section 5.1), so the one ``normalize`` of the
  request gives both; below ``scheme`` or with ``IRI_NFC`` it is a second
  ``normalize`` of the spelling at the configured level.  ``None``: keyed as given.

Stamps live in the crawl's one per-request cache, the stamper's (weak keys:
gone with the request, beside the fingerprint the fingerprinter keyed it on:
:class:`Cached`; one look-up per request on the dupefilter's path, see
:meth:`Stamper.entry`), not in ``request.meta``: meta goes
through the frontier codec (JSON, see
:mod:`iri_scrapy.frontier.codec`) and to other processes, and a stamp there
would be trusted after the URL or the options changed.  A request read back
from a frontier store is a new object, stamped again on first use (one
``normalize``).

The "keyed as given" rule lives here too (:func:`as_given`), once, and the
retrieval key (level ``scheme``, URI form, no fragment: RFC 3987 section 5.1)
has one name in the plugin, :func:`iri_scrapy.core.ladder.retrieval_key`,
re-exported here.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, NamedTuple
from weakref import ref

from iri_scrapy.core.errors import IRIError
from iri_scrapy.core.ladder import Level, fast_path, normalize
from iri_scrapy.core.mapping import iri_to_uri
from iri_scrapy.core.query import strip_fragment
from iri_scrapy.plugin.config import (
    META_DONT_NORMALIZE,
    META_ORIGINAL,
    META_VERBATIM,
    IRIConfig,
)
from iri_scrapy.plugin.links import STAT_UNNORMALIZABLE, count_unnormalizable, error_reason

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.statscollectors import StatsCollector

    from iri_scrapy.plugin.context import CrawlContext

logger = logging.getLogger(__name__)

_UCS_ENCODINGS = frozenset({
    "utf-8", "utf8", "utf_8", "utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32",
    "utf-32-le", "utf-32-be",
})

class Stamp(NamedTuple):
    """What one canonicalization of a request gave (see the module docstring)."""

    url: str
    spelling: str
    wire: str | None
    base: str | None

    @property
    def canonical(self) -> bool:
        """True if the spelling was its own key (fragment aside): no rung changed it."""
        base = self.base
        return base is None or self.spelling == base or strip_fragment(self.spelling) == base


_new_stamp = tuple.__new__  # Stamp(...) without the generated __new__ (per link)


class Cached:
    """What the crawl keeps per request, in its one per-request cache (weak keys).

    ``stamp``: the request's :class:`Stamp` (None: none yet); ``keyed``: what the
    crawl's fingerprinter keyed it on (its own record, None: not keyed yet).
    """

    __slots__ = ("stamp", "keyed")

    def __init__(self, stamp: Stamp | None, keyed: Any = None) -> None:
        self.stamp = stamp
        self.keyed = keyed


def as_given(meta: dict[str, Any]) -> bool:
    """Keyed and sent as given: ``dont_normalize_iri``, or the user's own
    ``verbatim_url`` (the plugin sets ``verbatim_url`` only together with
    ``iri_original``, on canonical URIs that ``Request()`` would alter)."""
    return bool(
        meta.get(META_DONT_NORMALIZE) or (meta.get(META_VERBATIM) and META_ORIGINAL not in meta)
    )


def fetch_form(url: str, query_encoding: str | None = None) -> str:
    """The URI a request for *url* is sent as (level SCHEME, URI form, fragment kept).

    *query_encoding* is the charset of the document the link was found in: for
    http(s), the characters of the query are sent in that charset (RFC 3987
    section 3.1 note, what browsers and stock Scrapy send; a character it
    cannot hold as ``%26%23NNNN%3B``); the path is always UTF-8.

    Raises :class:`~iri_scrapy.IRIError` when *url* has no canonical form.
    """
    # already canonical: most links (what normalize tries first; ASCII only)
    fast = fast_path(url, True) if url.isascii() else None
    if fast is not None:
        return fast
    if (
        query_encoding is not None
        and not url.isascii()
        and query_encoding.lower() not in _UCS_ENCODINGS
        and "?" in url
    ):
        url = iri_to_uri(url, query_encoding=query_encoding)
    return normalize(url, Level.SCHEME, form="uri", keep_fragment=True)


class Stamper:
    """Stamps requests for one crawler's options; counts URLs with no canonical form.

    One per crawl (:meth:`of` its :class:`~iri_scrapy.plugin.context.CrawlContext`),
    shared by the middlewares and the fingerprinter, so that each request is counted
    in ``iri/unnormalizable`` once.
    """

    def __init__(self, config: IRIConfig, stats: StatsCollector | None = None) -> None:
        self.config = config
        self.stats = stats
        self._warned = False
        self._fast_key = config.level >= Level.SCHEME and not config.nfc
        self._keep = config.keep_fragments
        self._level = min(config.level, Level.SCHEME)
        #: the crawl's one per-request cache: weak reference to the request ->
        #: :class:`Cached`, the entry gone with the request.  What ``WeakKeyDictionary``
        #: does, read inline: its ``get`` is a Python call around the same dict look-up,
        #: and the dupefilter's path made five of them per request (the ``request_seen``
        #: regression of issue 32; ``benchmarks/bench_dupefilter.py``).
        self._cache: dict[ref[Request], Cached] = {}
        pop = self._cache.pop

        def forget(gone: ref[Request]) -> None:
            pop(gone, None)

        self._forget = forget

    def stamp_of(self, request: Request) -> Stamp | None:
        """The stamp of *request*, or None if it has none or its URL changed since."""
        cached = self._cache.get(ref(request))
        if cached is not None:
            stamp = cached.stamp
            if stamp is not None and stamp.url == request.url:
                return stamp
        return None

    def cached(self, request: Request) -> Cached | None:
        """What the cache holds for *request* (None: nothing yet)."""
        return self._cache.get(ref(request))

    def entry(self, request: Request) -> Cached:
        """What the cache holds for *request*, made empty on first use (one look-up:
        the fingerprinter reads and writes the stamp and its key through it)."""
        cached = self._cache.get(ref(request))
        if cached is None:
            cached = self._cache[ref(request, self._forget)] = Cached(None)
        return cached

    def _put(self, request: Request, stamp: Stamp, cached: Cached | None = None) -> None:
        if cached is None:
            cached = self._cache.get(ref(request))
        if cached is None:
            self._cache[ref(request, self._forget)] = Cached(stamp)
        else:
            cached.stamp = stamp

    @classmethod
    def of(cls, context: CrawlContext) -> Stamper:
        """The crawl's stamper (created on first use, kept in *context*)."""
        stamper: Stamper | None = context.stamper
        if stamper is None:
            stamper = context.stamper = cls(context.config, context.stats)
        return stamper

    def key_base(self, spelling: str, wire: str) -> str | None:
        """The key of *spelling* before protocol rules and heuristics, from its *wire* form."""
        if self._fast_key:
            return wire if self._keep else strip_fragment(wire)
        source = spelling if self.config.level < Level.SCHEME else wire
        try:
            return normalize(source, self._level, keep_fragment=self._keep, nfc=self.config.nfc)
        except IRIError:
            return None

    def base_of(self, url: str) -> str | None:
        """The key base of *url* (see :class:`Stamp`), None if it has no canonical form
        (counted and logged as for a request)."""
        try:
            wire = fetch_form(url)
        except IRIError as exc:
            self.unnormalizable(url, exc)
            return None
        return self.key_base(url, wire)

    def stamp(self, request: Request, spelling: str | None = None,
              wire: str | None = None, cached: Cached | None = None) -> Stamp:
        """Stamp *request* (its URL written as *spelling*, default ``request.url``).

        *wire*, when the caller has just computed the fetch form (``follow()``),
        saves the ``normalize``; *cached*, the request's :meth:`entry` when the
        caller holds it, a look-up.  A URL with no canonical form is counted and
        logged here (the first one as a warning) and stamped with ``wire=None``.
        """
        url = request.url
        if spelling is None:
            spelling = url
        if as_given(request.meta):
            stamp = Stamp(url, spelling, url, None)
        else:
            if wire is None:
                try:
                    wire = fetch_form(url)
                except IRIError as exc:
                    self.unnormalizable(url, exc)
            base = None if wire is None else self.key_base(spelling, wire)
            stamp = Stamp(url, spelling, wire, base)
        self._put(request, stamp, cached)
        return stamp

    def stamp_link(self, request: Request, spelling: str, wire: str) -> None:
        """:meth:`stamp` for ``follow()``'s request, whose URL is *wire*, the fetch
        form ``urljoin()`` has just made of the resolved link *spelling* (not kept
        as given: ``follow()`` with ``dont_normalize_iri`` resolves the stock way).
        The same stamp, fewer steps: it runs for every link of every page."""
        base: str | None
        if self._fast_key:
            base = wire if self._keep else strip_fragment(wire)
        else:
            base = self.key_base(spelling, wire)
        # a request follow() has just made: nothing cached for it yet
        self._cache[ref(request, self._forget)] = Cached(
            _new_stamp(Stamp, (wire, spelling, wire, base)))

    def restamp(self, request: Request, stamp: Stamp) -> Stamp:
        """Carry *stamp* over to *request*, a copy whose URL is the stamp's wire form
        (or a spelling of the same key): no new canonicalization."""
        new = stamp._replace(url=request.url, wire=request.url)
        self._put(request, new)
        return new

    def stamp_for(self, request: Request) -> Stamp:
        """The stamp of *request*, stamping it if it has none (or a stale one)."""
        cached = self.entry(request)
        stamp = cached.stamp
        if stamp is not None and stamp.url == request.url:
            return stamp
        return self.stamp(request, cached=cached)

    def unnormalizable(self, url: str, exc: IRIError) -> None:
        """Count and log a URL that has no canonical form (first as a WARNING)."""
        count_unnormalizable(self.stats, error_reason(exc))
        level = logging.DEBUG if self._warned else logging.WARNING
        self._warned = True
        logger.log(
            level,
            "IRI: %(url)r has no canonical form (%(error)s); requested and deduplicated as "
            "given (further ones are logged at DEBUG level and counted in %(stat)s)",
            {"url": url if len(url) <= 200 else f"{url[:200]}... ({len(url)} characters)",
             "error": exc, "stat": STAT_UNNORMALIZABLE},
        )
