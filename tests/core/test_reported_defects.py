"""Defects reported adversarially, each a vector table keyed by the section it follows.

Every table that involves :func:`iri_scrapy.normalize` runs through each of its code
paths (the ``path`` fixture and ``via``: climb, fused, fast), checks idempotence on
that path, and the Hypothesis properties state the rule each fix follows.

1. NFC (RFC 3987 5.3.2.2) on the host of a DNS scheme: UTS 46 maps first and
   normalizes after (UTS 46 section 4), so NFC before it can name another domain
   (U+0345 has combining class 240 but maps to U+03B9, a starter).
2. URI -> IRI (3.2) must give an IRI that maps back (3.1) to the URI: byte for
   byte through 3.1 steps 1-2, to the same resource with ToASCII; with
   ``unicode_host=True`` a DNS host whose decoded form ToASCII refuses keeps its
   escapes, so that round trip never fails.
3. Errors name the character and its index in the caller's input, whatever the
   rungs did to the component before (case, escapes, percent-encoding).
4. The IRI form keeps invisible characters encoded (3.2 step 4, 6.1) in the host
   as in the path: a label holding ZWJ/ZWNJ stays an A-label.
5. A DNS host ending in a number is an IPv4 address (URL Standard, host parser),
   refused when it is not a valid one.
"""

from __future__ import annotations

import unicodedata
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import iri_scrapy as iri
from iri_scrapy import Level
from iri_scrapy.core.charclasses import BIDI_FORMATTING
from tests.support.paths import via

ERROR = "error"
SETTINGS = settings(deadline=None, suppress_health_check=list(HealthCheck))


def cases(rows: list[tuple[Any, ...]]) -> list[Any]:
    return [pytest.param(*row[1:], id=row[0]) for row in rows]


def run(path: str, text: str, level: Level | str = Level.SCHEME, **kwargs: Any) -> str:
    """``normalize`` by *path*, or ``"error"``; idempotent on that path."""
    try:
        out = via(path, text, level, **kwargs)
    except iri.IRIError:
        return ERROR
    assert via(path, out, level, **kwargs) == out, ("not idempotent", text, out)
    return out


def norm(text: str, level: Level | str = Level.SCHEME, **kwargs: Any) -> str:
    try:
        return iri.normalize(text, level, **kwargs)
    except iri.IRIError:
        return ERROR


# --- 1. NFC never changes which domain a host names ------------------------------------
#
# RFC 3987 5.3.2.2 (NFC, only with nfc=True) and 3.1/5.3.3 (ToASCII, UTS 46): UTS 46
# section 4 maps each code point, then normalizes to NFC.  NFC first reorders U+0345
# (ccc 240) after U+0301 (ccc 230); the mapping then makes U+0345 the starter U+03B9
# and the acute goes on another base: another domain.  So NFC is applied to a label
# of a DNS host only where UTS 46 maps the label and its NFC to the same string.

