"""Protocol learning from what servers answer (RFC 3987 section 5.3.4).

:class:`IRIProtocolMiddleware` (downloader, 650) is the plugin's
:class:`~iri_scrapy.plugin.location.IRILocationMiddleware` (canonical redirect
``Location``, the server's own spelling followed once) and, at ``IRI_LEVEL =
"protocol"``, learns rules from redirects once their target met the dupefilter,
from 2xx responses (content digests, canonical links, robots.txt Clean-param),
and drops or defers the requests the learned rules merge (:mod:`.learned`).

Design: docs/plugin.md, docs/protocol.md; stats: docs/stats.md.
"""

from __future__ import annotations

import hashlib
import logging
from typing import TYPE_CHECKING, Any

from scrapy import Request, signals
from scrapy.exceptions import DontCloseSpider, IgnoreRequest
from scrapy.http import HtmlResponse, TextResponse

from iri_scrapy.core.errors import IRIError
from iri_scrapy.core.ladder import Level, normalize, retrieval_key
from iri_scrapy.core.query import strip_fragment
from iri_scrapy.core.resolve import resolve
from iri_scrapy.plugin.config import META_CALIBRATE, META_PENDING, META_SAMPLE
from iri_scrapy.plugin.context import CrawlContext
from iri_scrapy.plugin.links import browser_href
from iri_scrapy.plugin.location import IRILocationMiddleware, decode_location
from iri_scrapy.protocol.decoded import decoded
from iri_scrapy.protocol.evidence import (
    canonical_from_html,
    canonical_from_link_headers,
    parse_clean_param,
)
from iri_scrapy.protocol.fingerprint import Fingerprint, fingerprint
from iri_scrapy.protocol.learned import Learned, learned_of, write_rules

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from typing_extensions import Self

    from iri_scrapy.protocol.rules import ProtocolRules


logger = logging.getLogger(__name__)

#: Seconds between a section's first fetch and its late calibration fetch: long
#: enough for a clock shown to the second to move.
CALIBRATION_DELAY = 1.5
LATE = "late:"


