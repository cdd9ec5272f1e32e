"""Adversarial vectors of the core, keyed by the section they follow.

Every vector is run through every code path of :func:`iri_scrapy.normalize`: the
fast regular-expression path (``fast_path``), the fused one-pass pipeline
(``fused_path``), the climb of the rungs (``climb_path``), the per-rung climb of ``dedupe`` and
``explain``, so that a fix in one path cannot leave another one behind.
"""

from __future__ import annotations

from typing import Any

import pytest

import iri_scrapy as iri
from iri_scrapy import Level
from iri_scrapy.core import ladder
from iri_scrapy.core.ladder import (
    NormalizeOptions,
    canonical_and_rungs,
    character_normalize,
    climb_path,
    fast_path,
    fused_path,
)
from iri_scrapy.core.mapping import uri_to_iri
from iri_scrapy.core.schemes import uses_dns
from tests.support.paths import via

FORMS = ("uri", "iri")

def cases(rows: list[tuple[Any, ...]]) -> list[Any]:
    return [pytest.param(*row[1:], id=row[0]) for row in rows]


def every_path(
    text: str, level: Level, form: str = "uri", keep_fragment: bool = True, nfc: bool = False
) -> str:
    """``normalize(text, ...)``, checked against every other code path ("error" if none)."""
    def run(fn: Any) -> str:
        try:
            return str(fn())
        except iri.IRIError:
            return "error"

    public = run(lambda: iri.normalize(text, level, form=form, keep_fragment=keep_fragment,  # type: ignore[arg-type]
                                       nfc=nfc))
    options = NormalizeOptions(level, form, keep_fragment, nfc)
    uri_options = NormalizeOptions(level, "uri", keep_fragment, nfc)
    slow = run(lambda: climb_path(text, options))
    assert public == slow, ("normalize vs composed rungs", text, level, form)
    uri = run(lambda: climb_path(text, uri_options))
    if level >= Level.SYNTAX and not nfc:
        fused = run(lambda: fused_path(text, level, keep_fragment))
        if fused != "None":
            assert fused == uri, ("fused vs composed rungs", text, level)
    if level >= Level.SCHEME and not nfc and form == "uri":
        fast = fast_path(text, keep_fragment)
        if fast is not None:
            assert fast == uri, ("fast path vs composed rungs", text)
    if level >= Level.SYNTAX and form == "uri":
        climbed = run(lambda: canonical_and_rungs(text, uri_options)[0])
        assert climbed == uri, ("dedupe climb vs composed rungs", text, level)
    if form == "iri" and uri != "error" and level > Level.SIMPLE:
        scheme = uri[: uri.find(":")] if ":" in uri else None
        assert public == uri_to_iri(uri, unicode_host=level >= Level.SCHEME and uses_dns(scheme))
    return public


def check_canonical(text: str, level: Level, form: str, keep: bool, nfc: bool) -> str:
    """Idempotence of every path, and the IRI form mapping back to the URI form."""
    out = every_path(text, level, form, keep, nfc)
    if out == "error":
        return out
    assert every_path(out, level, form, keep, nfc) == out, ("not idempotent", text, out)
    if form == "iri":
        uri = every_path(text, level, "uri", keep, nfc)
        # RFC 3987 3.2: the IRI maps back to the URI it was made from.
        assert every_path(out, level, "uri", keep, nfc) == uri, ("IRI form splits", text, out)
    return out


