"""What the protocol rung skipped in one crawl, given back when a rule is revoked.

At ``IRI_LEVEL = "protocol"`` a crawler shares one
:class:`~iri_scrapy.protocol.rules.ProtocolRules` (what was learned, RFC 3987
section 5.3.4) and one :class:`Learned`: every request the dupefilter dropped
*only because a learned rule merged it* with a key already seen, kept with the
key it was merged into.  When a rule stops (a counterexample, a later redirect:
``ProtocolRules.revision`` moves), each kept request whose key changed is handed
back to the engine (``iri/protocol/requeued``): nothing a rule skipped is lost
when the rule turns out wrong.  Requests that would only re-confirm a rule
still being learned are deferred until the fetches that decide it are done
(:meth:`Learned.defer`, :meth:`Learned.settle`; all are given back when the
crawl is idle): a site's first pages link many aliases of one kind at once, and
fetching them all would confirm one rule many times over.  It also publishes
the learner's counts as ``iri/protocol/<source>/<event>`` stats and carries the persistence hook the
``JOBDIR`` frontier sets (:mod:`iri_scrapy.protocol.jobdir_store`).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from iri_scrapy.plugin import compat  # noqa: F401  (checks the installed Scrapy first)
from iri_scrapy.plugin.config import META_DEFERRED, META_KEYED, META_SAMPLE, IRIConfig
from iri_scrapy.plugin.stamp import Stamper
from iri_scrapy.protocol.fingerprint import Fingerprint
from iri_scrapy.protocol.inflight import InFlight
from iri_scrapy.protocol.transforms import MAX_PAGES_PER_SCOPE, split_uri

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy import Request
    from scrapy.crawler import Crawler

    from iri_scrapy.plugin.context import CrawlContext
    from iri_scrapy.protocol.rules import ProtocolRules
    from iri_scrapy.protocol.transforms import Identity


logger = logging.getLogger(__name__)



class Sink(Protocol):
    """Where a frontier store keeps what decides whether a page is fetched (the
    ``JOBDIR`` store: :mod:`.jobdir_store`; the Redis fleet: :mod:`.redis_store`),
    told in the same reactor turn as each decision (one transaction with it)."""

    def hold(self, base: str, via: str, merged: str, holder: str,
             request: Request) -> None:
        """A request held back (key before the rules *base*; kept while
        ``rules.apply(via) == merged``; *holder*: the alias holding *merged*, or "")."""

    def release(self, base: str) -> None:
        """The request held as *base* was given back (or dropped for good)."""

    def holder(self, key: str, base: str | None) -> None:
        """The request of key before the rules *base* holds *key* (None: its own spelling)."""

    def page(self, uri: str, digest: bytes) -> None:
        """A 2xx page at *uri* served content of *digest* (what samples compare to)."""


class Learned:
    """The requests learned rules skipped, and the stats of the learner (see the module doc)."""

    def __init__(self, crawler: Crawler | None, rules: ProtocolRules,
                 stamper: Stamper | None = None) -> None:
        self.crawler = crawler
        self.rules = rules
        #: the crawl's stamper (the stamps of the requests it is asked about)
        self.stamper = stamper if stamper is not None else Stamper(IRIConfig())
        #: key before the rules -> (via, key merged into, the request): kept while
        #: ``rules.apply(via) == merged``; *via* is the key itself, or the alias
        #: served first that a rule maps onto it
        self.skipped: dict[str, tuple[str, str, Request]] = {}
        #: requests kept at download (:meth:`stale`): the filter has their own key
        self._passed: set[str] = set()
        #: the dupefilter's ``request in df`` (no side effect), set by the filter
        self.seen: Callable[[Request], bool] | None = None
        self.sink: Sink | None = None
        #: keys before the rules fetched as samples, or given back at the close
        #: (:meth:`unstood`): each alias is counted, and fetched past the rules, once
        #: (in a fleet the page a request held here stands for may be another
        #: worker's, so its copies met again would be given back at every idle)
        self.sampled: set[str] = set()
        self._revision = rules.revision
        self._published: dict[str, int] = {}
        #: the fetches in flight (what each would teach the rules being learned)
        self.flight = InFlight(rules)
        #: key -> (via, merged, request): deferred until their rules are decided
        self.deferred: dict[str, tuple[str, str, Request]] = {}
        #: (rule, folder) pairs a closing sample was taken for (:meth:`unstood`)
        self._closing_checked: set[tuple[Identity, str]] = set()
        #: key -> key before the rules of the request that added it, moved by a rule
        self._holders: dict[str, str] = {}
        #: pages this process did not serve (an earlier run's, another worker's),
        #: until it serves them (:meth:`observe_content`)
        self.replayed: set[str] = set()

    def duplicate(self, request: Request) -> bool:
        """For the dupefilter, on a request whose key was seen: True to drop it.

        A request that only a learned rule merged is kept (see :meth:`changed`),
        or fetched instead as the rule's sample (``meta["iri_protocol_sample"]``,
        False) that checks the rule against the content it serves.  Each alias
        (key before the rules) counts once, however often pages link it.
        """
        if not self._holders and self.rules.moves_nothing():
            return True  # no learned rule moved a key: a plain duplicate
        stamp = self.stamper.stamp_of(request)
        if stamp is None or stamp.base is None:
            return True
        base = stamp.base
        if base in self.skipped or base in self.sampled or base in self.deferred:
            return True  # this alias was met before: counted then
        merged, used = self.rules.trace(base)
        if not self._backed(base, merged):
            # the request that added this key was moved elsewhere by a rule that
            # stopped, and no page stands for the key: this one holds it now
            self.admitted(base, merged)
            return False
        if merged == base:
            if merged not in self._holders:
                return True  # the same key without any learned rule: a plain duplicate
            # the key's holder is an alias a rule moved here: kept while that stands
            if self._sampled(base, self._holders[merged], request):
                return False
            self.keep(base, base, merged, request)
            self.publish()
            return True
        if used and not self.rules.skip(used):
            self.sampled.add(base)
            request.meta[META_SAMPLE] = True
            self.publish()
            return False
        self.keep(base, base, merged, request)
        self.publish()
        return True

    def _sampled(self, base: str, alias: str, request: Request) -> bool:
        """Whether *request* (key before the rules *base*), which rules merge only
        because they map the *alias* served or scheduled first onto its key, is
        fetched as a sample of those rules: counted as one of their merges
        (:meth:`ProtocolRules.skip`), as a request they move is, else a wrong
        rule met alias first would hold every page behind its alias unchecked."""
        used = self.rules.trace(alias)[1]
        if not used or self.rules.skip(used):
            return False
        self.sampled.add(base)
        request.meta[META_SAMPLE] = True
        self.publish()
        return True

    def stale(self, request: Request) -> bool:
        """For the downloader, on a request about to be fetched: True to skip it.

        The dupefilter decided when the request was scheduled; rules learned
        since may merge it with a page already served (the links of the first
        pages of a site are all scheduled before any rule is known).  Such a
        request is kept, or sampled, as :meth:`duplicate` does.
        """
        meta = request.meta
        sample = bool(meta.get(META_SAMPLE))
        if not sample and request.dont_filter and not meta.get(META_DEFERRED):
            return False  # the spider's own dont_filter: always fetched
        # stamped here if not yet: a request read back from the frontier's store (a
        # fleet worker's lease, a resumed JOBDIR) is a new object, with no stamp
        stamp = self.stamper.stamp_for(request)
        if stamp is None or stamp.base is None:
            return False
        base = stamp.base
        if request.method == "GET" and (self._served_here(base) or base in self.flight):
            # this very spelling was served here (or is in flight): the filter let it
            # through again only because rules learned since gave it another key
            # (or another spelling of its base is kept); a sample of it would
            # compare nothing new (the page itself is compared when served)
            self.rules.events["refetch-avoided"] += 1
            return True
        if sample:
            return False
        # kept from here, it passed the filter under its own key: given back past it
        # (a copy of this spelling kept already stands for it: one request per key,
        # as the filter would have said had the rule been known when it was added)
        if self.rules.served(base) or self.flight.merged(base):
            self._passed.add(base)
            return self.duplicate(request)
        if base in self.sampled:
            return False
        kept = base in self.skipped
        alias = self.rules.served_alias(base)
        if alias is None or (not kept and self._sampled(base, alias, request)):
            if kept:  # no page stands for its key: this spelling is fetched now,
                self._release(base)  # and its kept copy has nothing left to give back
            return False
        self._passed.add(base)
        self.keep(base, alias, base, request)  # given back if the alias stops mapping here
        self.rules.events["alias-first"] += 1
        self.publish()
        return True

    def defer(self, request: Request) -> bool:
        """For the downloader, after :meth:`stale`: True if *request* is deferred
        (kept, not fetched now) until the rules it would only re-confirm are
        decided (:meth:`settle`); else False, and it is counted in flight until
        :meth:`fetched`.

        Deferred: every rule not yet in force that would rewrite it
        (:meth:`ProtocolRules.pending`) has its image's resource fetched twice
        already (or in flight), or once with enough confirming fetches in
        flight.  Kept as a skipped request is (persisted by the frontier's hook),
        so a crash loses nothing either.
        """
        meta = request.meta
        sample = bool(meta.get(META_SAMPLE))
        if not sample and request.dont_filter and not meta.get(META_DEFERRED):
            return False
        stamp = self.stamper.stamp_for(request)  # see stale()
        if stamp is None or stamp.base is None:
            return False
        base = stamp.base
        if sample:  # never deferred; in flight (another request of base waits for it)
            self.flight.start(request, base, [])
            return False
        pending = self.rules.pending(base, self.flight.bases)
        if pending and not meta.get(META_DEFERRED) and not self.flight.useful(pending):
            merged = self.rules.apply(pending[0][1])  # its key once the rule is in force
            if merged == self.rules.apply(base):
                # the rule would not move it: it holds its key (stale() found no page
                # served under it), and deferring would only delay its one fetch
                merged = ""
        else:
            merged = ""
        if merged:
            self.deferred[base] = (base, merged, request)
            if self.sink is not None:
                self.sink.hold(base, base, merged, "", request)
            self.rules.events["deferred"] += 1
            self.publish()
            return True
        self.flight.start(request, base, pending)
        return False

    def fetched(self, request: Request) -> None:
        """*request*, counted in flight by :meth:`defer`, is done (a response, an error)."""
        self.flight.done(request)

    def settle(self, *, everything: bool = False) -> list[Request]:
        """Decide the deferred requests whose rules moved: merged by a rule now in
        force (kept as skipped), or given back when the rule was refuted or a
        fetch of theirs is wanted again; with *everything* (the crawl is idle),
        every deferred request is given back.  Returns those given back, each a
        copy marked to pass the dupefilter (which has its key) and never be
        deferred again, for the engine (:meth:`give_back`)."""
        if not self.deferred:
            return []
        back = []
        for base, (via, merged, request) in list(self.deferred.items()):
            in_force = self.rules.apply(via) == merged  # the rule it waited for
            if in_force and (self.rules.served(via)
                             or self.flight.merged(via)):
                # a duplicate of a page served (or in flight), as stale() says; a
                # key no request fetched is never a reason to drop one
                del self.deferred[base]
                self.skipped[base] = (via, merged, request)
                self.rules.events["deferred_merged"] += 1
                continue
            pending = self.rules.pending(base, self.flight.bases)
            if everything or in_force or not pending or self.flight.useful(pending):
                del self.deferred[base]
                if self.sink is not None:
                    self.sink.release(base)
                back.append(request.replace(
                    dont_filter=True, meta={**request.meta, META_DEFERRED: True}))
        if back:
            self.rules.events["deferred_fetched"] += len(back)
        self.publish()
        return back

    def give_back(self, requests: list[Request]) -> int:
        """Hand *requests* (from :meth:`settle`) to the engine; how many."""
        if requests and self.crawler is not None and self.crawler.engine is not None:
            for request in requests:
                self.crawler.engine.crawl(request)
        return len(requests)

    def _served_here(self, base: str) -> bool:
        """Whether this process was served *base* itself (2xx).  A page an earlier
        run or another worker served is no such proof: it may have been killed
        before its spider had the response, and the frontier gave it back."""
        return base not in self.replayed and self.rules.was_served(base)

    def _release(self, base: str) -> None:
        """Forget the kept request of *base* (its spelling is fetched after all)."""
        del self.skipped[base]
        self._passed.discard(base)
        if self.sink is not None:
            self.sink.release(base)

    def keep(self, base: str, via: str, merged: str, request: Request) -> None:
        """Keep a skipped request while ``rules.apply(via) == merged`` (and store it)."""
        if base in self.skipped:
            return
        self.skipped[base] = (via, merged, request)
        if self.sink is not None:
            self.sink.hold(base, via, merged, self._holders.get(merged, ""), request)

    def changed(self, *, force: bool = False) -> list[Request]:
        """The kept requests whose merge no longer holds, removed from the kept ones
        (looked at when a rule stopped since the last call, or with *force*).

        A merge no longer holds when the rules give the request another key, or
        nothing stands for its key any more (:meth:`_backed`: the alias that added
        the key was moved by the rule that stopped, no page served under the key
        nor one in flight; a colour variant wrongly merged with the standard item).
        One the filter has the key of (it passed the filter: kept at download by
        :meth:`stale`, or marked ``meta["iri_keyed"]``; or orphaned) comes back as
        a copy with ``dont_filter``: the filter would drop it again.  One whose very
        spelling this process was served (a copy met again after its fetch) is not
        given back: its page is known (``refetch-avoided``).  One a rule stopped
        while a calibration of its site is in flight waits for it to land (the
        counterexample may prove chance, :meth:`ProtocolRules.reconsider`; the
        middleware looks again then, and the close gives back whatever is kept)."""
        return [request for _, request in self.changed_items(force=force)]

    def changed_items(self, *, force: bool = False) -> list[tuple[str, Request]]:
        """:meth:`changed`, each request with its key before the rules (the field
        of its record in a frontier store)."""
        if self.rules.revision == self._revision and not force:
            return []
        self._revision = self.rules.revision
        out = []
        unsettled = self.rules.calibration.unsettled
        for base, (via, merged, request) in list(self.skipped.items()):
            moved = self.rules.apply(via) != merged
            if moved and unsettled(via):
                continue  # the counterexample may prove chance: looked at when it lands
            orphaned = not moved and via == base and not self._backed(via, merged)
            if moved or orphaned:
                del self.skipped[base]
                if self.sink is not None:
                    self.sink.release(base)
                passed = (base in self._passed or META_KEYED in request.meta
                          or (self.seen is not None and self.seen(request)))
                self._passed.discard(base)
                if self._served_here(base):  # this very spelling was served here:
                    self.rules.events["refetch-avoided"] += 1  # nothing to give back
                    continue
                if moved and self._merged_on(base, request):
                    # rules learned since give it a key the filter has: its decision
                    if self.duplicate(request):  # (kept again, or dropped)
                        continue
                    passed = True  # a sample, or the key's holder now: past the filter
                if orphaned:  # it holds the key now: the others kept of that key
                    self.admitted(base, merged)  # stay kept behind it (one fetch)
                if (orphaned or passed) and not request.dont_filter:  # past the
                    # filter, and still the learner's at the download (a copy of its
                    # spelling in flight meanwhile is not fetched twice: stale())
                    request = request.replace(dont_filter=True,
                                              meta={**request.meta, META_DEFERRED: True})
                out.append((base, request))
        return out

    def _merged_on(self, base: str, request: Request) -> bool:
        """For a kept *request* (key before the rules *base*) whose merge moved: True
        if the rules now give it another key, one the filter has or a page was
        served or is in flight under (a further rule learned since:
        ``www.h/p/?sid=1`` kept as ``h/p/?sid=1`` is ``h/p/`` once the ``www.``
        host's ``drop-param:sid`` holds), where the filter's own decision
        (:meth:`duplicate`) applies."""
        key = self.rules.apply(base)
        if key == base:
            return False
        return ((self.seen is not None and self.seen(request))
                or self.rules.served(base) or self.flight.merged(base)
                or self.rules.served_alias(key) is not None)

    def admitted(self, base: str, key: str) -> None:
        """The dupefilter let a request through as the first of *key*; *base* its key
        before the rules.  Recorded when a rule moved it: that request holds *key*
        only while the rules still map it there (:meth:`_backed`)."""
        if key != base:
            self._holders[key] = base
        elif self._holders.pop(key, None) is None:
            return
        if self.sink is not None:
            self.sink.holder(key, base if key != base else None)

    def restore(self, holders: dict[str, str]) -> None:
        """The keys' holders recorded by an earlier run (:meth:`admitted`)."""
        for key, base in holders.items():
            self._holders.setdefault(key, base)

    def observe_content(self, uri: str, digest: Fingerprint | bytes, *,
                        replayed: bool = False) -> None:
        """A 2xx page: its content evidence (:meth:`ProtocolRules.observe_content`),
        and kept by the frontier store (a resume compares samples with it); with
        *replayed*, a page this process did not serve (read back from the store)."""
        stopped = len(self.rules.stopped)
        self.rules.observe_content(uri, digest)
        if replayed:
            self.replayed.add(uri)
        elif self.replayed:
            self.replayed.discard(uri)
        if self.sink is not None and not replayed:
            fp = Fingerprint.exact(digest) if isinstance(digest, bytes) else digest
            self.sink.page(uri, fp.to_record())
        if len(self.rules.stopped) > stopped:
            _say_stopped(self.rules)
            self.publish()

    def unstood(self) -> list[Request]:
        """At the close: every held request whose rule stopped holding, or for
        whose key no page was served (its holder did not end 2xx), removed from
        the kept ones and marked to pass the dupefilter, for the engine
        (:meth:`give_back`); and one sample (``meta["iri_protocol_sample"]``) per
        rule learned from content and folder of the URIs it merged where no
        page confirmed it, so a rule confirmed on one path is checked on every
        other path it held pages of before the crawl may end (the sampling while
        the crawl runs leaves a rule's first merges unchecked).  Nothing a rule
        held back is lost because the page that stood for it never came, or
        because no sample was taken where the rule was wrong."""
        if not self.skipped:
            return []
        served = self.rules.served_keys()
        checked = self._closing_checked  # one closing sample per rule and folder
        back = []
        for base, (via, merged, request) in list(self.skipped.items()):
            if self._served_here(base):
                continue  # its own spelling was served here: its page is known
            sample = False
            key = self.rules.apply(via)
            if key == self.rules.apply(merged) and key in served:  # (rules learned
                # since may have moved both on: still one resource, a page served)
                groups = _unchecked(self.rules, self._holders, via, merged) - checked
                if not groups:
                    continue
                checked |= groups
                sample = True
            self.sampled.add(base)
            del self.skipped[base]
            if self.sink is not None:
                self.sink.release(base)
            meta = {k: v for k, v in request.meta.items() if k != META_SAMPLE}
            if sample:
                meta[META_SAMPLE] = True
            back.append(request.replace(dont_filter=True, meta=meta))
        if back:
            self.rules.events["unstood"] += len(back)
            logger.info("IRI protocol: %(n)d request(s) held back by learned rules are "
                        "fetched at the close (no page stood for them, or they check a "
                        "rule where no page confirmed it)", {"n": len(back)})
            self.publish()
        return back

    def _backed(self, via: str, merged: str) -> bool:
        """True if something still stands for a request kept as a duplicate of
        *merged*: a page served under that key, a request in flight, or the request
        that holds the key, still mapped there and still to be fetched."""
        holder = self._holders.get(merged)
        if holder is None:
            return True  # held by its own spelling, which no rule moves away
        if (self.rules.apply(holder) == merged and holder not in self.skipped
                and holder not in self.deferred):
            return True
        return self.rules.served(via) or self.flight.merged(via)

    def requeue(self, *, force: bool = False) -> int:
        """Hand every request :meth:`changed` gives back to the engine; how many."""
        requests = self.changed(force=force)
        if requests:
            for request in requests:
                request.meta.pop(META_SAMPLE, None)
            logger.info("IRI protocol: a learned rule was revoked; %(n)d request(s) it had "
                        "skipped are scheduled again", {"n": len(requests)})
            self.rules.events["requeued"] += len(requests)
        self.publish()
        return self.give_back(requests)

    def publish(self) -> None:
        """The learner's counts as ``iri/protocol/<source>/<event>`` stats."""
        stats = self.crawler.stats if self.crawler is not None else None
        if stats is None:
            return
        for event, count in self.rules.events.items():
            if self._published.get(event) != count:
                self._published[event] = count
                stats.set_value(f"iri/protocol/{event}", count)


def _unchecked(rules: ProtocolRules, holders: dict[str, str], via: str,
              merged: str) -> set[tuple[Identity, str]]:
    """The (rule, folder) pairs of a held request's merge with no confirmation
    of the rule in the folder of the key it was merged into: rules learned
    from content, canonical links or Clean-param (a redirect is the server's
    own word; a trap's every longer spelling confirms it).  *holders*: key ->
    the spelling that holds it (:meth:`Learned.admitted`)."""
    probe = via if via != merged else holders.get(merged, via)
    folder = _folder(rules.apply(merged))  # folders of resources (keys under the rules
    out = set()  # now), not of the spellings a rule merged: /index.php/p/1/ is in /p
    for identity in rules.trace(probe)[1]:
        if rules.origin(identity) == "redirect" or identity[1] == "collapse-repeat":
            continue
        if not any(_folder(rules.apply(u)) == folder for u in rules.confirmations(identity)):
            out.add((identity, folder))
    return out


def _say_stopped(rules: ProtocolRules) -> None:
    """The WARNING of a host that reached the pages bound (the level stops there)."""
    scope = next(reversed(rules.stopped))
    logger.warning(
        "IRI protocol: %(scope)s reached a bound (%(bound)s: %(n)d pages compared "
        "per host); the learned level stops for this host: no rule is applied "
        "there any more, and what its rules held back is fetched",
        {"scope": scope, "bound": rules.stopped[scope], "n": MAX_PAGES_PER_SCOPE})


def _folder(uri: str) -> str:
    """The path of *uri* without its last segment (its "folder": the folder of
    ``http://h/b/13`` and of ``http://www.h/p/6/`` is ``/b`` and ``/p``; a rule's
    scope is its host already, and a ``www.`` rule's images are on the twin)."""
    parts = split_uri(uri.split("#", 1)[0])
    path = parts[2] if parts is not None else uri
    return path.rstrip("/").rsplit("/", 1)[0]


def learned_of(context: CrawlContext) -> Learned | None:
    """The crawl's one :class:`Learned` of its rules (None below level PROTOCOL;
    created on first use, kept in *context*)."""
    rules = context.rules
    if rules is None:
        return None
    learned: Learned | None = context.learned
    if learned is None or learned.rules is not rules:
        learned = context.learned = Learned(context.crawler, rules, Stamper.of(context))
    return learned


def write_rules(path: str | os.PathLike[str], data: dict[str, Any]) -> None:
    """Write a rules document atomically (a reader sees the old file or the new one)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, ensure_ascii=False, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)
