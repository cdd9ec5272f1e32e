"""Protocol-based normalization: what the protocol taught us (RFC 3987 section 5.3.4).

"If they observe that an IRI such as http://example.com/data redirects to an IRI
differing only in the trailing slash http://example.com/data/ they will likely
regard the two as equivalent in the future."  :class:`ProtocolRules` records
permanent redirects (301, 308) and keeps one consistent map from them:

* **Exact rules**: a redirect whose target differs from the request only by one
  trailing slash on the path (same query) maps its source to its target.
* **Redirected away from**: the source of every permanent redirect is a spelling
  the server refused; no rule ever maps a URI *to* it.
* **Host rules**: after ``min_evidence`` exact rules of one kind (add or remove
  the slash) in force on one host (scheme and authority), with no counterexample,
  the host rule maps other paths of the host the same way: add a slash to a
  path whose last segment looks like a directory (no ``.``), remove the one
  trailing slash of a path (not the root, not ``//``).  An exact rule beats the
  host rule on its own URI.

The map's output is a fixed point: :meth:`ProtocolRules.apply` accepts what a
host rule proposes only if it is no spelling redirected away from and the rules
map it to itself, so ``apply(apply(u)) == apply(u)``.  Rules work on canonical
URIs (level SCHEME output), so level PROTOCOL never splits what SCHEME merged.
A fragment is not part of what a rule matches (section 5.1) and is kept.

**Conflicting evidence**, resolved deterministically by the order it arrived in
(latest wins, per spelling): a permanent redirect *to* a spelling, or a 2xx
response *at* it, revokes any rule *from* it and clears "redirected away from";
a redirect away from a spelling revokes the exact rule that mapped a URI to it.
So ``a -> a/`` then ``a/ -> a`` leaves ``a/ -> a`` (both spellings still one
key).  A host rule stops for good at its first counterexample in its scope: a
2xx at a URI it would rewrite, or an exact rule whose target it would map back
to that rule's source (the server sends the other way there).
"""

from __future__ import annotations

from collections import Counter

__all__ = ["ProtocolRules"]

PERMANENT = frozenset({301, 308})
ADD, REMOVE = "add-slash", "remove-slash"
KINDS = (ADD, REMOVE)


def _drop_fragment(uri: str) -> tuple[str, str]:
    """``(uri_without_fragment, "#fragment" or "")``."""
    i = uri.find("#")
    return (uri, "") if i < 0 else (uri[:i], uri[i:])


def _path_start(head: str) -> int:
    """Index of the path in *head* (a URI without query or fragment) that has an
    authority (RFC 3986 section 3: ``scheme "://" authority path``), else -1."""
    colon = head.find(":")
    if colon <= 0 or not head.startswith("//", colon + 1):
        return -1
    return head.find("/", colon + 3)


def _host_key(uri: str) -> str:
    """Scheme and authority of *uri* (a URI without fragment): the scope of a host rule."""
    head = uri.split("?", 1)[0]
    start = _path_start(head)
    return head if start < 0 else head[:start]


def _candidate(uri: str, kind: str) -> str | None:
    """What a host rule of *kind* makes of *uri* (no fragment), or None if it does not apply.

    The two kinds are inverse on their domains: add-slash maps ``X`` to ``X/``
    (``X`` not ending in ``/``, its last segment non-empty without ``.``),
    remove-slash maps ``X/`` to ``X`` (``X`` not ending in ``/``, not the root).
    """
    head, sep, query = uri.partition("?")
    start = _path_start(head)
    if start < 0:
        return None
    if kind == ADD:
        last = head[head.rfind("/") + 1 :]
        if last and "." not in last:
            return head + "/" + sep + query
        return None
    if head.endswith("/") and len(head) - 1 > start and head[-2] != "/":
        return head[:-1] + sep + query
    return None


def _slash_kind(source: str, target: str) -> str | None:
    """ADD or REMOVE if *target* is *source* with one trailing slash added or
    removed on the path (same query, a path after an authority), else None."""
    s_head, s_sep, s_query = source.partition("?")
    t_head, t_sep, t_query = target.partition("?")
    if (s_sep, s_query) != (t_sep, t_query) or _path_start(s_head) < 0:
        return None
    if t_head == s_head + "/" and not s_head.endswith("/"):
        return ADD
    if s_head == t_head + "/" and not t_head.endswith("/") and _path_start(t_head) >= 0:
        return REMOVE
    return None


def _toggle(uri: str) -> str:
    """*uri* (no fragment) with one trailing slash on its path removed, or added."""
    head, sep, query = uri.partition("?")
    head = head[:-1] if head.endswith("/") else head + "/"
    return head + sep + query