# (id naming the section, input, normalize keyword arguments, expected result)
NORMALIZE = [
    # RFC 3986 2.3 / RFC 3987 5.3.2.3: an escape at index 0 of a component has
    # nothing before it; the end of the component is not "before" it.
    ("3986-2.3-escape-at-component-start", "http://h/?%31%4", {}, "http://h/?1%4"),
    ("3986-2.3-escape-at-component-start-iri", "http://h/?%31%4", {"form": "iri"}, "http://h/?1%4"),
    ("3986-2.3-escape-at-path-start", "%31%4", {"level": Level.SYNTAX}, "1%4"),
    ("3986-2.3-escape-at-fragment-start", "http://h/#%41%4", {}, "http://h/#A%4"),
    ("3986-2.3-escape-at-host-start", "foo://%41%4/", {}, "foo://a%4/"),
    ("3986-2.3-escape-at-userinfo-start", "http://%32%3@h/", {}, "http://2%3@h/"),
    ("3986-2.3-stray-percent-kept", "http://h/?%%36%31", {}, "http://h/?%%361"),
    # RFC 3986 4.2: a relative reference whose first segment has a ":" is not a
    # valid relative-path reference; decoding must not turn it into a scheme.
    ("3986-4.2-escape-in-would-be-scheme", "%68ttp://h/./a", {}, "%68ttp://h/./a"),
    ("3986-4.2-escape-in-would-be-scheme-iri", "%68ttp://h/./a", {"form": "iri"}, "%68ttp://h/./a"),
    ("3986-4.2-escape-in-would-be-scheme-syntax", "h%74tp://example.com:80/a", {"level": "syntax"},
     "h%74tp://example.com:80/a"),
    ("3986-4.2-lowercase-escape-uppercased", "h%74%2etp:x", {}, "h%74%2Etp:x"),
    ("3986-4.2-not-a-scheme-decoded", "1%41:x", {}, "1A:x"),
    ("3986-4.2-after-colon-decoded", "%68ttp:%41", {}, "%68ttp:A"),
    ("3986-4.2-slash-before-colon-decoded", "%68ttp/a:b", {}, "http/a:b"),
    ("3986-4.2-nfc-kelvin-would-be-scheme", "%E2%84%AA:", {"nfc": True}, "%E2%84%AA:"),
    ("3986-4.2-nfc-kelvin-would-be-scheme-raw", "\u212a:x\u212a", {"nfc": True}, "%E2%84%AA:xK"),
    ("3986-4.2-nfc-kelvin-not-a-scheme", "1\u212a:", {"nfc": True}, "1K:"),
    # RFC 3987 5.3.2.1 + 5.3.2.2: NFC can produce an uppercase ASCII letter (U+212A
    # KELVIN SIGN is canonically "K"); the host is case-insensitive after it too.
    ("3987-5.3.2.2-kelvin-host", "foo://\u212aa/", {"nfc": True}, "foo://ka/"),
    ("3987-5.3.2.2-kelvin-host-syntax", "http://\u212a/", {"nfc": True, "level": "syntax"}, "http://k/"),
    ("3987-5.3.2.2-kelvin-path-kept", "foo://h/\u212a", {"nfc": True}, "foo://h/K"),
    # RFC 3987 5.3.2.2: NFC never composes a delimiter away ("=" + U+0338 is U+2260).
    ("3987-5.3.2.2-eq-not-composed", "http://h/?a=%CC%B8b", {"nfc": True}, "http://h/?a=%CC%B8b"),
    ("3987-5.3.2.2-lt-not-composed", "http://h/a<\u0338", {"nfc": True}, "http://h/a%3C%CC%B8"),
    ("3987-5.3.2.2-eq-host-not-composed", "foo://a=\u0338/", {"nfc": True}, "foo://a=%CC%B8/"),
    ("3987-5.3.2.2-ne-kept", "http://h/?a%E2%89%A0b", {"nfc": True}, "http://h/?a%E2%89%A0b"),
    # RFC 3987 5.3.1 with 5.1: dropping the fragment must not expose white space
    # that preprocessing would then strip (the space is data of the path).
    ("3987-5.3.1-exposed-space-kept", "http://h/a #f",
     {"level": "simple", "form": "iri", "keep_fragment": False}, "http://h/a%20"),
    ("3987-5.3.1-exposed-space-uri", "http://h/a #f",
     {"level": "simple", "keep_fragment": False}, "http://h/a%20"),
    ("3987-5.3.1-exposed-tab-kept", "http://h/?q=\t\n#f",
     {"level": "simple", "form": "iri", "keep_fragment": False}, "http://h/?q=%09%0A"),
    # RFC 3987 5.3.2.1 (uppercase hex, "US-ASCII only host") with RFC 6068 2 (the
    # domain of a mailto address is case-insensitive): only a US-ASCII domain is
    # lowercased (lowercasing the ASCII letters of "A%CC%81" would not commute
    # with NFC), and escapes keep uppercase hex.
    ("6068-2-mailto-non-ascii-domain-hex-upper", "mailto:a@Bücher.de", {}, "mailto:a@B%C3%BCcher.de"),
    ("6068-2-mailto-non-ascii-domain-iri", "mailto:a@Bücher.de", {"form": "iri"}, "mailto:a@Bücher.de"),
    ("6068-2-mailto-escaped-domain", "mailto:a@B%c3%bccher.DE", {}, "mailto:a@B%C3%BCcher.DE"),
    ("6068-2-mailto-ascii-domain", "mailto:a@B%2c%41.DE", {}, "mailto:a@b%2Ca.de"),
    ("6068-2-mailto-combining-nfc", "mailto:a@A%CC%81", {"nfc": True}, "mailto:a@%C3%81"),
    # A mailto with an authority is not RFC 6068 syntax: no mailto rule applies
    # (all paths agree: the fast path returns it as it is).
    ("6068-2-mailto-with-authority", "mailto://h/a@B.com", {}, "mailto://h/a@B.com"),
    ("6068-2-mailto-with-authority-nfc", "mailto://h/a@B.com", {"nfc": True}, "mailto://h/a@B.com"),
    # RFC 3987 3.2: the IRI form maps back to the URI form; a host whose escapes
    # stay (they decode to a character a URI host cannot hold) gets no ToUnicode
    # (5.3.3 would not apply).  ("%40", "@", was used here: it is now no host on
    # the wire at level SCHEME, see WIRE_HOSTS; '"' is not a forbidden host code point.)
    ("3987-3.2-iri-host-with-escape", "http://%22x.xn--zca/", {"form": "iri"}, "http://%22x.xn--zca/"),
    ("3987-3.2-iri-host-with-escape-utf8", "http://%22x.%C3%9F/", {"form": "iri"}, "http://%22x.ß/"),
    ("3987-3.2-iri-host-idn", "http://xn--zca.de/", {"form": "iri"}, "http://ß.de/"),
]


