"""The learned rules as a JSON document: written, read back, merged (RFC 3987 section 5.3.4).

What a crawl keeps between runs (``IRI_PROTOCOL_RULES_FILE``, the ``JOBDIR``
frontier's file) and what a fleet's workers exchange (a Redis key): the exact
rules, the spellings redirected away from, and each host rule with its
confirmations and the counts against it.  The pages' digests are not kept (they
grow with the crawl).  :func:`read_into` checks every field's type before it
fills anything (a document is data: nothing in it is run, nothing half-loaded);
:func:`merge_data` makes two documents of one crawl one, losing no
counterexample.  :class:`~.rules.ProtocolRules` calls these as its ``to_data``,
``from_data``, ``load``, ``merge_data`` and ``adopt``.  A content
counterexample is named by its two pages (:func:`pair_key`), so that its
withdrawal by one worker reaches the others: a count would bring it back.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from iri_scrapy.core.errors import IRIScrapyError
from iri_scrapy.protocol.rulebook import RuleBook
from iri_scrapy.protocol.transforms import (
    BACKFILL,
    KEPT_CONFIRMATIONS,
    KINDS,
    MAX_VALUES,
    REDIRECT,
    SOURCES,
    Identity,
    redirect_rules,
    scope_of,
    split_uri,
    valid_param,
)

if TYPE_CHECKING:
    from iri_scrapy.protocol.fingerprint import Fingerprint

#: The version of the document (:func:`to_data`).
DATA_VERSION = 1
#: The most rules (exact and host) and spellings a document may hold, and the
#: longest string in it: a larger document is refused whole at load.
MAX_ENTRIES = 1_000_000
MAX_STRING = 8192
#: Withdrawn counterexamples kept per rule (one dropped may only revoke a rule again).
MAX_WITHDRAWN = 64
#: The fields of a host rule merged as sets (:func:`merge_data`).
_SETS = ("confirmed", "refuted", "withdrawn", "values")


class RulesDataError(IRIScrapyError, ValueError):
    """A rules document (:meth:`ProtocolRules.from_data`) that is not one: never half-loaded."""


def to_data(book: RuleBook) -> dict[str, Any]:
    """What *book* learned, as JSON data (:func:`read_into` reads it back)."""
    def ident(i: Identity) -> list[str]:
        return list(i)
    return {
        "v": DATA_VERSION,
        "min_evidence": book.min_evidence,
        "exact": [[s, t, *i] for s, (t, i) in sorted(book._exact.items())],
        "away": sorted(book._away),
        "rules": [_named({
            "rule": ident(i), "origin": book._origin.get(i, REDIRECT),
            "confirmed": list(book._confirmed.get(i, ())),
            "bad": book._bad[i] - len(book._refuted.get(i, ())),
            "refuted": sorted(book._refuted.get(i, ())),
            "withdrawn": sorted(book._withdrawn.get(i, ())),
            "values": sorted(book._dropped.get(i, ())),
            "contrary": book._contrary[i], "skips": book._skips[i]})
            for i in sorted(book._origin)
        ],
    }


def _named(entry: dict[str, Any]) -> dict[str, Any]:
    """*entry* without its empty lists of named counterexamples (optional fields)."""
    for field in ("refuted", "withdrawn", "values"):
        if not entry.get(field, True):
            del entry[field]
    return entry


def _fail(why: str) -> RulesDataError:
    return RulesDataError(f"protocol rules document: {why}")


def _strings(value: Any, n: int | None, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value) or (
        n is not None and len(value) != n
    ):
        raise _fail(f"{what} is not a list of {n or 'any number of'} strings")
    if (n is None and len(value) > MAX_ENTRIES) or any(len(v) > MAX_STRING for v in value):
        raise _fail(f"{what} is larger than a rules document may be")
    return value


def _host_rule(r: list[str]) -> Identity:
    """*r* as a host rule: a known kind, a scope that is a scheme and authority."""
    parts = split_uri(r[0] + "/")
    if r[1] not in KINDS or parts is None or scope_of(parts) != r[0]:
        raise _fail(f"unknown kind or not a host in the rule {r}")
    if not valid_param(r[1], r[2]):
        raise _fail(f"not a parameter of its kind in the rule {r}")
    return (r[0], r[1], r[2])


def _in_scope(uri: str, scope: str, row: list[str]) -> None:
    parts = split_uri(uri)
    if parts is None or scope_of(parts) != scope:
        raise _fail(f"{uri!r} is not a URI of the rule's host in {row}")


def stored_min_evidence(data: Any) -> int:
    """The ``min_evidence`` of a document; :class:`RulesDataError` if *data* is not
    one of this version."""
    if not isinstance(data, dict) or data.get("v") != DATA_VERSION:
        raise _fail(f"not version {DATA_VERSION}")
    stored = data.get("min_evidence")
    if isinstance(stored, bool) or not isinstance(stored, int) or stored < 1:
        raise _fail("min_evidence is not a positive integer")
    return stored


def read_into(book: RuleBook, data: Any) -> None:
    """Fill the fresh *book* from the document *data* (:func:`stored_min_evidence`
    checked it); :class:`RulesDataError` if a field is not what it must be."""
    exact, away, entries = data.get("exact"), data.get("away"), data.get("rules")
    if not isinstance(exact, list) or not isinstance(entries, list):
        raise _fail("exact or rules is not a list")
    if len(exact) + len(entries) > MAX_ENTRIES:
        raise _fail("more rules than a rules document may hold")
    for row in exact:
        source, target, *identity = _strings(row, 5, "an exact rule")
        # an unknown kind would fail every URL of its host mid-crawl: refused here
        i = _host_rule(identity)
        _in_scope(source, i[0], row)
        book._exact[source] = (target, i)
        book._sources.setdefault(target, set()).add(source)
        for rule in redirect_rules(i, source):  # the host's, and its section's
            book._evidence[rule] += 1
            book._scopes.setdefault(rule[0], set()).add(rule[1:])
    book._away = set(_strings(away, None, "away"))
    for entry in entries:
        if not isinstance(entry, dict):
            raise _fail("a rule is not an object")
        r = _strings(entry.get("rule"), 3, "a rule")
        i = _host_rule(r)
        if entry.get("origin") not in SOURCES:
            raise _fail(f"unknown origin in {r}")
        numbers: list[int] = []
        for field in ("bad", "contrary", "skips"):
            n = entry.get(field)
            if not isinstance(n, int) or isinstance(n, bool) or n < 0:
                raise _fail(f"bad counts in {r}")
            numbers.append(n)
        book._origin[i] = entry["origin"]
        book._candidates.setdefault(i[0], set()).add(i)
        book._scopes.setdefault(i[0], set()).add(i[1:])
        book._confirmed[i] = _strings(entry.get("confirmed"), None, "confirmed")[
            :KEPT_CONFIRMATIONS]
        values = set(_strings(entry.get("values", []), None, "values")[:MAX_VALUES])
        if values:
            book._dropped[i] = values
        withdrawn = set(_strings(entry.get("withdrawn", []), None, "withdrawn"))
        refuted = set(_strings(entry.get("refuted", []), None, "refuted")) - withdrawn
        if refuted:
            book._refuted[i] = refuted
        if withdrawn:
            book._withdrawn[i] = withdrawn
        book._bad[i], book._contrary[i], book._skips[i] = numbers
        book._bad[i] += len(refuted)


def pair_key(pair: tuple[str, Fingerprint, Fingerprint]) -> str:
    """The name of one content counterexample (a URI and the two pages that
    differed): the same whichever worker of a fleet compared the two pages, in
    whichever order, so that one worker's withdrawal of it (the site's
    calibration shows the difference is chance) names what the others counted."""
    digests = sorted((pair[1].digest, pair[2].digest))
    return hashlib.blake2b(b"".join(digests), digest_size=16).hexdigest()


def adopt_refuting(book: RuleBook, fresh: RuleBook) -> None:
    """Before *book* takes *fresh*'s learned part (``ProtocolRules.adopt``):
    the content counterexamples of rules *book* never exported (never nominated
    here) merged in as :func:`merge_data` merges them, and the pages kept for a
    counterexample the fleet withdrew dropped (what is left is what *book*
    itself may still withdraw)."""
    for identity in set(book._bad) | set(book._withdrawn):
        if identity in book._origin:
            continue  # exported: the merged document has it
        mine, theirs = book._refuted.get(identity, set()), fresh._refuted.get(identity, set())
        unkeyed = max(book._bad[identity] - len(mine), fresh._bad[identity] - len(theirs))
        withdrawn = book._withdrawn.get(identity, set()) | fresh._withdrawn.get(identity, set())
        refuted = (mine | theirs) - withdrawn
        for keys, field in ((refuted, fresh._refuted), (withdrawn, fresh._withdrawn)):
            if keys:
                field[identity] = keys
        if unkeyed or refuted:
            fresh._bad[identity] = unkeyed + len(refuted)
    for identity, pairs in list(book._refuting.items()):
        live = fresh._refuted.get(identity, set())
        kept = [pair for pair in pairs if pair_key(pair) in live]
        if kept:
            book._refuting[identity] = kept
        else:
            del book._refuting[identity]


def merge_data(local: dict[str, Any], remote: dict[str, Any]) -> dict[str, Any]:
    """One rules document from two of one crawl (workers of a fleet).

    Both must have been read by :func:`read_into` (checked by the caller).  Host
    rules are merged so that no counterexample is lost: a rule's confirmations
    are the union (distinct images; the first ``KEPT_CONFIRMATIONS`` in sorted
    order); its content counterexamples named by :func:`pair_key` (``refuted``)
    the union less those either side withdrew (``withdrawn``, the union: the
    site's calibration showed that difference to be chance, which holds for
    every worker), those unnamed (``bad``: past ``MAX_REFUTING``), 2xx
    responses against it (``contrary``) and sample counts (``skips``) the
    larger of the two, so a rule revoked by either side stays revoked until the
    very counterexamples that revoked it are withdrawn.  Exact rules
    (each from a permanent redirect a worker fetched) and "redirected away from"
    are the union; a spelling the two map to different targets keeps the
    greater row.  The union can keep an exact rule another worker revoked: it
    merges only a spelling that was fetched (its redirect taught the rule), so
    it loses no page.  Commutative, associative and idempotent: workers that
    write in turn agree on one document instead of rewriting each other's.  The
    one definition of the merge: the frontier's ``merge_rules_data`` and
    ``ProtocolRules.adopt`` both use it.
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
            rules[key] = {**entry, **{field: set(entry.get(field, ())) for field in _SETS}}
            continue
        for field in _SETS:
            have_entry[field].update(entry.get(field, ()))
        have_entry["origin"] = min(have_entry["origin"], entry["origin"])
        for field in ("bad", "contrary", "skips"):
            have_entry[field] = max(have_entry[field], entry[field])
    for entry in rules.values():
        entry["confirmed"] = sorted(entry["confirmed"])[:KEPT_CONFIRMATIONS]
        entry["refuted"] = sorted(entry["refuted"] - entry["withdrawn"])
        entry["withdrawn"] = sorted(entry["withdrawn"])[:MAX_WITHDRAWN]
        entry["values"] = sorted(entry["values"])[:MAX_VALUES]
        _named(entry)
    return {
        "v": local["v"],
        "min_evidence": max(local["min_evidence"], remote["min_evidence"]),
        "exact": [exact[source] for source in sorted(exact)],
        "away": sorted(set(local["away"]) | set(remote["away"])),
        "rules": [rules[key] for key in sorted(rules)],
    }