NFC_HOSTS = [
    # (id, input, level, form, result with nfc=True)
    ("3987-5.3.2.2-uts46-4-ypogegrammeni-scheme", "http://q\u0345\u0301j.com/", Level.SCHEME,
     "uri", "http://xn--qj-58b.com/"),
    ("3987-5.3.2.2-uts46-4-ypogegrammeni-escaped", "http://q%CD%85%CC%81j.com/", Level.SCHEME,
     "uri", "http://xn--qj-58b.com/"),
    ("3987-5.3.2.2-uts46-4-ypogegrammeni-iri", "http://q\u0345\u0301j.com/", Level.SCHEME,
     "iri", "http://q\u03afj.com/"),
    ("3987-5.3.2.2-uts46-4-ypogegrammeni-syntax", "http://q\u0345\u0301j.com/", Level.SYNTAX,
     "uri", "http://q%CD%85%CC%81j.com/"),
    ("3987-5.3.2.2-uts46-4-reordered-is-another-domain", "http://q\u0301\u0345j.com/",
     Level.SCHEME, "uri", "http://xn--qj-8tb05e.com/"),
    ("3987-5.3.2.2-uts46-4-reordered-syntax", "http://q\u0301\u0345j.com/", Level.SYNTAX,
     "uri", "http://q%CC%81%CD%85j.com/"),
    ("3987-5.3.2.2-uts46-4-ypogegrammeni-https-port", "HTTPS://Q\u0345\u0301J.com:443/",
     Level.SCHEME, "uri", "https://xn--qj-58b.com/"),
    # NFC still applies where UTS 46 agrees (label by label).
    ("3987-5.3.2.2-safe-label-composed-syntax", "http://e\u0301.q\u0345\u0301j.com/",
     Level.SYNTAX, "uri", "http://%C3%A9.q%CD%85%CC%81j.com/"),
    ("3987-5.3.2.2-safe-kelvin-syntax", "http://\u212a/", Level.SYNTAX, "uri", "http://k/"),
    ("3987-5.3.2.2-safe-alpha-ypogegrammeni-syntax", "http://\u03b1\u0345.com/", Level.SYNTAX,
     "uri", "http://%E1%BE%B3.com/"),
    # Not a DNS scheme: not a domain name, NFC as 5.3.2.2 says.
    ("3987-5.3.2.2-other-scheme-nfc", "foo://q\u0345\u0301j/", Level.SCHEME, "uri",
     "foo://q%CC%81%CD%85j/"),
    # The path is not a host: NFC as 5.3.2.2 says.
    ("3987-5.3.2.2-path-nfc", "http://h/q\u0345\u0301j", Level.SCHEME, "uri",
     "http://h/q%CC%81%CD%85j"),
]


@pytest.mark.parametrize(("text", "level", "form", "expected"), cases(NFC_HOSTS))
def test_nfc_keeps_the_domain(path: str, text: str, level: Level, form: str, expected: str) -> None:
    assert run(path, text, level, form=form, nfc=True) == expected
    if iri.parse(text).scheme.lower() in ("http", "https"):  # type: ignore[union-attr]
        if level >= Level.SCHEME:
            # 5.3.3: the same host with and without NFC (the path may differ).
            assert iri.parse(run(path, text, level, form=form)).host == iri.parse(expected).host
        # NFC never splits what nfc=False merged.
        lower = run(path, text, level, form="uri")
        assert run(path, lower, level, form=form, nfc=True) == expected


COMBINING = ["\u0345", "\u0301", "\u0308", "\u0313", "\u0342", "\u0323", "\u0327", "\u0338",
             "\u0340", "\u0344", "\u1fbe", "\u0399"]
BASES = ["q", "a", "\u03b1", "\u03b9", "\u03af", "\u1fb3", "\u1f80", "\u03c9", "e", "K"]
host_labels = st.lists(st.sampled_from(BASES + COMBINING), min_size=1, max_size=6).map("".join)
greek_hosts = st.lists(host_labels, min_size=1, max_size=2).map(lambda ls: ".".join(ls) + ".com")


@SETTINGS
@given(greek_hosts, greek_hosts, st.sampled_from(["http", "https", "ws", "ftp"]))
def test_prop_nfc_never_changes_the_domain(a: str, b: str, scheme: str) -> None:
    """For combining marks (U+0345 in particular): at SCHEME the host is the same with
    and without NFC; NFC never splits what non-NFC merged; NFC at SYNTAX never
    merges hosts that are different domains at SCHEME; idempotence with NFC."""
    ua, ub = f"{scheme}://{a}/", f"{scheme}://{b}/"
    for text in (ua, ub):
        assert norm(text, nfc=True) == norm(text), text
        for level in (Level.SYNTAX, Level.SCHEME):
            once = norm(text, level, nfc=True)
            if once != ERROR:
                assert norm(once, level, nfc=True) == once, text
            merged = norm(text, level)
            if merged != ERROR:
                assert norm(merged, level, nfc=True) == once, text
    if norm(ua, Level.SYNTAX, nfc=True) == norm(ub, Level.SYNTAX, nfc=True):
        assert norm(ua) == norm(ub), (ua, ub)


# --- 2. URI -> IRI -> URI names the same resource (RFC 3987 3.2) ------------------------
#
# 3.2: the conversion "will always result in an IRI that maps back to the URI used as
# an input".  3.1 steps 1-2 (``idna=False``) are the mapping applications MUST apply:
# the default conversion maps back through it byte for byte.  With ToASCII (3.1, a
# MAY; ``iri_to_uri``'s default) a decoded host that ToASCII takes maps to its
# A-labels, the host the URI names (RFC 3986 3.2.2: percent-encoded UTF-8 in a
# reg-name is the IDN; 5.3.3 compares them equal).  A decoded host that ToASCII
# refuses keeps its escapes (for the schemes known to use DNS), so the round trip
# never fails: decoded, it would not map back through ToASCII.