@pytest.mark.parametrize(("text", "kwargs", "expected"), cases(NORMALIZE))
def test_normalize_vectors(text: str, kwargs: dict[str, Any], expected: str) -> None:
    level = Level.coerce(kwargs.get("level", Level.SCHEME))
    form = kwargs.get("form", "uri")
    keep, nfc = kwargs.get("keep_fragment", True), kwargs.get("nfc", False)
    assert check_canonical(text, level, form, keep, nfc) == expected


@pytest.mark.parametrize(("text", "kwargs", "expected"), cases(NORMALIZE))
def test_normalize_vectors_through_every_path(
    text: str, kwargs: dict[str, Any], expected: str, path: str
) -> None:
    try:
        got = via(path, text, **kwargs)
    except iri.IRIError:
        got = "error"
    assert got == expected


# (id, a, b, keyword arguments, lowest level at which they are equivalent or None)
EQUIVALENT = [
    ("3986-2.3-escape-at-component-start", "http://h/?%61=1&b=%4", "http://h/?a=1&b=%4", {}, Level.SYNTAX),
    ("3986-2.3-escape-at-fragment-start", "http://h/#%61%6", "http://h/#a%6", {}, Level.SYNTAX),
    ("3986-4.2-would-be-scheme", "h%74tp://example.com:80/a", "http://example.com:80/a", {}, None),
    ("3986-4.2-would-be-scheme-nfc", "h%74tp://example.com:80/a", "http://example.com:80/a", {"nfc": True}, None),
    ("3987-5.3.2.2-kelvin-host", "foo://\u212a/", "foo://k/", {"nfc": True}, Level.SYNTAX),
    ("3987-5.3.2.2-kelvin-host-no-nfc", "foo://\u212a/", "foo://k/", {}, None),
    ("3987-5.3.2.2-delimiter-not-composed", "http://h/?a=%CC%B8b", "http://h/?a%E2%89%A0b", {"nfc": True}, None),
    ("3987-5.3.2.2-gt-not-composed", "http://h/>\u0338", "http://h/\u226f", {"nfc": True}, None),
    ("3987-5.3.1-fragment-space", "http://h/a #f", "http://h/a", {"keep_fragment": False}, None),
    ("3987-5.3.1-fragment-space-iri", "http://h/a #f", "http://h/a%20", {"keep_fragment": False}, Level.SIMPLE),
    ("3987-5.3.1-leading-space", " http://h/", "http://h/", {}, Level.SIMPLE),
    ("6068-2-mailto-authority", "mailto://h/a@B.com", "mailto://h/a@b.com", {}, None),
    ("6068-2-mailto-authority-nfc", "mailto://h/a@B.com", "mailto://h/a@b.com", {"nfc": True}, None),
    ("6068-2-mailto-domain", "mailto:a@B.De", "mailto:a@b.de", {}, Level.SCHEME),
    ("6068-2-mailto-non-ascii-domain", "mailto:a@B%C3%BCcher.de", "mailto:a@b%c3%bccher.de", {}, None),
    ("6068-2-mailto-combining", "mailto:a@A%CC%81", "mailto:a@a%CC%81", {"nfc": True}, None),
    ("6068-2-mailto-combining-composed", "mailto:a@A%CC%81", "mailto:a@\u00c1", {"nfc": True}, Level.SYNTAX),
    ("3987-3.2-iri-form-host", "http://%22x.xn--zca/", "http://%22x.%C3%9F/", {}, None),
]


