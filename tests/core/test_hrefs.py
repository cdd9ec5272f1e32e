"""``preprocess_href``: the URL Standard's preprocessing of an href, and nothing else.

Vectors keyed by the step of https://url.spec.whatwg.org/#concept-basic-url-parser
they follow; Hypothesis properties; and the web-platform-tests vectors
(``tests/data/whatwg_urltestdata.jsonl.gz``) whose input holds a tab, a newline, a
backslash or a leading/trailing C0 control or space, for a special scheme: after
preprocessing, RFC 3986 resolution and our normalization give the host, port,
path, query and fragment a browser gives (compared decoded), but for the listed
deviations.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote, urlsplit

import pytest
from hypothesis import given
from hypothesis import strategies as st

import iri_scrapy as iri
from iri_scrapy import Level
from iri_scrapy.core.hrefs import (
    SPECIAL_SCHEMES,
    _slash_form,
    needs_preprocessing,
    preprocess_href,
    url_scheme,
)
from iri_scrapy.core.resolve import resolve
from tests.support.vectors import load

# (id, href, base scheme, expected)
VECTORS: list[tuple[str, str, str | None, str]] = [
    # step 1: remove any leading and trailing C0 control or space
    ("1-leading-space", " /x.html", "http", "/x.html"),
    ("1-trailing-space", "/x.html  ", "http", "/x.html"),
    ("1-both-c0", "\x00\x1b\x04 http://example.com/\x1f \r ", None, "http://example.com/"),
    ("1-form-feed-ends", "\x0c/x\x0c", "https", "/x"),
    ("1-only-spaces", "  \t", "http", ""),
    ("1-inner-space-kept", "/a b.html", "http", "/a b.html"),
    ("1-inner-form-feed-kept", "/a\x0cb", "http", "/a\x0cb"),
    ("1-inner-nul-kept", "/a\x00b", "http", "/a\x00b"),
    ("1-nbsp-not-c0", "\u00a0/x\u00a0", "http", "\u00a0/x\u00a0"),
    # step 2: remove all ASCII tab or newline
    ("2-lf-in-path", "/pa\nth.html", "http", "/path.html"),
    ("2-cr-lf", "/pa\r\nth.html", "http", "/path.html"),
    ("2-tab", "/pa\tth.html", "http", "/path.html"),
    ("2-in-host", "http://ho\tst/", None, "http://host/"),
    ("2-in-scheme", "h\tt\nt\rp://h/", None, "http://h/"),
    ("2-in-query", "/p?q\tu\ne\rry", "http", "/p?query"),
    ("2-in-fragment", "/p#f\tr\na\rg", "http", "/p#frag"),
    ("2-non-special", "mailto:a\n@b.test", None, "mailto:a@b.test"),
    # special scheme, https://url.spec.whatwg.org/#special-scheme: "\" is "/"
    ("special-relative-dotdot", "..\\index.html", "http", "../index.html"),
    ("special-absolute-path", "\\dir\\x.html", "https", "/dir/x.html"),
    ("special-network-path", "\\\\x\\hello", "http", "//x/hello"),
    ("special-authority-ends", "http://h\\@evil.test/", None, "http://h/@evil.test/"),
    ("special-userinfo", "http:\\\\a\\b:c\\d@foo.com\\", "http", "http://a/b:c/d@foo.com/"),
    ("special-own-scheme-wins", "http:\\\\foo.com\\", "mailto", "http://foo.com/"),
    ("special-uppercase-scheme", "HTTP:\\\\foo.com\\", None, "HTTP://foo.com/"),
    ("special-ws", "ws://a@b\\c", None, "ws://a@b/c"),
    ("special-wss", "wss://h\\p", None, "wss://h/p"),
    ("special-ftp", "ftp://h\\p", None, "ftp://h/p"),
    ("special-file", "\\\\server\\file", "file", "//server/file"),
    ("special-base-uppercase", "\\x", "HTTPS", "/x"),
    ("special-tab-then-backslash", "\t..\\a\n\\b.html ", "http", "../a/b.html"),
    # query state and fragment state: "\" is a code point like any other
    ("query-keeps", "/p\\q?a\\b", "http", "/p/q?a\\b"),
    ("fragment-keeps", "/p\\q#a\\b", "http", "/p/q#a\\b"),
    ("fragment-first", "#\\", "http", "#\\"),
    ("fragment-before-query", "/a\\b#c?d\\e", "http", "/a/b#c?d\\e"),
    ("authority-ends-at-query", "http://h?x\\@evil.test/", None, "http://h?x\\@evil.test/"),
    # not special: "\" kept
    ("non-special-scheme", "javascript:a('\\x')", "http", "javascript:a('\\x')"),
    ("non-special-base", "\\a", "foo", "\\a"),
    ("no-base", "\\a\\b", None, "\\a\\b"),
    ("drive-letter-is-a-scheme", "c:\\foo", "http", "c:\\foo"),
    ("non-special-absolute", "sc://a\\b/", "http", "sc://a\\b/"),
    # special scheme with an authority: the slashes a browser skips, the base's own
    # scheme without "//" read as relative
    ("slashes-other-scheme", "https:host/x", "http", "https://host/x"),
    ("slashes-same-scheme-relative", "http:page2.html", "http", "page2.html"),
    ("slashes-same-scheme-absolute-path", "http:/x", "http", "/x"),
    ("slashes-same-scheme-colon", "http:a:b", "http", "./a:b"),
    ("slashes-many", "http:////host/", "http", "http://host/"),
    ("slashes-three-relative", "///host/path", "http", "//host/path"),
    ("slashes-no-base", "http:host/x", None, "http://host/x"),
    ("slashes-file-untouched", "///x", "file", "///x"),
    ("slashes-mailto-base", "///x", "mailto", "///x"),
    # nothing to do: the identity
    ("clean-absolute", "http://example.test/a?b#c", "http", "http://example.test/a?b#c"),
    ("clean-escapes", "/a%5Cb%0A%09", "http", "/a%5Cb%0A%09"),
    ("clean-empty", "", "http", ""),
    ("clean-unicode", "/straße?q=привет", "http", "/straße?q=привет"),
]


@pytest.mark.parametrize(
    ("href", "base_scheme", "expected"), [pytest.param(*v[1:], id=v[0]) for v in VECTORS]
)
def test_vectors(href: str, base_scheme: str | None, expected: str) -> None:
    assert preprocess_href(href, base_scheme) == expected
    assert preprocess_href(expected, base_scheme) == expected  # idempotent
    if href != expected:
        assert needs_preprocessing(href)  # the callers' fast check never skips a change


def test_url_scheme() -> None:
    assert url_scheme("HTTP://x/") == "http"
    assert url_scheme("a+b-c.d:x") == "a+b-c.d"
    assert url_scheme("/a:b") is None
    assert url_scheme("1a:b") is None
    assert url_scheme("") is None
    assert {"ftp", "file", "http", "https", "ws", "wss"} == SPECIAL_SCHEMES


def test_normalize_stays_strict_rfc() -> None:
    """The library's normalize is RFC 3987: "\\" and a tab are characters, encoded."""
    assert iri.normalize("http://h\\@evil.test/") == "http://h%5C@evil.test/"
    assert iri.normalize("http://h.test/a\\b") == "http://h.test/a%5Cb"
    assert iri.normalize(preprocess_href("http://h\\@evil.test/", None)) == (
        "http://h/@evil.test/"
    )


