"""Protocol-based normalization: what the protocol taught us (RFC 3987 section 5.3.4).

"If they observe that an IRI such as http://example.com/data redirects to an IRI
differing only in the trailing slash http://example.com/data/ they will likely
regard the two as equivalent in the future."  :class:`ProtocolRules` records
permanent redirects (301, 308) whose target differs from the request only by a
trailing slash on the path.  The exact pair is learned at once; after
``min_evidence`` such redirects on one host with no contrary evidence, the host
rule applies to other paths of that host whose last segment looks like a
directory (no ``.``).  Rules only map to the redirect *target* spelling, so a
learned rule can never map a target back to its source: no loops.
"""

from __future__ import annotations

from collections import Counter
from urllib.parse import urlsplit

__all__ = ["ProtocolRules"]

PERMANENT = frozenset({301, 308})
ADD, REMOVE = "add-slash", "remove-slash"


def _host_key(uri: str) -> str:
    parts = urlsplit(uri)
    return f"{parts.scheme}://{parts.netloc}"


def _split_path(uri: str) -> tuple[str, str]:
    """``(up_to_path_end, query_and_fragment)`` of a URI."""
    cut = len(uri)
    for sep in ("?", "#"):
        i = uri.find(sep)
        if 0 <= i < cut:
            cut = i
    return uri[:cut], uri[cut:]


def _candidate(uri: str, kind: str) -> str | None:
    """What a host rule of *kind* would make of *uri*, or None if it does not apply."""
    head, tail = _split_path(uri)
    scheme_end = head.find("//")
    path_start = head.find("/", scheme_end + 2) if scheme_end >= 0 else -1
    if path_start < 0:
        return None
    last = head[head.rfind("/") + 1 :]
    if kind == ADD and not head.endswith("/") and last and "." not in last:
        return head + "/" + tail
    if kind == REMOVE and head.endswith("/") and len(head) - 1 > path_start:
        return head[:-1] + tail
    return None


class ProtocolRules:
    """Trailing-slash rules learned from permanent redirects, per host.

    Works on canonical URIs (``normalize(..., Level.SCHEME)`` output).  Not
    thread-safe (a Scrapy crawl runs in one thread).
    """

    def __init__(self, min_evidence: int = 2) -> None:
        self.min_evidence = min_evidence
        self._exact: dict[str, str] = {}
        self._evidence: Counter[tuple[str, str]] = Counter()
        self._contrary: Counter[tuple[str, str]] = Counter()

    def observe_redirect(self, source: str, target: str, status: int) -> bool:
        """Record a redirect between two canonical URIs; True if it taught a rule."""
        if status not in PERMANENT or source == target:
            return False
        s_head, s_tail = _split_path(source)
        t_head, t_tail = _split_path(target)
        if s_tail != t_tail:
            return False
        if t_head == s_head + "/" and not s_head.endswith("/"):
            kind = ADD
        elif s_head == t_head + "/" and not t_head.endswith("/"):
            kind = REMOVE
        else:
            return False
        if self._exact.get(target) == source:
            return False  # the opposite was learned: never loop
        self._exact[source] = target
        self._evidence[(_host_key(source), kind)] += 1
        return True

    def observe_contrary(self, uri: str) -> None:
        """Record that *uri* was served (2xx) as it is: evidence against host rules.

        Counts only against a rule that would have rewritten *uri*.
        """
        for kind in (ADD, REMOVE):
            if _candidate(uri, kind) is not None:
                self._contrary[(_host_key(uri), kind)] += 1

    def host_rule(self, uri: str) -> str | None:
        """The rule in force for *uri*'s host: ``"add-slash"``, ``"remove-slash"`` or None."""
        host = _host_key(uri)
        for kind in (ADD, REMOVE):
            if (
                self._evidence[(host, kind)] >= self.min_evidence
                and self._contrary[(host, kind)] == 0
            ):
                return kind
        return None

    def apply(self, uri: str) -> str:
        """Map a canonical URI to the spelling the protocol taught (5.3.4)."""
        exact = self._exact.get(uri)
        if exact is not None:
            return exact
        if not self._evidence:
            return uri
        kind = self.host_rule(uri)
        if kind is None:
            return uri
        return _candidate(uri, kind) or uri

    def __len__(self) -> int:
        return len(self._exact)
