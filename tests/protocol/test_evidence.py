"""Evidence for the protocol rung (RFC 3987 section 5.3.4): vectors keyed by source.

``Clean-param`` from Yandex's robots.txt documentation; ``rel=canonical`` in an HTML
head (RFC 6596, the HTML Standard's tree construction) and in ``Link`` headers
(RFC 8288 section 3 and appendix B); the content digest's noise (what it masks and
what it must never mask); ``www.`` hosts.  Properties: no parser raises on any text,
the digest is stable under inserted timestamps and tokens and changes with a short
number.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from iri_scrapy.protocol.evidence import (
    HTML_SCAN_LIMIT,
    MAX_CLEAN_PARAM_RULE,
    CleanParam,
    canonical_from_html,
    canonical_from_link_headers,
    canonical_links_from_html,
    host_prefixed_www,
    parse_clean_param,
)
from iri_scrapy.protocol.fingerprint import Fingerprint, Volatility, fingerprint


def cp(params: str, prefix: str = "/") -> CleanParam:
    return CleanParam(frozenset(params.split("&")), prefix)


# --------------------------------------------------------------------------- Clean-param

# (id, robots.txt, the rules parsed)
CLEAN_PARAM: dict[str, list[tuple[str, str, list[CleanParam]]]] = {
    # https://yandex.com/support/webmaster/controlling-robot/robots-txt.html#clean-param
    "yandex-doc": [
        ("get_book", "User-agent: Yandex\nDisallow:\nClean-param: ref /some_dir/get_book.pl\n",
         [cp("ref", "/some_dir/get_book.pl")]),
        ("showthread", "User-agent: Yandex\nDisallow:\nClean-param: s /forum/showthread.php\n",
         [cp("s", "/forum/showthread.php")]),
        ("sid-index", "User-agent: Yandex\nDisallow:\nClean-param: sid /index.php\n",
         [cp("sid", "/index.php")]),
        ("several-params-wildcard", "User-agent: Yandex\nDisallow:\nClean-param: s&ref /forum*/showthread.php\n",
         [cp("s&ref", "/forum*/showthread.php")]),
        ("one-param-two-scripts", "User-agent: Yandex\nDisallow:\n"
         "Clean-param: s /forum/index.php\nClean-param: s /forum/showthread.php\n",
         [cp("s", "/forum/index.php"), cp("s", "/forum/showthread.php")]),
        ("no-path", "Clean-param: utm_source&utm_medium&utm_campaign\n",
         [cp("utm_source&utm_medium&utm_campaign")]),
        ("regex-prefix", "Clean-Param: sid&sort /forum/*.php\n", [cp("sid&sort", "/forum/*.php")]),
    ],
    "syntax": [
        ("anywhere-in-the-file", "Clean-param: a\nUser-agent: Googlebot\nDisallow: /x\n"
         "Clean-param: b /p\nUser-agent: *\nClean-param: c\n", [cp("a"), cp("b", "/p"), cp("c")]),
        ("name-case-insensitive", "CLEAN-PARAM: a\nclean-param: b\ncLeAn-PaRaM: c\n",
         [cp("a"), cp("b"), cp("c")]),
        ("params-case-sensitive", "Clean-param: SID&sid\n", [cp("SID&sid")]),
        ("comment-stripped", "Clean-param: ref /a # tracking\nClean-param: x#y /b\n",
         [cp("ref", "/a"), cp("x")]),
        ("blanks", "  Clean-param :\tref   /a  \n", [cp("ref", "/a")]),
        ("crlf-and-cr", "Clean-param: a\r\nClean-param: b\rClean-param: c", [cp("a"), cp("b"), cp("c")]),
        ("empty-names-dropped", "Clean-param: &a&&b& /x\n", [cp("a&b", "/x")]),
        ("duplicates-once", "Clean-param: a /x\nClean-param: a /x\n", [cp("a", "/x")]),
        ("star-prefix", "Clean-param: a *\n", [cp("a", "*")]),
        ("utf8-bom", "\ufeffClean-param: a\n", [cp("a")]),
        ("utf8-bom-read-as-latin-1", "\xef\xbb\xbfClean-param: a\n", [cp("a")]),
        ("latin-1-bytes-in-name", "Clean-param: caf\xe9 /x\n", [cp("caf\xe9", "/x")]),
        ("utf-8-name-read-as-latin-1", "Clean-param: \xc3\xa0b&c\xc2\x85 /x\n", [cp("\xc3\xa0b&c\xc2\x85", "/x")]),
        ("form-feed-and-vertical-tab", "\fClean-param: a\t/x\v\n", [cp("a", "/x")]),
    ],
    "malformed": [
        ("no-params", "Clean-param:\nClean-param:   \nClean-param: & /x\n", []),
        ("three-fields", "Clean-param: a /x /y\n", []),
        ("path-not-a-path", "Clean-param: a x/y\n", []),
        ("name-with-equals", "Clean-param: a=1 /x\n", []),
        ("name-with-question-mark", "Clean-param: ?a /x\n", []),
        ("other-directive", "Clean-params: a\nCleanparam: a\nClean param: a\nX-Clean-param: a\n", []),
        ("no-colon", "Clean-param a /x\n", []),
        ("commented-out", "# Clean-param: a\n", []),
        ("binary", "\x00\xff\xfe<html>\x89PNG\r\n", []),
    ],
    "limit": [
        ("500-kept", "Clean-param: " + "p" * (MAX_CLEAN_PARAM_RULE - 13) + "\n",
         [cp("p" * (MAX_CLEAN_PARAM_RULE - 13))]),
        ("501-ignored", "Clean-param: " + "p" * (MAX_CLEAN_PARAM_RULE - 12) + "\nClean-param: b\n",
         [cp("b")]),
        ("comment-not-counted", "Clean-param: a /x #" + "c" * 600 + "\n", [cp("a", "/x")]),
    ],
}


@pytest.mark.parametrize(("robots", "expected"), [
    pytest.param(robots, expected, id=f"{source}/{name}")
    for source, rows in CLEAN_PARAM.items() for name, robots, expected in rows])
def test_clean_param(robots: str, expected: list[CleanParam]) -> None:
    assert parse_clean_param(robots) == expected


# (prefix, path, in scope)
MATCHES = [
    ("/", "/anything", True),
    ("/", "/", True),
    ("", "/x", True),
    ("/forum/showthread.php", "/forum/showthread.php", True),
    ("/forum/showthread.php", "/forum/showthread.php5", True),  # a prefix (* implied at the end)
    ("/forum/showthread.php", "/forum/index.php", False),
    ("/forum/showthread.php", "/Forum/showthread.php", False),  # paths are case-sensitive
    ("/forum*/showthread.php", "/forum_old/showthread.php", True),
    ("/forum*/showthread.php", "/forum/showthread.php", True),
    ("/forum*/showthread.php", "/forums/x/showthread.php", True),
    ("/forum*/showthread.php", "/forum_old/index.php", False),
    ("/forum*/showthread.php", "/other/forum/showthread.php", False),  # anchored at the start
    ("/forum/*.php", "/forum/a.php", True),
    ("/forum/*.php", "/forum/a.html", False),
    ("*", "/x", True),
    ("*/print", "/a/b/print", True),
    ("/a.b", "/aXb", False),  # "." is a literal dot
    ("/a$", "/a", False),  # "$" is literal: not in Yandex's allowed set, no end anchor
    ("/a$", "/a$b", True),
]


@pytest.mark.parametrize(("prefix", "path", "expected"), MATCHES)
def test_clean_param_matches(prefix: str, path: str, expected: bool) -> None:
    assert CleanParam(frozenset({"s"}), prefix).matches(path) is expected


def test_clean_param_rule_is_frozen_and_hashable() -> None:
    rule = parse_clean_param("Clean-param: s&ref /forum\n")[0]
    assert rule == cp("ref&s", "/forum") and hash(rule) == hash(cp("s&ref", "/forum"))
    with pytest.raises(AttributeError):
        rule.prefix = "/"  # type: ignore[misc]


# --------------------------------------------------------------------------- rel=canonical in HTML

HEAD = "<!DOCTYPE html><html><head><meta charset=utf-8><title>T</title>"

# (id, document, the href of the first canonical link in its head)
CANONICAL_HTML: dict[str, list[tuple[str, str, str | None]]] = {
    "RFC 6596 section 3": [
        ("in-head", HEAD + '<link rel="canonical" href="https://a.test/x"></head><body>b</body>',
         "https://a.test/x"),
        ("relative", HEAD + '<link rel="canonical" href="/x?b=1"></head>', "/x?b=1"),
        ("none", HEAD + '<link rel="stylesheet" href="/s.css"></head><body>', None),
        ("first-of-several", HEAD + '<link rel=canonical href=/a><link rel=canonical href=/b>', "/a"),
    ],
    "HTML 4.2.4 rel tokens": [
        ("uppercase", HEAD + '<LINK REL="CANONICAL" HREF="/x">', "/x"),
        ("mixed-case-token", HEAD + '<link rel="Canonical" href="/x">', "/x"),
        ("token-list", HEAD + '<link rel="alternate canonical" href="/x">', "/x"),
        ("token-list-tabs", HEAD + '<link rel="\tfoo\ncanonical  bar " href="/x">', "/x"),
        ("not-a-substring", HEAD + '<link rel="canonicalish" href="/x"><link rel="non-canonical" href="/y">', None),
        ("rel-from-reference", HEAD + '<link rel="&#99;anonical" href="/x">', "/x"),
        ("no-rel", HEAD + '<link href="/x" title=canonical>', None),
    ],
    "HTML 13.1.2.3 attribute values": [
        ("single-quoted", HEAD + "<link rel='canonical' href='/x y'>", "/x y"),
        ("unquoted", HEAD + "<link rel=canonical href=/x?a=1>", "/x?a=1"),
        ("entity-in-href", HEAD + '<link rel="canonical" href="/x?a=1&amp;b=2&#x26;c=3">', "/x?a=1&b=2&c=3"),
        ("named-entity-no-semicolon", HEAD + '<link rel="canonical" href="/x?a=1&amp;copy=2">', "/x?a=1&copy=2"),
        ("href-blanks-stripped", HEAD + '<link rel="canonical" href="  /x \n">', "/x"),
        ("first-of-repeated-attributes", HEAD + '<link rel=canonical href=/a href=/b>', "/a"),
        ("first-rel-counts", HEAD + '<link rel=stylesheet rel=canonical href=/a>', None),
        ("empty-href-skipped", HEAD + '<link rel=canonical href=""><link rel=canonical href=/b>', "/b"),
        ("missing-href-skipped", HEAD + '<link rel=canonical><link rel=canonical href=/b>', "/b"),
        ("xhtml-self-closing", HEAD + '<link rel="canonical" href="/x" />', "/x"),
        ("attribute-order", HEAD + '<link href="/x" hreflang=en rel="canonical">', "/x"),
    ],
    "HTML 13.2.6 tree construction: the head ends": [
        ("in-body", HEAD + '</head><body><link rel="canonical" href="/x"></body>', None),
        ("after-body-start-tag", "<html><body><p>x</p><link rel=canonical href=/x>", None),
        ("implicit-body-div", HEAD + '<div>ad</div><link rel="canonical" href="/x">', None),
        ("implicit-body-text", HEAD + 'stray text<link rel="canonical" href="/x">', None),
        ("implicit-body-img", HEAD + '<img src=/p.gif><link rel="canonical" href="/x">', None),
        ("after-head-before-body", HEAD + '</head>\n<link rel="canonical" href="/x"><body>', "/x"),
        ("no-head-tags", '<link rel="canonical" href="/x"><p>text', "/x"),
        ("before-html", '<!DOCTYPE html>\n<link rel="canonical" href="/x"><html>', "/x"),
        ("body-in-comment", HEAD + '<!-- <body> --><link rel="canonical" href="/x">', "/x"),
        ("body-in-script", HEAD + '<script>document.write("<body>")</script><link rel=canonical href=/x>', "/x"),
        ("whitespace-is-no-body", HEAD + '\n \t\r\n<link rel=canonical href=/x>', "/x"),
        ("meta-and-base-stay", HEAD + '<base href=/b/><meta name=x content=y><link rel=canonical href=/x>', "/x"),
    ],
    "ignored containers": [
        ("in-comment", HEAD + '<!-- <link rel="canonical" href="/x"> --></head>', None),
        ("in-comment-then-real", HEAD + '<!--<link rel=canonical href=/a>--><link rel=canonical href=/b>', "/b"),
        ("in-script", HEAD + '<script>var s = \'<link rel="canonical" href="/x">\';</script></head>', None),
        ("in-style", HEAD + '<style>/* <link rel="canonical" href="/x"> */</style></head>', None),
        ("in-noscript", HEAD + '<noscript><link rel="canonical" href="/x"></noscript></head>', None),
        ("in-template", HEAD + '<template><link rel="canonical" href="/x"></template></head>', None),
        ("in-nested-template", HEAD + '<template><template></template><link rel=canonical href=/x></template>', None),
        ("in-title", HEAD[:-10] + '<title>a <link rel=canonical href=/x> b</title></head>', None),
        ("after-noscript", HEAD + '<noscript><img src=/px></noscript><link rel=canonical href=/x>', "/x"),
        ("noscript-text-not-body", HEAD + '<noscript>Enable JS</noscript><link rel=canonical href=/x>', "/x"),
    ],
    "broken HTML": [
        ("unclosed-head", '<html><head><link rel=canonical href=/x', None),  # an unfinished tag
        ("unclosed-comment", HEAD + '<!-- <link rel=canonical href=/x>', None),
        ("unclosed-script", HEAD + '<script><link rel=canonical href=/x>', None),
        ("garbage-before", '\x00\x01<<>><html><head><link rel=canonical href=/x>', None),
        ("bogus-markup-decl", HEAD + '<![if x]><link rel=canonical href=/x>', "/x"),
        ("empty", "", None),
    ],
}


@pytest.mark.parametrize(("document", "expected"), [
    pytest.param(document, expected, id=f"{source}/{name}")
    for source, rows in CANONICAL_HTML.items() for name, document, expected in rows])
def test_canonical_from_html(document: str, expected: str | None) -> None:
    assert canonical_from_html(document) == expected


def test_canonical_links_from_html_lists_conflicting_ones() -> None:
    document = HEAD + "<link rel=canonical href=/a><link rel=canonical href=/b></head><body>"
    assert canonical_links_from_html(document) == ["/a", "/b"]


def test_canonical_from_html_reads_64_kib_only() -> None:
    filler = "<meta name=x content=y>" * (HTML_SCAN_LIMIT // 23 + 1)
    assert canonical_from_html(HEAD + filler + "<link rel=canonical href=/x>") is None
    kept = filler[:(HTML_SCAN_LIMIT - 200) // 23 * 23]  # whole tags, the link within 64 KiB
    assert canonical_from_html(HEAD + kept + "<link rel=canonical href=/x>") == "/x"


# --------------------------------------------------------------------------- Link headers

# (id, Link header values, the first canonical target)
CANONICAL_LINK: dict[str, list[tuple[str, list[str], str | None]]] = {
    "RFC 6596 section 3": [
        ("example", ['<http://www.example.com/page.php?item=purse>; rel="canonical"'],
         "http://www.example.com/page.php?item=purse"),
    ],
    "RFC 8288 section 3": [
        ("unquoted-rel", ["</x>; rel=canonical"], "/x"),
        ("uppercase-rel-and-name", ["</x>; REL=CANONICAL"], "/x"),
        ("rel-list", ['</x>; rel="alternate canonical"'], "/x"),
        ("params-any-order", ['</x>; title="T"; type="text/html"; rel="canonical"; hreflang=en'], "/x"),
        ("blanks", ['  </x>  ;  rel  =  "canonical"  '], "/x"),
        ("several-in-one-value", ['</a>; rel="next", </b>; rel="canonical", </c>; rel=canonical'], "/b"),
        ("several-values", ['</a>; rel=next', '</b>; rel=prev, </c>; rel="canonical"'], "/c"),
        ("comma-in-quoted-title", ['</a>; title="a, </b>; rel=canonical"; rel=next, </c>; rel=canonical'], "/c"),
        ("comma-in-uri", ['</a,b>; rel=canonical'], "/a,b"),
        ("semicolon-in-uri", ['</a;b>; rel=canonical'], "/a;b"),
        ("escaped-quote", [r'</a>; title="x\"; rel=canonical"; rel=next, </b>; rel=canonical'], "/b"),
        ("first-rel-only", ['</a>; rel=next; rel=canonical, </b>; rel=canonical'], "/b"),  # 3.3
        ("rel-star-is-not-rel", ["</a>; rel*=UTF-8''canonical, </b>; rel=canonical"], "/b"),
        ("anchor-kept-raw", ['<https://a.test/x>; rel=canonical; anchor="#frag"'], "https://a.test/x"),
        ("no-canonical", ['</a>; rel=next, </b>; rel="prev"'], None),
        ("not-a-substring", ['</a>; rel=canonicalx, </b>; rel="non-canonical"'], None),
        ("param-without-value", ['</a>; crossorigin; rel=canonical'], "/a"),
    ],
    "malformed": [
        ("no-angle", ['/x; rel=canonical'], None),
        ("unclosed-angle", ['</x; rel=canonical'], None),
        ("garbage-stops-the-value", ['</a>; rel=next, garbage, </b>; rel=canonical'], None),
        ("garbage-value-then-good-value", ['garbage', '</b>; rel=canonical'], "/b"),
        ("unterminated-quote", ['</a>; rel="canonical'], "/a"),
        ("empty-target", ['<>; rel=canonical, </b>; rel=canonical'], "/b"),
        ("empty", [], None),
        ("empty-string", [""], None),
        ("bytes-as-latin-1", [b'</x\xe9>; rel=canonical'], "/x\xe9"),  # type: ignore[list-item]
        ("not-text", [None, 3, '</b>; rel=canonical'], "/b"),  # type: ignore[list-item]
    ],
}


@pytest.mark.parametrize(("values", "expected"), [
    pytest.param(values, expected, id=f"{source}/{name}")
    for source, rows in CANONICAL_LINK.items() for name, values, expected in rows])
def test_canonical_from_link_headers(values: list[str], expected: str | None) -> None:
    assert canonical_from_link_headers(values) == expected
    assert canonical_from_link_headers(iter(values)) == expected


def test_one_value_given_bare_is_one_value() -> None:
    assert canonical_from_link_headers("</x>; rel=canonical") == "/x"  # not its characters


def test_hostile_markup_costs_linear_time() -> None:
    """A tag opened and never closed, repeated, is read once (not once per "<": a
    quadratic regex took minutes on 1 MiB of ``<a <a <a``)."""
    for piece in ("<a ", "<script ", "<img src=", "<!--", "<link rel=canonical ", "&#", "2024-05-01T"):
        body = piece * (256 * 1024 // len(piece))
        start = time.perf_counter()
        fingerprint(body)
        fingerprint("<p>" + body)
        canonical_from_html("<html><head><meta name=canonical>" + body)
        assert time.perf_counter() - start < 5, piece


def test_canonical_from_link_headers_survives_a_failing_iterable() -> None:
    def values() -> Iterator[str]:
        yield "</a>; rel=next"
        raise OSError("connection reset")

    assert canonical_from_link_headers(values()) is None


# --------------------------------------------------------------------------- www. hosts

@pytest.mark.parametrize(("a", "b", "expected"), [
    ("www.example.com", "example.com", True),
    ("example.com", "www.example.com", True),
    ("WWW.Example.COM", "example.com", True),
    ("www.example.com.", "example.com.", True),
    ("example.com", "example.com", False),  # equal: no difference
    ("www.example.com", "www.example.com", False),
    ("www2.example.com", "example.com", False),
    ("wwwexample.com", "example.com", False),
    ("www.www.example.com", "example.com", False),  # two labels
    ("www.www.example.com", "www.example.com", True),
    ("m.example.com", "example.com", False),
    ("www.example.com", "example.org", False),
    ("www.com", "com", False),  # a bare single label is not a site
    ("www.", "", False),
    ("www.localhost", "localhost", False),
    ("", "", False),
])
def test_host_prefixed_www(a: str, b: str, expected: bool) -> None:
    assert host_prefixed_www(a, b) is expected
    assert host_prefixed_www(b, a) is expected


# --------------------------------------------------------------------------- properties

@pytest.mark.slow  # 5 s at the CI profile's example count
@given(st.text())
def test_parsers_never_raise_on_text(text: str) -> None:
    for rule in parse_clean_param(text):
        assert rule.params and all(rule.params)
        rule.matches(text)
    assert isinstance(canonical_from_html(text), str | None)
    assert isinstance(canonical_from_link_headers([text, text]), str | None)
    assert isinstance(fingerprint(text), Fingerprint)
    host_prefixed_www(text, text[4:])


_MARKUP = st.sampled_from(["<", ">", "</", "<!--", "-->", "<script>", "</script>", "<link ", "rel=",
                           "canonical", "href=", '"', "'", "&amp;", "&#", "<head>", "<body>",
                           "<noscript>", "Clean-param:", "&", " /", "#", "\n", "<", ";", ",", "=",
                           "rel*=", "\\", "<![", "<?", "<template>", "12:30", "2024-05-01"])


@given(st.lists(st.one_of(_MARKUP, st.text(max_size=5)), max_size=40))
def test_parsers_never_raise_on_markup_soup(pieces: list[str]) -> None:
    text = "".join(pieces)
    parse_clean_param(text)
    canonical_from_html(text)
    canonical_from_html("<html><head>" + text)
    canonical_from_link_headers(text.split(","))
    fingerprint(text)
    fingerprint("<p>" + text)


@given(st.binary(max_size=300))
def test_parsers_never_raise_on_latin_1_bytes(data: bytes) -> None:
    text = data.decode("latin-1")
    parse_clean_param(text)
    canonical_from_html(text)
    canonical_from_link_headers([text])
    fingerprint(text)


_WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFXYZéß", min_size=1, max_size=12)
_NUMBER = st.integers(min_value=0, max_value=999_999_999).map(str)
_PRICE = st.builds(lambda a, b: f"{a}.{b:02d}", st.integers(0, 99_999), st.integers(0, 99))
_CONTENT = st.lists(st.one_of(_WORD, _NUMBER, _PRICE), min_size=1, max_size=30)
_DATETIME = st.datetimes(min_value=datetime(2001, 9, 10), max_value=datetime(2099, 12, 31),
                         timezones=st.just(timezone.utc))


@given(_CONTENT, st.data(), st.booleans())
def test_digest_changes_with_a_short_number(words: list[str], data: st.DataObject, markup: bool) -> None:
    i = data.draw(st.integers(0, len(words)))
    n, m = data.draw(st.lists(_NUMBER, min_size=2, max_size=2, unique=True))
    a = " ".join(words[:i] + [n] + words[i:])
    b = " ".join(words[:i] + [m] + words[i:])
    if markup:
        a, b = f"<article><p>{a}</p></article>", f"<article><p>{b}</p></article>"
    assert not Volatility().same(fingerprint(a), fingerprint(b))


# --------------------------------------------------------------------------- the messy site

@pytest.mark.parametrize("mode", ["messy", "wrong"])
def test_fingerprints_tell_the_messy_sites_resources_apart(mode: str) -> None:
    """On the issue's messy site (tests/support/messy_site.py), every URL that serves a
    page, rendered with fresh noise (timestamp, CSRF token, cache-buster, random
    session ids in links, AMP markup), the site calibrated on two renders of each
    shop's listing and first post, plain and AMP (at once and a second later): the aliases of a resource are the same, two
    resources never are."""
    from tests.support.messy_site import MessySite, Page, answer, render

    def fetch(url: str) -> Fingerprint:
        page = answer(mode, url)
        assert isinstance(page, Page)
        return fingerprint(render(page).decode("utf-8"))

    urls = {url: r for url, r in MessySite(mode).reachable_urls().items() if r is not None}
    volatility = Volatility()
    for url in ("http://shop.messy.test/shop/list?page=1", "http://blog.messy.test/post/1/",
                "http://blog.messy.test/post/1/?amp"):  # (the AMP template: its own noise)
        if url in urls:
            first = fetch(url)
            volatility.learn(first, fetch(url))
            time.sleep(1.05)  # the late calibration: a clock shown to the second moves
            volatility.learn(first, fetch(url))
    pages: dict[str, list[Fingerprint]] = {}
    for url, resource in urls.items():
        pages.setdefault(resource, []).append(fetch(url))
    assert len(pages) > 100
    split = [r for r, fps in pages.items() if not all(volatility.same(fps[0], f) for f in fps)]
    assert split == []  # no resource split
    firsts = list(pages.items())
    merged = [(a, b) for i, (a, fa) in enumerate(firsts) for b, fb in firsts[i + 1:]
              if volatility.same(fa[0], fb[0])]
    assert merged == []  # no two merged
