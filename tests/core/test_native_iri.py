"""The native IRI path (iri_scrapy/core/_iripath.c) agrees with the Python reference.

The C ``iri_to_uri`` maps an IRI to its URI (RFC 3987 3.1: UTF-8 escapes, UTS 46 ToASCII
hosts) for the fast path, or gives None.  Where it answers it must give what
``mapping.iri_to_uri`` gives (never answer where Python refuses), and the key
``normalize`` then returns must be the pure-Python one (the fused path, the climb where
it declines): over the vector files, the generated corpora (IRIs in many scripts) and
mutations of them with the characters UTS 46 treats apart, and over every host of the
UTS 46 conformance files (IdnaTestV2 and the WHATWG's), on both paths.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from iri_scrapy import IRIError
from iri_scrapy.core import hosts, ladder, native
from iri_scrapy.core.mapping import iri_to_uri
from tests.core.test_native import _mutations, _texts
from tests.support.generated_urls import lines
from tests.support.paths import via
from tests.support.vectors import load

pytestmark = pytest.mark.skipif(not native.enabled(), reason="native fast path not built")

#: The UTS 46 conformance files, and how many of their non-ASCII hosts the native path
#: answers at least (most are there to be refused: Python refuses them).
IDNA_FILES = {"unicode_idnatestv2": 200, "whatwg_idnatestv2": 200, "whatwg_toascii": 20}
#: What UTS 46 and the IRI path treat apart: scripts (left-to-right, right-to-left, outside
#: the BMP), mapped letters (uppercase, fullwidth, ß, ς), ignored (soft hyphen), marks,
#: joiners, CONTEXTO digits, what maps to a full stop or a delimiter, Punycode's hyphens,
#: a lone surrogate and a code point no Unicode assigns.
_IRI_ALPHABET = ("é\u00dfς\u0428ш台\u0627\u05d0\u0660\u06f1\U00010300Ａ\u00ad\u0301\u200c\u200d"
                 "\u3002\uff0e\u2488\uff03\u00b7\u0378\ud800-.:/?#%xX1")


def _key(text: str, keep: bool, path: str = "fused") -> object:
    """The key on *path*, by default the pure-Python one (its error's class when there
    is none)."""
    try:
        return via(path, text, keep_fragment=keep)
    except IRIError as exc:
        return type(exc)


def _agree(text: str) -> bool:
    """Check the IRI path on *text*; True if it answered."""
    assert native.MODULE is not None
    uri = native.MODULE.iri_to_uri(text)
    if uri is None:
        return False
    assert uri.isascii() and uri == iri_to_uri(text), (text, uri)
    for keep in (True, False):
        fast = native.MODULE.fast_path(uri, keep)
        if fast is not None:
            assert fast == _key(text, keep), (text, keep, fast)
    return True


def _iri_mutations(text: str, rnd: random.Random) -> Iterator[str]:
    for _ in range(3):
        i = rnd.randrange(len(text) + 1)
        c = rnd.choice(_IRI_ALPHABET)
        yield text[:i] + c + text[i:]
        if text:
            j = rnd.randrange(len(text))
            yield text[:j] + c + text[j + 1:]


def test_the_iri_path_is_the_one_in_use() -> None:
    assert native.MODULE is not None and ladder.iri_path is native.MODULE.iri_to_uri


@pytest.mark.slow
def test_agrees_with_the_reference_on_corpora_and_mutations() -> None:
    rnd = random.Random(3492)
    seen = answered = 0
    texts = [*_texts(), *lines("iris", n=3000, seed=46)]
    for text in texts:
        for candidate in (text, *_iri_mutations(text, rnd), *_mutations(text, rnd)):
            if candidate.isascii():
                continue
            answered += _agree(candidate)
            seen += 1
    assert seen > 100_000 and answered > 50_000, (seen, answered)


@pytest.mark.parametrize("text", [
    "http://bücher.de/", "http://BÜCHER.de/", "http://Bücher.DE/", "http://bücher.de:80/",
    "http://faß.de/", "http://ςαφ.gr/", "http://xn--bcher-kva.de/é", "http://a\u00adb\u00e9.de/",
    "http://\u0301a.de/", "http://a\u200db.de/", "http://\u0627\u0644\u0639\u0631\u0628\u064a\u0629.eg/",
    "http://\u05d0\u0031.il/", "http://a\u3002b\u00e9/", "http://\u2488\u00e9.com/", "http://\uff03\u00e9.com/",
    "http://ab--\u00e9.com/", "http://-\u00e9.com/", "http://\u00e9-.com/", "http://\u00e9..com/",
    "http://\u00e9.com./", "http://\u00e9.1/", "http://\u00e9.0x1f/", "http://e\u0301.com/",
    "http://" + "\u00e9" * 60 + ".com/", "http://" + ("\u00e9" * 20 + ".") * 13 + "com/",
    "http://\U00010300.com/", "http://\u0378.com/", "http://a.com/\ud800", "foo://\u00e9.com/",
    "foo://a.com/\u00e9", "http://user@\u00e9.com/", "http://[::1]/\u00e9", "http://\u00e9.com:8x/",
    "http://\u00e9.com/a b", "http://\u00e9.com/%7e", "http://\u00e9.com/%e9", "http://\u00e9.com/./a",
    "https://ru.wikipedia.org/wiki/\u0428\u0440\u0438?q=\u00e9#\u00e9", "http://\u00e9.com#a#\u00e9",
    "http://\u00e9.com?\u00e9?", "http://\u00e9.com", "ws://\u00e9.com:80/", "mailto:\u00e9@a.com",
    "http:\u00e9", "\u00e9", "http://\u00e9.com/\t",
])
def test_agrees_on_edges(text: str) -> None:
    _agree(text)
    for keep in (True, False):
        assert _key(text, keep, "native") == _key(text, keep)


@pytest.mark.slow
@pytest.mark.parametrize("name", IDNA_FILES)
def test_uts46_conformance_on_both_paths(name: str) -> None:
    """Every host of the UTS 46 conformance file: the native ToASCII gives the
    reference's A-labels where it answers (the expected ones where the file expects
    success), and ``normalize`` gives one key on both paths."""
    assert native.MODULE is not None
    answered = 0
    for r in load(name):
        host = str(r["input"])
        got = native.MODULE.host_to_ascii(host)
        if got is not None:
            assert got == hosts.host_to_ascii(host), r
            if r["expected"] is not None and not r.get("options"):
                assert got == r["expected"], r
            answered += not host.isascii()
        url = "http://" + host + "/"
        assert _key(url, True, "native") == _key(url, True), r
    assert answered >= IDNA_FILES[name], answered


def test_facts_come_from_the_python_reference() -> None:
    assert hosts.code_point_facts(ord("A")) == ("a", 0)
    assert hosts.code_point_facts(0xE9) == (None, 0)
    assert hosts.code_point_facts(0x0301) == (None, hosts.FACT_MARK)
    assert hosts.code_point_facts(0x0627) == (None, hosts.FACT_RTL)
    assert hosts.code_point_facts(0x200D) == (None, hosts.FACT_CONTEXT)
    assert hosts.code_point_facts(0x3002) == (".", 0)
    assert hosts.code_point_facts(0x00AD) == ("", 0)  # ignored: the native path asks Python
    assert hosts.code_point_facts(0x0378) is None  # unassigned


def test_cold_caches_forget_the_facts_and_keep_the_keys() -> None:
    text = "http://bücher.de/é"
    first = ladder.normalize(text)
    ladder.clear_caches()
    assert ladder.normalize(text) == first == "http://xn--bcher-kva.de/%C3%A9"