# ------------------------------------------------------------------ properties

_ALPHABET = st.sampled_from(
    list("ab/\\?#:@.% \t\n\r\x00\x0c\x1f") + ["http:", "HTTP:", "file:", "mailto:", "é"]
)
_HREFS = st.lists(_ALPHABET, max_size=24).map("".join) | st.text(max_size=40)
_BASES = st.sampled_from([None, "http", "https", "file", "ws", "ftp", "mailto", "foo", "HTTP"])


@given(_HREFS, _BASES)
def test_idempotent_and_no_tab_or_newline(href: str, base: str | None) -> None:
    out = preprocess_href(href, base)
    assert preprocess_href(out, base) == out
    assert not any(c in out for c in "\t\n\r")
    assert out == out.strip("".join(chr(c) for c in range(0x21)))
    assert len(out) <= len(href) + 2  # at most the "//" a browser reads after "https:"


def _plain(href: str) -> bool:
    """No slash form (``///``, a special scheme without ``//host``): the properties
    below are about the other characters; the slashes have their own."""
    return not _slash_form(href.replace("\\", "/"))


@given(_HREFS, _BASES)
def test_identity_without_those_characters(href: str, base: str | None) -> None:
    clean = href.replace("\\", "").translate({9: None, 10: None, 13: None})
    clean = clean.strip("".join(chr(c) for c in range(0x21)))
    if _plain(clean):
        assert preprocess_href(clean, base) == clean
        assert not needs_preprocessing(clean)


