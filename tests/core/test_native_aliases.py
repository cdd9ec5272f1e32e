"""The native alias rungs (iri_scrapy/core/_aliases.c) answer as the Python ladder.

``alias_key`` (the key and the rungs of an ASCII URL that the common alias rungs make
canonical, for dedupe's batch loop) is held to the pure-Python reference: the fast
path's reference when that answers, else ``ladder.fused_rungs``, which must answer
(and raise nothing) wherever the C code does.  Over the vector files, the generated
corpora, the aliases a dump holds (case, default and zero-padded ports, escapes, dot
segments, fragments, and their combinations), single-character mutations of all of
them, and Hypothesis text; the C code must answer most aliases.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iri_scrapy.core import ladder, native
from iri_scrapy.core.errors import IRIError
from iri_scrapy.core.ladder import NormalizeOptions, Rung
from tests.core.test_native import _mutations, _outcome, _texts

pytestmark = pytest.mark.skipif(native.MODULE is None, reason="native fast path not built")

_ALIAS_ALPHABET = "aZ09:/.%7eEfF#?~-_@[]+ \\\"{}|^`<>"


def _python(text: str, keep: bool) -> tuple[str, tuple[Rung, ...]] | None:
    """Key and rungs by the pure-Python reference, None where it does not take the
    fused pass (then the C code must not answer either)."""
    if not text.isascii():
        return None
    fast = ladder.reference_fast_path(text, keep)
    if fast is not None:
        return fast, ()
    return ladder.fused_rungs(text, NormalizeOptions(keep_fragment=keep))


def _check(text: str) -> int:
    """1 if the C code answered *text* (then as the reference), else 0."""
    assert native.MODULE is not None
    answered = 0
    for keep in (False, True):
        got = native.MODULE.alias_key(text, keep)
        if got is None:
            continue
        try:
            want = _python(text, keep)
        except IRIError as exc:  # pragma: no cover - a failure's message
            raise AssertionError(f"C answered {text!r}, Python raised {exc}") from None
        key, mask = got
        assert want == (key, ladder._mask_rungs(mask)), (text, keep, got, want)
        answered = 1
    return answered


def _aliases(url: str, rnd: random.Random) -> Iterator[str]:
    """The aliases a frontier dump holds of *url*, alone and two at a time."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return
    host, slash, path = rest.partition("/")
    port = ":443" if scheme == "https" else ":80"
    edits = [
        lambda s, h, p: (s.upper(), h, p),
        lambda s, h, p: (s, h.upper(), p),
        lambda s, h, p: (s, h + port, p),
        lambda s, h, p: (s, h + ":0" + port[1:], p),
        lambda s, h, p: (s, h + ":", p),
        lambda s, h, p: (s, h, "./" + p),
        lambda s, h, p: (s, h, "a/../" + p),
        lambda s, h, p: (s, h, p + "/."),
        lambda s, h, p: (s, h, p + "/.."),
        lambda s, h, p: (s, h, p.replace("%2F", "%2f").replace("~", "%7e").replace("-", "%2D")),
        lambda s, h, p: (s, h, p + "#section-2"),
        lambda s, h, p: (s, h, p + "?q=%7e#x%2a"),
        lambda s, h, p: (s, h, p.replace("/", "/%2E/", 1)),
    ]
    for _ in range(4):
        s, h, p = scheme, host, path
        for edit in rnd.sample(edits, rnd.choice((1, 2, 3))):
            s, h, p = edit(s, h, p)
        yield f"{s}://{h}{slash if slash or not p else '/'}{p}"
    yield f"{scheme}://{host}"


@pytest.mark.slow
def test_the_alias_rungs_answer_as_the_python_ladder() -> None:
    rnd = random.Random(32)
    cases = answered = 0
    for text in _texts():
        variants = [text, *_aliases(text, rnd)]
        for variant in list(variants):
            variants += _mutations(variant, rnd)
        for variant in variants:
            answered += _check(variant)
            cases += 1
    assert cases > 500_000
    assert answered > cases // 4


@pytest.mark.parametrize("text, key, rungs", [
    ("HTTP://Example.COM:80", "http://example.com/", (Rung.CASE, Rung.SCHEME)),
    ("http://a.example/%7e/%2f/./b/../c?x=%7E#f", "http://a.example/~/%2F/c?x=~",
     (Rung.CASE, Rung.PERCENT, Rung.PATH)),
    ("http://a.example:0080/", "http://a.example/", (Rung.SCHEME,)),
    ("http://a.example:000000080/", "http://a.example/", (Rung.SCHEME,)),
    ("foo://h:080/x", "foo://h:80/x", (Rung.SCHEME,)),
    ("http://a.example:/x", "http://a.example/x", (Rung.SCHEME,)),
    ("http://a.example/a/%2E%2E/b", "http://a.example/b", (Rung.PERCENT, Rung.PATH)),
    ("http://a.example/a/.b/#x", "http://a.example/a/.b/", ()),
    ("https://a.example:443?q", "https://a.example/?q", (Rung.SCHEME,)),
    # the printable characters a URI does not allow, written as escapes (3.1 step 2)
    ("http://a.example/ x", "http://a.example/%20x", (Rung.PERCENT,)),
    ("http://a.example/a\\%7e b/?q={x}#f g", "http://a.example/a%5C~%20b/?q=%7Bx%7D",
     (Rung.CASE, Rung.PERCENT)),
    ("http://a.example/a|b/%2E%2E/c^d#x", "http://a.example/c%5Ed", (Rung.PERCENT, Rung.PATH)),
    ("http://a.example/\"x\"#<b>", "http://a.example/%22x%22", (Rung.PERCENT,)),
])
def test_alias_keys_and_rungs(text: str, key: str, rungs: tuple[Rung, ...]) -> None:
    assert native.MODULE is not None
    got = native.MODULE.alias_key(text, False)
    assert got is not None and (got[0], ladder._mask_rungs(got[1])) == (key, rungs)
    assert _check(text)


