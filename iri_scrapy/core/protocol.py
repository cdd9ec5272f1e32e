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
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterator

__all__ = ["ProtocolRules", "KINDS", "MAX_STEPS"]

PERMANENT = frozenset({301, 308})
ADD, REMOVE = "add-slash", "remove-slash"
DROP_PARAM, DROP_INDEX = "drop-param", "drop-index"
REMOVE_WWW, ADD_WWW, HTTPS = "remove-www", "add-www", "https"
#: The kinds of rule, in the order :meth:`ProtocolRules.apply` tries host rules.
KINDS = (HTTPS, REMOVE_WWW, ADD_WWW, DROP_INDEX, DROP_PARAM, ADD, REMOVE)
#: Host rules applied to one URI at most (one per kind, with room to spare).
MAX_STEPS = 8

#: A host rule: (scope: scheme and authority, kind, parameter: a name or "").
Identity = tuple[str, str, str]
#: A canonical URI without fragment, with an authority: scheme, authority, path, "?", query.
Parts = tuple[str, str, str, str, str]


def _drop_fragment(uri: str) -> tuple[str, str]:
    """``(uri_without_fragment, "#fragment" or "")``."""
    i = uri.find("#")
    return (uri, "") if i < 0 else (uri[:i], uri[i:])


def _parts(uri: str) -> Parts | None:
    """*uri* (no fragment) split as ``scheme "://" authority path ["?" query]``
    (RFC 3986 section 3), or None if it has no authority."""
    colon = uri.find(":")
    if colon <= 0 or not uri.startswith("//", colon + 1):
        return None
    head, sep, query = uri[colon + 3 :].partition("?")
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
    return uri.split("?", 1)[0] if parts is None else _scope(parts)


def _names(query: str) -> set[str]:
    return {pair.split("=", 1)[0] for pair in query.split("&")}


