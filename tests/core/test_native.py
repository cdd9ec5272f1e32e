"""The native fast path (iri_scrapy/core/_fastpath.c) agrees with the Python reference.

Two implementations of one test, as yarl runs its quoters: the C ``fast_path`` and
``ladder.reference_fast_path`` answer the same (the same string, or None) for every
line of every vector file, the generated corpora, and mutations of them (one
character inserted, replaced, deleted or case-flipped, from an alphabet of the
characters the fast path treats apart).  Every example table also runs through the
native path (tests/support/paths.py).  CI builds the extension: there a missing build fails.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from iri_scrapy.core import ladder, native
from iri_scrapy.core.hrefs import needs_preprocessing
from iri_scrapy.core.resolve import resolve
from tests.support.generated_urls import KINDS, lines
from tests.support.vectors import load

_VECTOR_FILES = ["rfc3986_examples", "rfc3987_examples", "w3lib_canonicalize_url", "purell",
                 "url_normalize", "urlcanon_whatwg", "whatwg_urltestdata", "addressable",
                 "hyperlink_iri", "nutch_basic_normalizer"]
#: What the fast path looks at: delimiters, escapes, dots, digits, case, a non-ASCII letter.
_ALPHABET = "aZz09:/?#%.@[]-_~!$&'()*+,;= \tAFfx\u00e9\x7f\x00\\\"{}|^`<>"


def test_ci_builds_the_extension() -> None:
    if os.environ.get("CI") and os.environ.get(native.ENV) != "0":
        assert native.enabled(), "CI installs with a C compiler: the native fast path must be built"
    elif not native.enabled():
        pytest.skip("the native fast path is not built here (no C compiler at install)")


pytestmark_native = pytest.mark.skipif(not native.enabled(), reason="native fast path not built")


def _texts() -> Iterator[str]:
    for name in _VECTOR_FILES:
        for case in load(name):
            for key in ("input", "expected", "base"):
                value = case.get(key)
                if isinstance(value, str):
                    yield value
    for kind in KINDS:
        yield from lines(kind, n=2000)


def _mutations(text: str, rnd: random.Random) -> Iterator[str]:
    for _ in range(3):
        i = rnd.randrange(len(text) + 1)
        c = rnd.choice(_ALPHABET)
        yield text[:i] + c + text[i:]
        if text:
            j = rnd.randrange(len(text))
            yield text[:j] + c + text[j + 1:]
            yield text[:j] + text[j + 1:]
            yield text[:j] + text[j].swapcase() + text[j + 1:]


def _agree(text: str) -> None:
    assert native.MODULE is not None
    for keep in (True, False):
        want = ladder.reference_fast_path(text, keep)
        got = native.MODULE.fast_path(text, keep)
        assert got == want, (text, keep, got, want)


@pytestmark_native
def test_the_native_fast_path_is_the_one_in_use() -> None:
    assert native.MODULE is not None
    assert ladder.fast_path is native.MODULE.fast_path


@pytestmark_native
def test_agrees_with_the_reference_on_vectors_corpora_and_mutations() -> None:
    rnd = random.Random(3987)
    seen = 0
    for text in _texts():
        _agree(text)
        for mutated in _mutations(text, rnd):
            _agree(mutated)
            seen += 1
    assert seen > 100_000


@pytestmark_native
@pytest.mark.parametrize("text", [
    "http://a.com", "http://a.com/", "http://a.com:80/", "http://a.com:8080/", "http://a.com:65535/",
    "http://a.com:65536/", "http://a.com:99999/", "http://a.com:0/", "http://a.com:080/",
    "http://a.com:123456/", "http://a..com/", "http://.a.com/", "http://1.2.3.4/", "http://a.0x1f/",
    "http://a.09/", "foo://1.2.3.4", "foo://a..b", "foo://a.com:80/", "http://a.com/%7e",
    "http://a.com/%7E", "http://a.com/%2f", "http://a.com/%2F", "http://a.com/%", "http://a.com/%4",
    "http://a.com/a/./b", "http://a.com/a/..", "http://a.com/a/.b", "http://a.com/a/...",
    "http://a.com/?q#f", "http://a.com/#f#g", "http://a.com?x", "http://A.com/", "HTTP://a.com/",
    "http://a.com/\u00e9", "http://a.com/\ud800", "http://a.com:/", "http://a.com:80", "", "h",
    "http:/a", "http://", "http://@a/", "ws://a.com:80/", "wss://a.com:443/x", "ftp://a.com",
    "mailto://a", "file:///etc/passwd", "file://host/x#y",
    # "ends in a number": the last label's first character is read in C
    "http://docs.example/", "http://a.0xab/", "http://a.1e/", "http://a.e1/", "http://a.b./",
    "http://a.1./", "http://0x/", "http://a.0x./", "http://1e./", "http://a.9f.e/",
    # a host starting with a dot: an empty label only for a DNS scheme
    "file://.git/HEAD", "file://.", "foo://.a/b", "foo://..a", "http://.a/b", "ws://./",
])
def test_agrees_on_edges(text: str) -> None:
    _agree(text)


@pytest.mark.parametrize("text", ["file://.git/HEAD", "file://.gitignore", "foo://.a./b"])
def test_a_host_starting_with_a_dot_is_canonical_outside_dns(text: str) -> None:
    """``file://.git/HEAD`` is its own key (no DNS rule reads its host): the fast path
    answers it; for http the first label is empty and the reference refuses it."""
    climbed = ladder.climb_path(text, ladder.NormalizeOptions(keep_fragment=False))
    assert ladder.reference_fast_path(text, False) == text == climbed
    assert ladder.reference_fast_path("http" + text[text.index(":"):], False) is None
    if native.MODULE is not None:
        _agree(text)


@pytestmark_native
@given(st.text(alphabet=_ALPHABET, max_size=40).map(lambda t: "http://" + t))
def test_agrees_on_generated_text(text: str) -> None:
    _agree(text)


#: Bases a link may be found on (resolution must not depend on them for the links below).
_BASES = ("http://docs.example/library/os.html?q#f", "https://a.test/", "file:///a/b")


@pytest.mark.slow
@pytest.mark.parametrize("path", ["native", "reference"])
def test_a_canonical_absolute_link_is_its_own_resolution(path: str) -> None:
    """``response.urljoin(href)`` answers an href the fast path calls canonical with the
    href itself (one native call, plugin/middleware.py): the browser's reading leaves it
    as it is and it resolves to itself on any base (RFC 3986 5.2.2: an absolute
    reference without dot segments), so its fetch form, and key, are the reference's."""
    module = native.MODULE
    if path == "native" and module is None:
        pytest.skip("native fast path not built")
    fast = module.fast_path if module is not None and path == "native" else ladder.reference_fast_path
    rnd = random.Random(3986)
    checked = 0
    for text in [*_texts(), "file://.git/HEAD", "file://.", "foo://.a./b"]:
        for candidate in (text, *_mutations(text, rnd)):
            if not candidate.isascii() or fast(candidate, True) is None:
                continue
            assert not needs_preprocessing(candidate), candidate
            for base in _BASES:
                assert resolve(base, candidate) == candidate, (base, candidate)
            checked += 1
    assert checked > 10_000


