"""The rungs of one pass (``ladder.fused_rungs``) are the climb's.

``canonical_and_rungs`` takes the rungs that changed a URL from the fused pass when it
can (an ASCII URI with an authority and a reg-name host, level SCHEME or PROTOCOL
without rules): each component through the rungs' own functions, a rung counted when
it changed a component.  Here the key and the rungs are compared with the climb's
per-rung comparison of the whole string (what ``canonical_and_rungs`` did for every
alias before) over the vector files, the generated corpora and their mutations.
"""

from __future__ import annotations

import random

import pytest

from iri_scrapy.core import ladder
from iri_scrapy.core.errors import IRIError
from iri_scrapy.core.ladder import Level, NormalizeOptions, Rung, fused_rungs
from tests.core.test_native import _mutations, _texts

_OPTIONS = (NormalizeOptions(keep_fragment=False), NormalizeOptions(keep_fragment=True),
            NormalizeOptions(Level.PROTOCOL, keep_fragment=False))


def _climbed(text: str, options: NormalizeOptions) -> tuple[str, tuple[Rung, ...]] | None:
    """Key and rungs by the climb: a rung counts when the whole string changed."""
    try:
        steps = ladder.climb(text, options)
        _, ref = next(steps)
        before, applied = ref.unsplit(), []
        for rung, new in steps:
            after = new.unsplit()
            if after != before:
                applied.append(rung)
            before = after
    except IRIError:
        return None
    return before, tuple(applied)


def _check(text: str, options: NormalizeOptions) -> bool:
    try:
        got = fused_rungs(text, options)
    except IRIError:
        assert _climbed(text, options) is None, text
        return True
    if got is None:
        return False
    assert got == _climbed(text, options), (text, options)
    return True


@pytest.mark.slow
def test_one_pass_gives_the_climbs_key_and_rungs() -> None:
    rnd = random.Random(5332)
    covered = 0
    for text in _texts():
        for candidate in (text, *_mutations(text, rnd)):
            for options in _OPTIONS:
                covered += _check(candidate, options)
    assert covered > 150_000


@pytest.mark.parametrize("text, rungs", [
    ("HTTP://a.example/", (Rung.CASE,)),
    ("http://A.example:80/%7e/./x?q=%7e#f", (Rung.CASE, Rung.PERCENT, Rung.PATH, Rung.SCHEME)),
    ("http://a.example", (Rung.SCHEME,)),
    ("http://a.example:/", (Rung.SCHEME,)),
    ("http://a.example/a b", (Rung.PERCENT,)),
    ("http://a.example/%2f", (Rung.CASE,)),
    ("http://u%7e@a.example/", (Rung.CASE, Rung.PERCENT)),
    ("http://u%7E@a.example/", (Rung.PERCENT,)),
    ("http://a.example/#%7e", ()),
    ("http://xn--caf-dma.example/", ()),
    ("http://a.example/?a%3d", (Rung.CASE,)),
])
def test_rungs_of_one_pass(text: str, rungs: tuple[Rung, ...]) -> None:
    options = NormalizeOptions(keep_fragment=False)
    assert _check(text, options)
    assert fused_rungs(text, options) == (_climbed(text, options) or ("", ()))[:1] + (rungs,)


@pytest.mark.parametrize("text", ["http://[::1]/", "mailto:a@B.example", "/relative",
                                  "http://caf\u00e9.example/", "urn:x:y"])
def test_the_climb_answers_the_rest(text: str) -> None:
    assert fused_rungs(text, NormalizeOptions(keep_fragment=False)) is None


@pytest.mark.parametrize("text", ["http://a.example:8x/", "http://a:b:c/", "http://a.example:99999/",
                                  "http://a..example/", "http://[a/"])
def test_an_error_is_normalizes(text: str) -> None:
    """The error (and its index in the whole text) is the one normalize() raises."""
    options = NormalizeOptions(keep_fragment=False)
    with pytest.raises(IRIError) as want:
        ladder.canonical(text, options)
    with pytest.raises(IRIError) as got:
        ladder.canonical_and_rungs(text, options)
    assert str(got.value) == str(want.value)
