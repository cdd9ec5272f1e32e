"""Hosts: UTS 46 ToASCII through the idna package, and our RFC 3492 encoder."""

from __future__ import annotations

import random
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

import iri_scrapy as iri
from iri_scrapy.core.hosts import _ipv4_number, ends_in_number, host_to_ascii, host_to_unicode
from iri_scrapy.core.punycode import punycode_encode
from tests.support.vectors import load

IDNA_FILES = ["unicode_idnatestv2", "whatwg_idnatestv2", "whatwg_toascii"]


def test_punycode_matches_the_codec_on_every_vector_label() -> None:
    labels = {"bücher", "例子", "ñ", "\U0001f600"}
    for name in IDNA_FILES:
        for r in load(name):
            labels.update(str(r["input"]).split("."))
    rnd = random.Random(7)
    for _ in range(3000):
        labels.add("".join(chr(rnd.choice([rnd.randint(0x21, 0x7E), rnd.randint(0xA0, 0xD7FF), rnd.randint(0x10000, 0x10FFFF)])) for _ in range(rnd.randint(1, 20))))
    checked = 0
    for label in labels:
        try:
            expected = label.encode("punycode").decode("ascii")
        except UnicodeError:
            continue
        assert punycode_encode(label) == expected, label
        checked += 1
    assert checked > 3000


def test_uts46_never_gives_another_a_label() -> None:
    """Where a UTS 46 test expects success we give that A-label or refuse (we keep
    idna's hyphen rules, stricter than the URL Standard's, and a host whose A-label form
    is longer than the 253 octets of a DNS name, which the URL Standard ignores: 7
    vectors); never another name."""
    same = refused = 0
    for name in IDNA_FILES:
        for r in load(name):
            if r["input"].isascii() or r["expected"] is None or r.get("options"):
                continue
            try:
                got = host_to_ascii(r["input"])
            except iri.IRIHostError:
                refused += 1
                continue
            assert got == r["expected"], r
            same += 1
    assert same >= 951 and refused <= 67


HOSTS = [
    ("3.1-resume", "résumé.example.org", "xn--rsum-bpad.example.org"),
    ("5.3.3-case-fold", "BÜCHER.example", "xn--bcher-kva.example"),
    ("uts46-nontransitional-sharp-s", "faß.de", "xn--fa-hia.de"),
    ("uts46-final-sigma", "βόλος.com", "xn--nxasmm1c.com"),
    ("uts46-ideographic-full-stop", "例子。测试", "xn--fsqu00a.xn--0zwm56d"),
    ("ascii-underscore-kept", "my_host.Example.com", "my_host.example.com"),
]


@pytest.mark.parametrize(("host", "expected"), [pytest.param(h, e, id=i) for i, h, e in HOSTS])
def test_host_to_ascii(host: str, expected: str) -> None:
    assert host_to_ascii(host) == expected


def test_host_error_names_the_label() -> None:
    with pytest.raises(iri.IRIHostError) as info:
        host_to_ascii("ok.a\u200db.com", start=7)
    assert repr("a\u200db") in str(info.value) and "U+200D" in str(info.value)
    assert info.value.index == 7 + 4


def test_uts46_symbols_are_allowed_like_browsers_do() -> None:
    # NV8 symbols: not PVALID in IDNA 2008, valid in UTS 46 (i❤.ws is registered)
    assert host_to_ascii("i❤.ws") == "xn--i-7iq.ws"
    assert host_to_ascii("☃.com") == "xn--n3h.com"


@pytest.mark.parametrize("host", ["example\uff03.com", "\uff05\uff14\uff11.com", "a\u3000b.com"])
def test_uts46_mapping_to_a_delimiter_is_refused(host: str) -> None:
    with pytest.raises(iri.IRIHostError, match="which a host cannot contain"):
        host_to_ascii(host)


def test_host_to_unicode_only_converts_valid_a_labels() -> None:
    assert host_to_unicode("xn--99zt52a.example.org") == "納豆.example.org"
    assert host_to_unicode("xn--zz-invalid.example") == "xn--zz-invalid.example"
    assert host_to_unicode("example.org") == "example.org"


def test_cached_uts46_mapping_equals_idna_on_every_vector_label() -> None:
    import idna

    from iri_scrapy.core.hosts import remap_label

    labels = {"Bücher", "ＡＢＣ", "ß", "ς", "\u200d", "a\u0301"}
    for name in IDNA_FILES:
        for r in load(name):
            labels.update(str(r["input"]).split("."))
    for label in labels:
        try:
            expected: object = idna.uts46_remap(label, std3_rules=False)
        except idna.IDNAError as exc:
            expected = type(exc)
        if any(c >= "\x80" and unicodedata.category(c) == "Cn" for c in label):
            # a code point this Python's Unicode does not know is refused, whatever
            # idna's (possibly newer) tables say: results must not depend on the Python
            expected = idna.InvalidCodepoint
        try:
            got: object = remap_label(label)
        except idna.IDNAError as exc:
            got = type(exc)
        assert got == expected, label