ROUND_TRIPS = [
    # (id, URI, uri_to_iri(URI), the same with unicode_host=True, iri_to_uri of that)
    ("3987-3.2-combining-mark-label", "ftp://a.%CC%81a/", "ftp://a.%CC%81a/",
     "ftp://a.%CC%81a/", "ftp://a.%CC%81a/"),
    ("3987-3.2-hyphen-label", "http://%C3%A9-.com/", "http://%C3%A9-.com/",
     "http://%C3%A9-.com/", "http://%C3%A9-.com/"),
    ("3987-3.2-mapped-delimiter", "http://a%EF%BC%83.com/", "http://a%EF%BC%83.com/",
     "http://a%EF%BC%83.com/", "http://a%EF%BC%83.com/"),
    ("3987-3.2-ideographic-stop-bracket", "http://example.com[%E3%80%82/",
     "http://example.com[%E3%80%82/", "http://example.com[%E3%80%82/",
     "http://example.com[%E3%80%82/"),
    ("3987-3.2-sharp-s-idn", "http://%C3%9F.de/", "http://\u00df.de/", "http://\u00df.de/",
     "http://xn--zca.de/"),
    ("3987-3.2-resume-idn", "http://r%C3%A9sum%C3%A9.example.org/",
     "http://r\u00e9sum\u00e9.example.org/", "http://r\u00e9sum\u00e9.example.org/",
     "http://xn--rsum-bpad.example.org/"),
    ("3987-3.2-other-scheme-decoded", "foo://a.%CC%81a/", "foo://a.\u0301a/", "foo://a.\u0301a/",
     "foo://a.%CC%81a/"),
    ("3987-3.2-escape-left-decoded", "http://%40x.%CC%81a/", "http://%40x.\u0301a/",
     "http://%40x.\u0301a/", "http://%40x.%CC%81a/"),
    # UTS 46 maps U+3002 to ".": decoded, the host would name ".c" (an empty label):
    # the escapes stay (it once gave http://.c/ through ToASCII)
    ("3987-3.2-ideographic-stop-empty-label", "http://%E3%80%82c/", "http://%E3%80%82c/",
     "http://%E3%80%82c/", "http://%E3%80%82c/"),
    ("3987-3.2-ideographic-stops-empty-label", "http://a%E3%80%82%E3%80%82c/",
     "http://a%E3%80%82%E3%80%82c/", "http://a%E3%80%82%E3%80%82c/",
     "http://a%E3%80%82%E3%80%82c/"),
]


@pytest.mark.parametrize(("uri", "plain", "dns_aware", "expected_uri"), cases(ROUND_TRIPS))
def test_uri_to_iri_maps_back(
    path: str, uri: str, plain: str, dns_aware: str, expected_uri: str
) -> None:
    # The default conversion: 3.1 steps 1-2 give the URI back, byte for byte.
    assert iri.uri_to_iri(uri) == plain
    assert iri.iri_to_uri(plain, idna=False) == uri
    # With ToASCII too: the same resource, or (a scheme not known to use DNS) refused
    # as the URI itself is.
    try:
        back = iri.iri_to_uri(plain)
    except iri.IRIHostError:
        back = ERROR
    assert back in (expected_uri, ERROR)
    if back == ERROR:
        assert run(path, uri) == ERROR
    # The conversion with scheme-specific knowledge: never fails, same resource.
    out = iri.uri_to_iri(uri, unicode_host=True)
    assert out == dns_aware
    assert iri.iri_to_uri(out) == expected_uri
    assert iri.iri_to_uri(out, idna=False) == uri
    assert iri.uri_to_iri(expected_uri, unicode_host=True) == out
    assert run(path, expected_uri) == run(path, uri)


PCT_HOST_PIECES = ["%C3%A9", "%C3%9F", "%CC%81", "%E2%80%8D", "%EF%BC%83", "%E3%80%82", "%41",
                   "%40", "a", "-", ".", "xn--zca", "1", "%E0%A4%95%E0%A5%8D"]