@pytest.mark.parametrize("text", [
    "http://1.2.3.4:80/", "http://[::1]:80/", "http://u@a.example:80/", "http://XN--CAF-DMA.example/",
    "http://a.example/%zz", "http://a.example/%7", "http://caf\u00e9.example/", "mailto://A/",
    "http://a.example:99999/", "http://a.example:1x/", "http://a..example/", "http://a%41.example/",
    "http://a.example/x ", "http://a.example/[x]", 'http://"a.example/', "http://a.example/\x00",
    " http://a.example/", "file:///x/./y",
    "http:/a.example/", "h%41ttp://a/", "http://a.example:0123456/", "http://A.example/" + "x" * 5000,
])
def test_what_the_alias_rungs_leave_to_python(text: str) -> None:
    assert native.MODULE is not None
    for keep in (False, True):
        assert native.MODULE.alias_key(text, keep) is None
    _check(text)


@given(st.sampled_from(["http", "HTTPS", "ws", "Ftp", "foo", "mailto", "file"]),
       st.text(alphabet=_ALIAS_ALPHABET, max_size=40))
@settings(max_examples=1500)
def test_alias_rungs_on_generated_text(scheme: str, rest: str) -> None:
    _check(f"{scheme}://{rest}")
    _check(f"{scheme}://A.example{rest}")


@given(st.sampled_from(["http", "HTTPS", "ws", "Ftp", "foo", "mailto", "file"]),
       st.text(alphabet=_ALIAS_ALPHABET, max_size=40), st.booleans())
@settings(max_examples=700)
def test_normalize_answers_generated_text_as_the_reference(scheme: str, rest: str,
                                                          keep: bool) -> None:
    """The C entry (fast path, then the alias rungs, then the reference) against the
    reference alone, results and errors."""
    for text in (f"{scheme}://{rest}", f"{scheme}://A.example{rest}"):
        got = _outcome(ladder.normalize, text, keep_fragment=keep)
        assert got == _outcome(ladder.normalize_reference, text, keep_fragment=keep), text


def test_the_tables_come_from_the_ladder() -> None:
    assert tuple(rung.key for _, rung in ladder._RUNG_BITS) == native.ALIAS_RUNG_KEYS
    wrong = dict(ladder._UNRESERVED_OCTETS)
    wrong["2F"] = "/"  # decoding "%2F" would change the meaning of the path
    with pytest.raises(ValueError, match="disagree"):
        native.aliases(wrong, ladder.CANONICAL_ESCAPE, ladder.encode_component,
                       ladder._RUNG_BITS)


def test_the_encoded_characters_come_from_the_percent_rung() -> None:
    table = native.encoded_table(ladder.encode_component)
    assert [chr(c) for c in range(128) if table[c]] == list(' "<>\\^`{|}')
    with pytest.raises(ValueError, match="writes"):
        native.encoded_table(lambda char: "%" if char == "\\" else char)


def _python_calls(text: str) -> list[str]:
    """The Python functions ``normalize(text, keep_fragment=False)`` calls."""
    import sys

    calls: list[str] = []

    def profile(frame: object, event: str, arg: object) -> None:
        if event == "call":
            calls.append(frame.f_code.co_name)  # type: ignore[attr-defined]

    sys.setprofile(profile)
    try:
        ladder.normalize(text, keep_fragment=False)
    finally:
        sys.setprofile(None)
    return calls


@pytest.mark.parametrize("text", [
    "HTTP://A.example:80/a/./b", "https://a.example/New\\%20Pages/x.html", "http://a.example/p#Main Story",
    "http://a.example/?iid={headline=press}", "http://a.example/%7ex/..",
])
def test_normalize_answers_the_aliases_in_c(text: str) -> None:
    """The C entry asks the alias rungs when the fast path refuses: no Python call, the
    reference's key."""
    assert _python_calls(text) == []
    assert ladder.normalize(text, keep_fragment=False) == ladder.normalize_reference(
        text, keep_fragment=False)
    assert _python_calls('http://"a.example/') != []  # the reference answers the rest
