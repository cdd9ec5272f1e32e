"""The transforms a protocol rule is made of, on canonical URIs (RFC 3987 section 5.3.4).

Each *kind* of rule is one transform of a URI split as ``scheme "://" authority
path ["?" query]`` (RFC 3986 section 3): one trailing slash added or removed, a
query parameter dropped, an ``index.*`` segment dropped, ``www.`` removed or
added, ``http`` -> ``https``, repeated segments collapsed; and the aliases web
applications make, each learned from content: one path's query in a normal form
(pairs in name order, empty pairs dropped, chosen percent-encoded reserved
characters decoded: RFC 3986 sections 2.2 and 6.2.2.2 leave these to the
server, so each is part of the rule only where content showed it), a pair at its
default value dropped, one path served under another.  Pure functions: which
kinds apply to a URI (:func:`candidates`), which kind turns one URI into another
(:func:`classify`), which kinds two URIs with equal content suggest
(:func:`pair_rules`).  The rules themselves are :mod:`.rulebook` and
:mod:`.rules`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator

from iri_scrapy.core.query import (
    drop_params,
    in_clean_param_scope,
    join_query,
    param_name,
    query_pairs,
    split_query,
)

PERMANENT = frozenset({301, 308})
ADD, REMOVE = "add-slash", "remove-slash"
DROP_PARAM, DROP_INDEX = "drop-param", "drop-index"
DROP_SCRIPT, REPEAT = "drop-script", "collapse-repeat"
REMOVE_WWW, ADD_WWW, HTTPS = "remove-www", "add-www", "https"
QUERY_FORM, DROP_PAIR, ALIAS_PATH = "query-form", "drop-pair", "alias-path"
#: The kinds of rule, in the order :meth:`ProtocolRules.apply` tries host rules: those
#: that move a URI to another host (scheme, ``www.``) last, so that a host's own rules
#: apply before the URI leaves it (``www.`` links with a session id the bare host's links
#: never carry: drop-param:sid of the ``www.`` host, then remove-www).
KINDS = (DROP_SCRIPT, DROP_INDEX, ALIAS_PATH, REPEAT, DROP_PARAM, DROP_PAIR, QUERY_FORM, ADD,
         REMOVE, HTTPS, REMOVE_WWW, ADD_WWW)
#: The kinds whose parameter names what they change (not read off the URI):
#: :func:`candidates` yields them only for the rules it is given.
PARAM_KINDS = frozenset({QUERY_FORM, DROP_PAIR, ALIAS_PATH})
#: Reserved characters a ``query-form`` rule may decode (RFC 3986 section 2.2: the
#: sub-delims and gen-delims allowed as data in a query, section 3.4, less those
#: that cut it: ``&``, ``=``, ``#``; ``[`` and ``]`` are not allowed there).
DECODABLE = {f"%{ord(c):02X}": c for c in "!$'()*+,;:@/?"}
#: The longest parameter of a rule (a rules document's strings are bounded anyway).
MAX_PARAM = 2048
#: Where a rule's evidence comes from (see the module doc).
REDIRECT, CANONICAL, CLEAN_PARAM, CONTENT = "redirect", "canonical", "clean-param", "content"
SOURCES = (REDIRECT, CANONICAL, CLEAN_PARAM, CONTENT)
#: Pages (canonical URI -> content digest) kept per host for content evidence.
MAX_PAGES_PER_SCOPE = 50_000
#: Earlier pages a newly nominated rule is checked against.
BACKFILL = 5_000
#: URIs kept per content digest, to find pairs of aliases.
PER_DIGEST = 16
#: Content counterexamples kept per rule, to withdraw them if calibration explains them.
MAX_REFUTING = 4
#: Confirmations kept per rule (what is exported; the count saturates there).
KEPT_CONFIRMATIONS = 64
#: Values of what a ``drop-param`` rule drops its confirmations must show (and keep).
MAX_VALUES = 2
#: Confirmations beyond this many (plus one) do not space a rule's samples further.
SAMPLE_SHIFT_MAX = 5
#: The version of :meth:`ProtocolRules.to_data`'s document.
DATA_VERSION = 1
MAX_STEPS = 8

#: A host rule: (scope: scheme and authority, kind, parameter: a name or "").
Identity = tuple[str, str, str]
#: A canonical URI without fragment, with an authority: scheme, authority, path, "?", query.
Parts = tuple[str, str, str, str, str]



def split_uri(uri: str) -> Parts | None:
    """*uri* (no fragment) split as ``scheme "://" authority path ["?" query]``
    (RFC 3986 section 3), or None if it has no authority."""
    colon = uri.find(":")
    if colon <= 0 or not uri.startswith("//", colon + 1):
        return None
    head, sep, query = split_query(uri[colon + 3 :])
    slash = head.find("/")
    authority, path = (head, "") if slash < 0 else (head[:slash], head[slash:])
    return uri[:colon], authority, path, sep, query


def join_uri(parts: Parts) -> str:
    scheme, authority, path, sep, query = parts
    return f"{scheme}://{authority}{path}{sep}{query}"


def scope_of(parts: Parts) -> str:
    return f"{parts[0]}://{parts[1]}"


def host_key(uri: str) -> str:
    """Scheme and authority of *uri* (a URI without fragment): the scope of a host rule."""
    parts = split_uri(uri)
    return split_query(uri)[0] if parts is None else scope_of(parts)


def param_names(query: str) -> set[str]:
    """The names of the parameters of *query* a ``drop-param`` rule can name (not
    those holding ``@/`` or ``@*``, where a Clean-param prefix would start)."""
    return {name for name in map(param_name, query_pairs(query)) if rule_name(name)}


def rule_name(name: str) -> bool:
    """True if a ``drop-param`` rule can name the query parameter *name*: not empty,
    no ``&`` (it joins names), no ``@/`` or ``@*`` (they start a prefix).  A plain
    ``@`` is fine: Roundup names its list parameters ``@sort``, ``@startwith``..."""
    return bool(name) and "&" not in name and "@/" not in name and "@*" not in name


def param_parts(param: str) -> tuple[str, str]:
    """The names and the Clean-param prefix of a ``drop-param`` parameter
    (``"a&b@/prefix"`` -> ``("a&b", "/prefix")``): the prefix starts at the first
    ``@`` followed by ``/`` or ``*``."""
    at = param.find("@")
    while at >= 0:
        if param[at + 1:at + 2] in ("/", "*"):
            return param[:at], param[at + 1:]
        at = param.find("@", at + 1)
    return param, ""


def vary(identity: Identity, a: str, b: str) -> bool:
    """Whether two aliases *identity* maps to one image differ in what it drops.

    Equal content under two aliases says something about a dropped parameter only
    if its value differs between them (present in one only counts): two colour
    variants ``?sid=a&color=blue``, ``?sid=b&color=blue`` confirm dropping ``sid``,
    not dropping ``sid`` and ``color``.  Other kinds change one fixed part: True.
    """
    if identity[1] != DROP_PARAM:
        return True
    pa, pb = split_uri(a), split_uri(b)
    if pa is None or pb is None:
        return False
    qa, qb = pa[4] or "", pb[4] or ""
    for name in param_parts(identity[2])[0].split("&"):
        va = sorted(p for p in query_pairs(qa) if param_name(p) == name)
        vb = sorted(p for p in query_pairs(qb) if param_name(p) == name)
        if va == vb:
            return False
    return True


def covers(identity: Identity, alias: str) -> bool:
    """Whether equal content at *alias* and at its image under *identity* confirms the
    whole rule: a ``drop-param`` naming several parameters is confirmed only by an
    alias holding every one of them (``?ref=l1`` says nothing about dropping
    ``color``: a ``drop-param:color&ref`` confirmed so merged colour variants).
    Other kinds change one fixed part: True."""
    if identity[1] != DROP_PARAM:
        return True
    parts = split_uri(alias)
    names = set(param_parts(identity[2])[0].split("&"))
    return parts is not None and names <= set(map(param_name, query_pairs(parts[4] or "")))


def dropped_value(identity: Identity, alias: str) -> str | None:
    """What the ``drop-param`` rule *identity* drops from *alias* (its pairs of the
    named parameters, sorted and joined: ``"sort=id"``), or None if nothing."""
    parts = split_uri(alias)
    if identity[1] != DROP_PARAM or parts is None or not parts[4]:
        return None
    names = set(param_parts(identity[2])[0].split("&"))
    dropped = sorted(p for p in query_pairs(parts[4]) if param_name(p) in names)
    return "&".join(dropped) or None


def without_params(parts: Parts, param: str) -> Parts | None:
    """*parts* without the query parameters *param* names (``"a&b"``, optionally
    ``"@/prefix"`` restricting it to paths under a Clean-param prefix), or None
    if none of them is there."""
    scheme, authority, path, sep, query = parts
    names, prefix = param_parts(param)
    if not query or not in_clean_param_scope(prefix, path):
        return None
    pairs = query_pairs(query)
    kept = drop_params(pairs, set(names.split("&")))
    if len(kept) == len(pairs):
        return None
    return scheme, authority, path, "?" if kept else "", join_query(kept)


def query_form(query: str, ops: Collection[str]) -> str:
    """*query* in the normal form *ops* name (a ``query-form`` rule's tokens):
    each ``%XX`` token decoded (:data:`DECODABLE`), ``empty`` drops the pairs
    with an empty value (``a=``) and the empty pairs (``&&``), ``order`` puts
    the pairs in name order (stable: the values of one name keep their order).
    One pass per token and a sort: no pattern is matched."""
    for token in ops:
        char = DECODABLE.get(token)
        if char is not None:
            query = query.replace(token, char).replace(token.lower(), char)
    pairs = query_pairs(query)
    if "empty" in ops:
        pairs = [p for p in pairs if p and p != param_name(p) + "="]
    if "order" in ops:
        pairs = sorted(pairs, key=param_name)
    return join_query(pairs)


def form_spec(qa: str, qb: str) -> str | None:
    """The fewest ``query-form`` tokens under which the queries *qa* and *qb*
    have one normal form (``"empty+order+%2C"``), or None if none does (or they
    are equal).  A ``%XX`` token is a candidate only if it occurs in one of them."""
    if qa == qb:
        return None
    upper = (qa + "&" + qb).upper()
    ops = ["empty", "order", *sorted(t for t in DECODABLE if t in upper)]
    if query_form(qa, ops) != query_form(qb, ops):
        return None
    for token in list(ops):
        fewer = [t for t in ops if t != token]
        if query_form(qa, fewer) == query_form(qb, fewer):
            ops = fewer
    return "+".join(ops) or None


def param_path(param: str) -> tuple[str, str]:
    """A ``query-form`` parameter cut at its first ``@``: ``(tokens, path)``."""
    spec, _, path = param.partition("@")
    return spec, path


def redirect_rules(identity: Identity, source: str) -> list[Identity]:
    """The host rules a permanent redirect of *source*, an instance of *identity*,
    is evidence for: *identity*, and for a slash rule on a path below a first
    segment, the same rule on that section alone (``add-slash:/post/``): a site's
    posts may all redirect to their slash while a page at its root (``/home``) is
    served without one, which refutes the host's rule but not the section's."""
    if identity[1] not in (ADD, REMOVE) or identity[2]:
        return [identity]
    parts = split_uri(source)
    if parts is None:
        return [identity]
    first, slash, rest = parts[2][1:].partition("/")
    if not (slash and first and rest.strip("/")):
        return [identity]
    return [identity, (identity[0], identity[1], f"/{first}/")]


def valid_param(kind: str, param: str) -> bool:
    """Whether *param* is a well-formed parameter of a *kind* rule (a rules
    document's rules are checked whole at load)."""
    if len(param) > MAX_PARAM:
        return False
    if kind == QUERY_FORM:
        spec, path = param_path(param)
        tokens = spec.split("+")
        return (path.startswith("/") and "?" not in path and "#" not in path
                and len(set(tokens)) == len(tokens)
                and all(t in ("empty", "order") or t in DECODABLE for t in tokens))
    if kind == DROP_PAIR:  # a pair, or a flag (``?amp``)
        name = param.partition("=")[0]
        return rule_name(name) and "#" not in param
    if kind in (ADD, REMOVE):  # the host, or one section (first path segment)
        return param == "" or (len(param) > 2 and param[0] == param[-1] == "/"
                               and not any(c in param[1:-1] for c in "/?#"))
    if kind == ALIAS_PATH:
        old, sep, new = param.partition(">")
        return (bool(sep) and old != new and all(
            p.startswith("/") and not any(c in p for c in "?#> ") for p in (old, new)))
    return True


def _param_kind(parts: Parts, kind: str, param: str) -> Parts | None:
    """*parts* changed by the rule ``kind:param`` of :data:`PARAM_KINDS`, or None
    if it does not apply (or changes nothing)."""
    scheme, authority, path, sep, query = parts
    if kind == QUERY_FORM:
        spec, where = param_path(param)
        if path != where or not query:
            return None
        new = query_form(query, spec.split("+"))
        if new == query:
            return None
        return scheme, authority, path, "?" if new else "", new
    if kind == DROP_PAIR:
        if not query:
            return None
        pairs = query_pairs(query)
        kept = [p for p in pairs if p != param]
        if len(kept) == len(pairs):
            return None
        return scheme, authority, path, "?" if kept else "", join_query(kept)
    if kind == ALIAS_PATH:
        old, _, new_path = param.partition(">")
        return (scheme, authority, new_path, sep, query) if path == old else None
    return None


def collapse(path: str, query: str) -> tuple[str, str]:
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


def candidates(
    parts: Parts, host_rule: bool, names: Collection[str] = (),
    rules: Collection[tuple[str, str]] = (),
) -> Iterator[tuple[str, str, Parts]]:
    """``(kind, parameter, new parts)`` for every kind that applies to *parts*.

    With *host_rule*, only where a host rule of the kind applies (``add-slash``
    not on a last segment with a ``.``); else where an exact rule may.  A
    rule's output is outside its own domain (one rule never applies twice).
    ``drop-param`` only for the parameters *names* given (``"a"``, ``"a&b"``,
    ``"a&b@/prefix"``; each costs the length of the query); the kinds of
    :data:`PARAM_KINDS` only for the ``(kind, parameter)`` *rules* given.
    """
    scheme, authority, path, sep, query = parts
    first, slash, rest = path[1:].partition("/")
    if slash and first.startswith("index.") and len(first) > 6:
        yield DROP_SCRIPT, first, (scheme, authority, "/" + rest, sep, query)
    last = path[path.rfind("/") + 1 :]
    if last.startswith("index.") and len(last) > 6:
        yield DROP_INDEX, last, (scheme, authority, path[: -len(last)], sep, query)
    for kind, param in sorted(rules):
        if kind == ALIAS_PATH:
            moved = _param_kind(parts, kind, param)
            if moved is not None:
                yield kind, param, moved
    new_path, new_query = collapse(path, query)
    if new_path != path or new_query != query:
        yield REPEAT, "", (scheme, authority, new_path, sep, new_query)
    if sep and query and names:
        for param in sorted(names):
            dropped = without_params(parts, param)
            if dropped is not None:
                yield DROP_PARAM, param, dropped
    if sep and query:
        for kind, param in sorted(rules, key=lambda r: (r[0] != DROP_PAIR, r)):
            if kind in (DROP_PAIR, QUERY_FORM):
                changed = _param_kind(parts, kind, param)
                if changed is not None:
                    yield kind, param, changed
    section = f"/{first}/" if host_rule and slash and first else ""
    if path and last and (not host_rule or "." not in last):
        yield ADD, "", (scheme, authority, path + "/", sep, query)
        if section and len(path) > len(section):
            yield ADD, section, (scheme, authority, path + "/", sep, query)
    if len(path) > 1 and path.endswith("/") and path[-2] != "/":
        yield REMOVE, "", (scheme, authority, path[:-1], sep, query)
        if section and len(path) > len(section):
            yield REMOVE, section, (scheme, authority, path[:-1], sep, query)
    # last, the kinds that move the URI to another host (KINDS' order): a host's own
    # rules apply before the URI leaves it
    if scheme == "http" and ":" not in authority.rsplit("@", 1)[-1]:
        yield HTTPS, "", ("https", authority, path, sep, query)
    if "@" not in authority:
        if authority.startswith("www.") and "." in authority[4:]:
            yield REMOVE_WWW, "", (scheme, authority[4:], path, sep, query)
        elif not authority.startswith("www.") and "." in authority and not (
            authority.startswith("[") or authority.replace(".", "").replace(":", "").isdigit()
        ):
            yield ADD_WWW, "", (scheme, "www." + authority, path, sep, query)


def classify(source: str, target: str) -> Identity | None:
    """The host rule of which ``source -> target`` is an instance, or None."""
    parts, goal = split_uri(source), split_uri(target)
    if parts is None or goal is None:
        return None
    dropped = param_names(parts[4]) - param_names(goal[4]) if parts[4] else set()
    params = ["&".join(sorted(dropped))] if dropped else []
    for kind, param, new in candidates(parts, False, params):
        if new == goal:
            return scope_of(parts), kind, param
    spec = form_spec(parts[4], goal[4]) if parts[:3] == goal[:3] and parts[4] else None
    if spec is not None and query_form(parts[4], spec.split("+")) == goal[4]:
        return scope_of(parts), QUERY_FORM, f"{spec}@{parts[2]}"
    return None


def app_rules(pa: Parts, pb: Parts) -> Iterator[Identity]:
    """The rules of :data:`PARAM_KINDS` under which two URIs of one scope with
    equal content are one: one query in two normal forms (``query-form`` on
    their path), one pair more (``drop-pair``), or one query under two paths
    one of which is an ancestor of the other (``alias-path``, to the shorter:
    a section served at its default child, ``/wiki`` and ``/wiki/WikiStart``;
    siblings with equal content, two empty items, are never one)."""
    scope = scope_of(pa)
    if pa[2] == pb[2]:
        spec = form_spec(pa[4], pb[4])
        if spec is not None and valid_param(QUERY_FORM, f"{spec}@{pa[2]}"):
            yield scope, QUERY_FORM, f"{spec}@{pa[2]}"
        for x, y in ((pa[4], pb[4]), (pb[4], pa[4])):
            xs, ys = query_pairs(x) if x else [], query_pairs(y) if y else []
            if len(xs) == len(ys) + 1:
                extra = [p for p in xs if p not in ys]
                if (len(extra) == 1 and [p for p in xs if p != extra[0]] == ys
                        and valid_param(DROP_PAIR, extra[0])):
                    yield scope, DROP_PAIR, extra[0]
    elif pa[3:] == pb[3:]:
        short, long = sorted((pa[2], pb[2]), key=lambda p: (len(p), p))
        if long.startswith(short.rstrip("/") + "/") and valid_param(
                ALIAS_PATH, f"{long}>{short}"):
            yield scope, ALIAS_PATH, f"{long}>{short}"


def twins(parts: Parts) -> tuple[str, ...]:
    """The scope of *parts* and the scopes whose rules may map URIs onto it:
    its ``www.`` twin and, for https, the http scope of the same authority."""
    scheme, authority = parts[0], parts[1]
    www = authority[4:] if authority.startswith("www.") else "www." + authority
    out: tuple[str, ...] = (f"{scheme}://{authority}", f"{scheme}://{www}")
    if scheme == "https":
        out += (f"http://{authority}", f"http://{www}")
    return out


def pair_rules(a: str, b: str) -> list[Identity]:
    """The host rules under which two URIs with equal content are one: one
    transform from one to the other (slash towards a directory, ``www.``
    removed, http -> https, parameters dropped, :func:`app_rules`' kinds), or,
    between two URIs with the same parameters, those whose values differ
    dropped from both."""
    out = []
    for source, target in ((a, b), (b, a)):
        identity = classify(source, target)
        if identity is not None and identity[1] not in (ADD_WWW, REMOVE) or (
            identity is not None and identity[1] == REMOVE and "." in source.rsplit("/", 2)[-2]
        ):
            out.append(identity)
    pa, pb = split_uri(a), split_uri(b)
    if pa is not None and pb is not None and pa[:2] == pb[:2]:
        out.extend(i for i in app_rules(pa, pb) if i not in out and (
            i[1] != ALIAS_PATH or not out))
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
            if differ and all(map(rule_name, differ)):
                out.append((scope_of(pa), DROP_PARAM, "&".join(differ)))
    return out

