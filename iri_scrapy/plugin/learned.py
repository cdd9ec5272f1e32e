"""What the protocol rung skipped in one crawl, given back when a rule is revoked.

At ``IRI_LEVEL = "protocol"`` a crawler shares one
:class:`~iri_scrapy.core.protocol.ProtocolRules` (what was learned, RFC 3987
section 5.3.4) and one :class:`Learned`: every request the dupefilter dropped
*only because a learned rule merged it* with a key already seen, kept with the
key it was merged into.  When a rule stops (a counterexample, a later redirect:
``ProtocolRules.revision`` moves), each kept request whose key changed is handed
back to the engine (``iri/protocol/requeued``): nothing a rule skipped is lost
when the rule turns out wrong.  It also publishes the learner's counts as
``iri/protocol/<source>/<event>`` stats and carries the persistence hook the
``JOBDIR`` frontier sets (:mod:`iri_scrapy.frontier.protocol_store`).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from iri_scrapy.plugin import compat  # noqa: F401  (checks the installed Scrapy first)
from iri_scrapy.plugin.config import META_SAMPLE
from iri_scrapy.plugin.stamp import stamp_of

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

    from iri_scrapy.core.protocol import ProtocolRules

__all__ = ["Learned", "learned_for", "write_rules"]

logger = logging.getLogger(__name__)

_ATTR = "_iri_scrapy_learned"

#: Called with (key before the rules, via, key merged into, request) for each request kept.
Sink = Callable[[str, str, str, "Request"], None]


class Learned:
    """The requests learned rules skipped, and the stats of the learner (see the module doc)."""

    def __init__(self, crawler: Crawler | None, rules: ProtocolRules) -> None:
        self.crawler = crawler
        self.rules = rules
        #: key before the rules -> (via, key merged into, the request): kept while
        #: ``rules.apply(via) == merged``; *via* is the key itself, or the alias
        #: served first that a rule maps onto it
        self.skipped: dict[str, tuple[str, str, Request]] = {}
        self.sink: Sink | None = None
        #: keys before the rules fetched as samples (each alias is counted once)
        self.sampled: set[str] = set()
        self._revision = rules.revision
        self._published: dict[str, int] = {}

    def duplicate(self, request: Request) -> bool:
        """For the dupefilter, on a request whose key was seen: True to drop it.

        A request that only a learned rule merged is kept (see :meth:`changed`),
        or fetched instead as the rule's sample (``meta["iri_protocol_sample"]``,
        False) that checks the rule against the content it serves.  Each alias
        (key before the rules) counts once, however often pages link it.
        """
        stamp = stamp_of(request)
        if stamp is None or stamp.base is None:
            return True
        base = stamp.base
        if base in self.skipped or base in self.sampled:
            return True  # this alias was met before: counted then
        merged, used = self.rules.trace(base)
        if merged == base:
            return True  # the same key without any learned rule: a plain duplicate
        if used and not self.rules.skip(used):
            self.sampled.add(base)
            request.meta[META_SAMPLE] = True
            self.publish()
            return False
        self.keep(base, base, merged, request)
        self.publish()
        return True

    def stale(self, request: Request) -> bool:
        """For the downloader, on a request about to be fetched: True to skip it.

        The dupefilter decided when the request was scheduled; rules learned
        since may merge it with a page already served (the links of the first
        pages of a site are all scheduled before any rule is known).  Such a
        request is kept, or sampled, as :meth:`duplicate` does.
        """
        if request.dont_filter or request.meta.get(META_SAMPLE):
            return False
        stamp = stamp_of(request)
        if stamp is None or stamp.base is None:
            return False
        base = stamp.base
        if base in self.skipped or base in self.sampled:
            return False
        if self.rules.served(base):
            return self.duplicate(request)
        alias = self.rules.served_alias(base)
        if alias is None:
            return False
        self.keep(base, alias, base, request)  # given back if the alias stops mapping here
        self.rules.events["alias-first"] += 1
        self.publish()
        return True

    def keep(self, base: str, via: str, merged: str, request: Request) -> None:
        """Keep a skipped request while ``rules.apply(via) == merged`` (and hand it
        to the persistence hook)."""
        if base in self.skipped:
            return
        self.skipped[base] = (via, merged, request)
        if self.sink is not None:
            self.sink(base, via, merged, request)

    def changed(self, *, force: bool = False) -> list[Request]:
        """The kept requests whose merge no longer holds, removed from the kept ones
        (looked at when a rule stopped since the last call, or with *force*)."""
        if self.rules.revision == self._revision and not force:
            return []
        self._revision = self.rules.revision
        out = []
        for base, (via, merged, request) in list(self.skipped.items()):
            if self.rules.apply(via) != merged:
                del self.skipped[base]
                out.append(request)
        return out

    def requeue(self) -> int:
        """Hand every request :meth:`changed` gives back to the engine; how many."""
        requests = self.changed()
        if requests and self.crawler is not None:
            engine = self.crawler.engine  # requests change only while the crawl runs
            for request in requests:
                request.meta.pop(META_SAMPLE, None)
                engine.crawl(request)
        if requests:
            logger.info("IRI protocol: a learned rule was revoked; %(n)d request(s) it had "
                        "skipped are scheduled again", {"n": len(requests)})
            self.rules.events["requeued"] += len(requests)
        self.publish()
        return len(requests)

    def publish(self) -> None:
        """The learner's counts as ``iri/protocol/<source>/<event>`` stats."""
        stats = self.crawler.stats if self.crawler is not None else None
        if stats is None:
            return
        for event, count in self.rules.events.items():
            if self._published.get(event) != count:
                self._published[event] = count
                stats.set_value(f"iri/protocol/{event}", count)


def learned_for(crawler: Crawler, rules: ProtocolRules) -> Learned:
    """The crawler's one :class:`Learned` (created on first use)."""
    learned: Learned | None = getattr(crawler, _ATTR, None)
    if learned is None or learned.rules is not rules:
        learned = Learned(crawler, rules)
        setattr(crawler, _ATTR, learned)
    return learned


def write_rules(path: str | os.PathLike[str], data: dict[str, Any]) -> None:
    """Write a rules document atomically (a reader sees the old file or the new one)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, ensure_ascii=False, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)