def test_the_tables_come_from_the_python_definitions() -> None:
    table = native.class_table(native.CharClasses("a", "a-c", "b", "/", "?"))
    assert table[ord("a")] & 3 == 3 and table[ord("b")] & 6 == 6 and table[ord("z")] == 0
    escapes = native.escape_table(ladder.CANONICAL_ESCAPE)
    assert escapes[0x2F] == 1 and escapes[0x7E] == 0 and escapes[0x41] == 0 and escapes[0xE9] == 1
    assert ("http", "80", True) in native.scheme_table()


def test_without_the_extension_the_add_on_says_so_in_one_info_line(tmp_path: object) -> None:
    """A build without a compiler (IRISCRAPY_NATIVE=0 stands in for it): the keys are the
    reference's and one INFO line of the add-on says the fast path is off."""
    import subprocess
    import sys

    code = (
        "import logging, sys\n"
        "logging.basicConfig(level=logging.INFO, stream=sys.stdout, format='%(message)s')\n"
        "from scrapy import Spider\n"
        "from scrapy.utils.test import get_crawler\n"
        "from iri_scrapy.core import ladder, native\n"
        "assert not native.enabled() and ladder.fast_path is ladder.reference_fast_path\n"
        "get_crawler(Spider, settings_dict={'ADDONS': {'iri_scrapy.Addon': 0}})\n"
    )
    env = {**os.environ, native.ENV: "0"}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [x for x in proc.stdout.splitlines() if "native fast path is off" in x]
    assert lines == ["iri_scrapy: the native fast path is off (IRISCRAPY_NATIVE=0): the same "
                     "keys, computed in pure Python"], proc.stdout


