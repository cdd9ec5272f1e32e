"""Per-site calibration of content evidence: two fetches of one spelling (RFC 3987 section 5.3.4).

What changes between two responses of one resource differs from site to site
(counters, render times, rotating widgets, random lists, tokens in links): no
list of shapes anticipates it.  So the first HTML page of each site (its hosts
with and without ``www.``) is fetched a second time at once, and a third time a
few seconds later (what moves with the clock), and the fingerprints'
differences are what changes by chance there (:class:`~.fingerprint.Volatility`).
Pages of a site served while its first calibration is in flight wait
(:meth:`Calibration.hold`) and are judged when it lands: a comparison made
before would count the site's chrome noise as a difference.  Any other
*section* (a host and its first path segment) is calibrated on demand
(:meth:`Calibration.want`): when content first differs there under a candidate
rule, the page that differed is fetched once more, and the counterexample is
withdrawn if that shows the difference is chance (``ProtocolRules.reconsider``);
a section whose aliases serve equal content costs no fetch.  At most
:data:`MAX_CALIBRATIONS` sections per site.  Pure bookkeeping (no I/O, no
Scrapy): the middleware fetches, this decides.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from iri_scrapy.protocol.fingerprint import Fingerprint, Volatility
from iri_scrapy.protocol.transforms import split_uri

#: Sections of one site calibrated (each costs one extra fetch).
MAX_CALIBRATIONS = 8
#: Pages held per site while a calibration is in flight (beyond: not observed).
MAX_HELD = 512


def site_of(uri: str) -> str:
    """The site of a canonical URI: its authority without a leading ``www.``."""
    parts = split_uri(uri)
    authority = parts[1] if parts is not None else uri
    return authority[4:] if authority.startswith("www.") else authority


def section_of(uri: str) -> str:
    """The host and first path segment of *uri* (what one calibration covers)."""
    parts = split_uri(uri)
    if parts is None:
        return uri
    first = parts[2][1:].split("/", 1)[0] if parts[2].count("/") > 1 else ""
    return f"{parts[1]}/{first}"


@dataclass
class _Site:
    volatility: Volatility = field(default_factory=Volatility)
    sections: set[str] = field(default_factory=set)
    # section -> (URI, its first fetch): what a second fetch of that URI is compared with
    waiting: dict[str, tuple[str, Fingerprint]] = field(default_factory=dict)
    firsts: dict[str, tuple[str, Fingerprint]] = field(default_factory=dict)  # (the late one)
    held: list[tuple[str, Fingerprint]] = field(default_factory=list)
    lazy: dict[str, tuple[str, Fingerprint]] = field(default_factory=dict)  # (on demand)


class Calibration:
    """Per site: what changes by chance, and the calibrations in flight."""

    def __init__(self) -> None:
        self._sites: dict[str, _Site] = {}
        #: pages not observed because too many were held
        self.dropped = 0
        #: calibrations on demand to fetch: (URI, section) (:meth:`want`)
        self.wanted: list[tuple[str, str]] = []
        #: per site, the calibration fetches asked for and not landed yet
        #: (:meth:`asked`, :meth:`answered`)
        self._asked: Counter[str] = Counter()
        #: the fetch pairs learned from here, for a fleet's other workers (:meth:`take`);
        #: emptied by whoever shares them (at most :data:`MAX_HELD` kept)
        self.pairs: list[tuple[str, Fingerprint, Fingerprint]] = []

    def asked(self, uri: str) -> None:
        """A calibration fetch of *uri* was asked for (fetched now or after a delay)."""
        self._asked[site_of(uri)] += 1

    def answered(self, uri: str) -> None:
        """A calibration fetch of *uri* (:meth:`asked`) landed, failed or was refused."""
        site = site_of(uri)
        self._asked[site] -= 1
        if self._asked[site] <= 0:
            del self._asked[site]

    def unsettled(self, uri: str) -> bool:
        """True while a calibration of *uri*'s site is in flight: a content
        counterexample there may still prove chance (``ProtocolRules.reconsider``)."""
        return bool(self._asked) and site_of(uri) in self._asked

    def volatility(self, uri: str) -> Volatility:
        """What changes by chance on *uri*'s site (empty before any calibration)."""
        site = self._sites.get(site_of(uri))
        return site.volatility if site is not None else Volatility()

    def start(self, uri: str, fp: Fingerprint) -> str | None:
        """*uri* served *fp*: the section to calibrate by fetching *uri* again (the
        site's first page), or None."""
        site = self._sites.setdefault(site_of(uri), _Site())
        section = section_of(uri)
        if site.sections or fp.empty:
            return None
        site.sections.add(section)
        site.waiting[section] = site.firsts[section] = (uri, fp)
        return section

    def want(self, uri: str, fp: Fingerprint) -> str | None:
        """Content at *uri* (which served *fp*) differed from another page's: the
        section to calibrate by fetching *uri* again (queued in :attr:`wanted`),
        if it was not, within the budget; else None."""
        site = self._sites.setdefault(site_of(uri), _Site())
        section = section_of(uri)
        if section in site.sections or len(site.sections) >= MAX_CALIBRATIONS or fp.empty:
            return None
        site.sections.add(section)
        site.lazy[section] = (uri, fp)
        self.wanted.append((uri, section))
        return section

    def land_late(self, uri: str, section: str, fp: Fingerprint) -> bool:
        """A later fetch of *section*'s first page served *fp*: what changed since
        (a clock, a relative age) changes by chance too.  Holds nothing."""
        site = self._sites.get(site_of(uri))
        first = _pop(site.firsts, section, uri) if site is not None else None
        if site is None or first is None:
            return False
        self._learn(site, uri, first, fp)
        return True

    def hold(self, uri: str, fp: Fingerprint) -> bool:
        """Keep (*uri*, *fp*) until the site's calibrations land; False if none is
        in flight (observe it now)."""
        site = self._sites.get(site_of(uri))
        if site is None or not site.waiting:
            return False
        if len(site.held) < MAX_HELD:
            site.held.append((uri, fp))
        else:
            self.dropped += 1
        return True

    def land(self, uri: str, section: str,
             fp: Fingerprint | None) -> tuple[bool, list[tuple[str, Fingerprint]]]:
        """The second fetch of *section* served *fp* (None: it failed, nothing is
        learned): whether it was awaited (False: asked by another process, a
        resumed crawl, another worker of a fleet, or of another URI of the
        section), and the pages held that may be observed now."""
        site = self._sites.get(site_of(uri))
        lazy = _pop(site.lazy, section, uri) if site is not None else None
        if site is not None and lazy is not None:
            if fp is not None:
                self._learn(site, uri, lazy, fp)
            return True, []
        first = _pop(site.waiting, section, uri) if site is not None else None
        if site is None or first is None:
            return False, []
        if fp is not None:
            self._learn(site, uri, first, fp)
        if site.waiting:
            return True, []
        held, site.held = site.held, []
        return True, held

    def _learn(self, site: _Site, uri: str, first: Fingerprint, second: Fingerprint) -> None:
        site.volatility.learn(first, second)
        if len(self.pairs) < MAX_HELD:
            self.pairs.append((uri, first, second))

    def take(self, uri: str, first: Fingerprint, second: Fingerprint) -> None:
        """Two fetches of *uri* another worker of a fleet made: learned as this
        process's own, and *uri*'s section counted as calibrated (never fetched
        again here for it; a site's first calibration not started here)."""
        site = self._sites.setdefault(site_of(uri), _Site())
        site.sections.add(section_of(uri))
        site.volatility.learn(first, second)


def _pop(entries: dict[str, tuple[str, Fingerprint]], section: str,
         uri: str) -> Fingerprint | None:
    """The first fetch *section* waits a second fetch of, if that is *uri*'s
    (removed); else None, and nothing removed.  Only two fetches of one URI show
    what changes by chance: in a fleet, a calibration one worker asked for may
    be fetched by another, whose first page of the section is another page (all
    that differs between two pages learned as chance merged a shop's items)."""
    entry = entries.get(section)
    if entry is None or entry[0] != uri:
        return None
    del entries[section]
    return entry[1]