def adopt(book: RuleBook, fresh: RuleBook,
          track: Callable[[Identity, str, Fingerprint], None]) -> int:
    """Fold *fresh* (the merge of *book*'s rules document and another worker's,
    read back: ``ProtocolRules.adopt``) into *book* while it is in use; how far
    ``revision`` moved (the rules in force that stopped).

    The learned part of *book* becomes exactly *fresh*'s.  Unlike a load, what
    *book* alone keeps stays: the pages' digests and the images seen per rule
    (content evidence goes on; each rule new here is checked against the pages
    already served, with *track*, ``ProtocolRules._track``, as a nomination does),
    the evidence against rules never nominated, ``events``, ``learned`` and
    ``revoked``.  ``revision`` moves only when a rule in force here stops (a host
    rule another worker has a counterexample to, an exact rule the merge
    retargets): then what it merged is looked at again (``Learned.changed``), and
    each such host rule counts as ``<source>/revoked``, each exact rule in
    ``revoked``; a rule that comes into force by the merge counts as
    ``<source>/adopted`` (and as ``<source>/revoked`` too if the pages served here
    then refute it).  As with local learning, a spelling newly redirected away
    from moves no revision.  ``apply`` stays idempotent (it only ever reads a rule
    set).
    """
    before = book._forces()
    exact_before, revision = book._exact, book.revision
    new = [i for i in sorted(fresh._origin) if i not in book._origin]
    for name in ("_contrary", "_skips"):  # counts of rules never exported
        mine, theirs = getattr(book, name), getattr(fresh, name)
        for identity, n in mine.items():
            if n > theirs[identity]:
                theirs[identity] = n
    adopt_refuting(book, fresh)  # (and _bad)
    for name in ("_exact", "_sources", "_away", "_evidence", "_contrary", "_bad",
                 "_skips", "_confirmed", "_dropped", "_origin", "_candidates",
                 "_scopes", "_refuted", "_withdrawn"):
        setattr(book, name, getattr(fresh, name))
    stopped = 0
    after = book._forces()
    for identity in sorted(before - after):
        stopped += 1
        book.events[f"{book.origin(identity)}/revoked"] += 1
    for identity in sorted(after - before):
        book.events[f"{book.origin(identity)}/adopted"] += 1
    for source, (target, identity) in sorted(exact_before.items()):
        if book._exact.get(source, (None,))[0] != target:  # retargeted by the merge
            stopped += 1
            book.revoked[identity[1]] += 1
    book.revision += stopped  # what those rules merged is looked at again
    for identity in new:  # checked against the pages served here, as _nominate does
        for uri in book._keys.get(identity[0], [])[-BACKFILL:]:
            track(identity, uri, book._digests[uri])  # may refute it: revoked
    return book.revision - revision