@SETTINGS
@given(st.lists(st.sampled_from(PCT_HOST_PIECES), min_size=1, max_size=6).map("".join),
       st.sampled_from(["http", "https", "ftp", "ws", "foo"]))
def test_prop_round_trip_names_the_same_resource(host: str, scheme: str) -> None:
    """3.2 on hosts of escapes: with ``unicode_host=True`` the round trip never fails and
    names what the URI names at 5.3.3; without it, 3.1 steps 1-2 give the URI back, and
    ToASCII fails only where the URI has no canonical form either."""
    uri = f"{scheme}://{host}/"
    out = iri.uri_to_iri(uri, unicode_host=True)
    back = iri.iri_to_uri(out)
    assert norm(back) == norm(uri), (uri, out, back)
    plain = iri.uri_to_iri(uri)
    # Up to hex case and escaped unreserved characters (3.2), the URI itself.
    assert norm(iri.iri_to_uri(plain, idna=False), Level.SYNTAX) == norm(uri, Level.SYNTAX)
    try:
        assert norm(iri.iri_to_uri(plain)) == norm(uri), (uri, plain)
    except iri.IRIHostError:
        assert norm(uri) == ERROR, (uri, plain)


# --- 3. Errors point into the caller's input ---------------------------------------------

ERRORS = [
    # (id, input, component, the bad character, functions that raise)
    ("3986-3.2.3-port-arabic-indic-digit", "http://EXAMPLE.com:8\u0668/", "port", "\u0668",
     "normalize explain"),
    ("3986-3.2.3-port-fullwidth-digits", "HTTP://H.COM:\uff18\uff10/", "port", "\uff18",
     "normalize explain"),
    ("3986-3.2.3-port-escape-then-digit", "http://h:8%30\u0668/", "port", "%",
     "normalize explain"),
    ("3986-3.2.3-port-letter", "http://ABC.COM:1x/", "port", "x", "normalize explain"),
    ("3987-3.1-uppercase-host-joiner", "http://A.B.C\u200db/", "host", "\u200d",
     "normalize explain iri_to_uri"),
    ("3987-3.1-escapes-before-nbsp", "HTTP://ABC.%41%42\u00a0x.com/", "host", "\u00a0",
     "normalize explain"),
    ("3987-3.1-uppercase-mapped-delimiter", "http://AB\uff03.com/", "host", "\uff03",
     "normalize explain iri_to_uri"),
    ("3987-3.1-escape-before-bidi-label", "http://EX%41MPLE.\u05d0a.com/", "host", "\u05d0",
     "normalize explain"),
    ("3986-3.2.2-delimiter-after-escape", "http://A%41[b:80/", "host", "[",
     "normalize explain"),
    ("3987-3.1-path-surrogate-after-escape", "http://h/%7e\ud800", "path", "\ud800",
     "normalize explain iri_to_uri"),
    ("3987-3.1-query-surrogate-after-escape", "http://h/?%7e\ud800", "query", "\ud800",
     "normalize explain iri_to_uri"),
    ("3987-3.1-fragment-surrogate-after-escape", "http://h/#%7e\ud800", "fragment", "\ud800",
     "normalize iri_to_uri"),
    ("3987-3.1-userinfo-surrogate-after-escape", "http://%7e\ud800@h/", "userinfo", "\ud800",
     "normalize explain iri_to_uri"),
    ("3987-3.1-other-scheme-host-surrogate", "foo://A%7e\ud800/", "host", "\ud800",
     "normalize explain iri_to_uri"),
    ("3987-3.1-leading-space-uppercase-host", "  HTTP://A\u200dB.COM/", "host", "\u200d",
     "normalize explain iri_to_uri"),
    # NFC composes A + U+0301 before the joiner: the joiner as written.
    ("3987-5.3.2.2-composed-before-joiner", "http://A\u0301\u200d.com/", "host", "\u200d",
     "normalize explain iri_to_uri"),
    ("3987-3.1-escaped-composed-before-joiner", "http://A%CC%81%E2%80%8D.COM/", "host", "%E2",
     "normalize explain"),
]