def test_code_point_unknown_to_this_python_is_a_clear_error() -> None:
    """idna may ship tables of a newer Unicode than Python's ``unicodedata``; such a
    code point is refused with a message naming it, whichever idna is installed."""
    unknown = next(chr(cp) for cp in range(0x0860, 0x3FFFF) if unicodedata.category(chr(cp)) == "Cn")
    with pytest.raises(iri.IRIHostError) as info:
        host_to_ascii(f"a{unknown}b.com", start=7)
    message = str(info.value)
    assert f"U+{ord(unknown):04X}" in message and "not assigned in this Python" in message
    assert info.value.index == 8


def test_ipv6_text_is_rfc5952_canonical() -> None:
    """RFC 5952 section 4 (what ``ipaddress`` writes, outside IPv4-mapped addresses,
    whose text changed in Python 3.13): one spelling per address."""
    import ipaddress

    from iri_scrapy.core.hosts import ipv6_text

    rnd = random.Random(5952)
    for _ in range(5000):
        fields = [rnd.choice([0, 0, 0, 1, 0xFFFF, rnd.randrange(0x10000)]) for _ in range(8)]
        value = sum(f << (112 - 16 * i) for i, f in enumerate(fields))
        addr = ipaddress.IPv6Address(value)
        if addr.ipv4_mapped is not None:
            continue
        assert ipv6_text(addr.exploded) == addr.compressed
        assert ipv6_text(addr.compressed.upper()) == addr.compressed
    assert ipv6_text("::ffff:1.2.3.4") == "::ffff:102:304"
    with pytest.raises(ValueError):
        ipv6_text(":::1")


# 31 labels "é" (xn--9ca, 7 octets) and their full stops: 247 octets.
_LONG = ".".join(["é"] * 31)
DNS_LENGTH = [  # (host, A-label form or None if refused): RFC 1034 section 3.1, 253 octets
    (_LONG + ".abcde", ".".join(["xn--9ca"] * 31) + ".abcde"),  # 253
    (_LONG + ".abcde.", ".".join(["xn--9ca"] * 31) + ".abcde."),  # 253 and the root
    (_LONG + ".abcdef", None),  # 254
    ("é" + ".a" * 127, None),  # 255: refused by its full stops, before the labels
    ("é" + "。a" * 127, None),  # the same with ideographic full stops
    ("abc." * 80 + "com", "abc." * 80 + "com"),  # ASCII: not mapped, not checked
]


@pytest.mark.parametrize(("host", "expected"), DNS_LENGTH)
def test_host_longer_than_dns_allows_is_refused(host: str, expected: str | None) -> None:
    if expected is not None:
        assert host_to_ascii(host) == expected
        return
    with pytest.raises(iri.IRIError, match=r"past the 253 of a DNS name \(RFC 1034"):
        host_to_ascii(host)


def test_huge_label_error_is_shortened() -> None:
    with pytest.raises(iri.IRIError) as info:
        host_to_ascii("é" * 100_000)
    assert len(str(info.value)) < 1000


# URL Standard, "ends in a number checker" (host parsing): the last label, less one
# trailing dot, is all digits or parses as an IPv4 number (decimal, 0-octal, 0x-hex).
ENDS_IN_NUMBER = [
    ("example.com", False), ("foo.de", False), ("127.0.0.1", True), ("a.b.0x1f", True),
    ("a.0x", True), ("a.0X.", True), ("a.09", True), ("a.08.", True), ("a.1e", False),
    ("example.com.", False), ("", False), (".", False), ("1.", True), ("a.0xg", False),
    ("a.b", False), ("0x.a", False), ("a.x1", False), ("a.07", True),
]


@pytest.mark.parametrize(("host", "expected"), ENDS_IN_NUMBER)
def test_ends_in_number(host: str, expected: bool) -> None:
    assert ends_in_number(host) is expected


def _ends_in_number_reference(host: str) -> bool:
    """The checker as the URL Standard words it, with no shortcut."""
    end = len(host) - 1 if host.endswith(".") else len(host)
    last = host[host.rfind(".", 0, end) + 1 : end]
    if not last:
        return False
    if last.isascii() and last.isdigit():
        return True
    return _ipv4_number(last) is not None


@given(st.text(alphabet="0123456789abcdefxXAg.-z", max_size=12))
def test_ends_in_number_shortcut_agrees_with_the_standard(host: str) -> None:
    assert ends_in_number(host) is _ends_in_number_reference(host)
