"""The optimized page fingerprint equals the reference one, block for block.

Fingerprints are stored (``JOBDIR``, Redis) and compared across processes, so the
faster :func:`~iri_scrapy.protocol.fingerprint.fingerprint` must give exactly what
the frozen copy in :mod:`tests.support.fingerprint_reference` gives: the same
block hashes, labels, paths and digest, on the tests' generated sites, on real
documentation pages (two of python3-doc, in tests/data) and on hostile markup.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from iri_scrapy.protocol.fingerprint import Fingerprint, fingerprint
from tests.support import fingerprint_reference as reference
from tests.support import gen_site, messy_site
from tests.support.vectors import load


def _fields(fp: Fingerprint | reference.Fingerprint) -> tuple[list[int], ...]:
    return list(fp.pairs), list(fp.labels), list(fp.paths), list(fp.places), list(fp.digest)


def assert_same(body: str) -> None:
    got, want = fingerprint(body), reference.fingerprint(body)
    assert _fields(got) == _fields(want), body[:200]


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
