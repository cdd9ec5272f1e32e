"""``IRIDupeFilter``: one fetch per canonical resource, in 8 bytes per URL.

``DUPEFILTER_CLASS = "iri_scrapy.IRIDupeFilter"``.  A request is a duplicate when
``crawler.request_fingerprinter`` gives a fingerprint already seen, kept as a
64-bit prefix in a :class:`FingerprintSet` (:mod:`iri_scrapy.store.fpstore`) and,
with ``JOBDIR``, in ``<JOBDIR>/iri_fingerprints.bin`` (or in the frontier's store,
which fills it through :meth:`IRIDupeFilter.preload`).  A redirect to the same key
(scrapy#1225) passes.  Stats count each duplicate
by the ladder rung that made it equal (RFC 3987 sections 5.3.1-5.3.4, 5.1 for
fragments).  Subclasses move the seen-set elsewhere by overriding :meth:`seen_add`.

Design: docs/plugin.md; stats: docs/stats.md.
"""

from __future__ import annotations

import hashlib
import logging
import sys
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from scrapy import Request
from scrapy.dupefilters import BaseDupeFilter
from scrapy.utils.request import RequestFingerprinter

from iri_scrapy.core.errors import IRIError
from iri_scrapy.core.explain import ExplainedRules, explain
from iri_scrapy.core.ladder import CANONICALIZATION_VERSION
from iri_scrapy.core.query import strip_fragment
from iri_scrapy.plugin import compat  # noqa: F401 - checks the installed Scrapy first
from iri_scrapy.plugin.config import (
    META_KEYED,
    META_VERBATIM,
    IRIConfig,
    setting,
)
from iri_scrapy.plugin.context import CrawlContext
from iri_scrapy.plugin.fingerprinter import (
    IRIRequestFingerprinter,
    KeyedFingerprinter,
    dedupe_fingerprinter,
    key_of,
    spelling,
)
from iri_scrapy.plugin.refusal import REASON_JOBDIR_MISMATCH, refuse_start
from iri_scrapy.plugin.report_extension import (
    dupefilter_closed,
    dupefilter_opened,
    note_duplicate,
)
from iri_scrapy.plugin.stamp import Stamp, Stamper, as_given
from iri_scrapy.store.fpstore import (
    FILENAME,
    FingerprintFile,
    FingerprintFileMismatch,
    FingerprintSet,
    fp64,
)

if TYPE_CHECKING:
    from collections.abc import Iterable

    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings
    from scrapy.statscollectors import StatsCollector
    from twisted.internet.task import LoopingCall
    from typing_extensions import Self



logger = logging.getLogger(__name__)

STAT_FILTERED = "dupefilter/filtered"
#: One count per duplicate: the rung that made it equal to the first spelling.
STAT_DECIDED_BY_PREFIX = "iri/dupefilter/decided_by/"
#: Fetches stock Scrapy's fingerprint would have made that we did not: one per
#: distinct stock fingerprint among the duplicates it tells apart from their page.
STAT_STOCK_ALIASES = "iri/dupefilter/stock_aliases"
#: First spellings kept for ``decided_by`` (those a rung changed, or rules or heuristics
#: keyed elsewhere; all in debug).
FIRST_SPELLINGS_KEPT = 100_000
STAT_REDIRECT_SAME_KEY = "iri/dupefilter/redirect_same_key"
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


def _decided(first: str, written: str, cfg: IRIConfig, rules: ExplainedRules | None) -> str:
    """The rung at which *written* became equal to *first* (:func:`iri_scrapy.explain`)."""
    try:
        result = explain(first, written, cfg.level, keep_fragment=cfg.keep_fragments,
                         nfc=cfg.nfc, rules=rules)
    except IRIError:
        return "simple"
    rung = result.rung
    if rung is None:
        return "heuristics"
    if rung.key == "simple" and result.fragments_dropped:
        return "fragment"
    return rung.key


@lru_cache(maxsize=16384)
def _decided_cached(first: str, written: str, cfg: IRIConfig) -> str:
    return _decided(first, written, cfg, None)


_STOCK_FINGERPRINTER = RequestFingerprinter()


@lru_cache(maxsize=16384)
def _stock_url(url: str) -> bytes:
    """Stock Scrapy's fingerprint of a GET request for a link written *url*."""
    return _STOCK_FINGERPRINTER.fingerprint(Request(url))


