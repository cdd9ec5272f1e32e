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
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Iterator
from typing import Any

from iri_scrapy.core.errors import IRIScrapyError
from iri_scrapy.core.query import (
    drop_params,
    in_clean_param_scope,
    join_query,
    param_name,
    query_pairs,
    split_fragment,
    split_query,
    strip_fragment,
)

PERMANENT = frozenset({301, 308})
ADD, REMOVE = "add-slash", "remove-slash"
DROP_PARAM, DROP_INDEX = "drop-param", "drop-index"
DROP_SCRIPT, REPEAT = "drop-script", "collapse-repeat"
REMOVE_WWW, ADD_WWW, HTTPS = "remove-www", "add-www", "https"
#: The kinds of rule, in the order :meth:`ProtocolRules.apply` tries host rules.
KINDS = (HTTPS, REMOVE_WWW, ADD_WWW, DROP_SCRIPT, DROP_INDEX, REPEAT, DROP_PARAM, ADD, REMOVE)
#: Where a rule's evidence comes from (see the module doc).
REDIRECT, CANONICAL, CLEAN_PARAM, CONTENT = "redirect", "canonical", "clean-param", "content"
SOURCES = (REDIRECT, CANONICAL, CLEAN_PARAM, CONTENT)
#: Pages (canonical URI -> content digest) kept per host for content evidence.
MAX_PAGES_PER_SCOPE = 50_000
#: Earlier pages a newly nominated rule is checked against.
BACKFILL = 5_000
#: URIs kept per content digest, to find pairs of aliases.
PER_DIGEST = 16
#: Confirmations kept per rule (what is exported; the count saturates there).
KEPT_CONFIRMATIONS = 64
#: Confirmations beyond this many (plus one) do not space a rule's samples further.
SAMPLE_SHIFT_MAX = 5
#: The version of :meth:`ProtocolRules.to_data`'s document.
DATA_VERSION = 1


class RulesDataError(IRIScrapyError, ValueError):
    """A rules document (:meth:`ProtocolRules.from_data`) that is not one: never half-loaded."""
#: Host rules applied to one URI at most (one per kind, with room to spare).
MAX_STEPS = 8

#: A host rule: (scope: scheme and authority, kind, parameter: a name or "").
Identity = tuple[str, str, str]
#: A canonical URI without fragment, with an authority: scheme, authority, path, "?", query.
Parts = tuple[str, str, str, str, str]


def _parts(uri: str) -> Parts | None:
    """*uri* (no fragment) split as ``scheme "://" authority path ["?" query]``
    (RFC 3986 section 3), or None if it has no authority."""
    colon = uri.find(":")
    if colon <= 0 or not uri.startswith("//", colon + 1):
        return None
    head, sep, query = split_query(uri[colon + 3 :])
    slash = head.find("/")
    authority, path = (head, "") if slash < 0 else (head[:slash], head[slash:])
    return uri[:colon], authority, path, sep, query


def _join(parts: Parts) -> str:
    scheme, authority, path, sep, query = parts
    return f"{scheme}://{authority}{path}{sep}{query}"


def _scope(parts: Parts) -> str:
    return f"{parts[0]}://{parts[1]}"


def _host_key(uri: str) -> str:
    """Scheme and authority of *uri* (a URI without fragment): the scope of a host rule."""
    parts = _parts(uri)
    return split_query(uri)[0] if parts is None else _scope(parts)


def _names(query: str) -> set[str]:
    return {param_name(pair) for pair in query_pairs(query)}


def _vary(identity: Identity, a: str, b: str) -> bool:
    """Whether two aliases *identity* maps to one image differ in what it drops.

    Equal content under two aliases says something about a dropped parameter only
    if its value differs between them (present in one only counts): two colour
    variants ``?sid=a&color=blue``, ``?sid=b&color=blue`` confirm dropping ``sid``,
    not dropping ``sid`` and ``color``.  Other kinds change one fixed part: True.
    """
    if identity[1] != DROP_PARAM:
        return True
    pa, pb = _parts(a), _parts(b)
    if pa is None or pb is None:
        return False
    qa, qb = pa[4] or "", pb[4] or ""
    for name in identity[2].split("@", 1)[0].split("&"):
        va = sorted(p for p in query_pairs(qa) if param_name(p) == name)
        vb = sorted(p for p in query_pairs(qb) if param_name(p) == name)
        if va == vb:
            return False
    return True


