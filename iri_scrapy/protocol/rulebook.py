"""The learned rules as a set: what they map, and what rests on them (RFC 3987 section 5.3.4).

:class:`RuleBook` holds the state of what was learned (exact rules, "redirected
away from", host rules with their evidence, the pages served and their
digests) and answers from it: :meth:`RuleBook.apply` (the rung itself,
idempotent), the rules in force, why a URI maps where it does, and what content
evidence a fetch would add.  It learns nothing: :class:`~.rules.ProtocolRules`
(its subclass) observes and changes it; :mod:`.document` reads and writes it as
data.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Container, Iterator
from typing import Any

from iri_scrapy.core.query import split_fragment, strip_fragment
from iri_scrapy.protocol.calibration import Calibration
from iri_scrapy.protocol.fingerprint import Fingerprint
from iri_scrapy.protocol.memo import IN_FORCE, MAX_KEPT, learns
from iri_scrapy.protocol.transforms import (
    ADD,
    ADD_WWW,
    CLEAN_PARAM,
    DROP_PARAM,
    KINDS,
    MAX_STEPS,
    MAX_VALUES,
    PARAM_KINDS,
    REDIRECT,
    REMOVE,
    REPEAT,
    Identity,
    Parts,
    candidates,
    classify,
    host_key,
    join_uri,
    param_names,
    scope_of,
    split_uri,
    twins,
)


class RuleBook:
    """What was learned, and what it answers (see the module doc).

    Works on canonical URIs (``normalize(..., Level.SCHEME)`` output).  Not
    thread-safe (a Scrapy crawl runs in one thread).  ``learned`` and ``revoked``
    count exact rules per kind (``revoked``: revoked by later evidence).
    What :meth:`trace` answers is kept until the rules change (:mod:`.memo`: every
    method a subclass defines counts as changing them).
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        learns(cls)

    def __init__(self, min_evidence: int = 2, sample_every: int = 10) -> None:
        for name, value in (("min_evidence", min_evidence), ("sample_every", sample_every)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        self.min_evidence = min_evidence
        self.learned: Counter[str] = Counter()
        self.revoked: Counter[str] = Counter()
        self._exact: dict[str, tuple[str, Identity]] = {}
        self._sources: dict[str, set[str]] = {}  # target -> sources of exact rules to it
        self._away: set[str] = set()
        self._evidence: Counter[Identity] = Counter()
        self._contrary: Counter[Identity] = Counter()
        self._scopes: dict[str, set[tuple[str, str]]] = {}  # scope -> kinds with evidence
        # evidence other than redirects (see the module doc)
        self.sample_every = sample_every
        #: Counts per source and event: ``"content/learned"``, ``"canonical/applied"``, ...
        self.events: Counter[str] = Counter()
        #: Increases whenever a rule in force stops (what it merged must be looked at again).
        self.revision = 0
        self._confirmed: dict[Identity, list[str]] = {}  # images (or URIs) that confirmed it
        #: per ``drop-param`` rule, the values its confirmations dropped (at most two:
        #: one value says nothing of the others, :meth:`_in_force`)
        self._dropped: dict[Identity, set[str]] = {}
        self._bad: Counter[Identity] = Counter()  # content counterexamples
        #: per rule, the content counterexamples (URI, two pages) kept (:meth:`reconsider`)
        self._refuting: dict[Identity, list[tuple[str, Fingerprint, Fingerprint]]] = {}
        #: per rule, the keys (:func:`.document.pair_key`) of those counterexamples
        #: in ``_bad``, and of those withdrawn: what a fleet's workers exchange
        self._refuted: dict[Identity, set[str]] = {}
        self._withdrawn: dict[Identity, set[str]] = {}
        self._origin: dict[Identity, str] = {}  # the source that nominated it
        self._candidates: dict[str, set[Identity]] = {}  # scope -> nominated rules
        self._images: dict[Identity, dict[str, tuple[Fingerprint, str]]] = {}
        self._digests: dict[str, Fingerprint] = {}  # canonical URI -> its content
        #: per site, what changes by chance (two fetches of one spelling)
        self.calibration = Calibration()
        self._keys: dict[str, list[str]] = {}  # scope -> URIs with a digest, in order
        self._by_digest: dict[bytes, list[str]] = {}
        self._skips: Counter[Identity] = Counter()
        #: Scopes where a bound was reached (scope -> which): no rule applies there.
        self.stopped: dict[str, str] = {}
        #: The page content evidence looked at last, and the earlier pages it served
        #: the content of, each another spelling one rule relates to it.
        self.observing: str | None = None
        self.echoes: list[str] = []
        # key -> first URI served under it, for the rules in force of the signature
        self._indexed: tuple[frozenset[Identity], int, int] = (frozenset(), 0, 0)
        self._index: dict[str, str] = {}
        self._memo: dict[object, Any] = {}  # uri -> trace(uri), until the rules change
        self._learning = 0  # > 0 while a method that changes the rules runs

    def __len__(self) -> int:
        return len(self._exact)

    # --- applying -------------------------------------------------------------

    def host_rules(self, uri: str) -> list[tuple[str, str]]:
        """The host rules in force for *uri*'s scope: ``(kind, parameter)``, in the
        order they are tried."""
        scope = host_key(strip_fragment(uri))
        candidates = self._scopes.get(scope)
        if not candidates:
            return []
        out = [(kind, param) for kind, param in candidates
               if self._in_force((scope, kind, param))]
        if not out:
            return out
        slash = {kind for kind, _ in out if kind in (ADD, REMOVE)}
        if len(slash) > 1:  # the host's add-slash and a section's remove-slash (or the
            # reverse) say opposite things below that section: neither is used
            out = [rule for rule in out if rule[0] not in slash]
        return sorted(out, key=lambda rule: (KINDS.index(rule[0]), rule[1]))

    def _in_force(self, identity: Identity) -> bool:
        """A host rule is used once ``min_evidence`` permanent redirects with no
        2xx against it, or ``min_evidence`` content confirmations, showed it --
        and never after content differed in its scope."""
        if self._bad[identity]:
            return False
        if len(self._confirmed.get(identity, ())) >= self.min_evidence and self._diverse(identity):
            return True
        return (self._evidence[identity] >= self.min_evidence
                and self._contrary[identity] == 0)

    def _diverse(self, identity: Identity) -> bool:
        """A ``drop-param`` rule is confirmed by content only once pages showed two
        values of what it drops the same as without (a report's default sort
        spelled out, ``?sort=id``, says nothing of ``?sort=title``: the same rows in
        another order); other kinds change one fixed part, and a ``Clean-param`` is
        the server's word for every value."""
        return (identity[1] != DROP_PARAM or self._origin.get(identity) == CLEAN_PARAM
                or len(self._dropped.get(identity, ())) >= MAX_VALUES)

    def _forces(self) -> set[Identity]:
        """The host rules in force now."""
        return {(scope, kind, param) for scope, rules in self._scopes.items()
                for kind, param in rules if self._in_force((scope, kind, param))}

    def host_rule(self, uri: str) -> str | None:
        """The trailing-slash rule in force for *uri*'s host: ``"add-slash"``,
        ``"remove-slash"`` or None (at most one is: every add-slash exact rule
        contradicts remove-slash)."""
        kinds = [kind for kind, _ in self.host_rules(uri) if kind in (ADD, REMOVE)]
        return kinds[0] if kinds else None

    def redirected_away(self, uri: str) -> bool:
        """True if the latest evidence on *uri* is a permanent redirect away from it."""
        return strip_fragment(uri) in self._away

    def _exact_target(self, uri: str) -> str | None:
        """The target of *uri*'s exact rule, or None.  A target learned here is never
        redirected away from (:meth:`_send_away` revokes the rule); one merged from
        another worker's document may be, and such a rule is not used."""
        exact = self._exact.get(uri)
        if exact is None or (exact[0] in self._away and exact[0] not in self._exact):
            return None
        return exact[0]

    def _step(self, uri: str) -> tuple[str, Identity | None]:
        """One rule applied to *uri* (no fragment): its exact rule, else the first
        host rule whose output is no spelling redirected away from (or is one
        that its exact rule moves on from); and that host rule (None for none,
        or for an exact rule: the server said so)."""
        target = self._exact_target(uri)
        if target is not None:
            return target, None
        rules = self.host_rules(uri)  # (most URIs: none, and no need to split them)
        if not rules:
            return uri, None
        parts = split_uri(uri)
        if parts is None:
            return uri, None
        names = [param for kind, param in rules if kind == DROP_PARAM]
        learned = [rule for rule in rules if rule[0] in PARAM_KINDS]
        for kind, param, new in candidates(parts, True, names, learned):
            if (kind, param) in rules:
                out = join_uri(new)
                if out not in self._away or self._exact_target(out) is not None:  # not a dead end
                    return out, (scope_of(parts), kind, param)
        return uri, None

    def apply(self, uri: str) -> str:
        """Map a canonical URI to the spelling the protocol taught (5.3.4); idempotent."""
        return uri if self.moves_nothing() else self.trace(uri)[0]

    def moves_nothing(self) -> bool:
        """True if :meth:`trace` leaves every URI as it is (no exact rule, and no host
        rule in force): what most requests of most sites meet, answered without a
        look at the URI."""
        if self._exact:
            return False
        if not self._scopes:
            return True
        if self._learning:
            return not self._forces()
        in_force = self._memo.get(IN_FORCE)
        if in_force is None:
            in_force = self._memo[IN_FORCE] = bool(self._forces())
        return not in_force

    def trace(self, uri: str) -> tuple[str, list[Identity]]:
        """:meth:`apply`, and the host rules it used (in order; exact rules not listed)."""
        if not self._exact and not self._scopes:  # no rule of any kind
            return uri, []
        if self._learning:
            return self._trace(uri)
        memo = self._memo
        known = memo.get(uri)
        if known is None:
            if not self._exact:  # no exact rule, and (most sites) no host rule in force
                in_force = memo.get(IN_FORCE)
                if in_force is None:
                    in_force = memo[IN_FORCE] = bool(self._forces())
                if not in_force:
                    return uri, []
            if len(memo) >= MAX_KEPT:
                memo.clear()
            known = memo[uri] = self._trace(uri)
        return known[0], list(known[1])

    def _trace(self, uri: str) -> tuple[str, list[Identity]]:
        head, fragment = split_fragment(uri)
        if self.stopped and host_key(head) in self.stopped:
            return uri, []  # a bound was reached on this host: the level stopped there
        out = head
        used: list[Identity] = []
        for _ in range(MAX_STEPS):
            new, rule = self._step(out)
            if new == out:
                break
            out = new
            if rule is not None:
                used.append(rule)
        else:
            return uri, []  # no fixed point within MAX_STEPS: leave the URI as it is
        return (uri, []) if out == head else (out + fragment, used)

    # --- what a rule rests on -------------------------------------------------

    def origin(self, identity: Identity) -> str:
        """The source that nominated a host rule (``redirect``, ``canonical``, ...)."""
        return self._origin.get(identity, REDIRECT)

    def describe(self, identity: Identity) -> str:
        """One line: a host rule and its evidence (for ``explain`` and logs)."""
        scope, kind, param = identity
        rule = f"{kind}:{param}" if param else kind
        confirmed = len(self._confirmed.get(identity, ()))
        redirects = self._evidence[identity]
        evidence = []
        if confirmed:
            evidence.append(f"{confirmed} page(s) with equal content")
        if redirects:
            evidence.append(f"{redirects} permanent redirect(s)")
        return (f"{rule} on {scope} (from {self.origin(identity)}: "
                f"{', '.join(evidence) or 'no evidence'})")

    def why(self, uri: str) -> list[str]:
        """The rules :meth:`apply` uses on *uri*, each with its evidence, in order."""
        head = strip_fragment(uri)
        lines = []
        out = head
        for _ in range(MAX_STEPS):
            exact = self._exact.get(out)
            new, rule = self._step(out)
            if new == out:
                break
            if rule is not None:
                lines.append(self.describe(rule))
            elif exact is not None:
                lines.append(f"{exact[1][1]}: {out} -> {new} (a permanent redirect)")
            out = new
        return lines

    def _strength(self, identity: Identity, floor: int = 1) -> int:
        """The confirmations of *identity* (at least *floor*): pages with equal
        content, or permanent redirects with no 2xx against them."""
        have = len(self._confirmed.get(identity, ()))
        if self._contrary[identity] == 0:
            have = max(have, self._evidence[identity])
        return max(floor, have)

    def needed(self, identity: Identity) -> int:
        """Confirmations *identity* still needs to be in force (0 if it is)."""
        return max(0, self.min_evidence - self._strength(identity, floor=0))

    # --- content: what was served ---------------------------------------------

    def confirmations(self, identity: Identity) -> list[str]:
        """The images (or URIs) whose equal content confirmed the host rule *identity*."""
        return list(self._confirmed.get(identity, ()))

    def served_keys(self) -> set[str]:
        """The keys (under the rules now) of every page served 2xx and kept
        (:meth:`observe_content`)."""
        return {self.apply(uri) for uri in self._digests}

    def was_served(self, uri: str) -> bool:
        """True if a 2xx response at *uri* itself was observed (:meth:`observe_content`)."""
        return strip_fragment(uri) in self._digests

    def served(self, uri: str) -> bool:
        """True if rules move *uri* and a page was already served under the key
        they give it (that key itself, or another URI one rule maps onto it)."""
        uri = strip_fragment(uri)
        key, used = self.trace(uri)
        if key == uri:
            return False
        if key in self._digests:
            return True
        out = uri
        for identity in used:  # the image of each step, served through another alias
            out = self.step_image(identity, out)
            seen = self._images.get(identity, {}).get(out)
            if seen is not None and seen[1] != uri:
                return True
        return False

    def served_alias(self, uri: str) -> str | None:
        """For *uri* that rules leave as it is: another URI already served that
        the host rules in force map onto *uri* (the alias met first), or None."""
        uri = strip_fragment(uri)
        parts = split_uri(uri)
        if parts is None:
            return None
        for twin in twins(parts):
            for identity in sorted(self._candidates.get(twin, ())):
                seen = self._images.get(identity, {}).get(uri)
                if (seen is not None and seen[1] != uri and self.apply(seen[1]) == uri
                        and self._in_force(identity)):
                    return seen[1]
        # through several rules (``www.h/p/?sid=1``: the twin's drop-param, then remove-www)
        alias = self._served_index().get(uri)
        if alias is not None and alias != uri and self.apply(alias) == uri:
            return alias
        return None

    def _served_index(self) -> dict[str, str]:
        """Key under the rules now -> the first URI served under it (2xx), rebuilt
        when the rules in force changed (each page's key again; none while no
        rule is in force), else kept up by :meth:`_index_page`."""
        forces = frozenset(self._forces()) if self._scopes else frozenset()
        signature = (forces, self.revision, len(self._exact))
        if signature != self._indexed:
            self._indexed = signature
            self._index = {}
            if forces or self._exact:
                for served in self._digests:
                    self._index.setdefault(self.apply(served), served)
        return self._index

    def _index_page(self, uri: str) -> None:
        """A page served at *uri*: in the key index if it is current."""
        if self._indexed[0] or self._exact:
            self._index.setdefault(self.apply(uri), uri)

    def twin_key(self, uri: str) -> str:
        """The key the rules in force give *uri* if it is on another host (a
        ``www.`` twin's page under remove-www, an ``http`` page under https), else
        *uri*: content evidence of a host's own rules goes through the rules in
        force that move its pages to their twin, and through no other."""
        key = self.apply(uri)
        return key if key != uri and host_key(key) != host_key(uri) else uri

    def step_image(self, identity: Identity, uri: str) -> str:
        """What the host rule *identity* alone makes of *uri* (*uri* if it does not apply)."""
        parts = split_uri(uri)
        if parts is None:
            return uri
        kind, param = identity[1], identity[2]
        for k, p, out in candidates(parts, True, (param,) if kind == DROP_PARAM else (),
                                    ((kind, param),) if kind in PARAM_KINDS else ()):
            if k == kind and p == param:
                return join_uri(out)
        return uri

    def same(self, uri: str, a: Fingerprint, b: Fingerprint) -> bool:
        """True if a crawler gets the same from *a* and *b*, pages of *uri*'s site
        (what changes by chance there excused: :mod:`.calibration`)."""
        return self.calibration.volatility(uri).same(a, b)

    def same_content(self, uri: str, fp: Fingerprint, excluded: Container[str] = ()) -> bool:
        """True if another page already served the content *fp* under the key
        :meth:`apply` gives *uri*, which rules moved (a sample that confirmed its
        rules); pages in *excluded* do not count."""
        uri = strip_fragment(uri)
        key = self.apply(uri)
        if key == uri:
            return False
        others = [key, *self._by_digest.get(self.calibration.volatility(uri).digest(fp), ())]
        return any(other != uri and other not in excluded and other in self._digests
                   and self.apply(other) == key and self.same(uri, self._digests[other], fp)
                   for other in others)

    def pending(self, uri: str, flying: Container[str] = ()) -> list[tuple[Identity, str, int]]:
        """The rules not yet in force (and with no content counterexample) that
        would rewrite *uri*: ``(rule, image, seen)``, *seen* the fetches of the
        image's resource under that rule already observed (0, 1, or 2 once the
        image confirmed it: a further fetch there teaches nothing).

        Both the rules nominated and those a fetch of *uri* would nominate: one
        transform (:func:`pair_rules`' kinds) onto a page already served, or in
        *flying* (keys of the fetches in flight: served by the time *uri* would
        be, the first links of a site are all scheduled at once).  Trap rules
        (``collapse-repeat``) are left out: each longer spelling confirms.
        """
        uri = strip_fragment(uri)
        parts = split_uri(uri)
        if parts is None:
            return []
        out = []
        nominated = self._candidates.get(scope_of(parts), ())
        for identity in nominated:
            if identity[1] == REPEAT or self._bad[identity] or self._in_force(identity):
                continue
            image = self.step_image(identity, uri)
            if image == uri:
                continue
            if image in self._confirmed.get(identity, ()):
                seen = 2
            else:
                seen = min(2, (image in self._digests)
                           + (image in self._images.get(identity, {})))
            out.append((identity, image, seen))
        for identity, image in self._potential(uri, parts, flying):
            if identity not in nominated and not self._bad[identity]:
                out.append((identity, image, 1))
        return out

    def _potential(self, uri: str, parts: Parts, flying: Container[str] = (), *,
                   traps: bool = False) -> Iterator[tuple[Identity, str]]:
        """The rules content evidence would nominate if *uri* served the content
        of a page already served (or in *flying*) one transform away, or on its
        twin host (:meth:`twin_key`): ``(rule, that page)``; with *traps*, the
        trap rule (``collapse-repeat``) too."""
        if not self._digests and not flying:
            return
        names: list[str] = []
        if parts[4]:
            single = sorted(param_names(parts[4]))
            names = single if len(single) == 1 else [*single, "&".join(single)]
        for kind, _, new in candidates(parts, True, names):
            if kind in (ADD_WWW, REMOVE) or (kind == REPEAT and not traps):
                continue  # (content never nominates the first two)
            image = join_uri(new)
            key = image if image in self._digests or image in flying else self.twin_key(image)
            if key in self._digests or key in flying:
                identity = classify(uri, image)
                if identity is not None:
                    yield identity, key