@pytest.mark.parametrize(("a", "b", "kwargs", "lowest"), cases(EQUIVALENT))
def test_equivalent_vectors(a: str, b: str, kwargs: dict[str, Any], lowest: Level | None) -> None:
    for level in Level:
        expected = lowest is not None and level >= lowest
        assert iri.equivalent(a, b, level, **kwargs) is expected, level
        assert iri.explain(a, b, level, **kwargs).equivalent is expected, level
        for form in FORMS:
            for text in (a, b):
                check_canonical(text, level, form, kwargs.get("keep_fragment", True), kwargs.get("nfc", False))


def test_iri_form_never_merges_different_uris() -> None:
    # 3.2: two URI forms that differ must have IRI forms that differ.
    a, b = "http://%22x.xn--zca/", "http://%22x.%C3%9F/"
    assert iri.normalize(a) != iri.normalize(b)
    assert iri.normalize(a, form="iri") != iri.normalize(b, form="iri")


def test_explain_agrees_with_equivalent_at_simple() -> None:
    e = iri.explain(" http://h/", "http://h/", "simple")
    assert e.equivalent and e.rung is iri.Rung.SIMPLE
    assert iri.equivalent(" http://h/", "http://h/", "simple")


# RFC 3987 3.1: ToASCII only "for schemes known to use domain names in ireg-name".
IRI_TO_URI = [
    ("3.1-no-idna-for-unknown-scheme", "foo://é/", {}, "foo://%C3%A9/"),
    ("3.1-no-idna-for-relative", "//é/x", {}, "//%C3%A9/x"),
    ("3.1-idna-for-http", "http://é/", {}, "http://xn--9ca/"),
    ("3.1-idna-off", "http://é/", {"idna": False}, "http://%C3%A9/"),
    ("3.1-escape-in-dns-host", "http://%40x.é/", {}, "http://%40x.%C3%A9/"),
    ("3.1-no-idna-with-escapes", "http://r%C3%A9sum%C3%A9.é/", {}, "http://r%C3%A9sum%C3%A9.%C3%A9/"),
    ("3.1-uppercase-dns-scheme", "HTTP://é/", {}, "HTTP://xn--9ca/"),
]


@pytest.mark.parametrize(("text", "kwargs", "expected"), cases(IRI_TO_URI))
def test_iri_to_uri_vectors(text: str, kwargs: dict[str, Any], expected: str) -> None:
    assert iri.iri_to_uri(text, **kwargs) == expected
    assert iri.iri_to_uri(expected, **kwargs) == expected


# RFC 3987 3.2: "The conversion ... will always result in an IRI that maps back
# to the URI used as an input".
ROUND_TRIP = [
    ("3.2-combining-mark-host", "foo://%CC%81/"),
    ("3.2-escape-in-would-be-scheme", "%68ttp://h/./a"),
    ("3.2-stray-percent", "http://h/?%%361"),
    ("3.2-escape-in-host", "http://%40x.%C3%A9/"),
    ("3.2-relative-authority", "//%C3%A9/"),
]

# uri_to_iri(unicode_host=True): ToUnicode only where iri_to_uri applies ToASCII.
UNICODE_HOST = [
    ("3.2.1-dns-scheme", "http://xn--zca.de/", "http://ß.de/"),
    ("3.2.1-relative", "//xn--zca.de/", "//xn--zca.de/"),
    ("3.2.1-other-scheme", "foo://xn--zca.de/", "foo://xn--zca.de/"),
    ("3.2.1-escape-left", "http://%40x.xn--zca/", "http://%40x.xn--zca/"),
    ("3.2.1-uppercase-a-label", "http://xn--ZCA.de/", "http://ß.de/"),
]


@pytest.mark.parametrize(("uri", "expected"), cases(UNICODE_HOST))
def test_unicode_host_maps_back(uri: str, expected: str) -> None:
    out = iri.uri_to_iri(uri, unicode_host=True)
    assert out == expected
    assert iri.iri_to_uri(out).lower() == uri.lower()


@pytest.mark.parametrize("uri", cases(ROUND_TRIP))
def test_uri_to_iri_maps_back(uri: str) -> None:
    assert iri.iri_to_uri(iri.uri_to_iri(uri)) == uri


VALID = [
    # RFC 5234 2.3: ABNF literals are case-insensitive: IPvFuture's "v" too.
    ("5234-2.3-ipvfuture-upper-v", "http://[V1.x]/"),
    ("3986-3.2.2-ipvfuture", "http://[v1.x]/"),
    # RFC 6874 2: a zone identifier is introduced by "%25".
    ("6874-2-zone-id", "http://[fe80::1%25eth0]/"),
    ("6874-2-zone-id-escaped", "http://[fe80::1%25%65th0]/"),
]

