"""Properties the core must have on any string, checked one string at a time.

Used by tests/core/test_properties.py (Hypothesis and an exhaustive run over short
strings) and by benchmarks/prop_check.py (a million generated strings).

For a text ``t``, every level, form, ``keep_fragment`` and ``nfc``:

- ``normalize`` is idempotent, and the fast, fused and composed paths agree;
- the IRI form normalizes back to the URI form (RFC 3987 3.2);
- a higher level never splits what a lower one merged: ``normalize`` at a level
  gives the same on ``t`` and on what a lower level (in the form ``equivalent``
  compares) made of ``t``; with ``nfc=True`` likewise on the ``nfc=False`` result;
- ``explain`` agrees with ``equivalent`` on ``t`` against each of those;
- ``iri_to_uri(uri_to_iri(u)) == u`` for every canonical URI ``u`` (3.2).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

import iri_scrapy as iri
from iri_scrapy import Level
from iri_scrapy.core.ladder import NormalizeOptions, climb_path, fast_path, fused_path

ERROR = "<IRIError>"
FORMS = ("uri", "iri")


def _norm(text: str, level: Level, form: str, keep: bool, nfc: bool) -> str:
    try:
        return iri.normalize(text, level, form=form, keep_fragment=keep, nfc=nfc)  # type: ignore[arg-type]
    except iri.IRIError:
        return ERROR


def _slow(text: str, level: Level, form: str, keep: bool, nfc: bool) -> str:
    try:
        return climb_path(text, NormalizeOptions(level, form, keep, nfc))
    except iri.IRIError:
        return ERROR


def _eq_form(level: Level) -> str:
    """The form ``equivalent`` compares at *level* (5.3.1: no mapping to a URI)."""
    return "iri" if level is Level.SIMPLE else "uri"


def check(text: str, *, explain: bool = True) -> Iterator[str]:
    """Yield a description of every property *text* violates."""
    yield from check_normalize(text)
    yield from check_levels(text)
    if explain:
        yield from check_explain(text)
    yield from check_round_trip(text)


COMBOS = tuple(itertools.product((True, False), (False, True)))  # (keep_fragment, nfc)


def check_normalize(text: str, combos: tuple[tuple[bool, bool], ...] = COMBOS) -> Iterator[str]:
    """Idempotence, IRI form back to URI form, and the code paths agreeing."""
    for keep, nfc in combos:
        uri_of: dict[Level, str] = {}
        for level in Level:
            for form in FORMS:
                out = _norm(text, level, form, keep, nfc)
                if form == "uri":
                    uri_of[level] = out
                where = f"{text!r} level={level.name} form={form} keep={keep} nfc={nfc}"
                slow = _slow(text, level, form, keep, nfc)
                if out != slow:
                    yield f"normalize {out!r} != composed rungs {slow!r}: {where}"
                if out == ERROR:
                    continue
                again = _norm(out, level, form, keep, nfc)
                if again != out:
                    yield f"not idempotent: {out!r} -> {again!r}: {where}"
                if form == "iri" and _norm(out, level, "uri", keep, nfc) != uri_of[level]:
                    back = _norm(out, level, "uri", keep, nfc)
                    yield f"IRI form {out!r} normalizes to {back!r}, URI form is {uri_of[level]!r}: {where}"
        if not nfc:
            for level in (Level.SYNTAX, Level.SCHEME):
                fused = fused_path(text, level, keep) if _fused_ok(text, level, keep) else None
                if fused is not None and fused != uri_of[level]:
                    yield f"fused {fused!r} != {uri_of[level]!r}: {text!r} level={level.name} keep={keep}"
            fast = fast_path(text, keep)
            if fast is not None and fast != uri_of[Level.SCHEME]:
                yield f"fast {fast!r} != {uri_of[Level.SCHEME]!r}: {text!r} keep={keep}"


def check_levels(text: str, combos: tuple[tuple[bool, bool], ...] = COMBOS) -> Iterator[str]:
    """A higher level never splits what a lower one merged (nor nfc=True what nfc=False did)."""
    for keep, nfc in combos:
        for low, high in itertools.combinations(Level, 2):
            merged = _norm(text, low, _eq_form(low), keep, nfc)
            if merged == ERROR:
                continue
            a, b = _norm(merged, high, "uri", keep, nfc), _norm(text, high, "uri", keep, nfc)
            if a != b:
                yield (f"{low.name} maps {text!r} to {merged!r}, which {high.name} splits: "
                       f"{a!r} != {b!r} (keep={keep} nfc={nfc})")
        if nfc:
            for level in Level:
                plain = _norm(text, level, "uri", keep, False)
                if plain == ERROR:
                    continue
                a, b = _norm(plain, level, "uri", keep, True), _norm(text, level, "uri", keep, True)
                if a != b:
                    yield f"nfc=True splits what nfc=False merged: {text!r} {plain!r} level={level.name}"


def check_explain(text: str, combos: tuple[tuple[bool, bool], ...] = COMBOS) -> Iterator[str]:
    """``explain`` agrees with ``equivalent`` on *text* against its canonical forms."""
    for keep, nfc in combos:
        yield from _check_explain(text, keep, nfc)


def _fused_ok(text: str, level: Level, keep: bool) -> bool:
    try:
        fused_path(text, level, keep)
    except iri.IRIError:
        return False
    return True


def _check_explain(text: str, keep: bool, nfc: bool) -> Iterator[str]:
    others = {_norm(text, lvl, _eq_form(lvl), keep, nfc) for lvl in Level} - {ERROR}
    for other, level in itertools.product(sorted(others), Level):
        try:
            verdict = iri.equivalent(text, other, level, keep_fragment=keep, nfc=nfc)
        except iri.IRIError:
            continue
        try:
            said = iri.explain(text, other, level, keep_fragment=keep, nfc=nfc).equivalent
        except iri.IRIError:
            yield f"explain raises, equivalent does not: {text!r} {other!r} {level.name}"
            continue
        if said != verdict:
            yield (f"explain says {said}, equivalent {verdict}: {text!r} vs {other!r} "
                   f"level={level.name} keep={keep} nfc={nfc}")


def check_round_trip(text: str) -> Iterator[str]:
    """3.2: "an IRI that maps back to the URI used as an input"."""
    seen: set[str] = set()
    for level in (Level.SYNTAX, Level.SCHEME):
        for nfc in (False, True):
            uri = _norm(text, level, "uri", True, nfc)
            if uri == ERROR or uri in seen:
                continue
            seen.add(uri)
            try:
                back = iri.iri_to_uri(iri.uri_to_iri(uri), idna=False)
            except iri.IRIError as exc:
                yield f"iri_to_uri(uri_to_iri({uri!r}), idna=False) raises {exc}"
                continue
            if back != uri:
                yield f"iri_to_uri(uri_to_iri({uri!r}), idna=False) == {back!r}"
            if level is Level.SCHEME:
                for unicode_host in (False, True):
                    try:
                        back = iri.iri_to_uri(iri.uri_to_iri(uri, unicode_host=unicode_host))
                    except iri.IRIError as exc:
                        yield f"iri_to_uri(uri_to_iri({uri!r}, unicode_host={unicode_host})) raises {exc}"
                        continue
                    if back != uri:
                        yield f"iri_to_uri(uri_to_iri({uri!r}, unicode_host={unicode_host})) == {back!r}"


# The alphabet of the exhaustive run: "%", hex digits, escapes of unreserved and
# of non-ASCII characters, and the delimiters that matter to the ladder.
TOKENS = (
    "%", "4", "1", "a", "F", "%41", "%61", "%7e", "%2E", "%31", "%34",
    "%C3%A9", "%CC%81", "%CC%B8", "%E2%84%AA", ".", "/", ":", "?", "#", "=",
)
PREFIXES = ("", "http://h/")


def short_strings(max_tokens: int, tokens: tuple[str, ...] = TOKENS,
                  prefixes: tuple[str, ...] = PREFIXES) -> Iterator[str]:
    for n in range(max_tokens + 1):
        for combo in itertools.product(tokens, repeat=n):
            body = "".join(combo)
            for prefix in prefixes:
                yield prefix + body


def first_failure(texts: Iterator[str], checker: Callable[[str], Iterator[str]] = check) -> str | None:
    for text in texts:
        for failure in checker(text):
            return failure
    return None