def _drop_params(parts: Parts, param: str) -> Parts | None:
    """*parts* without the query parameters *param* names (``"a&b"``, optionally
    ``"@/prefix"`` restricting it to paths under a Clean-param prefix), or None
    if none of them is there."""
    scheme, authority, path, sep, query = parts
    names, _, prefix = param.partition("@")
    if not query or not in_clean_param_scope(prefix, path):
        return None
    pairs = query_pairs(query)
    kept = drop_params(pairs, set(names.split("&")))
    if len(kept) == len(pairs):
        return None
    return scheme, authority, path, "?" if kept else "", join_query(kept)


def _collapse(path: str, query: str) -> tuple[str, str]:
    """A path without consecutive repeated segments (``/a/next/next/`` -> ``/a/next/``)
    and a query without repeated identical pairs (``q=x&q=x`` -> ``q=x``): the
    shape of URLs that grow without end (a crawler trap)."""
    segments = path.split("/")
    kept = segments[:1]
    for segment in segments[1:]:
        if not (segment and segment == kept[-1]):
            kept.append(segment)
    seen: set[str] = set()
    pairs = []
    for pair in query_pairs(query) if query else ():
        if pair not in seen:
            seen.add(pair)
            pairs.append(pair)
    return "/".join(kept), join_query(pairs)


def _candidates(
    parts: Parts, host_rule: bool, names: Collection[str] = ()
) -> Iterator[tuple[str, str, Parts]]:
    """``(kind, parameter, new parts)`` for every kind that applies to *parts*.

    With *host_rule*, only where a host rule of the kind applies (``add-slash``
    not on a last segment with a ``.``); else where an exact rule may.  A
    rule's output is outside its own domain (one rule never applies twice).
    ``drop-param`` only for the parameters *names* given (``"a"``, ``"a&b"``,
    ``"a&b@/prefix"``; each costs the length of the query).
    """
    scheme, authority, path, sep, query = parts
    if scheme == "http" and ":" not in authority.rsplit("@", 1)[-1]:
        yield HTTPS, "", ("https", authority, path, sep, query)
    if "@" not in authority:
        if authority.startswith("www.") and "." in authority[4:]:
            yield REMOVE_WWW, "", (scheme, authority[4:], path, sep, query)
        elif not authority.startswith("www.") and "." in authority and not (
            authority.startswith("[") or authority.replace(".", "").replace(":", "").isdigit()
        ):
            yield ADD_WWW, "", (scheme, "www." + authority, path, sep, query)
    first, slash, rest = path[1:].partition("/")
    if slash and first.startswith("index.") and len(first) > 6:
        yield DROP_SCRIPT, first, (scheme, authority, "/" + rest, sep, query)
    last = path[path.rfind("/") + 1 :]
    if last.startswith("index.") and len(last) > 6:
        yield DROP_INDEX, last, (scheme, authority, path[: -len(last)], sep, query)
    new_path, new_query = _collapse(path, query)
    if new_path != path or new_query != query:
        yield REPEAT, "", (scheme, authority, new_path, sep, new_query)
    if sep and query and names:
        for param in sorted(names):
            dropped = _drop_params(parts, param)
            if dropped is not None:
                yield DROP_PARAM, param, dropped
    if path and last and (not host_rule or "." not in last):
        yield ADD, "", (scheme, authority, path + "/", sep, query)
    if len(path) > 1 and path.endswith("/") and path[-2] != "/":
        yield REMOVE, "", (scheme, authority, path[:-1], sep, query)


def _classify(source: str, target: str) -> Identity | None:
    """The host rule of which ``source -> target`` is an instance, or None."""
    parts, goal = _parts(source), _parts(target)
    if parts is None or goal is None:
        return None
    dropped = _names(parts[4]) - _names(goal[4]) if parts[4] else set()
    params = ["&".join(sorted(dropped))] if dropped else []
    for kind, param, new in _candidates(parts, False, params):
        if new == goal:
            return _scope(parts), kind, param
    return None


