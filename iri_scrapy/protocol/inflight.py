"""The fetches in flight at level protocol, and what each would teach the learner.

:class:`~iri_scrapy.protocol.learned.Learned` asks two things of a request about to
be downloaded: is its spelling (or another spelling a rule merges with it) already
in flight, a duplicate the dupefilter would have dropped had the rule been known
when it was scheduled; and would its fetch confirm a rule still being learned
(RFC 3987 section 5.3.4: a rule is learned from what the server answers, each
image's resource fetched twice, the confirmations a rule needs), or only repeat
what the fetches in flight will tell.  This module keeps those counts, from the
download (:meth:`InFlight.start`) to its answer or failure (:meth:`InFlight.done`).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

if TYPE_CHECKING:
    from scrapy import Request

    from iri_scrapy.protocol.rules import ProtocolRules
    from iri_scrapy.protocol.transforms import Identity

#: a pending rule of a request: (the rule, the image of the request, fetches seen)
Pending = tuple["Identity", str, int]


class InFlight:
    """The requests downloading now: their keys before the rules, and per rule being
    learned the images they would confirm it with."""

    def __init__(self, rules: ProtocolRules) -> None:
        self.rules = rules
        #: keys before the rules of the requests in flight, with their counts
        self.bases: Counter[str] = Counter()
        # per rule being learned, the images of the fetches in flight it would
        # rewrite, and how many of those fetches would confirm it
        self._flying: dict[Identity, Counter[str]] = {}
        self._confirming: Counter[Identity] = Counter()
        self._fetching: WeakKeyDictionary[
            Request, tuple[str, list[tuple[Identity, str, bool]]]] = WeakKeyDictionary()

    def __contains__(self, base: str) -> bool:
        return base in self.bases

    def merged(self, base: str) -> bool:
        """True if the rules merge *base* with another request in flight (scheduled
        as another key before the rule was known): a duplicate, as the dupefilter
        would have said had the rule been known then."""
        if not self.bases:
            return False
        rules = self.rules
        key = rules.apply(base)
        return key != base and any(
            other != base and rules.apply(other) == key for other in self.bases)

    def useful(self, pending: list[Pending]) -> bool:
        """Whether a fetch would teach one of the *pending* rules something: the
        first of its image's resource, or a confirmation still wanted."""
        for identity, image, seen in pending:
            flying = self._flying.get(identity)
            k = seen + (flying[image] if flying else 0)
            if k == 0 or (k == 1 and self._confirming[identity] < self.rules.needed(identity)):
                return True
        return False

    def start(self, request: Request, base: str, pending: list[Pending]) -> None:
        """*request* (key before the rules *base*) is downloaded now; *pending*: the
        rules being learned it would rewrite."""
        entry = []
        for identity, image, seen in pending:
            flying = self._flying.setdefault(identity, Counter())
            confirming = seen + flying[image] == 1
            flying[image] += 1
            if confirming:
                self._confirming[identity] += 1
            entry.append((identity, image, confirming))
        self._fetching[request] = (base, entry)
        self.bases[base] += 1

    def done(self, request: Request) -> None:
        """*request*, counted by :meth:`start`, is done (a response, an error)."""
        fetching = self._fetching.pop(request, None)
        if fetching is None:
            return
        base, entry = fetching
        self.bases[base] -= 1
        if self.bases[base] <= 0:
            del self.bases[base]
        for identity, image, confirming in entry:
            flying = self._flying[identity]
            flying[image] -= 1
            if flying[image] <= 0:
                del flying[image]
            if not flying:
                del self._flying[identity]
            if confirming:
                self._confirming[identity] -= 1
                if self._confirming[identity] <= 0:
                    del self._confirming[identity]
