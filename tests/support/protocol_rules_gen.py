"""Generated protocol rule sets and URLs: the checks of RFC 3987 section 5.3.4 rules.

A rule set is what :class:`~iri_scrapy.ProtocolRules` learned from a sequence of
events on a small universe of hosts and paths (so that rules meet each other):

``("redirect", source, target, status)``  a 3xx between two canonical URIs
    (trailing slash added or removed, ``//`` collapsed, another path, http ->
    https, ``www.`` removed or added, a parameter dropped, ``index.*`` removed;
    301/308 mostly, some 302);
``("served", uri, "", 200)``  a 2xx response at *uri*.

The ground truth is a model independent of the rules: a spelling is *redirected
away from* if the latest event about it is a permanent redirect from it (a 2xx
at it, or a permanent redirect to it, clears that).  Each URL checked (some
spelled non-canonically, some with a fragment) counts three checks against the
fixed rule set:

``idempotent``  ``normalize(normalize(u, P), P) == normalize(u, P)``;
``away``        ``normalize(u, P)`` is never a spelling redirected away from,
                unless it is what level SCHEME made of ``u`` (rules moved nothing);
``monotone``    a higher level never splits a lower merge: ``normalize(u, P)``
                equals ``normalize`` at P of what SYNTAX and SCHEME made of ``u``.

``python -m tests.support.protocol_rules_gen [CHECKS] [SEED]`` prints the failures
per check (the figures of issue 23: 360,000 checks).
"""

from __future__ import annotations

import random
import sys
from collections import Counter
from collections.abc import Iterable, Sequence

import iri_scrapy as iri
from iri_scrapy import Level, ProtocolRules

Event = tuple[str, str, str, int]

HOSTS = ("http://h.test", "https://h.test", "http://www.h.test", "http://w.test")
DIRS = ("/a", "/b", "/c", "/d", "/x/a", "/x/y")
FILES = ("/f.html", "/x/g.php", "/x/index.html", "/index.php")
QUERIES = ("", "?q=1", "?q=1&r=2")
PERMANENT = (301, 308)
CHECKS = ("idempotent", "away", "monotone")


def _spellings() -> list[str]:
    out = []
    for host in HOSTS:
        for path in DIRS + FILES:
            for query in QUERIES:
                out += [host + path + query, host + path + "/" + query, host + path + "//" + query]
        out += [host + "/", host + "//", host + "/elsewhere"]
    return out


#: Every canonical spelling of the universe (what events and checks draw from).
SPELLINGS = tuple(_spellings())


def _redirects() -> list[Event]:
    out: list[Event] = []
    for host in HOSTS:
        for path in DIRS + FILES:
            for query in QUERIES:
                plain, slash, double = host + path + query, host + path + "/" + query, (
                    host + path + "//" + query
                )
                for status in (301, 308, 302):
                    out += [("redirect", plain, slash, status), ("redirect", slash, plain, status)]
                out += [("redirect", double, slash, 301), ("redirect", plain, host + "/elsewhere", 301)]
    out += [("redirect", "http://h.test/a", "https://h.test/a/", 301)]
    return out


def _other_kinds() -> list[Event]:
    """Redirects of the other kinds: https, www, a parameter dropped, ``index.*`` removed."""
    out: list[Event] = []
    for path in DIRS + FILES:
        for query in QUERIES:
            rest = path + query
            out += [
                ("redirect", "http://h.test" + rest, "https://h.test" + rest, 301),
                ("redirect", "http://w.test" + rest, "https://w.test" + rest, 308),
                ("redirect", "http://www.h.test" + rest, "http://h.test" + rest, 301),
                ("redirect", "http://h.test" + rest, "http://www.h.test" + rest, 301),
            ]
        for host in HOSTS:
            out += [
                ("redirect", host + path + "?q=1", host + path, 301),
                ("redirect", host + path + "?q=1&r=2", host + path + "?r=2", 301),
                ("redirect", host + path + "?q=1&r=2", host + path + "?q=1", 301),
            ]
    for host in HOSTS:
        out += [("redirect", host + "/x/index.html", host + "/x/", 301),
                ("redirect", host + "/index.php", host + "/", 301)]
    return out


#: Every event of the universe (Hypothesis samples lists of them).
EVENTS: tuple[Event, ...] = tuple(_redirects()) + tuple(_other_kinds()) + tuple(
    ("served", u, "", 200) for u in SPELLINGS
)
def _slash_pair(a: str, b: str) -> bool:
    """True if *a* and *b* differ only by one trailing slash on the path."""
    (ha, _, qa), (hb, _, qb) = a.partition("?"), b.partition("?")
    return qa == qb and (ha + "/" == hb or hb + "/" == ha)