INVALID = [
    ("6874-2-zone-id-bare-percent", "http://[fe80::1%eth0]/", "host", "%", 15),
    ("6874-2-zone-id-empty", "http://[fe80::1%25]/", "host", "%", 15),
    ("6874-2-zone-id-bad-char", "http://[fe80::1%25e!h]/", "host", "!", 19),
    ("6874-2-zone-on-ipv4", "http://[1.2.3.4%25x]/", "host", "%", 15),
]


@pytest.mark.parametrize("text", cases(VALID))
def test_validate_accepts(text: str) -> None:
    iri.validate(text)


@pytest.mark.parametrize(("text", "component", "char", "index"), cases(INVALID))
def test_validate_rejects(text: str, component: str, char: str, index: int) -> None:
    with pytest.raises(iri.IRISyntaxError) as info:
        iri.validate(text)
    err = info.value
    assert (err.component, err.char, err.index) == (component, char, index)
    assert f"U+{ord(char):04X}" in str(err)


def test_character_rung_on_every_noncharacter() -> None:
    # The rung is public: any input, even one holding all of U+FDD0..U+FDEF.
    nonchars = "".join(chr(c) for c in range(0xFDD0, 0xFDF0))
    for tail, expected, decoded in (("%41", "%41", "A"), ("%7C\u0301e\u0301", "%7C%CC%81%C3%A9", "%7C%CC%81%C3%A9")):
        out = character_normalize(iri.parse("http://h/" + nonchars + tail))
        assert out.path.endswith(expected)
        assert character_normalize(out) == out
        out = character_normalize(ladder.percent_normalize(iri.parse("http://h/" + nonchars + tail)))
        assert out.path.endswith(decoded)


# nfc=True never splits what nfc=False merged: normalize(x, nfc=True) is also
# what nfc=True makes of normalize(x) (RFC 3987 5.3.2.2 only adds equivalences).
NFC_AFTER_PLAIN = [
    ("6068-2-mailto-combining", "mailto:a@A%CC%81"),
    ("6068-2-mailto-combining-raw", "mailto:a@A\u0301.De"),
    ("5.3.2.1-host-combining", "foo://A%CC%81/"),
    ("5.3.2.2-kelvin-host", "foo://\u212a/"),
]


@pytest.mark.parametrize("text", cases(NFC_AFTER_PLAIN))
@pytest.mark.parametrize("level", list(Level))
def test_nfc_never_splits_what_plain_merged(text: str, level: Level) -> None:
    plain = iri.normalize(text, level)
    assert iri.normalize(plain, level, nfc=True) == iri.normalize(text, level, nfc=True)


def test_public_rungs_raise_only_iri_errors() -> None:
    # A public rung may get a raw reference (no percent rung before it): a lone
    # surrogate in a DNS host is an IRIError naming it, not a UnicodeEncodeError.
    for rung in (ladder.scheme_normalize, ladder.character_normalize,
                 ladder.case_normalize, ladder.percent_normalize):
        for text in ("http://\ud800%80/", "http://%40x.\ud800/", "http://a%CC%81\ud800/"):
            try:
                rung(iri.parse(text))
            except iri.IRIError as exc:
                assert exc.char == "\ud800" and exc.component in ("host", "path")


# Errors name the component, the character and its index in the input as given,
# even when the same text occurs before the component (a host also in the userinfo).
ERROR_INDEXES = [
    ("host-after-userinfo-same-text", "http://x.a\u200db.com@a\u200db.com/", "host", 18),
    ("host-after-userinfo-surrogate", "foo://u@a\ud800/", "host", 9),
    ("path-after-leading-space", " http://h.com/a\ud800?a\ud800", "path", 15),
    ("port-after-leading-tab", "\thttp://u@h.com:80\ud800/", "port", 18),
    ("fragment", "http://h/?x#\ud800", "fragment", 12),
    ("relative-authority", " //a\ud800/", "host", 4),
]


@pytest.mark.parametrize(("text", "component", "index"), cases(ERROR_INDEXES))
@pytest.mark.parametrize("fn", ["normalize", "iri_to_uri", "explain"])
def test_error_indexes(text: str, component: str, index: int, fn: str) -> None:
    call = {"normalize": iri.normalize, "iri_to_uri": iri.iri_to_uri,
            "explain": lambda t: iri.explain(t, "http://h/")}[fn]
    with pytest.raises(iri.IRIError) as info:
        call(text)
    err = info.value
    assert (err.component, err.index) == (component, index)
    assert err.char == text[index] and f"U+{ord(text[index]):04X} at index {index}" in str(err)