def _twins(parts: Parts) -> tuple[str, ...]:
    """The scope of *parts* and the scopes whose rules may map URIs onto it:
    its ``www.`` twin and, for https, the http scope of the same authority."""
    scheme, authority = parts[0], parts[1]
    www = authority[4:] if authority.startswith("www.") else "www." + authority
    out: tuple[str, ...] = (f"{scheme}://{authority}", f"{scheme}://{www}")
    if scheme == "https":
        out += (f"http://{authority}", f"http://{www}")
    return out


def _pair_rules(a: str, b: str) -> list[Identity]:
    """The host rules under which two URIs with equal content are one: one
    transform from one to the other (slash towards a directory, ``www.``
    removed, http -> https, parameters dropped), or, between two URIs with the
    same parameters, those whose values differ dropped from both."""
    out = []
    for source, target in ((a, b), (b, a)):
        identity = _classify(source, target)
        if identity is not None and identity[1] not in (ADD_WWW, REMOVE) or (
            identity is not None and identity[1] == REMOVE and "." in source.rsplit("/", 2)[-2]
        ):
            out.append(identity)
    pa, pb = _parts(a), _parts(b)
    if pa is not None and pb is not None and pa[:3] == pb[:3] and pa[4] and pb[4]:
        va: dict[str, list[str]] = {}
        vb: dict[str, list[str]] = {}
        for query, values in ((pa[4], va), (pb[4], vb)):
            for pair in query_pairs(query):
                name, _, value = pair.partition("=")
                values.setdefault(name, []).append(value)
        # the same parameters, once each on both sides, some with other values
        # (session ids): those dropped from both (another count is a trap, above)
        if va.keys() == vb.keys() and all(len(v) == 1 for v in (*va.values(), *vb.values())):
            differ = sorted(n for n in va if va[n] != vb[n])
            if differ:
                out.append((_scope(pa), DROP_PARAM, "&".join(differ)))
    return out


