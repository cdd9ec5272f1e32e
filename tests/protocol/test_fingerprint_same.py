"""The optimized page fingerprint equals the reference one, block for block.

Fingerprints are stored (``JOBDIR``, Redis) and compared across processes, so the
faster :func:`~iri_scrapy.protocol.fingerprint.fingerprint` must give exactly what
the frozen copy in :mod:`tests.support.fingerprint_reference` gives: the same
block hashes, labels, paths and digest, on the tests' generated sites, on real
documentation pages (two of python3-doc, in tests/data) and on hostile markup.
Both ways of cutting a page are checked: the C cutter (``_blocks.c``, built by
every install with a C compiler; under CI a missing build fails) and the
pure-Python one (``_Blocks``), which a machine without a compiler uses.
"""

from __future__ import annotations

import hashlib
import os
import random
from collections.abc import Callable, Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from iri_scrapy.protocol import fingerprint as module
from iri_scrapy.protocol.fingerprint import Fingerprint
from tests.support import fingerprint_reference as reference
from tests.support import gen_site, messy_site
from tests.support.vectors import load


def _fields(fp: Fingerprint | reference.Fingerprint) -> tuple[list[int], ...]:
    return list(fp.pairs), list(fp.labels), list(fp.paths), list(fp.places), list(fp.digest)


def _python(body: str) -> Fingerprint:
    """The fingerprint as a machine without the C cutter makes it."""
    saved, module._CUT = module._CUT, None
    try:
        return module.fingerprint(body)
    finally:
        module._CUT = saved


def _native(body: str) -> Fingerprint:
    """The fingerprint through the C cutter (which hands a few pages back to
    ``_Blocks``: see _blocks.c)."""
    assert module._CUT is not None
    return module.fingerprint(body)


_WAYS: dict[str, Callable[[str], Fingerprint]] = {"python": _python, "native": _native}
_way = "native"  # which one assert_same checks (set by the fixture: one test, both ways)


@pytest.fixture(autouse=True, params=sorted(_WAYS))
def way(request: pytest.FixtureRequest) -> Iterator[str]:
    global _way
    if request.param == "native" and module._CUT is None:
        if os.environ.get("CI") and os.environ.get("IRISCRAPY_NATIVE") != "0":
            pytest.fail("CI installs with a C compiler: the C page cutter must be built")
        pytest.skip("the C page cutter is not built here (no C compiler at install)")
    saved, _way = _way, request.param
    yield request.param
    _way = saved


def assert_same(body: str) -> None:
    got, want = _WAYS[_way](body), reference.fingerprint(body)
    assert _fields(got) == _fields(want), body[:200]


def test_its_hash_is_blake2b_with_an_8_byte_digest() -> None:
    """The C cutter hashes with its own BLAKE2b (RFC 7693): hashlib's, for every
    length around the 128-byte block."""
    if module._CUT is None:
        pytest.skip("the C page cutter is not built here")
    from iri_scrapy.protocol import _blocks  # type: ignore[attr-defined]

    rng = random.Random(7)
    for n in [*range(0, 300), 1000, 4096]:
        data = rng.randbytes(n)
        want = int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little",
                              signed=True)
        assert _blocks.hash8(data) == want, n


def test_the_characters_it_is_handed_are_the_ones_python_uses() -> None:
    """The whitespace of ``str.split()`` stops at U+3000, and the characters
    ``_KEPT_HINT_RE``'s IGNORECASE folds onto the ASCII letters of its names are
    the three it leaves to the reference."""
    spaces = "".join(c for c in map(chr, range(0x110000)) if c.isspace())
    assert spaces == module._SPACES
    letters = module.re.compile(f"[{module.re.escape(''.join(module._KEPT_HINTS))}]", module.re.I)
    folded = "".join(c for c in map(chr, range(0x80, 0x110000)) if letters.fullmatch(c))
    assert folded == module._FOLDED


def test_pages_it_leaves_to_the_reference() -> None:
    """A tag or data- attribute name that is not ASCII (``str.lower``'s Unicode
    rules), a folded character, more than 64 data- attributes or query pairs: the
    C cutter hands the page back, and the result is the reference's."""
    many_data = "".join(f' data-a{i}="{i}"' for i in range(70))
    many_pairs = "&".join(f"k{i}=v" for i in range(70))
    for body in ["<p>x<dİv class=a>y</p>", "<p><a data-é=\"/x\" href=/y>t</a></p>",
                 "<p>ſ<a href=/x>t</a></p>", f"<div{many_data}>t</div>",
                 f'<p><a href="/x?{many_pairs}">t</a></p>']:
        if module._CUT is not None:
            assert module._CUT(module._HIDDEN_RE.sub(" ", body)) is None, body
        assert_same(body)
    assert module._CUT is None or module._CUT("<p>x<div class=a>y</p>") is not None


@pytest.mark.slow
def test_the_messy_sites_pages() -> None:
    for mode in messy_site.MODES:
        model = messy_site.MessySite(mode)
        for url in model.reachable_urls():
            page = model.answer(url)
            if isinstance(page, messy_site.Page):
                assert_same(messy_site.render(page).decode())


