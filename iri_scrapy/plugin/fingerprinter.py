"""``IRIRequestFingerprinter``: Scrapy request fingerprints over the canonical URI.

Set ``REQUEST_FINGERPRINTER_CLASS = "iri_scrapy.IRIRequestFingerprinter"`` (the
add-on does) and every component that asks ``crawler.request_fingerprinter``
(the stock ``RFPDupeFilter``, :class:`~iri_scrapy.IRIDupeFilter`, the HTTP cache,
the media pipelines) identifies a resource by its canonical retrieval URI:

1. the comparison ladder (RFC 3987 section 5.3) at ``IRI_LEVEL`` in URI form;
2. the fragment excluded, since "when IRIs are compared to select (or avoid) a
   network action ... fragment components (if any) should be excluded"
   (RFC 3987 section 5.1), unless ``IRI_KEEP_FRAGMENTS``;
3. at level PROTOCOL, the crawler's learned :class:`~iri_scrapy.ProtocolRules`
   (section 5.3.4);
4. the opt-in query heuristics (``IRI_SORT_QUERY``, ``IRI_DROP_QUERY_PARAMS``),
   which are not RFC 3987.

The fingerprint is the SHA-1 of the same JSON document Scrapy's own
``scrapy.utils.request.fingerprint`` hashes (``body`` in hex, ``headers``,
``method``, ``url``, keys sorted), with the canonical URI as ``url``; so it is
20 ``bytes``, like Scrapy's.

Requests with ``meta["dont_normalize_iri"]`` (or Scrapy's ``verbatim_url``) are
fingerprinted on ``request.url`` exactly as given.  A URL with no canonical form
(:class:`~iri_scrapy.IRIError`: a host that fails IDNA, a non-numeric port) is
fingerprinted as given too: never raised, never dropped; the first one of a
crawl is logged as a warning and each such request counts ``iri/unnormalizable``.

With ``IRI_REQUEST_FINGERPRINTER_BASE_CLASS`` (:data:`BASE_SETTING`) naming another
fingerprinter (the add-on moves a user's own ``REQUEST_FINGERPRINTER_CLASS`` there),
the fingerprint is the SHA-1 of this one followed by that one's for the request
with its key as URL: two requests are duplicates only if both fingerprinters say
so, and IRI aliases stay one resource for both (docs/compose.md).

Fingerprints are cached per :class:`~scrapy.Request` in the crawl's one
per-request cache, beside the request's stamp (:class:`~iri_scrapy.plugin.stamp.Cached`,
weak keys like Scrapy's own cache).  At level PROTOCOL the learned rules change during the crawl, so
the cache keeps the level-SCHEME canonical URI (the costly part) and re-applies
the rules on every call (a dict lookup); the SHA-1 is recomputed only when that
changes the key.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from iri_scrapy.core.errors import IRIError
from iri_scrapy.core.ladder import Level, RulesHook, retrieval_key, rungs_applied
from iri_scrapy.core.ladder import normalize as _normalize
from iri_scrapy.plugin import compat  # checks the installed Scrapy first
from iri_scrapy.plugin.config import (
    META_ORIGINAL,
    IRIConfig,
    load_object,
)
from iri_scrapy.plugin.context import CrawlContext
from iri_scrapy.plugin.idna_requests import convert as idna_convert
from iri_scrapy.plugin.idna_requests import enabled as idna_enabled
from iri_scrapy.plugin.stamp import Stamp, Stamper, as_given

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector
    from typing_extensions import Self


logger = logging.getLogger(__name__)

#: ``json.dumps``' string encoding (``ensure_ascii``, as Scrapy's fingerprint() uses):
#: ``JSONEncoder.encode(str)`` takes the same C fast path as ``json.dumps`` does.
_json_str = json.JSONEncoder().encode

#: Setting: another fingerprinter whose fingerprint is hashed together with ours.
BASE_SETTING = "IRI_REQUEST_FINGERPRINTER_BASE_CLASS"


def rung_keys(
    url: str, config: IRIConfig, rules: RulesHook | None = None
) -> tuple[str, ...]:
    """See :func:`_rung_keys`; cached per spelling when no protocol rules apply
    (pages repeat the same links, and duplicates are counted per rung)."""
    if rules is None:
        return _rung_keys_cached(url, config)
    return _rung_keys(url, config, rules)


@lru_cache(maxsize=16384)
def _rung_keys_cached(url: str, config: IRIConfig) -> tuple[str, ...]:
    return _rung_keys(url, config, None)


def _rung_keys(
    url: str, config: IRIConfig, rules: RulesHook | None = None
) -> tuple[str, ...]:
    """The names of the normalizations that changed *url* on its way to its key.

    In ladder order: the :attr:`Rung.key <iri_scrapy.Rung.key>` of each rung of
    RFC 3987 section 5.3 that changed the URL (``case``, ``character``,
    ``percent``, ``path``, ``scheme``, ``protocol``), computed on the URL without
    its fragment when fragments are excluded; then ``fragment`` if a fragment
    was dropped (section 5.1); then ``heuristics`` if an opt-in query heuristic
    changed the key.  An empty tuple means the URL was its own key (simple string
    comparison, 5.3.1).  Raises :class:`~iri_scrapy.IRIError` like ``normalize``.
    """
    keep = config.keep_fragments
    out = [
        rung.key
        for rung in rungs_applied(
            url, config.level, keep_fragment=keep, nfc=config.nfc, rules=rules
        )
    ]
    if not keep and "#" in url:
        out.append("fragment")
    if config.heuristics:
        canonical = _normalize(
            url, config.level, keep_fragment=keep, nfc=config.nfc, rules=rules
        )
        if config.apply_heuristics(canonical) != canonical:
            out.append("heuristics")
    return tuple(out)


class _Entry:
    """Cache of one request: the spelling it was keyed on, its key and fingerprint."""

    __slots__ = ("verbatim", "base", "key", "fp")

    def __init__(self, verbatim: bool, base: str | None, key: str, fp: bytes) -> None:
        self.verbatim = verbatim
        self.base = base  # level-SCHEME canonical URI when rules may rewrite it, else None
        self.key = key
        self.fp = fp


class IRIRequestFingerprinter:
    """Scrapy ``REQUEST_FINGERPRINTER_CLASS`` keyed on the canonical URI (RFC 3987 5.3).

    Without a crawler it uses *config* (default :class:`IRIConfig`) and *rules*
    (level PROTOCOL only), and counts nothing.  *include_headers* names request
    headers to hash too, as in Scrapy's ``fingerprint()`` (none by default).
    """

    def __init__(
        self,
        crawler: Crawler | None = None,
        *,
        config: IRIConfig | None = None,
        rules: RulesHook | None = None,
        include_headers: Iterable[bytes | str] | None = None,
    ) -> None:
        context = CrawlContext.of(crawler) if crawler is not None else None
        if config is None:
            config = context.config if context is not None else IRIConfig()
        self.config = config
        self.level = config.level
        if context is not None and rules is None:
            rules = context.rules
        self.rules: RulesHook | None = rules if config.level >= Level.PROTOCOL else None
        self.stats: StatsCollector | None = crawler.stats if crawler is not None else None
        self._headers: tuple[bytes, ...] = tuple(
            sorted(h.lower().encode() if isinstance(h, str) else h.lower()
                   for h in include_headers or ())
        )
        #: canonicalizes each request once (shared with the middlewares of the crawler)
        self.stamper = (Stamper.of(context)
                        if context is not None and config == context.config
                        else Stamper(config, self.stats))
        #: The add-on's IDNA 2008 Request() URLs are on in this crawler: a request made
        #: by another component gets its IDNA 2008 URL here, before it is keyed.
        self._idna2008 = crawler is not None and idna_enabled(crawler.settings)
        #: The fingerprinter named by ``IRI_REQUEST_FINGERPRINTER_BASE_CLASS``, or None.
        self.base: Any = _build_base(crawler) if crawler is not None else None
        if self.base is not None:
            self.fingerprint = self._composed_fingerprint  # type: ignore[method-assign]

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    # --- keys --------------------------------------------------------------

    def _key(self, base: str) -> str:
        return key_of(base, self.config, self.rules)

    def canonical_url(self, url: str) -> str:
        """The key URL of *url* (what the fingerprint hashes; *url* itself if none)."""
        base = self.stamper.base_of(url)
        return url if base is None else self._key(base)

    def key_url(self, request: Request) -> str:
        """The URL the fingerprint of *request* hashes (for explain logging)."""
        self.fingerprint(request)
        return self._keyed(request).key

    def rungs(self, request: Request) -> tuple[str, ...]:
        """The normalizations that changed *request*'s URL into its key (see :func:`rung_keys`).

        Computed on the spelling the spider wrote (its stamp's), since the
        normalization middleware has already made ``request.url`` canonical.
        Empty for ``dont_normalize_iri`` requests and URLs with no canonical form.
        """
        if as_given(request.meta):
            return ()
        try:
            return rung_keys(spelling(request, self.stamper.stamp_of(request)), self.config,
                             self.rules)
        except IRIError:
            return ()

    # --- fingerprint ---------------------------------------------------------

    def fingerprint(self, request: Request) -> bytes:
        """The 20-byte SHA-1 fingerprint of *request* (method, key URL, body).

        The key comes from the request's stamp (:mod:`iri_scrapy.plugin.stamp`):
        a request the plugin has already canonicalized is not canonicalized again.
        """
        verbatim = as_given(request.meta)
        cached = self.stamper.entry(request)  # the one look-up of the request's cache
        entry: _Entry | None = cached.keyed
        if entry is not None and entry.verbatim == verbatim:
            if entry.base is None:
                return entry.fp
            key = self._key(entry.base)
            if key == entry.key:
                return entry.fp
            entry.key = key
            entry.fp = self._hash(request, key)
            return entry.fp
        if self._idna2008 and compat.pending_idna2008():
            idna_convert(request)
        if verbatim:
            base = None
            key = request.url
        else:
            stamp = cached.stamp
            if stamp is None or stamp.url != request.url:
                stamp = self.stamper.stamp(request, cached=cached)
            base = stamp.base
            if base is None:
                key = request.url
            else:
                key = self._key(base)
                if self.rules is None:
                    base = None
        fp = self._hash(request, key)
        cached.keyed = _Entry(verbatim, base, key, fp)
        return fp

    def _keyed(self, request: Request) -> _Entry:
        """What :meth:`fingerprint` cached for *request* (it has been called)."""
        cached = self.stamper.cached(request)
        assert cached is not None and cached.keyed is not None
        keyed: _Entry = cached.keyed
        return keyed

    def _composed_fingerprint(self, request: Request) -> bytes:
        """SHA-1 of ours and the base fingerprinter's fingerprint (with a base only).

        The base fingerprints the request with its key as URL, so that IRI
        aliases stay one resource for it too (its other parts, e.g. headers, kept).
        """
        own = type(self).fingerprint(self, request)
        key = self._keyed(request).key
        keyed = request
        if key != request.url:
            try:
                keyed = request.replace(url=key)
            except ValueError:  # a key Request() refuses: the request as it is
                keyed = request
        return hashlib.sha1(own + self.base.fingerprint(keyed)).digest()  # noqa: S324

    def _hash(self, request: Request, url: str) -> bytes:
        # Byte for byte the text json.dumps(..., sort_keys=True) gives in Scrapy's
        # fingerprint(): {"body": <hex>, "headers": {...}, "method": ..., "url": ...}.
        headers = self._headers_json(request) if self._headers else "{}"
        text = (
            '{"body": "' + request.body.hex() + '", "headers": ' + headers
            + ', "method": ' + _json_str(request.method) + ', "url": ' + _json_str(url) + "}"
        )
        return hashlib.sha1(text.encode()).digest()  # noqa: S324 - an identifier, not security

    def _headers_json(self, request: Request) -> str:
        parts = []
        for name in self._headers:
            if name in request.headers:
                values = ", ".join(
                    '"' + v.hex() + '"' for v in request.headers.getlist(name)
                )
                parts.append(f'"{name.hex()}": [{values}]')
        return "{" + ", ".join(parts) + "}"

    def __repr__(self) -> str:
        base = "" if self.base is None else f" base={type(self.base).__qualname__}"
        return f"<{type(self).__name__} {self.config.options_tag()}{base}>"


def _build_base(crawler: Crawler) -> Any:
    """The fingerprinter named by :data:`BASE_SETTING` for *crawler*, or None."""
    value = crawler.settings.get(BASE_SETTING)
    if not value:
        return None
    cls = load_object(value)
    if isinstance(cls, type) and issubclass(cls, IRIRequestFingerprinter):
        raise ValueError(f"{BASE_SETTING} = {value!r}: the base of IRIRequestFingerprinter "
                         "must be another fingerprinter")
    from_crawler = getattr(cls, "from_crawler", None)  # as Scrapy builds components
    return from_crawler(crawler) if from_crawler is not None else cls()


#: Pairs of URLs for :func:`chain_problem`: stock canonicalization merges the first
#: pair (an empty query parameter dropped), the ladder keeps it apart (RFC 3987 5.3.3
#: never removes a query part); the second pair are aliases at level SCHEME (case,
#: default port, dot segments, an escaped unreserved character: 5.3.2, 5.3.3).
_PROBES = (
    ("http://iri-scrapy.invalid/item?id=1", "http://iri-scrapy.invalid/item?id=1&"),
    ("HTTP://Iri-Scrapy.INVALID:80/a/./b/%7euser", "http://iri-scrapy.invalid/a/b/~user"),
)


def key_of(base: str, config: IRIConfig, rules: RulesHook | None) -> str:
    """The dedup key of a stamp's *base*: the learned protocol rules (RFC 3987
    section 5.3.4), then the opt-in query heuristics (what the fingerprint hashes)."""
    if rules is not None:
        base = rules.apply(base)
    return config.apply_heuristics(base)


def chain_problem(fingerprinter: Any, config: IRIConfig) -> str | None:
    """None if *fingerprinter* keys requests as :class:`IRIRequestFingerprinter` does.

    An :class:`IRIRequestFingerprinter` passes as is; any other (scrapy-zyte-api's,
    scrapy-poet's, ...) is asked for the fingerprints of :data:`_PROBES` (plain GET
    requests that do not use Zyte API, ``meta["zyte_api_automap"] = False``), which
    must be equal or different exactly as ours are.  Otherwise a short phrase
    saying what is wrong.
    """
    if isinstance(fingerprinter, IRIRequestFingerprinter):
        return None
    if fingerprinter is None or not callable(getattr(fingerprinter, "fingerprint", None)):
        return "is not a fingerprinter"
    from scrapy import Request

    ours = IRIRequestFingerprinter(config=config)
    meta = {"zyte_api_automap": False}
    for a, b in _PROBES:
        ra, rb = Request(a, meta=dict(meta)), Request(b, meta=dict(meta))
        try:
            same = fingerprinter.fingerprint(ra) == fingerprinter.fingerprint(rb)
        except Exception as exc:  # noqa: BLE001 - any failure: unverified, said as such
            return f"could not be checked ({type(exc).__name__}: {exc})"
        if same != (ours.fingerprint(ra) == ours.fingerprint(rb)):
            verb = "merges" if same else "keeps apart"
            return f"{verb} {a} and {b} (IRIRequestFingerprinter is not in its chain)"
    return None


class KeyedFingerprinter:
    """The crawler's fingerprinter with the canonical key folded in: what the dupefilters key on.

    With scrapy-zyte-api (or scrapy-poet) on top of the chain, a request sent
    through Zyte API is fingerprinted from its API parameters with w3lib's
    ``canonicalize_url``, which merges ``/item?id=1&`` with ``/item?id=1`` (two
    resources under RFC 3987 5.3: a page lost).  Where the chain's fingerprint
    of a request differs from :class:`IRIRequestFingerprinter`'s (the chain did
    not fall back to ours), the key is the SHA-1 of both: two requests are
    duplicates only if both say so.  Where they are equal (every request the
    chain hands to ours) the chain's fingerprint is the key, unchanged.
    """

    def __init__(self, chain: Any, ours: IRIRequestFingerprinter) -> None:
        self.chain = chain
        self.ours = ours
        self.stamper = ours.stamper

    def fingerprint(self, request: Request) -> bytes:
        fp: bytes = self.chain.fingerprint(request)
        own = self.ours.fingerprint(request)
        if fp == own:
            return fp
        return hashlib.sha1(fp + own).digest()  # noqa: S324 - an identifier, not security

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {type(self.chain).__qualname__}+{self.ours!r}>"


def dedupe_fingerprinter(crawler: Crawler) -> Any:
    """What the dupefilters of *crawler* key requests on: the crawler's fingerprinter,
    folded with ours (:class:`KeyedFingerprinter`) when another one is on top of a
    chain that holds ours.  A chain without ours is the user's choice, kept as it is
    (the add-on says at start that IRI deduplication is off)."""
    chain = crawler.request_fingerprinter
    if isinstance(chain, IRIRequestFingerprinter):
        return chain
    ours = IRIRequestFingerprinter(crawler)
    if chain_problem(chain, ours.config) is not None:
        return chain
    return KeyedFingerprinter(chain, ours)


def spelling(request: Request, stamp: Stamp | None) -> str:
    """The URL as the spider wrote it: its *stamp*'s spelling (see
    :mod:`iri_scrapy.plugin.stamp`); for a request with no valid stamp (None),
    ``meta["iri_original"]`` when that is the same resource as ``request.url`` at
    level SCHEME, else ``request.url``.

    The check matters after a redirect: Scrapy copies meta, so ``iri_original``
    may still name the redirect's source.
    """
    if stamp is not None:
        return stamp.spelling
    url = request.url
    original = request.meta.get(META_ORIGINAL)
    if not original or original == url:
        return url
    try:
        same = retrieval_key(original) == retrieval_key(url)
    except IRIError:
        return url
    return original if same else url