def _check_error(err: iri.IRIError, text: str, component: str, bad: str) -> None:
    """*bad* is the character, or the character and what follows it in *text*, where
    the first occurrence of the character alone is another one."""
    index, bad = text.index(bad), bad[0]
    assert (err.component, err.index, err.char) == (component, index, bad), str(err)
    assert err.text == text
    assert f"U+{ord(bad):04X} at index {index}" in str(err)
    assert str(err).startswith(component + ": ")


@pytest.mark.parametrize(("text", "component", "bad", "raisers"), cases(ERRORS))
def test_error_points_into_the_input(
    path: str, text: str, component: str, bad: str, raisers: str
) -> None:
    for form in ("uri", "iri"):
        for keep in (True, False):
            for nfc in (False, True):
                if component == "fragment" and not keep:
                    continue
                with pytest.raises(iri.IRIError) as info:
                    via(path, text, form=form, keep_fragment=keep, nfc=nfc)
                _check_error(info.value, text, component, bad)
    if "explain" in raisers:
        with pytest.raises(iri.IRIError) as info:
            iri.explain(text, "http://h/")
        _check_error(info.value, text, component, bad)
    if "iri_to_uri" in raisers:
        with pytest.raises(iri.IRIError) as info:
            iri.iri_to_uri(text)
        _check_error(info.value, text, component, bad)


# --- 4. Invisible characters stay encoded in the IRI form, host included ----------------
#
# RFC 3987 3.2 step 4 with 4.1 and 6.1 (and Weber's guidelines): characters that are
# invisible (format characters, Cf: ZWJ, ZWNJ) are not shown decoded.  In a path they
# stay %-encoded; in a host shown with ToUnicode (3.2.1) their label stays the A-label,
# which maps back to the same URI.

ZWJ_HOST = "\u0915\u094d\u200d"  # KA, VIRAMA, ZWJ: a valid IDNA 2008 label (CONTEXTJ)
ZWNJ_HOST = "\u0915\u094d\u200c"
INVISIBLE = [
    # (id, input, level, IRI form)
    ("3987-6.1-zwj-host-iri-form", f"http://{ZWJ_HOST}.com/a\u200db", Level.SCHEME,
     "http://xn--11b6iy14e.com/a%E2%80%8Db"),
    ("3987-6.1-zwnj-host-iri-form", f"http://{ZWNJ_HOST}.com/", Level.SCHEME,
     "http://xn--11b6iv14e.com/"),
    ("3987-6.1-zwj-host-escaped", "http://%E0%A4%95%E0%A5%8D%E2%80%8D.com/", Level.SCHEME,
     "http://xn--11b6iy14e.com/"),
    ("3987-6.1-zwj-label-other-labels-shown", f"http://{ZWJ_HOST}.\u00e9.com/", Level.SCHEME,
     "http://xn--11b6iy14e.\u00e9.com/"),
    ("3987-6.1-zwj-a-label", "http://xn--11b6iy14e.com/", Level.SCHEME,
     "http://xn--11b6iy14e.com/"),
    ("3987-6.1-zwj-host-syntax", f"http://{ZWJ_HOST}.com/", Level.SYNTAX,
     "http://\u0915\u094d%E2%80%8D.com/"),
]


@pytest.mark.parametrize(("text", "level", "expected"), cases(INVISIBLE))
def test_invisible_characters_stay_encoded(path: str, text: str, level: Level, expected: str) -> None:
    assert run(path, text, level, form="iri") == expected
    # 3.2: the IRI form maps back to the URI form.
    assert run(path, expected, level) == run(path, text, level)
    uri = run(path, text, level)
    if level >= Level.SCHEME:
        assert iri.uri_to_iri(uri, unicode_host=True) == expected
        assert iri.iri_to_uri(expected) == uri


def _invisible(char: str) -> bool:
    return char in BIDI_FORMATTING or (
        not char.isascii() and unicodedata.category(char) in ("Zs", "Zl", "Zp", "Cf", "Cc", "Co", "Cs")
    )


@SETTINGS
@given(st.lists(st.sampled_from(["\u0915", "\u094d", "\u200d", "\u200c", "a", "\u0628",
                                 "\u0644", "\u00e9", "-", "."]), min_size=1, max_size=6).map("".join))