def _outcome(fn: object, *args: object, **kwargs: object) -> object:
    try:
        return fn(*args, **kwargs)  # type: ignore[operator]
    except (ValueError, TypeError) as exc:
        return (type(exc), str(exc))


#: The calls a user makes: the fast entry's own (level SCHEME, form "uri") and the ones it
#: hands to the reference (other levels and forms, NFC, a level by name, unknown arguments).
_CALLS: list[tuple[tuple[object, ...], dict[str, object]]] = [
    ((), {}), ((), {"keep_fragment": False}), ((ladder.Level.SCHEME,), {"keep_fragment": True}),
    ((), {"level": ladder.Level.PROTOCOL, "rules": None}), ((ladder.Level.SYNTAX,), {}),
    (("scheme",), {"form": "iri"}), ((3,), {"form": "uri", "nfc": False}),
    ((), {"nfc": True, "keep_fragment": False}), ((), {"form": "surt"}), ((), {"bogus": 1}),
    ((ladder.Level.SCHEME,), {"level": ladder.Level.SCHEME}),
]


@pytestmark_native
def test_normalize_is_the_c_entry_and_answers_as_the_reference() -> None:
    """``normalize`` is the C entry (native.entry): every call gives what
    ``normalize_reference`` gives, results and errors, over the vectors, the corpora
    and their mutations."""
    import iri_scrapy

    assert iri_scrapy.normalize is ladder.normalize is not ladder.normalize_reference
    rnd = random.Random(5)
    checked = 0
    for text in _texts():
        for candidate in (text, *list(_mutations(text, rnd))[::4]):
            for args, kwargs in _CALLS[:2] if checked % 7 else _CALLS:
                got = _outcome(ladder.normalize, candidate, *args, **kwargs)
                want = _outcome(ladder.normalize_reference, candidate, *args, **kwargs)
                assert got == want, (candidate, args, kwargs)
            checked += 1
    assert checked > 20_000


@pytestmark_native
def test_the_c_entry_reads_a_keyword_that_is_not_interned() -> None:
    """The entry compares a keyword's name by identity first (the interned name), then by
    its text: a name built at run time is read the same."""
    name = "".join(["keep_", "fragment"])  # a new str object, not the interned name
    text = "http://a.example/p#f"
    for keep in (False, True):
        kwargs: dict[str, object] = {name: keep}
        assert ladder.normalize(text, **kwargs) == ladder.normalize_reference(  # type: ignore[arg-type]
            text, keep_fragment=keep)


@pytestmark_native
def test_the_c_entry_is_documented_and_pickled_as_the_reference() -> None:
    import inspect
    import pickle

    entry, reference = ladder.normalize, ladder.normalize_reference
    assert inspect.signature(entry).parameters.keys() == inspect.signature(reference).parameters.keys()
    assert inspect.signature(entry).parameters["level"].default is ladder.Level.SCHEME
    assert entry.__doc__ == inspect.getdoc(reference)
    assert (entry.__module__, entry.__name__) == ("iri_scrapy.core.ladder", "normalize")
    assert pickle.loads(pickle.dumps(entry)) is entry
    assert _outcome(entry, b"http://a/") == _outcome(reference, b"http://a/")
    assert _outcome(entry) == (TypeError, _outcome(reference)[1])  # type: ignore[index]