class ProtocolRules:
    """Rules learned from permanent redirects, per host (see the module doc).

    Works on canonical URIs (``normalize(..., Level.SCHEME)`` output).  Not
    thread-safe (a Scrapy crawl runs in one thread).  ``learned`` and ``revoked``
    count exact rules per kind (``revoked``: revoked by later evidence).
    """

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
        self._bad: Counter[Identity] = Counter()  # content counterexamples
        self._origin: dict[Identity, str] = {}  # the source that nominated it
        self._candidates: dict[str, set[Identity]] = {}  # scope -> nominated rules
        self._images: dict[Identity, dict[str, tuple[bytes, str]]] = {}
        self._digests: dict[str, bytes] = {}  # canonical URI -> digest of its content
        self._keys: dict[str, list[str]] = {}  # scope -> URIs with a digest, in order
        self._by_digest: dict[bytes, list[str]] = {}
        self._skips: Counter[Identity] = Counter()

    # --- learning ------------------------------------------------------------

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
        identity = _classify(source, target)
        if identity is None:
            return None
        self._exact[source] = (target, identity)
        self._sources.setdefault(target, set()).add(source)
        self._evidence[identity] += 1
        before = self._in_force(identity)
        self._scopes.setdefault(identity[0], set()).add(identity[1:])
        self.learned[identity[1]] += 1
        self._nominate(identity, REDIRECT)
        if not before and self._in_force(identity):
            self.events[f"{self._origin[identity]}/learned"] += 1
        goal = _parts(target)
        if goal is not None:  # a host rule that would send the target back is contradicted
            for kind, param, new in _candidates(goal, True):  # (none adds a parameter)
                if _join(new) == source:
                    self._against((_scope(goal), kind, param), content=False)
        return identity[1]

    def observe_contrary(self, uri: str) -> int:
        """Record that *uri* was served (2xx) as it is; the number of exact rules
        that revoked (0 or 1).

        Evidence against every host rule that would have rewritten *uri*, and
        the latest word on *uri*: it is no longer redirected away from.
        """
        uri = strip_fragment(uri)
        parts = _parts(uri)
        if parts is not None:
            scope = _scope(parts)
            for kind, param, _ in _candidates(parts, True):
                self._against((scope, kind, param), content=False)
            if parts[4]:
                for name in _names(parts[4]):
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
        before = self._in_force(identity)
        self._evidence[identity] -= 1
        self.revoked[identity[1]] += 1
        self.revision += 1  # what the exact rule merged is looked at again
        if before and not self._in_force(identity):
            self.events[f"{self._origin.get(identity, REDIRECT)}/revoked"] += 1
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

    def _against(self, identity: Identity, *, content: bool) -> None:
        """Evidence against *identity*: content that differed in its scope (for
        good), or (not *content*) a 2xx against a redirect policy."""
        before = self._in_force(identity)
        if content:
            self._bad[identity] += 1
            self.events["counterexamples"] += 1
        else:
            self._contrary[identity] += 1
        if before and not self._in_force(identity):
            self.revision += 1
            self.events[f"{self._origin.get(identity, REDIRECT)}/revoked"] += 1

    def _confirm(self, identity: Identity, unit: str) -> None:
        kept = self._confirmed.setdefault(identity, [])
        if unit in kept:
            return
        before = self._in_force(identity)
        if len(kept) < KEPT_CONFIRMATIONS:
            kept.append(unit)
        source = self._origin.get(identity, CONTENT)
        if before:
            self.events[f"{source}/verified"] += 1
        elif self._in_force(identity):
            self.events[f"{source}/learned"] += 1

    def _track(self, identity: Identity, uri: str, digest: bytes) -> None:
        """Compare the content at *uri* with the content of what *identity* maps
        it to (or of the aliases it maps to *uri*): equal confirms, different
        revokes for good."""
        parts = _parts(uri)
        if parts is None or self._bad[identity]:
            return
        new = None
        if _scope(parts) == identity[0]:  # else *uri* can only be an image (on a twin host)
            image = self.step_image(identity, uri)
            new = None if image == uri else image
        images = self._images.setdefault(identity, {})
        if new is None:  # *uri* may be what earlier aliases map to
            earlier = images.get(uri)
            if earlier is not None:
                self._compare(identity, earlier[0], digest, uri, earlier[1])
            return
        target = self._digests.get(new)
        if target is not None:
            self._compare(identity, target, digest, new, uri)
        earlier = images.get(new)
        if earlier is None:
            images[new] = (digest, uri)
        elif earlier[1] != uri and (earlier[0] != digest or _vary(identity, earlier[1], uri)):
            self._compare(identity, earlier[0], digest, new, uri)

    def _compare(self, identity: Identity, a: bytes, b: bytes, image: str, uri: str) -> None:
        if a != b:
            self._against(identity, content=True)
        else:  # a trap grows without end: each longer spelling is a confirmation
            self._confirm(identity, uri if identity[1] == REPEAT else image)

    def observe_content(self, uri: str, digest: bytes) -> None:
        """Record that the canonical URI *uri* served (2xx) content of *digest*
        (a digest robust to per-response noise, e.g.
        :func:`iri_scrapy.protocol.evidence.content_digest`).

        Two URIs with equal digests that differ by one kind of transform
        nominate that rule (source ``content``); every rule nominated for the
        scope is checked against the new page.
        """
        uri = strip_fragment(uri)
        parts = _parts(uri)
        if parts is None:
            return
        scope = _scope(parts)
        if uri not in self._digests:
            keys = self._keys.setdefault(scope, [])
            if len(keys) >= MAX_PAGES_PER_SCOPE:
                return
            keys.append(uri)
        self._digests[uri] = digest
        same = self._by_digest.setdefault(digest, [])
        for other in same:
            if other != uri:
                for identity in _pair_rules(uri, other):
                    self._nominate(identity, CONTENT)
        if uri not in same and len(same) < PER_DIGEST:
            same.append(uri)
        for identity, image in self._potential(uri, parts):  # a rule content refutes
            if identity not in self._origin and self._digests[image] != digest:
                self._against(identity, content=True)
        for twin in _twins(parts):  # rules whose image is on this host (www., http)
            for identity in sorted(self._candidates.get(twin, ())):
                self._track(identity, uri, digest)

    def observe_canonical(self, uri: str, target: str) -> str | None:
        """Record that the page at *uri* declared *target* canonical (``<link
        rel=canonical>``, a ``Link`` header); the kind of rule it nominated, or None.

        Only a target one transform away on the same host (or its ``www.``
        twin) nominates a rule; it is used once the content of
        ``min_evidence`` such pairs was equal.  A canonical pointing elsewhere
        (every tag page declaring ``/``) is ignored: it never merges anything.
        """
        uri, target = strip_fragment(uri), strip_fragment(target)
        identity = _classify(uri, target) if uri != target else None
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
        parts = _parts(strip_fragment(scope_uri))
        wanted = sorted({name for name in names if name and "&" not in name and "@" not in name})
        if parts is None or not wanted:
            return
        param = "&".join(wanted) + (f"@{prefix}" if prefix not in ("", "/", "*") else "")
        self._nominate((_scope(parts), DROP_PARAM, param), CLEAN_PARAM)

    def skip(self, used: Iterable[Identity]) -> bool:
        """Whether a request merged by the host rules *used* is skipped (True) or
        fetched as a sample that checks them (False).

        Per rule, merge number n is sampled when n = K * 2**j (K:
        ``sample_every``) with 2**j at least 2**(c - 1), c the rule's
        confirmations (capped at :data:`SAMPLE_SHIFT_MAX` + 1): a rule's
        confirmations count as its first samples, and each sample that confirms
        it doubles the run before the next, so its samples grow with the
        logarithm of what it merged.  With the default two confirmations, a wrong
        rule is caught within 2K merges; nothing it skipped is lost (revocation
        gives them back).
        """
        sample = False
        for identity in used:
            self._skips[identity] += 1
            n = self._skips[identity]
            if n % self.sample_every == 0:
                m = n // self.sample_every
                floor = 1 << min(self._strength(identity) - 1, SAMPLE_SHIFT_MAX)
                if m & (m - 1) == 0 and m >= floor:  # floor*K, 2*floor*K, ... merges
                    sample = True
        for identity in used:
            source = self._origin.get(identity, REDIRECT)
            self.events[f"{source}/{'sampled' if sample else 'applied'}"] += 1
        return not sample

    def _strength(self, identity: Identity, floor: int = 1) -> int:
        """The confirmations of *identity* (at least *floor*): pages with equal
        content, or permanent redirects with no 2xx against them."""
        have = len(self._confirmed.get(identity, ()))
        if self._contrary[identity] == 0:
            have = max(have, self._evidence[identity])
        return max(floor, have)

    def pending(self, uri: str) -> list[tuple[Identity, str, int]]:
        """The rules not yet in force (and with no content counterexample) that
        would rewrite *uri*: ``(rule, image, seen)``, *seen* the fetches of the
        image's resource under that rule already observed (0, 1, or 2 once the
        image confirmed it: a further fetch there teaches nothing).

        Both the rules nominated and those a fetch of *uri* would nominate: one
        transform (:func:`_pair_rules`' kinds) onto a page already served.  Trap
        rules (``collapse-repeat``) are left out: each longer spelling confirms.
        """
        uri = strip_fragment(uri)
        parts = _parts(uri)
        if parts is None:
            return []
        out = []
        nominated = self._candidates.get(_scope(parts), ())
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
        for identity, image in self._potential(uri, parts):
            if identity not in nominated and not self._bad[identity]:
                out.append((identity, image, 1))
        return out

    def _potential(self, uri: str, parts: Parts) -> Iterator[tuple[Identity, str]]:
        """The rules content evidence would nominate if *uri* served the content
        of a page already served one transform away: ``(rule, that page)``."""
        if not self._digests:
            return
        names: list[str] = []
        if parts[4]:
            single = sorted(_names(parts[4]))
            names = single if len(single) == 1 else [*single, "&".join(single)]
        for kind, _, new in _candidates(parts, True, names):
            if kind in (REPEAT, ADD_WWW, REMOVE):  # content never nominates these
                continue
            image = _join(new)
            if image in self._digests:
                identity = _classify(uri, image)
                if identity is not None:
                    yield identity, image

    def needed(self, identity: Identity) -> int:
        """Confirmations *identity* still needs to be in force (0 if it is)."""
        return max(0, self.min_evidence - self._strength(identity, floor=0))

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
        """For *uri* that rules leave as it is: another URI already served that a
        host rule in force maps onto *uri* (the alias met first), or None."""
        uri = strip_fragment(uri)
        parts = _parts(uri)
        if parts is None:
            return None
        for twin in _twins(parts):
            for identity in sorted(self._candidates.get(twin, ())):
                seen = self._images.get(identity, {}).get(uri)
                if (seen is not None and seen[1] != uri and self.apply(seen[1]) == uri
                        and self._in_force(identity)):
                    return seen[1]
        return None

    def step_image(self, identity: Identity, uri: str) -> str:
        """What the host rule *identity* alone makes of *uri* (*uri* if it does not apply)."""
        parts = _parts(uri)
        if parts is None:
            return uri
        kind, param = identity[1], identity[2]
        for k, p, out in _candidates(parts, True, (param,) if kind == DROP_PARAM else ()):
            if k == kind and p == param:
                return _join(out)
        return uri

    def same_content(self, uri: str, digest: bytes) -> bool:
        """True if another page already served *digest* under the key :meth:`apply`
        gives *uri*, which rules moved (a sample that confirmed its rules)."""
        uri = strip_fragment(uri)
        key = self.apply(uri)
        if key == uri:
            return False
        return any(other != uri and self.apply(other) == key
                   for other in self._by_digest.get(digest, ()))

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

    # --- export ----------------------------------------------------------------

    def to_data(self) -> dict[str, Any]:
        """What was learned, as JSON data (:meth:`from_data` reads it back).

        The pages' digests are not kept (they grow with the crawl): content
        evidence starts afresh for pages after a load, rules learned stay.
        """
        def ident(i: Identity) -> list[str]:
            return list(i)
        return {
            "v": DATA_VERSION,
            "min_evidence": self.min_evidence,
            "exact": [[s, t, *i] for s, (t, i) in sorted(self._exact.items())],
            "away": sorted(self._away),
            "rules": [
                {"rule": ident(i), "origin": self._origin.get(i, REDIRECT),
                 "confirmed": list(self._confirmed.get(i, ())),
                 "bad": self._bad[i], "contrary": self._contrary[i],
                 "skips": self._skips[i]}
                for i in sorted(self._origin)
            ],
        }

    @classmethod
    def from_data(cls, data: Any, *, min_evidence: int | None = None,
                  sample_every: int = 10) -> ProtocolRules:
        """Rules from :meth:`to_data`'s document; :class:`RulesDataError` if it is not one.

        The document is data: every field's type is checked, nothing in it is run.
        """
        def fail(why: str) -> RulesDataError:
            return RulesDataError(f"protocol rules document: {why}")

        def strings(value: Any, n: int | None, what: str) -> list[str]:
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value) or (
                n is not None and len(value) != n
            ):
                raise fail(f"{what} is not a list of {n or 'any number of'} strings")
            return value

        if not isinstance(data, dict) or data.get("v") != DATA_VERSION:
            raise fail(f"not version {DATA_VERSION}")
        stored = data.get("min_evidence")
        if isinstance(stored, bool) or not isinstance(stored, int) or stored < 1:
            raise fail("min_evidence is not a positive integer")
        rules = cls(min_evidence if min_evidence is not None else stored, sample_every)
        exact, away, entries = data.get("exact"), data.get("away"), data.get("rules")
        if not isinstance(exact, list) or not isinstance(entries, list):
            raise fail("exact or rules is not a list")
        for row in exact:
            source, target, *identity = strings(row, 5, "an exact rule")
            i: Identity = (identity[0], identity[1], identity[2])
            rules._exact[source] = (target, i)
            rules._sources.setdefault(target, set()).add(source)
            rules._evidence[i] += 1
            rules._scopes.setdefault(i[0], set()).add(i[1:])
        rules._away = set(strings(away, None, "away"))
        for entry in entries:
            if not isinstance(entry, dict):
                raise fail("a rule is not an object")
            r = strings(entry.get("rule"), 3, "a rule")
            i = (r[0], r[1], r[2])
            if i[1] not in KINDS or entry.get("origin") not in SOURCES:
                raise fail(f"unknown kind or origin in {r}")
            numbers: list[int] = []
            for field in ("bad", "contrary", "skips"):
                n = entry.get(field)
                if not isinstance(n, int) or isinstance(n, bool) or n < 0:
                    raise fail(f"bad counts in {r}")
                numbers.append(n)
            rules._origin[i] = entry["origin"]
            rules._candidates.setdefault(i[0], set()).add(i)
            rules._scopes.setdefault(i[0], set()).add(i[1:])
            rules._confirmed[i] = strings(entry.get("confirmed"), None, "confirmed")[
                :KEPT_CONFIRMATIONS]
            rules._bad[i], rules._contrary[i], rules._skips[i] = numbers
        return rules

    def load(self, data: Any) -> None:
        """Replace what this object learned by :meth:`from_data`'s reading of *data*
        (same ``min_evidence`` and ``sample_every``); nothing changes if it is refused."""
        other = self.from_data(data, min_evidence=self.min_evidence,
                               sample_every=self.sample_every)
        other.revision = self.revision + 1  # what was merged before is looked at again
        vars(self).update(vars(other))

    @staticmethod
    def merge_data(local: dict[str, Any], remote: dict[str, Any]) -> dict[str, Any]:
        """One rules document (:meth:`to_data`) from two of one crawl (workers of a fleet).

        Both must have been read by :meth:`from_data` (checked).  Host rules are
        merged so that no counterexample is lost: a rule's confirmations are the
        union (distinct images; the first ``KEPT_CONFIRMATIONS`` in sorted
        order), its content counterexamples (``bad``), 2xx responses against it
        (``contrary``) and sample counts (``skips``) the larger of the two, so a
        rule revoked by either side stays revoked (``bad`` is final).  Exact
        rules (each from a permanent redirect a worker fetched) and "redirected
        away from" are the union; a spelling the two map to different targets
        keeps the greater row.  The union can keep an exact rule another worker
        revoked: it merges only a spelling that was fetched (its redirect taught
        the rule), so it loses no page.  Commutative, associative and
        idempotent: workers that write in turn agree on one document instead of
        rewriting each other's.  The one definition of the merge: the frontier's
        ``merge_rules_data`` and :meth:`adopt` both use it.
        """
        exact: dict[str, list[str]] = {}
        for row in [*local["exact"], *remote["exact"]]:
            have = exact.get(row[0])
            exact[row[0]] = row if have is None else max(have, row)
        rules: dict[tuple[str, ...], dict[str, Any]] = {}
        for entry in [*local["rules"], *remote["rules"]]:
            key = tuple(entry["rule"])
            have_entry = rules.get(key)
            if have_entry is None:
                rules[key] = {**entry, "confirmed": set(entry["confirmed"])}
                continue
            have_entry["confirmed"].update(entry["confirmed"])
            have_entry["origin"] = min(have_entry["origin"], entry["origin"])
            for field in ("bad", "contrary", "skips"):
                have_entry[field] = max(have_entry[field], entry[field])
        for entry in rules.values():
            entry["confirmed"] = sorted(entry["confirmed"])[:KEPT_CONFIRMATIONS]
        return {
            "v": local["v"],
            "min_evidence": max(local["min_evidence"], remote["min_evidence"]),
            "exact": [exact[source] for source in sorted(exact)],
            "away": sorted(set(local["away"]) | set(remote["away"])),
            "rules": [rules[key] for key in sorted(rules)],
        }

    def adopt(self, data: Any) -> int:
        """Fold another worker's rules document (:meth:`to_data`'s shape) into these
        rules while they are in use; how far ``revision`` moved (the rules in force
        that stopped).

        *data* is read by :meth:`from_data` (data only; :class:`RulesDataError`
        and nothing changed if it is refused) and merged as :meth:`merge_data`
        merges two documents, so the learned part of these rules becomes exactly
        the merge of the two.  Unlike :meth:`load`, what this object alone keeps
        stays: the pages' digests and the images seen per rule (content evidence
        goes on; each rule new here is checked against the pages already served,
        as :meth:`_nominate` does), the evidence against rules never nominated,
        ``events``, ``learned`` and ``revoked``.  ``revision`` moves only when a
        rule in force here stops (a host rule another worker has a counterexample
        to, an exact rule the merge retargets): then what it merged is looked at
        again (``Learned.changed``), and each such host rule counts as
        ``<source>/revoked``, each exact rule in ``revoked``; a rule that comes
        into force by the merge counts as ``<source>/adopted`` (and as
        ``<source>/revoked`` too if the pages served here then refute it).  As
        with local learning, a spelling newly redirected away from moves no
        revision.  ``apply`` stays idempotent (it only ever reads a rule set).
        """
        other = self.from_data(data, min_evidence=self.min_evidence,
                               sample_every=self.sample_every)
        merged = self.merge_data(self.to_data(), other.to_data())
        fresh = self.from_data(merged, min_evidence=self.min_evidence,
                               sample_every=self.sample_every)
        before = self._forces()
        exact_before, revision = self._exact, self.revision
        new = [i for i in sorted(fresh._origin) if i not in self._origin]
        for name in ("_bad", "_contrary", "_skips"):  # counts of rules never exported
            mine, theirs = getattr(self, name), getattr(fresh, name)
            for identity, n in mine.items():
                if n > theirs[identity]:
                    theirs[identity] = n
        for name in ("_exact", "_sources", "_away", "_evidence", "_contrary", "_bad",
                     "_skips", "_confirmed", "_origin", "_candidates", "_scopes"):
            setattr(self, name, getattr(fresh, name))
        stopped = 0
        after = self._forces()
        for identity in sorted(before - after):
            stopped += 1
            self.events[f"{self.origin(identity)}/revoked"] += 1
        for identity in sorted(after - before):
            self.events[f"{self.origin(identity)}/adopted"] += 1
        for source, (target, identity) in sorted(exact_before.items()):
            if self._exact.get(source, (None,))[0] != target:  # retargeted by the merge
                stopped += 1
                self.revoked[identity[1]] += 1
        self.revision += stopped  # what those rules merged is looked at again
        for identity in new:  # checked against the pages served here, as _nominate does
            for uri in self._keys.get(identity[0], [])[-BACKFILL:]:
                self._track(identity, uri, self._digests[uri])  # may refute it: revoked
        return self.revision - revision

    def _forces(self) -> set[Identity]:
        """The host rules in force now."""
        return {(scope, kind, param) for scope, rules in self._scopes.items()
                for kind, param in rules if self._in_force((scope, kind, param))}

    # --- applying ------------------------------------------------------------

    def host_rules(self, uri: str) -> list[tuple[str, str]]:
        """The host rules in force for *uri*'s scope: ``(kind, parameter)``, in the
        order they are tried."""
        scope = _host_key(strip_fragment(uri))
        out = [
            (kind, param)
            for kind, param in self._scopes.get(scope, ())
            if self._in_force((scope, kind, param))
        ]
        return sorted(out, key=lambda rule: (KINDS.index(rule[0]), rule[1]))

    def _in_force(self, identity: Identity) -> bool:
        """A host rule is used once ``min_evidence`` permanent redirects with no
        2xx against it, or ``min_evidence`` content confirmations, showed it --
        and never after content differed in its scope."""
        if self._bad[identity]:
            return False
        if len(self._confirmed.get(identity, ())) >= self.min_evidence:
            return True
        return (self._evidence[identity] >= self.min_evidence
                and self._contrary[identity] == 0)

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
        parts = _parts(uri)
        if parts is None:
            return uri, None
        rules = self.host_rules(uri)
        if not rules:
            return uri, None
        names = [param for kind, param in rules if kind == DROP_PARAM]
        for kind, param, new in _candidates(parts, True, names):
            if (kind, param) in rules:
                out = _join(new)
                if out not in self._away or self._exact_target(out) is not None:  # not a dead end
                    return out, (_scope(parts), kind, param)
        return uri, None

    def apply(self, uri: str) -> str:
        """Map a canonical URI to the spelling the protocol taught (5.3.4); idempotent."""
        return self.trace(uri)[0]

    def trace(self, uri: str) -> tuple[str, list[Identity]]:
        """:meth:`apply`, and the host rules it used (in order; exact rules not listed)."""
        if not self._exact and not self._scopes:  # no rule of any kind
            return uri, []
        head, fragment = split_fragment(uri)
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

    def __len__(self) -> int:
        return len(self._exact)