def _fingerprinter_path(fingerprinter: object) -> str:
    if isinstance(fingerprinter, KeyedFingerprinter):
        return f"{_fingerprinter_path(fingerprinter.chain)}+key"
    cls = type(fingerprinter)
    return f"{cls.__module__}.{cls.__qualname__}"


class IRIDupeFilter(BaseDupeFilter):
    """Scrapy ``DUPEFILTER_CLASS`` deduplicating on canonical-URI fingerprints.

    Arguments (all optional, so that tests and benchmarks can build one bare):
    *fingerprinter* (default: a fresh :class:`IRIRequestFingerprinter` over
    *config*), *config* (for per-rung stats and explain), *rules* (level
    PROTOCOL), *stats*, *jobdir* (keep ``iri_fingerprints.bin`` there),
    *debug* (``DUPEFILTER_DEBUG``), *allow_reset* (``IRI_JOBDIR_ALLOW_RESET``),
    *learned* (level PROTOCOL, with *rules*: the crawler's
    :class:`~iri_scrapy.protocol.learned.Learned` of them, built on the same stamper),
    *context* (the crawl's :class:`~iri_scrapy.plugin.context.CrawlContext`: its report).
    """

    def __init__(
        self,
        *,
        fingerprinter: RequestFingerprinterProtocol | None = None,
        config: IRIConfig | None = None,
        rules: Any = None,
        stats: StatsCollector | None = None,
        jobdir: str | Path | None = None,
        debug: bool = False,
        allow_reset: bool = False,
        learned: Any = None,
        context: CrawlContext | None = None,
    ) -> None:
        #: the crawl's shared state (its report); a private one when built bare
        self.context = context if context is not None else CrawlContext()
        self.config = config or IRIConfig()
        self.rules = rules
        self.fingerprinter: RequestFingerprinterProtocol = (
            fingerprinter or IRIRequestFingerprinter(config=self.config, rules=rules)
        )
        #: the stamps of the requests: our fingerprinter's, else the crawl's
        stamper = getattr(self.fingerprinter, "stamper", None)
        self.stamper: Stamper = (stamper if isinstance(stamper, Stamper)
                                 else Stamper.of(self.context))
        if rules is not None and learned is None:  # what it skips would be lost
            raise ValueError("IRIDupeFilter: rules without learned (the Learned that keeps "
                             "what they skip, iri_scrapy.protocol.learned)")
        #: At level PROTOCOL: what learned rules skipped (given back if one is revoked).
        self.learned = learned
        if learned is not None:  # what it gives back passes the filter if it has the key
            learned.seen = self.__contains__
        self.stats = stats
        self.debug = debug
        self.logdupes = True
        self.file: FingerprintFile | None = None
        #: fp64 -> the first spelling of that key (when a rung changed it, or in debug)
        self._first_seen: dict[bytes, str] = {}
        self._requests = 0
        self._decided: dict[str, int] = {}
        #: stock fingerprints (8 bytes) of the duplicates counted in STAT_STOCK_ALIASES
        self._stock_seen = FingerprintSet()
        # (request, fingerprint) of the last request_seen(): the scheduler calls
        # log() for the same request right after it
        self._last: tuple[Request | None, bytes] = (None, b"")
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
        context = CrawlContext.of(crawler)
        return {
            "fingerprinter": dedupe_fingerprinter(crawler),
            "config": context.config,
            "rules": context.rules,
            "learned": context.learned_of_rules(),
            "context": context,
            "stats": crawler.stats,
            "jobdir": jobdir_setting(settings),
            "debug": settings.getbool("DUPEFILTER_DEBUG"),
            "allow_reset": setting(settings, "IRI_JOBDIR_ALLOW_RESET"),
        }

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        """Build for *crawler*; a ``JOBDIR`` file it must not use is refused at :meth:`open`.

        (Raised here, the error would be buried under Scrapy's clean-up of an
        engine with no slot yet; see :mod:`iri_scrapy.plugin.refusal`.)
        """
        kwargs = cls.kwargs_from_crawler(crawler)
        try:
            df = cls(**kwargs)
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

    def seen_fingerprint(self, request: Request) -> bytes:
        """The fingerprint :meth:`request_seen` just computed for *request* (else computed)."""
        last, fp = self._last
        return fp if last is request else self.fingerprint(request)

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
        """True if *request* is a duplicate to drop (the exceptions: docs/plugin.md)."""
        self._requests += 1
        fp = self.fingerprint(request)
        self._last = (request, fp)
        if not self.seen_add(fp):
            return self._first(request, fp)
        if not self._duplicate(request, fp):
            return False
        # at level PROTOCOL: kept if a learned rule merged it, or fetched as its sample
        return self.learned is None or self.learned.duplicate(request)

    def _first(self, request: Request, fp: bytes) -> bool:
        """Keep the first spelling of a new key (for the duplicates' stats); False."""
        stamp = self.stamper.stamp_of(request)
        if self.rules is not None:  # learned rules move keys: which one this request added
            request.meta[META_KEYED] = fp64(fp).hex()
            if self.learned is not None and stamp is not None and stamp.base is not None:
                self.learned.admitted(stamp.base, self.rules.apply(stamp.base))
        if self.debug:  # the spelling the spider wrote (request.url is canonical)
            self._first_seen[fp64(fp)] = spelling(request, stamp)
        elif (stamp is not None and (not stamp.canonical or self._moved(stamp))
                and len(self._first_seen) < FIRST_SPELLINGS_KEPT):
            self._first_seen[fp64(fp)] = stamp.spelling
        return False

    def _moved(self, stamp: Stamp) -> bool:
        """True if learned rules or the query heuristics key *stamp* elsewhere than its
        base (its spelling is then kept: the key would not stand for it)."""
        config = self.config
        if stamp.base is None or (self.rules is None and not config.drop_query_params
                                  and not config.sort_query):
            return False
        return key_of(stamp.base, config, self.rules) != stamp.base

    def _duplicate(self, request: Request, fp: bytes) -> bool:
        """A seen key: True, except for a redirect to its source's key (see docs/plugin.md)."""
        redirect_urls = request.meta.get("redirect_urls")
        if (redirect_urls and self._same_key_as(request, redirect_urls[-1], fp)
                and self._added_by_source(request, fp)):
            self._inc(STAT_REDIRECT_SAME_KEY)
            return False
        return True

    def _added_by_source(self, request: Request, fp: bytes) -> bool:
        """For a redirect to the key of its source: True if that source's own visit
        added the key.  At level PROTOCOL a rule learned since may have merged the
        source's key with one another request added (``/a`` redirected to ``/a/``,
        linked and fetched too), or with a page already served: then the redirect
        is a duplicate like any other."""
        if self.rules is None:
            return True
        keyed = request.meta.get(META_KEYED)
        if keyed is not None and keyed != fp64(fp).hex():
            return False
        stamp = self.stamper.stamp_of(request)
        return not (stamp is not None and stamp.base is not None
                    and self.rules.was_served(stamp.base))

    def _same_key_as(self, request: Request, url: str, fp: bytes) -> bool:
        """True if *request* at *url* (same method, body, headers) has fingerprint *fp*.

        Tried with *request*'s meta, then without ``verbatim_url`` (which the
        scheduler's entry may have added to the redirect only, rewriting it).
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

    def decided_by(self, request: Request, first: str | None = None,
                   key: str | None = None) -> str:
        """The rung that made *request* a duplicate (see ``iri/dupefilter/decided_by``).

        *first*: the first spelling of its key, if known; else the key itself
        (*key*, if the caller has it: :func:`key_of` of the stamp's base).
        """
        stamp = self.stamper.stamp_of(request)
        if stamp is None or stamp.base is None or as_given(request.meta):
            return "simple"
        written = stamp.spelling
        cfg = self.config
        if first is None:  # not kept: the key stands for it (rules and heuristics applied)
            first = key if key is not None else key_of(stamp.base, cfg, self.rules)
            if first == stamp.base and stamp.canonical:  # equal as written, fragment aside
                return "fragment" if written != stamp.base else "simple"
        if first == written:
            return "simple"
        if self.rules is None:  # pages repeat their links: cached per pair of spellings
            return _decided_cached(first, written, cfg)
        return _decided(first, written, cfg, self.rules)

    def stock_key(self, stamp: Stamp | None, first: str | None,
                  key: str | None = None) -> bytes | None:
        """The stock fingerprint (8 bytes) of a duplicate stock Scrapy's fingerprint
        tells apart from the first spelling of its key (*first*; None: the key
        itself, *key* if the caller has it), which stock would have fetched as
        another page; else None."""
        if stamp is None or stamp.base is None:
            return None
        other = (first if first is not None else key if key is not None
                 else key_of(stamp.base, self.config, self.rules))
        written = stamp.spelling
        if other == written or strip_fragment(other) == strip_fragment(written):
            return None  # stock's fingerprint drops the fragment too
        try:
            mine = _stock_url(written)
            if _stock_url(other) == mine:
                return None
        except (ValueError, TypeError):  # stock could not even spell one of them alike
            return hashlib.blake2b(written.encode("utf-8", "surrogatepass"),
                                   digest_size=8).digest()
        return fp64(mine)

    def log(self, request: Request, spider: Spider | None = None) -> None:
        """Count (and log) a request the scheduler dropped as a duplicate.

        Overrides the deprecated ``BaseDupeFilter.log`` without calling it: in
        Scrapy 2.19 the scheduler still calls ``df.log(request, spider)`` for every
        duplicate and only the base implementation warns.  Two stats calls per
        duplicate (``dupefilter/filtered``, ``iri/dupefilter/decided_by/<rung>``):
        each costs about as much as the rest of this method.
        """
        last = self._last
        fp = last[1] if last[0] is request else self.fingerprint(request)
        record = fp64(fp)
        first = self._first_seen.get(record)
        stamp = self.stamper.stamp_of(request)
        key = None  # the key, computed once for both (the learned rules' apply is not free)
        if first is None and stamp is not None and stamp.base is not None:
            key = key_of(stamp.base, self.config, self.rules)
        rung = self.decided_by(request, first, key)
        stock = self.stock_key(stamp, first, key)
        new = stock is not None and self._stock_seen.add(int.from_bytes(stock, "big"))
        self._decided[rung] = self._decided.get(rung, 0) + 1
        stats = self.stats
        if stats is not None:
            inc = stats.inc_value  # one look-up (Scrapy's collector wraps each one)
            inc(STAT_FILTERED)
            inc(STAT_DECIDED_BY_PREFIX + rung)
            if new:
                inc(STAT_STOCK_ALIASES)
        note_duplicate(self.context, request, record, stamp, first, rung, stock)
        if self.debug or self.logdupes:
            _log_duplicate(self, request, stamp, rung, first,
                           {"spider": spider} if spider is not None else None)

    def summary(self) -> str:
        """The close line: requests, duplicates by rung, the fetches stock would have made."""
        dropped = sum(self._decided.values())
        by_rung = ", ".join(f"{k} {v}" for k, v in sorted(
            self._decided.items(), key=lambda kv: (-kv[1], kv[0])))
        return (
            f"IRI dupefilter: {self._requests} requests, {dropped} duplicates dropped"
            f"{f' (decided by: {by_rung})' if by_rung else ''}; stock Scrapy's fingerprint "
            f"would have made {len(self._stock_seen)} more fetches"
        )

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
        dupefilter_opened(self.context, lambda: self._requests)
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
        logger.info(self.summary())
        dupefilter_closed(self.context, self._requests, reason)
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


def _log_duplicate(df: IRIDupeFilter, request: Request, stamp: Stamp | None, rung: str,
                   first: str | None, extra: dict[str, Any] | None) -> None:
    """The DEBUG line of a dropped duplicate: each one with ``DUPEFILTER_DEBUG`` (the
    spelling, the referer, the rung and why), else the first one only."""
    if df.debug:
        written = spelling(request, stamp)
        logger.debug(
            "Filtered duplicate request: %(request)s written as %(written)s (referer: "
            "%(referer)s; decided by: %(rungs)s; first seen as %(first)s): %(explain)s",
            {
                "request": request,
                "written": written,
                "referer": _referer(request),
                "rungs": rung,
                "first": first or "an earlier run",
                "explain": df._explain(first, written),
            },
            extra=extra,
        )
        return
    logger.debug(
        "Filtered duplicate request: %(request)s (decided by: %(rungs)s)"
        " - no more duplicates will be shown (see DUPEFILTER_DEBUG to show all"
        " duplicates, with the rung of RFC 3987 section 5.3 that merged them)",
        {"request": request, "rungs": rung},
        extra=extra,
    )
    df.logdupes = False