@given(_HREFS, _BASES)
def test_only_those_characters_change(href: str, base: str | None) -> None:
    """The output is the input, trimmed, tabs/newlines removed, some "\\" made "/"."""
    out = preprocess_href(href, base)
    inner = href.strip("".join(chr(c) for c in range(0x21))).translate(
        {9: None, 10: None, 13: None}
    )
    if not _plain(inner):
        return
    assert len(out) == len(inner)
    assert all(a == b or (a == "\\" and b == "/") for a, b in zip(inner, out, strict=True))


_NET = st.sampled_from(["ftp", "http", "https", "ws", "wss"])


@given(_NET, st.sampled_from([None, "http", "https", "ftp", "mailto"]),
       st.integers(0, 5), st.sampled_from(["h", "h.test/p", "h:81/a?q#f", "x/y:z"]))
def test_slashes_after_a_special_scheme(scheme: str, base: str | None, slashes: int,
                                        rest: str) -> None:
    """The special authority ignore slashes state: any number of slashes before the
    host is "//" (https://url.spec.whatwg.org/#special-authority-ignore-slashes-state);
    the base's own scheme without "//" is relative (special relative or authority
    state, RFC 3986 5.2.2's non-strict parser)."""
    href = f"{scheme}:{'/' * slashes}{rest}"
    out = preprocess_href(href, base)
    if scheme == base and slashes < 2:
        relative = "/" * slashes + rest
        assert out in (relative, "./" + relative)
        assert resolve("http://b.test/d/x", out) == resolve("http://b.test/d/x",
                                                            "./" + relative if not slashes
                                                            else relative)
    else:
        assert out == f"{scheme}://{rest}"
    assert preprocess_href("/" * (slashes + 2) + rest, "https") == "//" + rest


# ------------------------------------------------ web-platform-tests urltestdata

_SPECIAL_NET = {"http", "https", "ws", "wss", "ftp"}
# Browsers, and now preprocess_href, skip any number of slashes after a special
# scheme ("special authority ignore slashes state"): "/////////test" on an http page
# is host "test" (RFC 3986 alone reads an empty authority there).  No deviation left.
DEVIATIONS: set[tuple[str, str]] = set()


def _wpt() -> list[Any]:
    out = []
    for i, r in enumerate(load("whatwg_urltestdata")):
        expected = r.get("expected")
        if not needs_preprocessing(r["input"]) or not expected:
            continue
        if url_scheme(expected) not in _SPECIAL_NET:
            continue  # file: drive letters and non-special URLs: not the crawl's
        out.append(pytest.param(r, id=f"wpt-{i}"))
    return out


WPT = _wpt()


def _parts(url: str) -> tuple[Any, ...]:
    s = urlsplit(url)
    return (s.scheme, s.hostname, s.port, unquote(s.path), unquote(s.query),
            unquote(s.fragment))


def test_wpt_selection_is_not_empty() -> None:
    assert len(WPT) >= 25
    hrefs = {p.values[0]["input"] for p in WPT}
    assert "\\\\x\\hello" in hrefs and "http://example\t.\norg" in hrefs


@pytest.mark.parametrize("record", WPT)
def test_wpt_vectors_agree_with_browsers(record: dict[str, Any]) -> None:
    href, base = record["input"], record.get("base")
    pre = preprocess_href(href, url_scheme(base) if base else None)
    if (href, base) in DEVIATIONS:
        with pytest.raises(iri.IRIError):
            iri.normalize(resolve(str(base), pre), Level.SCHEME, form="uri")
        return
    got = iri.normalize(resolve(base, pre) if base else pre, Level.SCHEME, form="uri")
    assert _parts(got) == _parts(record["expected"]), (href, base, pre, got)