# Hosts on the wire (issues "bad input" and "wire"): at level SCHEME a DNS scheme's
# host that cannot be on the wire is an IRIHostError (RFC 3987 3.1 and 5.3.3: it has
# no ToASCII conversion; what cannot be on the wire is the URL Standard's host
# parser: forbidden host and domain code points after percent-decoding, empty
# labels, IP literals), a port above 65535 too; IPv6 is written in RFC 5952
# canonical text.  Lower levels stay lenient (Weber 5): they give a string, which
# SCHEME refuses as it refuses the input.  (id, input, result at SCHEME or "error")
WIRE_HOSTS = [
    # URL Standard forbidden host code points, written or percent-encoded.
    ("url-host-space", "http://exa mple.com/", "error"),
    ("url-host-space-escaped", "http://exa%20mple.com/", "error"),
    ("url-host-space-https", "https://a b/", "error"),
    ("url-host-space-ws", "ws://a b/", "error"),
    ("url-host-space-wss", "wss://a b/", "error"),
    ("url-host-space-ftp", "ftp://a b/", "error"),
    ("url-host-nul", "http://a\x00b/", "error"),
    ("url-host-tab", "http://a\tb/", "error"),
    ("url-host-lf-escaped", "http://a%0Ab/", "error"),
    ("url-host-lt", "http://a<b/", "error"),
    ("url-host-gt", "http://a>b/", "error"),
    ("url-host-caret", "http://a^b/", "error"),
    ("url-host-pipe", "http://a|b/", "error"),
    ("url-host-backslash", "http://a\\b/", "error"),
    ("url-host-at-escaped", "http://%40x.com/", "error"),
    ("url-host-slash-escaped", "http://a%2Fb/", "error"),
    ("url-host-hash-escaped", "http://a%23b/", "error"),
    ("url-host-question-escaped", "http://a%3Fb/", "error"),
    ("url-host-colon-escaped", "http://a%3Ab/", "error"),
    ("url-host-bracket-escaped", "http://a%5Bb/", "error"),
    # URL Standard forbidden domain code points: C0 controls, "%", DEL.
    ("url-domain-c0", "http://a\x01b/", "error"),
    ("url-domain-c0-escaped", "http://a%1Fb/", "error"),
    ("url-domain-del", "http://a\x7fb/", "error"),
    ("url-domain-stray-percent", "http://ex%zz.com", "error"),
    ("url-domain-percent-at-end", "http://ex%", "error"),
    ("url-domain-escaped-percent", "http://ex%25.com/", "error"),
    # RFC 3987 3.1: ToASCII maps characters; octets that are not UTF-8 are none.
    ("3987-3.1-pct-host-invalid-utf8", "http://%ff.com/", "error"),
    ("3987-3.1-pct-host-lone-continuation", "http://a%80/", "error"),
    # Not forbidden: kept (escaped where a URI host cannot hold it, 3.1).
    ("url-host-quote-kept", 'http://a"b.com/', "http://a%22b.com/"),
    ("url-host-sub-delims-kept", "http://a!$&'()*+,;=b.com/", "http://a!$&'()*+,;=b.com/"),
    ("url-host-underscore-kept", "http://my_host.example/", "http://my_host.example/"),
    # Non-DNS schemes keep their hosts (3.1 converts only DNS schemes' ireg-names).
    ("3987-3.1-other-scheme-space", "foo://exa mple/", "foo://exa%20mple/"),
    ("3987-3.1-other-scheme-empty-label", "foo://a..b/", "foo://a..b/"),
    ("3987-3.1-other-scheme-port", "foo://h:99999/", "foo://h:99999/"),
    ("3987-3.1-other-scheme-empty-host", "foo:///x", "foo:///x"),
    ("3987-3.1-relative-space", "//a b/", "//a%20b/"),
    # RFC 1034 3.1: no empty label; a trailing dot (the root) stays (another vhost).
    ("1034-3.1-empty-label", "http://a..b/", "error"),
    ("1034-3.1-leading-dot", "http://.a/", "error"),
    ("1034-3.1-dot-only", "http://./", "error"),
    ("1034-3.1-two-trailing-dots", "http://a../", "error"),
    ("1034-3.1-ideographic-full-stops", "http://a\u3002\u3002b/", "error"),
    ("1034-3.1-label-mapped-to-nothing", "http://a.\u00ad.b/", "error"),
    ("1034-3.1-label-mapped-to-nothing-escaped", "http://a.%C2%AD.b/", "error"),
    ("1034-3.1-trailing-dot-kept", "http://example.com./", "http://example.com./"),
    ("1034-3.1-trailing-ideographic-dot", "http://example.com\u3002/", "http://example.com./"),
    # RFC 3986 3.2.2: an empty host is no host on the wire for these schemes.
    ("3986-3.2.2-empty-host", "http:///x", "error"),
    ("3986-3.2.2-empty-host-port", "http://:80/", "error"),
    ("3986-3.2.2-empty-host-userinfo", "http://u@/", "error"),
    ("3986-3.2.2-empty-host-end", "http://", "error"),
    ("3986-3.2.2-empty-host-query", "https://?q", "error"),
    ("3986-3.2.2-host-mapped-to-nothing", "http://\u00ad/", "error"),
    # RFC 3986 3.2.2, RFC 6874 2: IP literals.
    ("3986-3.2.2-unclosed-ip-literal", "http://[::1", "error"),
    ("3986-3.2.2-unclosed-ip-literal-path", "http://[::1/x", "error"),
    ("3986-3.2.2-invalid-ipv6", "http://[:::1]/", "error"),
    ("3986-3.2.2-empty-ip-literal", "http://[]/", "error"),
    ("3986-3.2.2-text-after-literal", "http://[::1]x/", "error"),
    ("3986-3.2.2-ipv4-in-brackets", "http://[1.2.3.4]/", "error"),
    ("3986-3.2.2-ipv6-too-long", "http://[1:2:3:4:5:6:7:8:9]/", "error"),
    ("3986-3.2.2-ipv6-non-hex", "http://[::g]/", "error"),
    ("6874-2-bare-percent-zone", "http://[fe80::1%eth0]/", "error"),
    ("6874-2-empty-zone", "http://[fe80::1%25]/", "error"),
    ("6874-2-zone-bad-char", "http://[fe80::1%25e!h]/", "error"),
    ("3986-3.2.2-ipvfuture-kept", "http://[V1.X]/", "http://[v1.x]/"),
    # Ports (RFC 3986 3.2.3 with RFC 9110 4.2 / RFC 6455 3 / RFC 1738 3.2: TCP, 16 bits).
    ("3986-3.2.3-port-too-big", "http://h:65536/", "error"),
    ("3986-3.2.3-port-five-nines", "http://h:99999/", "error"),
    ("3986-3.2.3-port-six-digits", "https://h:100000/", "error"),
    ("3986-3.2.3-port-too-big-leading-zeros", "http://h:0065536/", "error"),
    ("3986-3.2.3-port-max", "http://h:65535/", "http://h:65535/"),
    ("3986-3.2.3-port-leading-zeros", "ws://h:0000080/", "ws://h/"),
    ("3986-3.2.3-port-zero", "http://h:0/", "http://h:0/"),
    # RFC 5952 4: IPv6 in canonical text at level SCHEME (what the URL Standard writes).
    ("5952-4-loopback-full", "http://[0:0:0:0:0:0:0:1]/", "http://[::1]/"),
    ("5952-4.1-leading-zeros", "http://[::0001]/", "http://[::1]/"),
    ("5952-4-loopback", "http://[::1]/", "http://[::1]/"),
    ("5952-4.3-lowercase", "http://[2001:DB8::A]/", "http://[2001:db8::a]/"),
    ("5952-4.2.1-longest-run", "http://[2001:db8:0:0:0:1:0:0]/", "http://[2001:db8::1:0:0]/"),
    ("5952-4.2.2-one-field-not-compressed", "http://[2001:db8:0:1:1:1:1:1]/",
     "http://[2001:db8:0:1:1:1:1:1]/"),
    ("5952-4.2.2-one-field-compressed-away", "http://[2001:db8::1:1:1:1:1]/",
     "http://[2001:db8:0:1:1:1:1:1]/"),
    ("5952-4.2.3-first-of-equal-runs", "http://[2001:db8:0:0:1:0:0:1]/", "http://[2001:db8::1:0:0:1]/"),
    ("5952-4-all-zero", "http://[0::0]/", "http://[::]/"),
    ("5952-5-ipv4-mapped-hex", "http://[::ffff:1.2.3.4]/", "http://[::ffff:102:304]/"),
    ("5952-5-ipv4-mapped-hex-kept", "http://[::FFFF:102:304]/", "http://[::ffff:102:304]/"),
    ("5952-5-ipv4-compatible", "http://[::1.2.3.4]/", "http://[::102:304]/"),
    ("5952-4-with-port-and-userinfo", "http://u@[0:0::1]:8080/x", "http://u@[::1]:8080/x"),
    ("5952-4-default-port", "https://[0:0::1]:443", "https://[::1]/"),
    ("6874-2-zone-kept", "http://[fe80::0001%25eth0]/", "http://[fe80::1%25eth0]/"),
    ("6874-2-zone-escapes-kept", "http://[fe80::1%25%65th0]/", "http://[fe80::1%25%65th0]/"),
    ("5952-4-other-scheme-untouched", "foo://[0:0:0:0:0:0:0:1]/", "foo://[0:0:0:0:0:0:0:1]/"),
]


