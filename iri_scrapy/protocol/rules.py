"""Protocol-based normalization: what the protocol taught us (RFC 3987 section 5.3.4).

"If they observe that an IRI such as http://example.com/data redirects to an IRI
differing only in the trailing slash http://example.com/data/ they will likely
regard the two as equivalent in the future."  :class:`ProtocolRules` records
permanent redirects (301, 308) and keeps one consistent map from them:

* **Exact rules**: a redirect whose target is its source changed by one *kind*
  of transform maps its source to its target.  The kinds (section 5.3.4's
  trailing slash, generalized):

  ``add-slash`` / ``remove-slash``  one trailing slash on the path;
  ``drop-param:NAME``  the query parameter NAME removed (every occurrence);
  ``drop-index:FILE``  a last segment ``index.*`` removed (``/x/index.php`` -> ``/x/``);
  ``remove-www`` / ``add-www``  the host's ``www.`` label removed or added;
  ``https``  ``http`` -> ``https``, same authority, no port.

* **Redirected away from**: the source of every permanent redirect is a spelling
  the server refused; no rule ever maps a URI *to* it.
* **Host rules**: after ``min_evidence`` exact rules of one kind in force from
  one host (scheme and authority), with no counterexample, the host rule maps
  other URIs of the host the same way (``add-slash`` only where the last segment
  looks like a directory, no ``.``; ``remove-slash`` never ``//`` -> ``/``).  An
  exact rule beats a host rule on its own URI.  ``min_evidence`` is the
  ``IRI_PROTOCOL_MIN_EVIDENCE`` setting, 2 by default: one redirect may be a
  one-off, two on distinct URIs of one host show a policy.

:meth:`ProtocolRules.apply` steps from rule to rule (at most :data:`MAX_STEPS`),
accepting a host rule's output only if it is no spelling redirected away from
(or one its exact rule moves on from: ``http://h/z`` -> ``https://h/z`` ->
``https://h/z/``); the result must be a fixed point of the rules, or the URI is
left as it is.  So
``apply(apply(u)) == apply(u)``.  Rules work on canonical URIs (level SCHEME
output), so level PROTOCOL never splits what SCHEME merged.  A fragment is not
part of what a rule matches (section 5.1) and is kept.

**Conflicting evidence**, resolved deterministically by the order it arrived in
(latest wins, per spelling): a permanent redirect *to* a spelling, or a 2xx
response *at* it, revokes any rule *from* it and clears "redirected away from";
a redirect away from a spelling revokes the exact rules that mapped URIs to it.
So ``a -> a/`` then ``a/ -> a`` leaves ``a/ -> a`` (both spellings still one
key).  A host rule stops for good at its first counterexample in its scope: a
2xx at a URI it would rewrite, or an exact rule whose target it would map back
to that rule's source (the server sends the other way there).

**Evidence other than redirects** (design: docs/protocol.md): content digests
(:meth:`ProtocolRules.observe_content`), canonical links
(:meth:`~ProtocolRules.observe_canonical`) and robots.txt Clean-param
(:meth:`~ProtocolRules.observe_clean_param`) only nominate host rules; a rule is
used after ``min_evidence`` confirmations (distinct images whose content was
equal) and never again once content differed in its scope.

**Workers of one crawl** (a fleet) exchange :meth:`~ProtocolRules.to_data`
documents: :meth:`~ProtocolRules.merge_data` makes two one (no counterexample
lost), and :meth:`~ProtocolRules.adopt` folds one into rules in use, keeping
what only this object holds (page digests, images, counts).

This module is the learner: :class:`ProtocolRules` observes evidence and
changes the rule set.  What the rules are and answer (``apply``, ``trace``,
``why``, ...) is :class:`~.rulebook.RuleBook`, its base; the transforms a rule
is made of are :mod:`.transforms`; the document is :mod:`.document`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from iri_scrapy.core.query import param_name, strip_fragment
from iri_scrapy.protocol import document
from iri_scrapy.protocol.fingerprint import Fingerprint
from iri_scrapy.protocol.rulebook import RuleBook
from iri_scrapy.protocol.transforms import (
    BACKFILL,
    CANONICAL,
    CLEAN_PARAM,
    CONTENT,
    DROP_PAIR,
    DROP_PARAM,
    KEPT_CONFIRMATIONS,
    MAX_PAGES_PER_SCOPE,
    MAX_REFUTING,
    MAX_VALUES,
    PER_DIGEST,
    PERMANENT,
    REDIRECT,
    REPEAT,
    SAMPLE_SHIFT_MAX,
    Identity,
    candidates,
    classify,
    covers,
    dropped_value,
    join_uri,
    pair_rules,
    param_names,
    redirect_rules,
    rule_name,
    scope_of,
    split_uri,
    twins,
    valid_param,
    vary,
)

logger = logging.getLogger(__name__)


def sampled(n: int, every: int, confirmations: int) -> bool:
    """Whether merge number *n* of a rule is fetched as a sample: when n = K * 2**j
    (K: *every*, ``sample_every``) with 2**j at least 2**(c - 1), c the rule's
    *confirmations* (capped at :data:`SAMPLE_SHIFT_MAX` + 1).  A rule's
    confirmations count as its first samples, and each sample that confirms it
    doubles the run before the next, so its samples grow with the logarithm of
    what it merged.  With the default two confirmations, a wrong rule is caught
    within 2K merges; nothing it skipped is lost (revocation gives them back)."""
    if n % every:
        return False
    m = n // every
    floor = 1 << min(confirmations - 1, SAMPLE_SHIFT_MAX)
    return m & (m - 1) == 0 and m >= floor  # floor*K, 2*floor*K, ... merges


class ProtocolRules(RuleBook):
    """Rules learned from what servers answer, per host (see the module doc).

    Works on canonical URIs (``normalize(..., Level.SCHEME)`` output).  Not
    thread-safe (a Scrapy crawl runs in one thread).
    """

    # --- learning from redirects ----------------------------------------------

    def observe_redirect(self, source: str, target: str, status: int) -> str | None:
        """Record a redirect between two canonical URIs; the kind of the exact rule
        it taught (``"add-slash"``, ...), or None.

        A permanent redirect (301, 308) marks *source* as redirected away from
        and *target* as not (latest wins); one of a known kind also becomes an
        exact rule.  Fragments are ignored.
        """
        source, target = strip_fragment(source), strip_fragment(target)
        if status not in PERMANENT or source == target:
            return None
        self._forget(target)
        self._send_away(source)
        known = self._exact.get(source)
        if known is not None and known[0] == target:
            return None  # the same rule again: no new confirmation
        self._revoke(source)  # a rule from source to another target: the latest wins
        identity = classify(source, target)
        if identity is None:
            return None
        self._exact[source] = (target, identity)
        self._sources.setdefault(target, set()).add(source)
        self.learned[identity[1]] += 1
        for rule in redirect_rules(identity, source):  # the host's, and its section's
            before = self._in_force(rule)
            self._evidence[rule] += 1
            self._scopes.setdefault(rule[0], set()).add(rule[1:])
            self._nominate(rule, REDIRECT)
            if not before and self._in_force(rule):
                self.events[f"{self._origin[rule]}/learned"] += 1
                logger.debug("IRI protocol rule in force (redirect): %s", self.describe(rule))
        goal = split_uri(target)
        if goal is not None:  # a host rule that would send the target back is contradicted
            for kind, param, new in candidates(goal, True):  # (none adds a parameter)
                if join_uri(new) == source:
                    self._against((scope_of(goal), kind, param), content=False)
        return identity[1]

    def observe_contrary(self, uri: str) -> int:
        """Record that *uri* was served (2xx) as it is; the number of exact rules
        that revoked (0 or 1).

        Evidence against every host rule that would have rewritten *uri*, and
        the latest word on *uri*: it is no longer redirected away from.
        """
        uri = strip_fragment(uri)
        parts = split_uri(uri)
        if parts is not None:
            scope = scope_of(parts)
            for kind, param, _ in candidates(parts, True):
                self._against((scope, kind, param), content=False)
            if parts[4]:
                for name in param_names(parts[4]):
                    self._against((scope, DROP_PARAM, name), content=False)
        return self._forget(uri)

    def _forget(self, uri: str) -> int:
        """*uri* is a final spelling now: not redirected away from, no rule from it."""
        self._away.discard(uri)
        return self._revoke(uri)

    def _send_away(self, uri: str) -> None:
        """*uri* is redirected away from: no exact rule may map a URI to it."""
        self._away.add(uri)
        for source in sorted(self._sources.get(uri, ())):
            self._revoke(source)

    def _revoke(self, source: str) -> int:
        entry = self._exact.pop(source, None)
        if entry is None:
            return 0
        target, identity = entry
        sources = self._sources[target]
        sources.discard(source)
        if not sources:
            del self._sources[target]
        self.revoked[identity[1]] += 1
        self.revision += 1  # what the exact rule merged is looked at again
        for rule in redirect_rules(identity, source):
            before = self._in_force(rule)
            self._evidence[rule] -= 1
            if before and not self._in_force(rule):
                self.events[f"{self._origin.get(rule, REDIRECT)}/revoked"] += 1
                logger.debug("IRI protocol rule revoked: %s", self.describe(rule))
        return 1

    # --- evidence other than redirects ----------------------------------------

    def _nominate(self, identity: Identity, source: str) -> None:
        """*identity* becomes a candidate: its scope's pages are checked against it."""
        if identity in self._origin:
            return
        self._origin[identity] = source
        self.events[f"{source}/nominated"] += 1
        scope = identity[0]
        self._candidates.setdefault(scope, set()).add(identity)
        self._scopes.setdefault(scope, set()).add(identity[1:])
        for uri in self._keys.get(scope, [])[-BACKFILL:]:
            self._track(identity, uri, self._digests[uri])

    def _against(self, identity: Identity, *, content: bool,
                 pair: tuple[str, Fingerprint, Fingerprint] | None = None) -> None:
        """Evidence against *identity*: content that differed in its scope (*pair*:
        the URI and the two pages; for good, unless the site's calibration later
        shows the difference is chance: :meth:`reconsider`), or (not *content*) a
        2xx against a redirect policy."""
        before = self._in_force(identity)
        if content:
            key = document.pair_key(pair) if pair is not None else ""
            if key in self._withdrawn.get(identity, ()) or key in self._refuted.get(
                    identity, ()):
                return  # known: withdrawn as chance (here or in the fleet), or counted
            self._bad[identity] += 1
            self.events["counterexamples"] += 1
            pairs = self._refuting.setdefault(identity, [])
            if pair is not None and len(pairs) < MAX_REFUTING:
                pairs.append(pair)
                self._refuted.setdefault(identity, set()).add(key)
                page = self._digests.get(pair[0])
                if page is not None:  # is the difference chance? fetch it again to see
                    self.calibration.want(pair[0], page, pair[1] if page is pair[2] else pair[2])
        else:
            self._contrary[identity] += 1
        if before and not self._in_force(identity):
            self.revision += 1
            self.events[f"{self._origin.get(identity, REDIRECT)}/revoked"] += 1

    def reconsider(self) -> int:
        """Withdraw the content counterexamples that what is now known to change by
        chance explains (every one kept for a rule, and all its counterexamples
        kept): a calibration that landed after them saw that noise (a clock that
        had not moved between two fetches, a section calibrated only when its
        content first differed).  A rule cleared that no source nominated is
        nominated now (content showed its pair the same).  The number of rules
        cleared."""
        cleared = 0
        for identity, pairs in list(self._refuting.items()):
            if (len(pairs) == self._bad[identity] and pairs
                    and all(self.same(uri, a, b) for uri, a, b in pairs)):
                del self._refuting[identity]
                del self._bad[identity]
                self._withdrawn.setdefault(identity, set()).update(
                    self._refuted.pop(identity, ()))
                self.events["counterexamples/withdrawn"] += 1
                cleared += 1
                if identity not in self._origin:
                    self._nominate(identity, CONTENT)
        return cleared

    def _confirm(self, identity: Identity, unit: str, aliases: tuple[str, ...] = ()) -> None:
        """*unit* (an image, or a trap's URI) confirmed *identity*, through *aliases*
        (the spellings it maps there: for a ``drop-param``, the values it dropped).
        A ``drop-param`` confirmed enough by one value only (``?sort=id``, the
        default spelled out) waits for another, and the narrower ``drop-pair`` of
        that value is nominated: it is what the pages showed."""
        if identity[1] == DROP_PARAM:
            values = self._dropped.setdefault(identity, set())
            for alias in aliases:
                value = dropped_value(identity, alias)
                if value is not None and len(values) < MAX_VALUES:
                    values.add(value)
        kept = self._confirmed.setdefault(identity, [])
        if unit in kept:
            return
        before = self._in_force(identity)
        if len(kept) < KEPT_CONFIRMATIONS:
            kept.append(unit)
        if identity[1] == DROP_PARAM and len(kept) >= self.min_evidence and \
                not self._diverse(identity):
            (value,) = self._dropped[identity] or {""}
            narrow = (identity[0], DROP_PAIR, value)
            if "&" not in value and valid_param(DROP_PAIR, value):
                self._nominate(narrow, self._origin.get(identity, CONTENT))
        source = self._origin.get(identity, CONTENT)
        if before:
            self.events[f"{source}/verified"] += 1
        elif self._in_force(identity):
            self.events[f"{source}/learned"] += 1
            logger.debug("IRI protocol rule in force (%s): %s", source, self.describe(identity))

    def _track(self, identity: Identity, uri: str, digest: Fingerprint) -> None:
        """Compare the content at *uri* with the content of what *identity* maps
        it to (or of the aliases it maps to *uri*): equal confirms, different
        revokes for good."""
        parts = split_uri(uri)
        if parts is None or self._bad[identity]:
            return
        new = None
        if scope_of(parts) == identity[0]:  # else *uri* can only be an image (on a twin host)
            image = self.step_image(identity, uri)
            new = None if image == uri else image
        images = self._images.setdefault(identity, {})
        same: list[str] = []  # the earlier pages *uri* served the content of
        if new is None:  # *uri* may be what earlier aliases map to
            earlier = images.get(uri)
            if earlier is not None and \
                    self._compare(identity, earlier[0], digest, uri, earlier[1], earlier[1]):
                same.append(earlier[1])
        else:
            target = self._digests.get(new)
            key = new
            if target is None:  # its image may be served on its twin host (the www. twin's
                key = self.twin_key(new)  # drop-param:sid, through remove-www in force)
                target = self._digests.get(key) if key != new else None
            if target is not None and self._compare(identity, target, digest, new, uri, uri):
                same.append(key)
            earlier = images.get(new)
            if earlier is None:
                images[new] = (digest, uri)
                if key != new:  # (and found under that key when its page comes later)
                    images.setdefault(key, (digest, uri))
            elif earlier[1] != uri and (not self.same(uri, earlier[0], digest)
                                        or vary(identity, earlier[1], uri)) and \
                    self._compare(identity, earlier[0], digest, new, uri, other=earlier[1]):
                same.append(earlier[1])
        if same and uri == self.observing:
            self.echoes.extend(same)

    def _compare(self, identity: Identity, a: Fingerprint, b: Fingerprint, image: str,
                 uri: str, alias: str | None = None, *, other: str | None = None) -> bool:
        """Content *a* and *b* of two URIs *identity* maps to *image*: different
        refutes it; the same confirms it, if *alias* (the one of them that is not the
        image, when one is) holds all it drops (:func:`covers`).  Else they are two
        aliases, *uri* and *other*.  True if they are the same."""
        if not self.same(uri, a, b):
            self._against(identity, content=True, pair=(uri, a, b))
            return False
        if alias is None or covers(identity, alias):  # a trap grows without end:
            aliases = (alias,) if alias is not None else (uri, other or uri)
            self._confirm(identity, uri if identity[1] == REPEAT else image,  # each
                          aliases)  # longer spelling is a confirmation
        return True

    def observe_content(self, uri: str, digest: Fingerprint | bytes) -> None:
        """Record that the canonical URI *uri* served (2xx) the content *digest*
        (:func:`iri_scrapy.protocol.fingerprint.fingerprint`; bytes: an opaque
        digest, equal only to itself).

        Two URIs whose content is the same (the blocks that do not change by
        chance on the site, :mod:`.calibration`) and that differ by one kind of
        transform nominate that rule (source ``content``); every rule nominated
        for the scope is checked against the new page, by the same measure.
        """
        if isinstance(digest, bytes):
            digest = Fingerprint.exact(digest)
        uri = strip_fragment(uri)
        self.observing, self.echoes = uri, []
        parts = split_uri(uri)
        if parts is None:
            return
        scope = scope_of(parts)
        if uri not in self._digests:
            keys = self._keys.setdefault(scope, [])
            if len(keys) >= MAX_PAGES_PER_SCOPE:
                self.stop_scope(scope, "pages")
                return
            keys.append(uri)
        self._digests[uri] = digest
        self._index_page(uri)
        same = self._by_digest.setdefault(self.calibration.volatility(uri).digest(digest), [])
        for other in same:
            if other != uri and self.same(uri, self._digests[other], digest):
                nominated = pair_rules(uri, other)
                if nominated:
                    self.echoes.append(other)
                for identity in nominated:
                    if not self._subsumed(identity, nominated):
                        self._nominate(identity, CONTENT)
        if uri not in same and len(same) < PER_DIGEST:
            same.append(uri)
        for identity, image in self._potential(uri, parts, traps=True):  # a rule content
            # refutes: its site's calibration may have missed what differs (on demand)
            if identity not in self._origin and not self.same(uri, self._digests[image], digest):
                self._against(identity, content=True, pair=(uri, self._digests[image], digest))
        for twin in twins(parts):  # rules whose image is on this host (www., http)
            for identity in sorted(self._candidates.get(twin, ())):
                self._track(identity, uri, digest)

    def _subsumed(self, identity: Identity, nominated: list[Identity]) -> bool:
        """A ``drop-pair:NAME=VALUE`` waits while ``drop-param:NAME`` (the
        parameter whatever its value), nominated by the same pair, is not
        refuted: one rule, not two, when the value does not matter."""
        if identity[1] != DROP_PAIR:
            return False
        broader = (identity[0], DROP_PARAM, param_name(identity[2]))
        return broader in nominated and not self._bad[broader]

    def stop_scope(self, scope: str, bound: str) -> None:
        """A bound (*bound*: ``"pages"``, :data:`MAX_PAGES_PER_SCOPE`) was reached in
        *scope*: its pages can no longer be compared, so no rule applies there any
        more (never a rule left in force unchecked); ``revision`` moves, so what
        its rules held back is given back (``Learned.changed``)."""
        if scope in self.stopped:
            return
        self.stopped[scope] = bound
        self.events[f"stopped/{bound}"] += 1
        self.revision += 1

    def observe_canonical(self, uri: str, target: str) -> str | None:
        """Record that the page at *uri* declared *target* canonical (``<link
        rel=canonical>``, a ``Link`` header); the kind of rule it nominated, or None.

        Only a target one transform away on the same host (or its ``www.``
        twin) nominates a rule; it is used once the content of
        ``min_evidence`` such pairs was equal.  A canonical pointing elsewhere
        (every tag page declaring ``/``) is ignored: it never merges anything.
        """
        uri, target = strip_fragment(uri), strip_fragment(target)
        identity = classify(uri, target) if uri != target else None
        if identity is None:
            if uri != target:
                self.events["canonical/ignored"] += 1
            return None
        self._nominate(identity, CANONICAL)
        return identity[1]

    def observe_clean_param(self, scope_uri: str, names: Iterable[str], prefix: str = "") -> None:
        """Record a robots.txt ``Clean-param: names prefix`` of the host of
        *scope_uri*: a rule dropping *names* (together) under *prefix*, used once
        ``min_evidence`` pages confirmed it."""
        parts = split_uri(strip_fragment(scope_uri))
        wanted = sorted({name for name in names if rule_name(name)})
        if parts is None or not wanted:
            return
        param = "&".join(wanted) + (f"@{prefix}" if prefix not in ("", "/", "*") else "")
        self._nominate((scope_of(parts), DROP_PARAM, param), CLEAN_PARAM)

    def skip(self, used: Iterable[Identity]) -> bool:
        """Whether a request merged by the host rules *used* is skipped (True) or
        fetched as a sample that checks them (False): a sample when the merge is a
        sample point of one of them (:func:`sampled`)."""
        sample = False
        for identity in used:
            self._skips[identity] += 1
            if sampled(self._skips[identity], self.sample_every, self._strength(identity)):
                sample = True
        for identity in used:
            source = self._origin.get(identity, REDIRECT)
            self.events[f"{source}/{'sampled' if sample else 'applied'}"] += 1
        return not sample

    # --- the rules as a document ----------------------------------------------

    def to_data(self) -> dict[str, Any]:
        """What was learned, as JSON data (:meth:`from_data` reads it back).

        The pages' digests are not kept (they grow with the crawl): content
        evidence starts afresh for pages after a load, rules learned stay.
        """
        return document.to_data(self)

    @classmethod
    def from_data(cls, data: Any, *, min_evidence: int | None = None,
                  sample_every: int = 10) -> ProtocolRules:
        """Rules from :meth:`to_data`'s document; :class:`~.document.RulesDataError` if not.

        The document is data: every field's type is checked, nothing in it is run.
        """
        stored = document.stored_min_evidence(data)
        rules = cls(min_evidence if min_evidence is not None else stored, sample_every)
        document.read_into(rules, data)
        return rules

    def load(self, data: Any) -> None:
        """Replace what this object learned by :meth:`from_data`'s reading of *data*
        (same ``min_evidence`` and ``sample_every``); nothing changes if it is refused."""
        other = self.from_data(data, min_evidence=self.min_evidence,
                               sample_every=self.sample_every)
        other.revision = self.revision + 1  # what was merged before is looked at again
        vars(self).update(vars(other))

    #: One rules document from two of one crawl (:func:`.document.merge_data`).
    merge_data = staticmethod(document.merge_data)

    def adopt(self, data: Any) -> int:
        """Fold another worker's rules document (:meth:`to_data`'s shape) into these
        rules while they are in use; how far ``revision`` moved (the rules in force
        that stopped).  *data* is read by :meth:`from_data` (data only;
        :class:`RulesDataError` and nothing changed if it is refused) and merged as
        :meth:`merge_data` merges two documents; what this object alone keeps
        stays (:func:`.document.adopt`)."""
        other = self.from_data(data, min_evidence=self.min_evidence,
                               sample_every=self.sample_every)
        fresh = self.from_data(self.merge_data(self.to_data(), other.to_data()),
                               min_evidence=self.min_evidence, sample_every=self.sample_every)
        return document.adopt(self, fresh, self._track)