#: The redirects that add or remove one trailing slash (what random rule sets favour).
SLASH_EVENTS = tuple(e for e in EVENTS if e[0] == "redirect" and _slash_pair(e[1], e[2]))
#: The redirects of the other kinds.
KIND_EVENTS = tuple(_other_kinds())


def build(events: Iterable[Event], min_evidence: int = 2) -> ProtocolRules:
    """The rule set learned from *events*, in order."""
    rules = ProtocolRules(min_evidence=min_evidence)
    for kind, uri, target, status in events:
        if kind == "redirect":
            rules.observe_redirect(uri, target, status)
        else:
            rules.observe_contrary(uri)
    return rules


def redirected_away(events: Iterable[Event]) -> set[str]:
    """The spellings whose latest event is a permanent redirect away from them."""
    away: dict[str, bool] = {}
    for kind, uri, target, status in events:
        if kind == "redirect":
            if status in PERMANENT and uri != target:
                away[uri] = True
                away[target] = False
        else:
            away[uri] = False
    return {u for u, is_away in away.items() if is_away}


def respell(rng: random.Random, uri: str) -> str:
    """*uri* spelled another way that level SCHEME merges with it (or as is)."""
    choice = rng.randrange(6)
    scheme, rest = uri.split("://", 1)
    host, slash, path = rest.partition("/")
    if choice == 1:
        return f"{scheme.upper()}://{host.upper()}{slash}{path}"
    if choice == 2:
        port = {"http": ":80", "https": ":443"}[scheme]
        return f"{scheme}://{host}{port}{slash}{path}"
    if choice == 3:
        return f"{scheme}://{host}/./{path}"
    if choice == 4:
        return uri.replace("/a", "/%61", 1) if "/a" in uri else uri + "#top"
    if choice == 5:
        return uri + "#frag"
    return uri


def _norm(text: str, level: Level, rules: ProtocolRules | None, keep: bool) -> str:
    return iri.normalize(text, level, rules=rules, keep_fragment=keep)


def violations(
    rules: ProtocolRules, away: set[str], text: str, keep_fragment: bool = True
) -> list[str]:
    """The checks (of :data:`CHECKS`) that *text* fails under *rules*."""
    failed = []
    out = _norm(text, Level.PROTOCOL, rules, keep_fragment)
    if _norm(out, Level.PROTOCOL, rules, keep_fragment) != out:
        failed.append("idempotent")
    base = _norm(text, Level.SCHEME, None, keep_fragment)
    if out != base and out.split("#", 1)[0] in away:
        failed.append("away")
    lower = (_norm(text, Level.SYNTAX, None, keep_fragment), base)
    if any(_norm(t, Level.PROTOCOL, rules, keep_fragment) != out for t in lower):
        failed.append("monotone")
    return failed


def random_events(rng: random.Random) -> list[Event]:
    """A sequence of 0-14 events, weighted towards redirects of a known kind."""
    n = rng.randrange(15)
    out = []
    for _ in range(n):
        roll = rng.random()
        pool: Sequence[Event] = (
            SLASH_EVENTS if roll < 0.45 else KIND_EVENTS if roll < 0.75 else EVENTS
        )
        out.append(rng.choice(pool))
    return out


def run(checks: int = 360_000, seed: int = 23, urls_per_set: int = 10) -> Counter[str]:
    """Failures per check over *checks* generated checks (3 per URL); key ``"checks"``
    holds the number run, ``"examples"`` the first failing (events, url) per check."""
    rng = random.Random(seed)
    counts: Counter[str] = Counter()
    done = 0
    while done < checks:
        events = random_events(rng)
        rules = build(events, min_evidence=rng.choice((1, 2, 2, 3)))
        away = redirected_away(events)
        for _ in range(urls_per_set):
            if done >= checks:
                break
            text = respell(rng, rng.choice(SPELLINGS))
            counts.update(violations(rules, away, text, keep_fragment=rng.random() < 0.8))
            done += len(CHECKS)
    counts["checks"] = done
    return counts


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 360_000
    s = int(sys.argv[2]) if len(sys.argv) > 2 else 23
    result = run(n, s)
    print(f"checks {result['checks']:,}: " + ", ".join(
        f"{name} failures {result[name]:,}" for name in CHECKS))
