"""Per-site calibration of content evidence: two fetches of one spelling (RFC 3987 section 5.3.4).

What changes between two responses of one resource differs from site to site
(counters, render times, rotating widgets, random lists, tokens in links): no
list of shapes anticipates it.  So the first HTML page of each site (its hosts
with and without ``www.``) is fetched a second time at once, and, if that showed
no change, a third time a few seconds later (what moves with the clock), and the
fingerprints' differences are what changes by chance there (:class:`~.fingerprint.Volatility`).
Pages of a site served while its first calibration is in flight wait
(:meth:`Calibration.hold`) and are judged when it lands: a comparison made
before would count the site's chrome noise as a difference.  A *section* (a
host and its first path segment; the first page's too: what its fetches showed
may have repeated by chance) is calibrated on demand (:meth:`Calibration.want`):
when content first differs there under a candidate rule, the page that differed
is fetched once more, and the counterexample is
withdrawn if that shows the difference is chance (``ProtocolRules.reconsider``);
a section whose aliases serve equal content costs no fetch, nor one whose pages
differ as other resources do (in three places or more, or only in the order of
what they share: :meth:`~.fingerprint.Volatility.explainable`; on two real
applications every such fetch was wasted).  Noise with few
values (a session id of three in every link, an A/B variant) repeats by chance:
a fetch that served again every block that differed (at one or two element
paths: :meth:`~.fingerprint.Volatility.repeated`) proves nothing, so it is
fetched again, at most :data:`ON_DEMAND_FETCHES` times in all (with three
values, 1 in 27 still repeats), and :data:`MAX_AGAIN` times per site (what
changes by chance is learned per site).  At most :data:`MAX_CALIBRATIONS` sections per
site.  Pure bookkeeping (no I/O, no Scrapy): the middleware fetches, this decides.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from iri_scrapy.protocol.fingerprint import Fingerprint, Volatility
from iri_scrapy.protocol.transforms import split_uri

#: Sections of one site calibrated (each costs one extra fetch).
MAX_CALIBRATIONS = 8
#: Fetches of one page a calibration on demand makes at most (:meth:`Calibration.land`).
ON_DEMAND_FETCHES = 3
#: Fetches again (beyond each section's first) per site: what changes by chance is
#: learned per site, so noise with few values, once seen to change, is known everywhere.
MAX_AGAIN = 2
#: Pages held per site while a calibration is in flight (beyond: not observed).
MAX_HELD = 512


def site_of(uri: str) -> str:
    """The site of a canonical URI: its authority without a leading ``www.``."""
    parts = split_uri(uri)
    authority = parts[1] if parts is not None else uri
    return authority[4:] if authority.startswith("www.") else authority


def section_of(uri: str) -> str:
    """The host and first path segment of *uri* (what one calibration covers):
    ``/item/7``, ``/item?id=7`` and ``/item`` are the section ``item``."""
    parts = split_uri(uri)
    if parts is None:
        return uri
    return f"{parts[1]}/{parts[2][1:].split('/', 1)[0]}"


@dataclass
class _Site:
    volatility: Volatility = field(default_factory=Volatility)
    sections: set[str] = field(default_factory=set)  # (the first page's: one per site)
    on_demand: set[str] = field(default_factory=set)  # (sections calibrated on demand)
    again: int = 0  # (fetches again of calibrations on demand: MAX_AGAIN)
    # section -> (URI, its first fetch): what a second fetch of that URI is compared with
    waiting: dict[str, tuple[str, Fingerprint]] = field(default_factory=dict)
    firsts: dict[str, tuple[str, Fingerprint]] = field(default_factory=dict)  # (the late one)
    held: list[tuple[str, Fingerprint]] = field(default_factory=list)
    lazy: dict[str, _OnDemand] = field(default_factory=dict)


@dataclass
class _OnDemand:
    """A calibration on demand in flight: *uri* served *first*, which differed
    from *other* (another page), and has been asked for *fetches* times again."""

    uri: str
    first: Fingerprint
    other: Fingerprint | None
    fetches: int = 1


class Calibration:
    """Per site: what changes by chance, and the calibrations in flight."""

    def __init__(self) -> None:
        self._sites: dict[str, _Site] = {}
        #: pages not observed because too many were held
        self.dropped = 0
        #: calibrations on demand to fetch: (URI, section) (:meth:`want`), each
        #: counted as asked for (:meth:`asked`) from the moment it is queued
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

    def want(self, uri: str, fp: Fingerprint, other: Fingerprint | None = None) -> str | None:
        """Content at *uri* (which served *fp*) differed from another page's
        (*other*): the section to calibrate by fetching *uri* again (queued in
        :attr:`wanted` and counted as asked for: what a counterexample there
        stopped waits for it), if it was not, within the budget; else None."""
        site = self._sites.setdefault(site_of(uri), _Site())
        section = section_of(uri)
        if section in site.on_demand or len(site.on_demand) >= MAX_CALIBRATIONS or fp.empty:
            return None
        if other is not None and not site.volatility.explainable(fp, other):
            return None  # another resource (:meth:`~.fingerprint.Volatility.explainable`)
        site.on_demand.add(section)
        site.lazy[section] = _OnDemand(uri, fp, other)
        self._queue(uri, section)
        return section

    def _queue(self, uri: str, section: str) -> None:
        self.wanted.append((uri, section))
        self.asked(uri)

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
        lazy = site.lazy.get(section) if site is not None else None
        if site is not None and lazy is not None and lazy.uri == uri:
            del site.lazy[section]
            if fp is not None:
                self._learn(site, uri, lazy.first, fp)
                if lazy.other is not None and lazy.fetches < ON_DEMAND_FETCHES and \
                        site.again < MAX_AGAIN and \
                        site.volatility.repeated(lazy.first, lazy.other, fp):
                    lazy.fetches += 1  # noise with few values may have repeated: again
                    site.again += 1
                    site.lazy[section] = lazy
                    self._queue(uri, section)
            return True, []
        first = _pop(site.waiting, section, uri) if site is not None else None
        if site is None or first is None:
            return False, []
        if fp is not None and self._learn(site, uri, first, fp):
            # it showed what changes by chance here: the later fetch is not needed (a
            # clock it would have caught is calibrated on demand: one path, one label)
            _pop(site.firsts, section, uri)
        if site.waiting:
            return True, []
        held, site.held = site.held, []
        return True, held

    def awaits_late(self, uri: str, section: str) -> bool:
        """True while the later fetch of *section*'s first page (*uri*) is still
        wanted (:meth:`land_late`): not once the second fetch showed changes."""
        site = self._sites.get(site_of(uri))
        entry = site.firsts.get(section) if site is not None else None
        return entry is not None and entry[0] == uri

    def _learn(self, site: _Site, uri: str, first: Fingerprint, second: Fingerprint) -> int:
        """Learn from two fetches of *uri*; the number of blocks that changed."""
        changed = site.volatility.learn(first, second)
        if len(self.pairs) < MAX_HELD:
            self.pairs.append((uri, first, second))
        return changed

    def take(self, uri: str, first: Fingerprint, second: Fingerprint) -> None:
        """Two fetches of *uri* another worker of a fleet made: learned as this
        process's own, and *uri*'s section counted as calibrated (never fetched
        again here for it; a site's first calibration not started here)."""
        site = self._sites.setdefault(site_of(uri), _Site())
        site.sections.add(section_of(uri))
        site.on_demand.add(section_of(uri))
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