@pytest.mark.parametrize(("text", "expected"), cases(WIRE_HOSTS))
def test_wire_hosts(text: str, expected: str) -> None:
    from tests.support import props

    for form in FORMS:
        for keep in (True, False):
            for nfc in (False, True):
                for level in Level:
                    out = check_canonical(text, level, form, keep, nfc)
                    if level >= Level.SCHEME and expected == "error":
                        assert out == "error", (level, form, keep, nfc)
                    elif level >= Level.SCHEME and form == "uri" and keep:
                        assert out == expected, (level, nfc)
                    else:
                        # Lower levels stay lenient (Weber 5): a string, never an error.
                        assert out != "error" or level >= Level.SCHEME, (level, form)
    # Every property of tests/support/props.py (idempotence, every path agreeing, levels
    # never splitting, explain agreeing with equivalent, IRI form mapping back).
    assert list(props.check(text)) == []


# One host, every spelling: equivalent from level SCHEME on, never merged with another.
WIRE_EQUIVALENT = [
    ("5952-4-loopback-spellings", "http://[0:0:0:0:0:0:0:1]/", "http://[::0001]/", Level.SCHEME),
    ("5952-4-loopback-written", "http://[::1]/", "http://[0:0:0:0:0:0:0:1]:80/", Level.SCHEME),
    ("5952-5-ipv4-mapped", "http://[::ffff:1.2.3.4]/", "http://[::ffff:102:304]/", Level.SCHEME),
    ("5952-4-different-addresses", "http://[::1]/", "http://[::1:0]/", None),
    ("5952-4-other-scheme", "foo://[::1]/", "foo://[0::1]/", None),
    ("6874-2-zones-differ", "http://[fe80::1%25eth0]/", "http://[fe80::1%25eth1]/", None),
    ("1034-3.1-trailing-dot-differs", "http://example.com./", "http://example.com/", None),
]