def _candidates(
    parts: Parts, host_rule: bool, names: Collection[str] = ()
) -> Iterator[tuple[str, str, Parts]]:
    """``(kind, parameter, new parts)`` for every kind that applies to *parts*.

    With *host_rule*, only where a host rule of the kind applies (``add-slash``
    not on a last segment with a ``.``); else where an exact rule may.  A
    rule's output is outside its own domain (one rule never applies twice).
    ``drop-param`` only for the parameter *names* given (each costs the length
    of the query: all of them at once would be quadratic).
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
    last = path[path.rfind("/") + 1 :]
    if last.startswith("index.") and len(last) > 6:
        yield DROP_INDEX, last, (scheme, authority, path[: -len(last)], sep, query)
    if sep and query and names:
        pairs = query.split("&")
        for name in sorted(_names(query).intersection(names)):
            kept = "&".join(p for p in pairs if p.split("=", 1)[0] != name)
            yield DROP_PARAM, name, (scheme, authority, path, "?" if kept else "", kept)
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
    for kind, param, new in _candidates(parts, False, dropped if len(dropped) == 1 else ()):
        if new == goal:
            return _scope(parts), kind, param
    return None


class ProtocolRules:
    """Rules learned from permanent redirects, per host (see the module doc).

    Works on canonical URIs (``normalize(..., Level.SCHEME)`` output).  Not
    thread-safe (a Scrapy crawl runs in one thread).  ``learned`` and ``revoked``
    count exact rules per kind (``revoked``: revoked by later evidence).
    """

    def __init__(self, min_evidence: int = 2) -> None:
        if isinstance(min_evidence, bool) or not isinstance(min_evidence, int) or min_evidence < 1:
            raise ValueError(f"min_evidence must be an integer >= 1, got {min_evidence!r}")
        self.min_evidence = min_evidence
        self.learned: Counter[str] = Counter()
        self.revoked: Counter[str] = Counter()
        self._exact: dict[str, tuple[str, Identity]] = {}
        self._sources: dict[str, set[str]] = {}  # target -> sources of exact rules to it
        self._away: set[str] = set()
        self._evidence: Counter[Identity] = Counter()
        self._contrary: Counter[Identity] = Counter()
        self._scopes: dict[str, set[tuple[str, str]]] = {}  # scope -> kinds with evidence

    # --- learning ------------------------------------------------------------

    def observe_redirect(self, source: str, target: str, status: int) -> str | None:
        """Record a redirect between two canonical URIs; the kind of the exact rule
        it taught (``"add-slash"``, ...), or None.

        A permanent redirect (301, 308) marks *source* as redirected away from
        and *target* as not (latest wins); one of a known kind also becomes an
        exact rule.  Fragments are ignored.
        """
        source, target = _drop_fragment(source)[0], _drop_fragment(target)[0]
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
        self._scopes.setdefault(identity[0], set()).add(identity[1:])
        self.learned[identity[1]] += 1
        goal = _parts(target)
        if goal is not None:  # a host rule that would send the target back is contradicted
            for kind, param, new in _candidates(goal, True):  # (none adds a parameter)
                if _join(new) == source:
                    self._contrary[(_scope(goal), kind, param)] += 1
        return identity[1]

    def observe_contrary(self, uri: str) -> int:
        """Record that *uri* was served (2xx) as it is; the number of exact rules
        that revoked (0 or 1).

        Evidence against every host rule that would have rewritten *uri*, and
        the latest word on *uri*: it is no longer redirected away from.
        """
        uri = _drop_fragment(uri)[0]
        parts = _parts(uri)
        if parts is not None:
            scope = _scope(parts)
            for kind, param, _ in _candidates(parts, True):
                self._contrary[(scope, kind, param)] += 1
            if parts[4]:
                for name in _names(parts[4]):
                    self._contrary[(scope, DROP_PARAM, name)] += 1
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
        self._evidence[identity] -= 1
        self.revoked[identity[1]] += 1
        return 1

    # --- applying ------------------------------------------------------------

    def host_rules(self, uri: str) -> list[tuple[str, str]]:
        """The host rules in force for *uri*'s scope: ``(kind, parameter)``, in the
        order they are tried."""
        scope = _host_key(_drop_fragment(uri)[0])
        out = [
            (kind, param)
            for kind, param in self._scopes.get(scope, ())
            if self._evidence[(scope, kind, param)] >= self.min_evidence
            and self._contrary[(scope, kind, param)] == 0
        ]
        return sorted(out, key=lambda rule: (KINDS.index(rule[0]), rule[1]))

    def host_rule(self, uri: str) -> str | None:
        """The trailing-slash rule in force for *uri*'s host: ``"add-slash"``,
        ``"remove-slash"`` or None (at most one is: every add-slash exact rule
        contradicts remove-slash)."""
        kinds = [kind for kind, _ in self.host_rules(uri) if kind in (ADD, REMOVE)]
        return kinds[0] if kinds else None

    def redirected_away(self, uri: str) -> bool:
        """True if the latest evidence on *uri* is a permanent redirect away from it."""
        return _drop_fragment(uri)[0] in self._away

    def _step(self, uri: str) -> str:
        """One rule applied to *uri* (no fragment): its exact rule, else the first
        host rule whose output is no spelling redirected away from (or is one
        that its exact rule moves on from)."""
        exact = self._exact.get(uri)
        if exact is not None:
            return exact[0]  # a target is never redirected away from
        parts = _parts(uri)
        if parts is None:
            return uri
        rules = self.host_rules(uri)
        if not rules:
            return uri
        names = [param for kind, param in rules if kind == DROP_PARAM]
        for kind, param, new in _candidates(parts, True, names):
            if (kind, param) in rules:
                out = _join(new)
                if out not in self._away or out in self._exact:  # not a dead end
                    return out
        return uri

    def apply(self, uri: str) -> str:
        """Map a canonical URI to the spelling the protocol taught (5.3.4); idempotent."""
        if not self._exact:  # no exact rule: no host rule either
            return uri
        head, fragment = _drop_fragment(uri)
        out = head
        for _ in range(MAX_STEPS):
            new = self._step(out)
            if new == out:
                break
            out = new
        else:
            return uri  # no fixed point within MAX_STEPS: leave the URI as it is
        return uri if out == head else out + fragment

    def __len__(self) -> int:
        return len(self._exact)