class ProtocolRules:
    """Trailing-slash rules learned from permanent redirects, per host (see the module doc).

    Works on canonical URIs (``normalize(..., Level.SCHEME)`` output).  Not
    thread-safe (a Scrapy crawl runs in one thread).  ``revoked`` counts the
    exact rules that later evidence revoked.
    """

    def __init__(self, min_evidence: int = 2) -> None:
        if isinstance(min_evidence, bool) or not isinstance(min_evidence, int) or min_evidence < 1:
            raise ValueError(f"min_evidence must be an integer >= 1, got {min_evidence!r}")
        self.min_evidence = min_evidence
        self.revoked = 0
        self._exact: dict[str, str] = {}
        self._away: set[str] = set()
        self._evidence: Counter[tuple[str, str]] = Counter()
        self._contrary: Counter[tuple[str, str]] = Counter()

    # --- learning ------------------------------------------------------------

    def observe_redirect(self, source: str, target: str, status: int) -> bool:
        """Record a redirect between two canonical URIs; True if it taught an exact rule.

        A permanent redirect (301, 308) marks *source* as redirected away from
        and *target* as not (latest wins); one that adds or removes a trailing
        slash also becomes an exact rule.  Fragments are ignored.
        """
        source, target = _drop_fragment(source)[0], _drop_fragment(target)[0]
        if status not in PERMANENT or source == target:
            return False
        self._forget(target)
        self._send_away(source)
        kind = _slash_kind(source, target)
        if kind is None or self._exact.get(source) == target:
            return False
        self._exact[source] = target
        host = _host_key(source)
        self._evidence[(host, kind)] += 1
        for other in KINDS:  # a host rule that would send the target back is contradicted
            if _candidate(target, other) == source:
                self._contrary[(host, other)] += 1
        return True

    def observe_contrary(self, uri: str) -> bool:
        """Record that *uri* was served (2xx) as it is; True if that revoked an exact rule.

        Evidence against the host rules that would have rewritten *uri*, and
        the latest word on *uri*: it is no longer redirected away from.
        """
        uri = _drop_fragment(uri)[0]
        for kind in KINDS:
            if _candidate(uri, kind) is not None:
                self._contrary[(_host_key(uri), kind)] += 1
        return self._forget(uri)

    def _forget(self, uri: str) -> bool:
        """*uri* is a final spelling now: not redirected away from, no rule from it."""
        self._away.discard(uri)
        return self._revoke(uri)

    def _send_away(self, uri: str) -> None:
        """*uri* is redirected away from: no exact rule may map a URI to it."""
        self._away.add(uri)
        other = _toggle(uri)  # the only source an exact rule to *uri* can have
        if self._exact.get(other) == uri:
            self._revoke(other)

    def _revoke(self, source: str) -> bool:
        target = self._exact.pop(source, None)
        if target is None:
            return False
        kind = _slash_kind(source, target)
        assert kind is not None
        self._evidence[(_host_key(source), kind)] -= 1
        self.revoked += 1
        return True

    # --- applying ------------------------------------------------------------

    def host_rule(self, uri: str) -> str | None:
        """The rule in force for *uri*'s host: ``"add-slash"``, ``"remove-slash"`` or None.

        At most one is: every add-slash exact rule contradicts remove-slash.
        """
        host = _host_key(_drop_fragment(uri)[0])
        for kind in KINDS:
            if (
                self._evidence[(host, kind)] >= self.min_evidence
                and self._contrary[(host, kind)] == 0
            ):
                return kind
        return None

    def redirected_away(self, uri: str) -> bool:
        """True if the latest evidence on *uri* is a permanent redirect away from it."""
        return _drop_fragment(uri)[0] in self._away

    def _step(self, uri: str, check: bool = True) -> str:
        exact = self._exact.get(uri)
        if exact is not None:
            return exact  # a target is never redirected away from, never a source
        kind = self.host_rule(uri)
        if kind is None:
            return uri
        new = _candidate(uri, kind)
        if new is None or new in self._away:
            return uri
        if check and self._step(new, check=False) != new:
            return uri  # not a fixed point of the rules: keep the URI as it is
        return new

    def apply(self, uri: str) -> str:
        """Map a canonical URI to the spelling the protocol taught (5.3.4); idempotent."""
        if not self._exact:  # no exact rule: no host rule either
            return uri
        head, fragment = _drop_fragment(uri)
        new = self._step(head)
        return uri if new == head else new + fragment

    def __len__(self) -> int:
        return len(self._exact)
