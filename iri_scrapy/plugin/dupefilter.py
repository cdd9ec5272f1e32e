"""``IRIDupeFilter``: one fetch per canonical resource, in 8 bytes per URL.

``DUPEFILTER_CLASS = "iri_scrapy.IRIDupeFilter"``.  A request is a duplicate when
``crawler.request_fingerprinter`` (normally :class:`IRIRequestFingerprinter`, but
any configured fingerprinter works) gives a fingerprint already seen.  Seen
fingerprints are kept as 64-bit prefixes in a :class:`FingerprintSet` (see
:mod:`iri_scrapy.store.fpstore` for memory and collision bounds), and with
``JOBDIR`` in the resumable ``<JOBDIR>/iri_fingerprints.bin``.

Settings
--------

``DUPEFILTER_DEBUG`` (Scrapy's): log every duplicate, see below.  ``JOBDIR``
(Scrapy's): keep seen fingerprints in ``<JOBDIR>/iri_fingerprints.bin`` and
resume from it -- unless the crash-safe frontier scheduler is on (the add-on's
default with ``JOBDIR``): it builds this filter without the file, keeps the
seen-set in its own store, with the pending requests, and fills the filter with
:meth:`IRIDupeFilter.preload` (:mod:`iri_scrapy.frontier.jobdir`).
``IRI_JOBDIR_ALLOW_RESET`` (default ``False``): when that file
was written under another canonicalization version, other ``IRI_*`` options or
another fingerprinter class, set it aside and start afresh instead of refusing
to start (:class:`~iri_scrapy.store.fpstore.FingerprintFileMismatch`).  The
``IRI_*`` settings of :mod:`iri_scrapy.plugin.config` choose the rung stats'
level and options (and, through the fingerprinter, the keys).

Requests that pass although their fingerprint was seen
------------------------------------------------------

* ``dont_filter=True``: Scrapy's scheduler does not ask the dupefilter at all.
* **Redirect to the same key** (the scrapy#1225 trap: ``/a`` -> 301 -> ``/a#x``,
  or ``/%7Ea`` -> ``/~a``): when ``meta["redirect_urls"]`` is set and the
  fingerprint of the request equals that of the same request at
  ``redirect_urls[-1]`` (the URL it was redirected from), the request passes
  and counts ``iri/dupefilter/redirect_same_key``.  The redirect middleware's
  ``REDIRECT_MAX_TIMES`` bounds any loop.
* **Re-issued by the normalization middleware**: a request with
  ``meta["iri_renormalized"] = True`` (:data:`META_RENORMALIZED`) passes when its
  fingerprint equals that of the same request at ``meta["iri_original"]`` (or
  when no original is recorded): it is the request already seen, not a
  duplicate of it.  Counts ``iri/dupefilter/renormalized``.

Stats
-----

Counted in :meth:`IRIDupeFilter.log`, which the scheduler calls for each request
it drops as a duplicate:

``dupefilter/filtered``
    Scrapy's standard counter.
``iri/dupefilter/filtered``
    The same number, under this plugin's prefix.
``iri/dupefilter/rung/<key>``
    For each dropped request, one count for every normalization its own URL
    needed to reach its key (:func:`~iri_scrapy.plugin.fingerprinter.rung_keys`,
    computed with the IRI core whatever the fingerprinter): ``case``,
    ``character``, ``percent``, ``path``, ``scheme``, ``protocol`` (RFC 3987
    5.3.2.1-5.3.4), ``fragment`` (a fragment was dropped, section 5.1),
    ``heuristics`` (an opt-in query heuristic).  A dropped request whose URL was
    already its key counts ``simple`` (5.3.1) alone: it is the same string as
    a key already seen (the *first* spelling may have needed rungs: those were
    counted for nobody, since that request was not dropped).  A
    ``dont_normalize_iri`` request, or one with no canonical form, counts
    ``simple``.  So ``/a#x`` after ``/a`` counts ``fragment`` only, and
    ``/%7Ea`` after ``/~a`` counts ``percent``.

With ``DUPEFILTER_DEBUG`` every dropped request is logged (DEBUG) with the
spelling the spider wrote (``meta["iri_original"]``: ``request.url`` is already
canonical) and an ``explain()`` account of it against the first spelling seen
of its key, which is kept (in debug mode only) per fingerprint, naming the rung
that made them equal; otherwise only the first one is logged.

Subclassing (a Redis-backed filter)
-----------------------------------

Override :meth:`IRIDupeFilter.seen_add` (record a fingerprint, say whether it
was there), :meth:`clear`, and :meth:`open`/:meth:`close` as needed, and extend
:meth:`kwargs_from_crawler` to pass your own constructor arguments;
:meth:`from_crawler` and :meth:`from_spider` (what ``scrapy_redis``'s scheduler
calls) both build through it.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from scrapy.dupefilters import BaseDupeFilter

from iri_scrapy.core.errors import IRIError
from iri_scrapy.core.explain import explain
from iri_scrapy.core.ladder import CANONICALIZATION_VERSION
from iri_scrapy.plugin import compat  # noqa: F401 - checks the installed Scrapy first
from iri_scrapy.plugin.config import (
    META_DONT_NORMALIZE,
    META_ORIGINAL,
    META_RENORMALIZED,
    META_VERBATIM,
    IRIConfig,
    rules_for,
)
from iri_scrapy.plugin.fingerprinter import IRIRequestFingerprinter, rung_keys, spelling
from iri_scrapy.plugin.refusal import REASON_JOBDIR_MISMATCH, refuse_start
from iri_scrapy.store.fpstore import (
    FILENAME,
    FingerprintFile,
    FingerprintFileMismatch,
    FingerprintSet,
    fp64,
)

if TYPE_CHECKING:
    from collections.abc import Iterable

    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings
    from scrapy.statscollectors import StatsCollector
    from twisted.internet.task import LoopingCall
    from typing_extensions import Self

    from iri_scrapy.core.protocol import ProtocolRules

__all__ = [
    "IRIDupeFilter",
    "META_RENORMALIZED",
    "STAT_FILTERED",
    "STAT_IRI_FILTERED",
    "STAT_RUNG_PREFIX",
    "STAT_REDIRECT_SAME_KEY",
    "STAT_RENORMALIZED",
    "STAT_LOADED",
]

logger = logging.getLogger(__name__)

STAT_FILTERED = "dupefilter/filtered"
STAT_IRI_FILTERED = "iri/dupefilter/filtered"
STAT_RUNG_PREFIX = "iri/dupefilter/rung/"
STAT_REDIRECT_SAME_KEY = "iri/dupefilter/redirect_same_key"
STAT_RENORMALIZED = "iri/dupefilter/renormalized"
#: Fingerprints read back from ``JOBDIR`` at start.
STAT_LOADED = "iri/dupefilter/loaded"


class RequestFingerprinterProtocol(Protocol):
    """What Scrapy documents a ``REQUEST_FINGERPRINTER_CLASS`` must provide."""

    def fingerprint(self, request: Request) -> bytes: ...


def jobdir_setting(settings: BaseSettings) -> str | None:
    """``JOBDIR`` if set (created if missing), else None (as Scrapy's own filter reads it)."""
    path = settings.get("JOBDIR")
    if not path:
        return None
    Path(path).mkdir(parents=True, exist_ok=True)
    return str(path)


def _referer(request: Request) -> str | None:
    """The ``Referer`` header as text, for logs (undecodable bytes replaced)."""
    referer = request.headers.get("Referer")
    return None if referer is None else referer.decode("utf-8", errors="replace")


def _fingerprinter_path(fingerprinter: object) -> str:
    cls = type(fingerprinter)
    return f"{cls.__module__}.{cls.__qualname__}"


class IRIDupeFilter(BaseDupeFilter):
    """Scrapy ``DUPEFILTER_CLASS`` deduplicating on canonical-URI fingerprints.

    Arguments (all optional, so that tests and benchmarks can build one bare):
    *fingerprinter* (default: a fresh :class:`IRIRequestFingerprinter` over
    *config*), *config* (for per-rung stats and explain), *rules* (level
    PROTOCOL), *stats*, *jobdir* (keep ``iri_fingerprints.bin`` there),
    *debug* (``DUPEFILTER_DEBUG``), *allow_reset* (``IRI_JOBDIR_ALLOW_RESET``).
    """

    def __init__(
        self,
        *,
        fingerprinter: RequestFingerprinterProtocol | None = None,
        config: IRIConfig | None = None,
        rules: ProtocolRules | None = None,
        stats: StatsCollector | None = None,
        jobdir: str | Path | None = None,
        debug: bool = False,
        allow_reset: bool = False,
    ) -> None:
        self.config = config or IRIConfig()
        self.rules = rules
        self.fingerprinter: RequestFingerprinterProtocol = (
            fingerprinter or IRIRequestFingerprinter(config=self.config, rules=rules)
        )
        self.stats = stats
        self.debug = debug
        self.logdupes = True
        self.file: FingerprintFile | None = None
        self._first_seen: dict[bytes, str] = {}
        self._refusal: tuple[Crawler, FingerprintFileMismatch] | None = None
        self._flusher: LoopingCall | None = None
        if jobdir:
            self.file = FingerprintFile(
                f"{jobdir}/{FILENAME}",
                canonicalization_version=CANONICALIZATION_VERSION,
                tag=self.options_tag(),
                allow_reset=allow_reset,
            )
            self._set = self.file.seen
            if self.file.loaded:
                logger.info(
                    "Resumed %d request fingerprints from %s", self.file.loaded, self.file.path
                )
                self._inc(STAT_LOADED, self.file.loaded)
        else:
            self._set = FingerprintSet()

    # --- construction --------------------------------------------------------

    @classmethod
    def kwargs_from_crawler(cls, crawler: Crawler) -> dict[str, Any]:
        """Constructor arguments from a crawler (extend this in subclasses)."""
        settings = crawler.settings
        config = IRIConfig.from_settings(settings)
        return {
            "fingerprinter": crawler.request_fingerprinter,
            "config": config,
            "rules": rules_for(crawler, config),
            "stats": crawler.stats,
            "jobdir": jobdir_setting(settings),
            "debug": settings.getbool("DUPEFILTER_DEBUG"),
            "allow_reset": settings.getbool("IRI_JOBDIR_ALLOW_RESET", False),
        }

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        """Build for *crawler*; a ``JOBDIR`` file it must not use is refused at :meth:`open`.

        (Raised here, the error would be buried under Scrapy's clean-up of an
        engine with no slot yet; see :mod:`iri_scrapy.plugin.refusal`.)
        """
        kwargs = cls.kwargs_from_crawler(crawler)
        try:
            return cls(**kwargs)
        except FingerprintFileMismatch as exc:
            df = cls(**{**kwargs, "jobdir": None})  # the file is left untouched
            df._refusal = (crawler, exc)
            return df

    @classmethod
    def from_spider(cls, spider: Spider) -> Self:
        """For schedulers that build the dupefilter from the spider (``scrapy_redis``)."""
        return cls.from_crawler(spider.crawler)

    def options_tag(self) -> str:
        """What the stored keys depend on: the IRI options and the fingerprinter class."""
        fingerprinter = _fingerprinter_path(self.fingerprinter)
        return f"{self.config.options_tag()};fingerprinter={fingerprinter}"

    # --- the filter ------------------------------------------------------------

    def fingerprint(self, request: Request) -> bytes:
        """The request's fingerprint, from the configured fingerprinter."""
        return self.fingerprinter.fingerprint(request)

    def seen_add(self, fingerprint: bytes) -> bool:
        """Record *fingerprint*; True if it had been recorded before.

        The storage hook: a subclass keeping fingerprints elsewhere overrides this.
        """
        record = fp64(fingerprint)
        if self.file is not None:
            new = self.file.add(record)
        else:
            new = self._set.add(int.from_bytes(record, "big"))
        return not new

    def preload(self, records: Iterable[int]) -> int:
        """Add fingerprint *records* (the integer form of 8-byte records) to the seen-set.

        For a store that owns persistence (the crash-safe frontier scheduler
        builds this filter without ``jobdir`` and preloads it from its own store).
        Returns how many were new; counts them in ``iri/dupefilter/loaded``.
        """
        if self.file is not None:
            raise RuntimeError("preload() is for a filter without its own JOBDIR file")
        added = self._set.update(records)
        if added:
            logger.info("Resumed %d request fingerprints from the frontier store", added)
            self._inc(STAT_LOADED, added)
        return added

    def request_seen(self, request: Request) -> bool:
        """True if *request* is a duplicate to drop (see the module docstring)."""
        fp = self.fingerprint(request)
        if not self.seen_add(fp):
            if self.debug:  # the spelling the spider wrote (request.url is canonical)
                self._first_seen[fp64(fp)] = spelling(request)
            return False
        meta = request.meta
        redirect_urls = meta.get("redirect_urls")
        if redirect_urls and self._same_key_as(request, redirect_urls[-1], fp):
            self._inc(STAT_REDIRECT_SAME_KEY)
            return False
        if meta.get(META_RENORMALIZED):
            original = meta.get(META_ORIGINAL)
            if original is None or self._same_key_as(request, original, fp):
                self._inc(STAT_RENORMALIZED)
                return False
        return True

    def _same_key_as(self, request: Request, url: str, fp: bytes) -> bool:
        """True if *request* at *url* (same method, body, headers) has fingerprint *fp*.

        Tried with *request*'s meta, then without ``verbatim_url`` (which the
        normalization middleware may have added to the re-issued request only).
        """
        if url == request.url:
            return True
        try:
            other = request.replace(url=url)
        except ValueError:  # not a URL Scrapy accepts
            return False
        if self.fingerprint(other) == fp:
            return True
        if other.meta.get(META_VERBATIM):
            meta = dict(other.meta)
            del meta[META_VERBATIM]
            return self.fingerprint(other.replace(meta=meta)) == fp
        return False

    # --- duplicates: stats and log -------------------------------------------

    def rung_keys(self, request: Request) -> tuple[str, ...]:
        """The normalizations *request*'s URL needed (``("simple",)`` if none)."""
        meta = request.meta
        if meta.get(META_DONT_NORMALIZE) or (
            meta.get(META_VERBATIM) and META_ORIGINAL not in meta
        ):
            return ("simple",)
        try:
            # the spelling the spider wrote: request.url is already canonical
            keys = rung_keys(spelling(request), self.config, self.rules)
        except IRIError:
            keys = ()
        return keys or ("simple",)

    def log(self, request: Request, spider: Spider | None = None) -> None:
        """Count (and log) a request the scheduler dropped as a duplicate.

        Overrides the deprecated ``BaseDupeFilter.log`` without calling it: in
        Scrapy 2.19 the scheduler still calls ``df.log(request, spider)`` for every
        duplicate and only the base implementation warns.
        """
        keys = self.rung_keys(request)
        stats = self.stats
        if stats is not None:
            inc = stats.inc_value  # one look-up (Scrapy's collector wraps each one)
            inc(STAT_FILTERED)
            inc(STAT_IRI_FILTERED)
            for key in keys:
                inc(STAT_RUNG_PREFIX + key)
        extra = {"spider": spider} if spider is not None else None
        if self.debug:
            first = self._first_seen.get(fp64(self.fingerprint(request)))
            written = spelling(request)
            logger.debug(
                "Filtered duplicate request: %(request)s written as %(written)s (referer: "
                "%(referer)s; normalized by: %(rungs)s; first seen as %(first)s): %(explain)s",
                {
                    "request": request,
                    "written": written,
                    "referer": _referer(request),
                    "rungs": ", ".join(keys),
                    "first": first or "an earlier run",
                    "explain": self._explain(first, written),
                },
                extra=extra,
            )
        elif self.logdupes:
            logger.debug(
                "Filtered duplicate request: %(request)s (normalized by: %(rungs)s)"
                " - no more duplicates will be shown (see DUPEFILTER_DEBUG to show all"
                " duplicates, with the rung of RFC 3987 section 5.3 that merged them)",
                {"request": request, "rungs": ", ".join(keys)},
                extra=extra,
            )
            self.logdupes = False

    def _explain(self, first: str | None, url: str) -> str:
        """One line: the rung of RFC 3987 section 5.3 that made *url* equal *first*."""
        if not first:
            return "first spelling not kept (seen before this run)"
        if first == url:
            return "identical URL (5.3.1 simple string comparison)"
        cfg = self.config
        try:
            result = explain(first, url, cfg.level, keep_fragment=cfg.keep_fragments,
                             nfc=cfg.nfc, rules=self.rules)
        except IRIError as exc:
            return f"no explanation: {exc}"
        text = str(result).splitlines()[0]
        if result.fragments_dropped:
            text += ", fragments excluded (5.1)"
        return text

    def _inc(self, key: str, count: int = 1) -> None:
        if self.stats is not None:
            self.stats.inc_value(key, count)

    # --- life cycle ------------------------------------------------------------

    def open(self) -> None:
        """Start flushing the ``JOBDIR`` buffer once a second while the crawl runs.

        Refuses to start (the spider is closed with ``finish_reason``
        ``iri_jobdir_mismatch``, one ERROR line) if the ``JOBDIR`` file was
        written under other options and ``IRI_JOBDIR_ALLOW_RESET`` is off.
        """
        if self._refusal is not None:
            crawler, exc = self._refusal
            refuse_start(crawler, REASON_JOBDIR_MISMATCH, str(exc), exc)
            return
        if self.file is None or "twisted.internet.reactor" not in sys.modules:
            return
        from twisted.internet.task import LoopingCall

        self._flusher = LoopingCall(self.flush)
        self._flusher.start(1.0, now=False)

    def flush(self) -> None:
        """Write buffered fingerprint records to ``JOBDIR`` (no-op without one)."""
        if self.file is not None:
            self.file.flush()

    def close(self, reason: str = "") -> None:
        if self._flusher is not None and self._flusher.running:
            self._flusher.stop()
        self._flusher = None
        if self.file is not None:
            self.file.close()

    def clear(self) -> None:
        """Forget every fingerprint (``scrapy_redis``' scheduler calls this to flush)."""
        if self.file is not None and not self.file.closed:
            self.file.clear()
        else:
            self._set.clear()
        self._first_seen.clear()

    def __len__(self) -> int:
        return len(self._set)

    def __contains__(self, request: Request) -> bool:
        """True if *request*'s fingerprint was seen (no side effect)."""
        return int.from_bytes(fp64(self.fingerprint(request)), "big") in self._set