class IRIProtocolMiddleware(IRILocationMiddleware):
    """Downloader middleware (priority 650): canonical redirect targets, 5.3.4 learning."""

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        context = CrawlContext.of(crawler)
        self.rules: ProtocolRules | None = context.rules
        self.learned: Learned | None = learned_of(context)
        # section -> the delayed call of its late calibration, and its request
        self._timers: dict[str, tuple[Any, Request]] = {}
        self.max_size = crawler.settings.getint("DOWNLOAD_MAXSIZE")
        self._dropped_connected = False  # request_dropped (see there)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        """Build for *crawler* (shares the crawler's ProtocolRules)."""
        mw = cls(crawler)
        if mw.rules is not None:  # (request_dropped: from the first redirect, _redirected)
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
        """Give back every deferred request, and every held one no page stands for
        (:meth:`Learned.unstood`), before the crawl may end; fetch the calibrations
        still waiting for their delay now."""
        learned = self.learned
        assert learned is not None
        waiting = False
        for section, (timer, late) in list(self._timers.items()):
            if timer.active():
                timer.cancel()
                self._fetch_again(section, late)
                waiting = True
        self._timers.clear()
        if learned.give_back(learned.settle(everything=True) + learned.unstood()) or waiting:
            raise DontCloseSpider

    def request_dropped(self, request: Request) -> None:
        """Learn the redirect that led to *request*, dropped by the scheduler.

        Connected when this process first carries a redirect to be learned there
        (:meth:`_redirected`): a signal handler costs every request the scheduler
        drops a dispatch, and a page's links are mostly dropped duplicates."""
        if self.rules is not None and META_PENDING in request.meta:
            self._learn(request.meta.pop(META_PENDING))
        self._calibrated(request, None)

    def _calibrated(self, request: Request, fp: Fingerprint | None) -> bool:
        """The calibration fetch *request* served *fp* (None: it failed, or was
        not a 2xx): learn what changes by chance, then observe the pages held
        meanwhile.  False if this process did not ask for it (a resumed crawl)."""
        section = request.meta.pop(META_CALIBRATE, None)
        if self.rules is None or not isinstance(section, str):
            return False
        self._inc(f"iri/protocol/calibration/{'fetched' if fp is not None else 'failed'}")
        self.rules.calibration.answered(request.url)
        try:
            served = retrieval_key(request.url)
        except IRIError:
            served = request.url
        if section.startswith(LATE):
            known = fp is not None and self.rules.calibration.land_late(
                served, section[len(LATE):], fp)
            held: list[tuple[str, Fingerprint]] = []
        else:
            known, held = self.rules.calibration.land(served, section, fp)
            timer = self._timers.get(section)
            if timer is not None and not self.rules.calibration.awaits_late(served, section):
                del self._timers[section]  # the second fetch showed changes: no third
                if timer[0].active():
                    timer[0].cancel()
                self.rules.calibration.answered(timer[1].url)
        if known and fp is not None:
            self.rules.reconsider()
        assert self.learned is not None
        for uri, page in held:
            self.learned.observe_content(uri, page)
        self.learned.requeue(force=True)  # what a counterexample stopped, if it stands
        self._fetch_wanted(request.priority)
        return known

    def _fetch_wanted(self, priority: int) -> None:
        """Fetch again each page whose section is calibrated on demand
        (:meth:`~.calibration.Calibration.want`: its content differed under a
        candidate rule), first in line."""
        assert self.rules is not None
        wanted = self.rules.calibration.wanted
        if not wanted or not self._engine_running():
            return
        while wanted:  # (each counted as asked for when it was queued)
            uri, section = wanted.pop()
            self._issue(Request(uri, dont_filter=True, priority=priority + 1000,
                                meta={META_CALIBRATE: section}))

    def _download(self, request: Request) -> None:
        """Fetch the calibration *request* past the scheduler
        (``engine.download_async()``, as robots.txt is): a measurement this process
        makes, not a page of the crawl, it never enters the frontier (a ``JOBDIR``,
        or a fleet's queue, where another worker would take it and this one would
        wait for it in vain).  Landed, failed or refused: :meth:`_calibrated`."""
        if self.rules is not None and META_CALIBRATE in request.meta:
            self.rules.calibration.asked(request.url)  # (answered: _calibrated)
        self._issue(request)

    def _issue(self, request: Request) -> None:
        """Download the calibration *request* now (:meth:`_download`)."""
        from scrapy.utils.defer import deferred_from_coro

        d = deferred_from_coro(self.crawler.engine.download_async(request))
        d.addBoth(lambda _: self._calibrated(request, None))  # (a no-op once landed)

    def _engine_running(self) -> bool:
        try:
            return self.crawler.engine is not None
        except RuntimeError:  # a middleware used outside a crawl (no engine yet)
            return False

    def _calibrate(self, request: Request, response: Response, served: str,
                   fp: Fingerprint) -> bool:
        """Start a calibration of *served*'s section if it is its first page (fetch
        it again, first in line); True if the page waits for its site's calibrations."""
        assert self.rules is not None
        calibration = self.rules.calibration
        if not fp.empty and isinstance(response, HtmlResponse) and self._engine_running():
            section = calibration.start(served, fp)
            if section is not None:
                self._download(Request(
                    response.url, dont_filter=True, priority=request.priority + 1000,
                    meta={META_CALIBRATE: section}))
                late = Request(response.url, dont_filter=True, priority=request.priority + 1000,
                               meta={META_CALIBRATE: LATE + section})
                calibration.asked(late.url)  # asked now, fetched after the delay
                from twisted.internet import reactor

                clock: Any = reactor  # (the installed reactor: IReactorTime)
                self._timers[section] = (clock.callLater(
                    CALIBRATION_DELAY, self._fetch_again, section, late), late)
        return calibration.hold(served, fp)

    def _fetch_again(self, section: str, request: Request) -> None:
        """Fetch *request* (a calibration) now."""
        self._timers.pop(section, None)
        self._issue(request)

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

    def _done(self, request: Request) -> None:
        """A fetch answered or failed: what was deferred on it is looked at (and a
        calibration fetch that did not serve a page teaches nothing)."""
        self._calibrated(request, None)
        if self.learned is not None:
            self.learned.fetched(request)
            self.learned.give_back(self.learned.settle())

    def _served(self, request: Request, response: Response) -> None:
        """A 2xx answer: evidence against the rules that would rewrite it, and more."""
        if self.rules is None:
            return
        try:
            served = retrieval_key(response.url)
        except IRIError:
            return
        self._inc("iri/protocol/contrary")
        revoked = dict(self.rules.revoked)
        if self.rules.observe_contrary(served):
            self._revoked(revoked, f"{served} served with status {response.status}")
        self._observe(served, request, response)

    def _observe(self, served: str, request: Request, response: Response) -> None:
        """Content, canonical link and Clean-param evidence of a 2xx response (5.3.4).

        A response whose content another spelling served in this process, one a
        rule relates to this one (a sample, ``meta["iri_protocol_sample"]``, that
        confirmed its rules; a fetch that confirmed or nominated a rule being
        learned) is dropped here (``IgnoreRequest``): the spider has had that
        resource, and the equal content is evidence about this very pair whatever
        becomes of the rule.  A page only an earlier run or another worker served
        does not count: its items may not be in a feed yet, and its own request
        may come back (a ``JOBDIR`` resumed after ``kill -9``), to be dropped as
        this one's duplicate.  One that did not confirm them goes on to the
        spider.  The body
        is read as the spider will get it (:mod:`.decoded`: this middleware runs
        before ``HttpCompressionMiddleware``); one that cannot be decoded is no
        evidence.
        """
        assert self.rules is not None and self.learned is not None
        rules = self.rules
        page = decoded(response, request.meta.get("download_maxsize", self.max_size))
        if page is None:
            self._inc("iri/protocol/content/undecodable")
            self.learned.requeue()
            return
        response = page
        text = response.text if isinstance(response, TextResponse) else None
        digest = (fingerprint(text) if text is not None else Fingerprint.exact(
            hashlib.blake2b(response.body, digest_size=16).digest()))
        if META_CALIBRATE in request.meta and self._calibrated(request, digest):
            raise IgnoreRequest(f"IRI protocol: {served} fetched twice to learn what "
                                "changes by chance on its site")
        held = self._calibrate(request, response, served, digest)
        if not digest.empty and not held:  # an empty page says nothing about the resource
            self.learned.observe_content(served, digest)
        if served.endswith("/robots.txt") and text is not None:
            for clean in parse_clean_param(text):
                rules.observe_clean_param(served, clean.params, clean.prefix)
        href = canonical_from_link_headers(
            decode_location(value) for value in response.headers.getlist(b"Link"))
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
        self._fetch_wanted(request.priority)
        replayed = self.learned.replayed  # (an earlier run's pages, another worker's:
        # their items may not be in a feed yet, and their own requests may come back)
        if not digest.empty and not held and rules.observing == served and (
                any(other not in replayed for other in rules.echoes)
                or rules.same_content(served, digest, replayed)):
            # the spider has had this resource: another spelling served here the
            # same content, one a rule (learned or being learned) relates to this
            # one (a sample that confirmed its rule, a fetch that confirmed one)
            sample = bool(request.meta.get(META_SAMPLE))
            self._inc(f"iri/protocol/{'sample' if sample else 'duplicate'}_dropped")
            raise IgnoreRequest(f"IRI protocol: {served} served the content of "
                                f"{rules.apply(served)} (a "
                                f"{'sample' if sample else 'fetch'} that confirmed its rule)")

    def _redirected(self, request: Request, response: Response, target: str) -> None:
        """A redirect to the canonical *target*: learned once the target met the
        dupefilter (its request carries it), or now if it is not followed."""
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
            if not self._dropped_connected:
                self._dropped_connected = True
                self.crawler.signals.connect(self.request_dropped,
                                             signal=signals.request_dropped)
        else:
            self._learn(pending)