@pytest.mark.slow
@pytest.mark.parametrize("seed", [gen_site.TUNING_SEEDS[0], gen_site.HELDOUT_SEEDS[0]])
def test_the_generated_sites_pages(seed: int) -> None:
    site = gen_site.GenSite(seed, tuple(gen_site.NOISE))  # every kind of noise
    rng = random.Random(seed)
    for url in site.reachable_urls():
        page = site.model.answer(url, "0" * 16)
        if isinstance(page, gen_site.Page):
            assert_same(site.renderer.render(page, rng, "s" * 16).decode())
        elif isinstance(page, gen_site.Text):
            assert_same(page.body)


def test_real_documentation_pages() -> None:
    """Two pages of the Python documentation (tests/data; all 530 pages of
    python3-doc agreed when the fingerprint was made faster)."""
    records = load("python3_doc_pages")
    assert len(records) == 2
    for record in records:
        assert_same(record["html"])


_NAMES = st.sampled_from([
    "a", "A", "p", "P", "div", "li", "ul", "img", "meta", "link", "br", "span", "b",
    "script", "SCRIPT", "style", "noscript", "template", "td", "h1", "x-y", "a:b", "z9",
])
_ATTR_NAMES = st.sampled_from([
    "href", "HREF", "src", "data-src", "data-x", "data-", "title", "alt", "content",
    "action", "poster", "class", "id", "name", "hrefx", "xhref", "", "=", "/", '"',
])
_TEXT = st.text(st.sampled_from(list("ab Z09 \t\n<>&;#=\"'/-!?.,_xé\u00a0\u2028\ud800")),
                max_size=24)
_VALUES = st.one_of(_TEXT, st.sampled_from([
    "/a/b?x=1&y=2&x=1#f", "http://h/p?q", "?&=&", "a.b", "&amp;x=1", "&#0;", "&#x110000;",
    "Foo Bar", "  spaced   out ", "x.y z", "#frag", "/p?=v&n=", "&unknown;",
]))


@st.composite
def _attribute(draw: st.DrawFn) -> str:
    name = draw(_ATTR_NAMES)
    value = draw(_VALUES)
    quote = draw(st.sampled_from(['"', "'", "", None]))
    space = draw(st.sampled_from(["", " ", "\n", " \t"]))
    if quote is None:
        return name
    return f"{name}{space}={space}{quote}{value}{quote}"


@st.composite
def _piece(draw: st.DrawFn) -> str:
    kind = draw(st.integers(0, 9))
    name = draw(_NAMES)
    if kind == 0:
        attrs = draw(st.lists(_attribute(), max_size=4))
        end = draw(st.sampled_from([">", "/>", "", " >", "<"]))
        return f"<{name}{''.join(' ' + a for a in attrs)}{end}"
    if kind == 1:
        return f"</{name}{draw(st.sampled_from(['>', ' >', '', 'x>']))}"
    if kind == 2:
        return draw(st.sampled_from(["<!--", "-->", "--!>", "<!-- c -->", "<!doctype html>",
                                     "<?xml ?>", "<!", "</", "<", ">", "<![CDATA[x]]>"]))
    if kind == 3:
        return draw(st.sampled_from(["&amp;", "&lt;p&gt;", "&#60;", "&#x3C;", "&nbsp;", "&",
                                     "&#", "&copy", "&notit;", "&#xD800;"]))
    return draw(_TEXT)


@given(st.lists(_piece(), max_size=40), st.sampled_from(["", "<p>", "  <", "\ufeff<b>", "x"]))
def test_hostile_markup(pieces: list[str], lead: str) -> None:
    assert_same(lead + "".join(pieces))


@given(st.text(max_size=200))
def test_any_text(body: str) -> None:
    assert_same(body)
    assert_same("<p>" + body)


def test_tags_seen_on_another_page_and_long_tags() -> None:
    """What a tag is, is kept from one page to the next (short tags): the same
    tag under other parents, and tags too long to keep, give what they gave."""
    long_attr = "x" * 200
    pages = [
        '<div class="a b"><a href="/p?q=1" title="T">x</a><span class=pre>y</span></div>',
        '<ul><li><div class="a b"><a href="/p?q=1" title="T">x</a></div></li></ul>',
        f'<p><a data-{long_attr}="/z" href="/y">t</a><div {long_attr} class=c>u</div></p>',
        f'<p>a < b > c <{long_attr} d<e>f</p><img src=/i.png alt="An image">',
        "<p>one<p>two</P><LI>three</li><BlockQuote class=q>four</blockquote>",
    ]
    for body in pages + pages[::-1]:
        assert_same(body)


def test_the_bounds() -> None:
    many = "".join(f'<p>w{i}<a href="/x{i}?a={i}&b=1">t</a></p>' for i in range(3000))
    assert_same("<div>" + many)  # past MAX_BLOCKS
    assert_same("<p>" + "word " * (reference.SCAN_LIMIT // 4))  # past SCAN_LIMIT
    assert_same("\n".join(f"line {i}" for i in range(reference.MAX_BLOCKS + 10)))
    deep = "".join(f"<div class=c{i % 3}>t{i}" for i in range(200))
    assert_same(deep + "</div>" * 150 + "tail")  # past the depth bound