@pytest.mark.parametrize(("a", "b", "lowest"), cases(WIRE_EQUIVALENT))
def test_wire_equivalent(a: str, b: str, lowest: Level | None) -> None:
    for level in Level:
        expected = lowest is not None and level >= lowest
        assert iri.equivalent(a, b, level) is expected, level
        assert iri.explain(a, b, level).equivalent is expected, level
        assert iri.equivalent(a, b, level, nfc=True) is expected, level


# The error names the character and its index in the input as given, on every path
# (fused, composed rungs with nfc=True, explain's climb, dedupe's climb).
WIRE_ERROR_INDEXES = [
    ("space", "http://exa mple.com/", "host", 10),
    ("space-escaped", "http://exa%20mple.com/", "host", 10),
    ("space-after-uppercase", "HTTP://EXA MPLE.com/", "host", 10),
    ("unclosed-ip-literal", "http://[::1", "host", 7),
    ("unclosed-after-userinfo", "http://u@[::1x/", "host", 9),
    ("invalid-ipv6", "http://[:::1]/", "host", 7),
    ("text-after-literal", "http://[::1]x/", "host", 12),
    ("zone-bare-percent", "http://[fe80::1%eth0]/", "host", 15),
    ("stray-percent", "http://ex%zz.com", "host", 9),
    ("invalid-utf8", "http://a.%FF.com/", "host", 9),
    ("empty-host", "http:///x", "host", 7),
    ("empty-host-port", "http://:80/", "host", 7),
    ("empty-label", "http://a..b/", "host", 9),
    ("leading-dot", "http://.a/", "host", 7),
    ("label-mapped-to-nothing", " http://A.\u00ad.b/", "host", 10),
    ("port-too-big", "http://h:65536/", "port", 9),
    ("port-leading-zeros", "http://h:0099999/", "port", 11),
]


@pytest.mark.parametrize(("text", "component", "index"), cases(WIRE_ERROR_INDEXES))
def test_wire_error_indexes(text: str, component: str, index: int) -> None:
    calls = [
        lambda: iri.normalize(text),
        lambda: iri.normalize(text, nfc=True),
        lambda: iri.normalize(text, "protocol", form="iri", keep_fragment=False),
        lambda: iri.explain(text, "http://h/"),
        lambda: iri.explain(text, "http://h/", nfc=True),
        lambda: canonical_and_rungs(
            text, NormalizeOptions(Level.SCHEME, "uri", keep_fragment=True, nfc=True)
        ),
    ]
    for call in calls:
        with pytest.raises(iri.IRIHostError) as info:
            call()
        err = info.value
        assert (err.component, err.index, err.char) == (component, index, text[index]), str(err)
        assert f"U+{ord(text[index]):04X} at index {index}" in str(err)
    # Lower levels stay lenient.
    iri.normalize(text, "syntax")