def test_prop_iri_form_host_has_no_invisible_character(label: str) -> None:
    for level in (Level.SYNTAX, Level.SCHEME):
        out = norm(f"http://{label}.com/", level, form="iri")
        if out != ERROR:
            host = iri.parse(out).host or ""
            assert not any(_invisible(c) for c in host), (label, out)


# --- 5. A host ending in a number is an IPv4 address (URL Standard, host parser) ----------
#
# README, "Hosts that cannot be on the wire": what cannot be on the wire follows the
# URL Standard's host parser, which parses a host "ending in a number" (its last
# label, less a trailing dot, all ASCII digits or a 0x hex number) with its IPv4
# parser and fails if that does not give an IPv4 address.

IPV4 = [
    # (id, input, result at SCHEME or the refused character)
    ("url-ipv4-part-above-255", "http://256.1.1.1/", ("error", 7)),
    ("url-ipv4-last-part-above-255", "http://1.2.3.256/", ("error", 13)),
    ("url-ipv4-letters-then-number", "http://a.1/", ("error", 7)),
    ("url-ipv4-tld-number", "http://example.123/", ("error", 7)),
    ("url-ipv4-tld-number-trailing-dot", "http://example.123./", ("error", 7)),
    ("url-ipv4-five-parts", "http://1.2.3.4.5/", ("error", 15)),
    ("url-ipv4-above-32-bits", "http://4294967296/", ("error", 7)),
    ("url-ipv4-bad-octal", "http://09.1.1.1/", ("error", 7)),
    ("url-ipv4-hex-last-label", "http://a.0x1f/", ("error", 7)),
    ("url-ipv4-uppercase", "HTTP://EXAMPLE.123/", ("error", 7)),
    ("url-ipv4-escaped-digit", "http://a.%31/", ("error", 7)),
    ("url-ipv4-after-escape", "http://%61b.1/", ("error", 7)),
    ("url-ipv4-fullwidth", "http://\uff41.\uff11/", ("error", 7)),
    ("url-ipv4-idn-label", "http://\u00e9.1/", ("error", 7)),
    ("url-ipv4-https-port", "https://u@a.1:8443/x", ("error", 10)),
    ("url-ipv4-ws", "ws://a.1/", ("error", 5)),
    ("url-ipv4-ftp", "ftp://a.1/", ("error", 6)),
    # Valid IPv4 addresses and hosts not ending in a number are kept as they are.
    ("url-ipv4-dotted", "http://1.2.3.4/", "http://1.2.3.4/"),
    ("url-ipv4-max", "http://255.255.255.255/", "http://255.255.255.255/"),
    ("url-ipv4-trailing-dot", "http://1.2.3.4./", "http://1.2.3.4./"),
    ("url-ipv4-short-form-kept", "http://127.1/", "http://127.1/"),
    ("url-ipv4-hex-kept", "http://0x7f.1/", "http://0x7f.1/"),
    ("url-ipv4-not-a-number", "http://a.1a/", "http://a.1a/"),
    ("url-ipv4-not-hex", "http://a.0x1g/", "http://a.0x1g/"),
    ("url-ipv4-number-not-last", "http://1.a/", "http://1.a/"),
    ("url-ipv4-other-scheme", "foo://a.1/", "foo://a.1/"),
    ("url-ipv4-relative", "//a.1/", "//a.1/"),
]


@pytest.mark.parametrize(("text", "expected"), cases(IPV4))
def test_host_ending_in_a_number(path: str, text: str, expected: Any) -> None:
    if isinstance(expected, str):
        assert run(path, text) == expected
        return
    _, index = expected
    for form in ("uri", "iri"):
        with pytest.raises(iri.IRIHostError) as info:
            via(path, text, form=form)
        err = info.value
        assert (err.component, err.index, err.char) == ("host", index, text[index]), str(err)
        assert "IPv4" in str(err) and f"U+{ord(text[index]):04X} at index {index}" in str(err)
    # Lower levels stay lenient; SCHEME refuses what they give as it refuses the input.
    for level in (Level.SIMPLE, Level.SYNTAX):
        lower = run(path, text, level, form="iri" if level is Level.SIMPLE else "uri")
        assert lower != ERROR
        with pytest.raises(iri.IRIHostError):
            via(path, lower)
