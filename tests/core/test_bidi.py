"""Tests of iri_scrapy.core.bidi: the analyses of ``iri-scrapy check``.

RFC 3987 section 4.1 (bidi formatting characters), section 4.2 and
draft-iri-bidi-guidelines section 3 (bidi components), IDN labels (UTS 46 via
the core) and mixed-script host labels (homographs, RFC 3987 section 8).
"""

from __future__ import annotations

import unicodedata

import pytest

from iri_scrapy import validate
from iri_scrapy.core.bidi import (
    Component,
    Finding,
    check,
    check_bidi_component,
    check_bidi_formatting,
    check_host,
    components,
    label_scripts,
    script_of,
)
from iri_scrapy.core.charclasses import BIDI_FORMATTING

ALEF, BET, GIMEL = "\u05d0", "\u05d1", "\u05d2"  # Hebrew letters, bidi class R
AR_ALEF, AR_BEH = "\u0627", "\u0628"  # Arabic letters, bidi class AL
SHEVA = "\u05b0"  # HEBREW POINT SHEVA, bidi class NSM
CYR_A = "\u0430"  # CYRILLIC SMALL LETTER A, looks like Latin "a"
GREEK_O = "\u03bf"  # GREEK SMALL LETTER OMICRON, looks like Latin "o"


def kinds(findings: list[Finding]) -> list[tuple[str, str, str | None, int | None]]:
    return [(f.kind, f.component, f.codepoint, f.index) for f in findings]


# --- the whole check: (IRI, expected findings as (kind, component, U+XXXX, index)) ------

CHECK_CASES = [
    pytest.param("http://example.com/a/b?x=1#top", [], id="ascii-ok"),
    pytest.param("http://www.example.org/résumé/ñ?q=ü#ç", [], id="latin-iri-ok"),
    pytest.param(f"http://{ALEF}{BET}.example/{GIMEL}{ALEF}/", [], id="rtl-components-ok"),
    pytest.param(f"http://example.com/{ALEF}123{BET}/", [], id="rtl-with-inner-digits-ok"),
    pytest.param(f"http://example.com/{ALEF}{BET}{SHEVA}/", [], id="rtl-ending-nsm-ok"),
    pytest.param(f"http://example.com/{AR_ALEF}{AR_BEH}.{AR_BEH}", [], id="arabic-al-ok"),
    pytest.param(f"http://example.com/x?{ALEF}{BET}=abc&k={GIMEL}", [],
                 id="query-names-values-separate-ok"),
    pytest.param("http://日本語ひらがなカタカナ.jp/", [], id="japanese-label-ok"),
    pytest.param("http://中文注音ㄅㄆ.tw/", [], id="han-bopomofo-ok"),
    pytest.param("http://한국어漢字.kr/", [], id="hangul-han-ok"),
    pytest.param("http://παράδειγμα.δοκιμή/", [], id="greek-ok"),
    pytest.param("http://пример.рф/", [], id="cyrillic-ok"),
    pytest.param("http://abc-123.example/", [], id="digits-hyphen-common"),
    pytest.param(
        "http://a\u202eb.example/",
        [("bidi-formatting", "host", "U+202E", 8), ("idn", "host", "U+202E", 8)],
        id="rlo-in-host",
    ),
    pytest.param(
        "http://example.com/a\u200eb/c\u2067d",
        [("bidi-formatting", "path", "U+200E", 20), ("bidi-formatting", "path", "U+2067", 24)],
        id="lrm-and-isolate-in-path-all-reported",
    ),
    pytest.param(
        f"http://example.com/{ALEF}{BET}c/",
        [("bidi-mixed", "path", "U+0063", 21), ("bidi-boundary", "path", "U+0063", 21)],
        id="rtl-then-ltr-segment",
    ),
    pytest.param(
        f"http://example.com/x{ALEF}/",
        [("bidi-mixed", "path", "U+0078", 19), ("bidi-boundary", "path", "U+0078", 19)],
        id="ltr-then-rtl-segment",
    ),
    pytest.param(
        f"http://example.com/1{ALEF}/",
        [("bidi-boundary", "path", "U+0031", 19)],
        id="rtl-segment-starting-with-digit",
    ),
    pytest.param(
        f"http://example.com/{ALEF}1",
        [("bidi-boundary", "path", "U+0031", 20)],
        id="rtl-segment-ending-with-digit",
    ),
    pytest.param(
        f"http://example.com/p#{ALEF}x{BET}",
        [("bidi-mixed", "fragment", "U+0078", 22)],
        id="mixed-fragment",
    ),
    pytest.param(
        f"http://user{ALEF}@example.com/",
        [("bidi-mixed", "userinfo", "U+0075", 7), ("bidi-boundary", "userinfo", "U+0075", 7)],
        id="mixed-userinfo",
    ),
    pytest.param(
        f"http://ex{CYR_A}mple.com/",
        [("mixed-script", "host", "U+0430", 9)],
        id="latin-cyrillic-homograph",
    ),
    pytest.param(
        f"http://g{GREEK_O}{GREEK_O}gle.com/",
        [("mixed-script", "host", "U+03BF", 8)],
        id="latin-greek-homograph",
    ),
    pytest.param(
        "http://xn--pple-43d.com/",
        [("mixed-script", "host", "U+0070", 7)],
        id="punycode-homograph-decoded",
    ),
    pytest.param("http://xn--a.com/", [("idn", "host", "U+0078", 7)], id="invalid-a-label"),
    pytest.param(
        "http://a\u200db.com/", [("idn", "host", "U+200D", 8)], id="uts46-contextj-failure"
    ),
    pytest.param(
        "http://example.com/a b",
        [("syntax", "path", "U+0020", 20)],
        id="validate-space",
    ),
    pytest.param(
        "http://example.com/%zz",
        [("syntax", "path", "U+0025", 19)],
        id="validate-bad-percent",
    ),
    pytest.param(
        "http://[::1]/ok", [], id="ipv6-literal-not-a-label"
    ),
    # RFC 3986 3.2.2: an IP literal's error points at its "[" (unclosed, or no
    # address), at the text after its "]", or at the character no literal holds.
    pytest.param("http://[::1", [("syntax", "host", "U+005B", 7)], id="3986-3.2.2-unclosed"),
    pytest.param("http://u@[::1/x", [("syntax", "host", "U+005B", 9)], id="3986-3.2.2-unclosed-userinfo"),
    pytest.param("http://[:::1]/", [("syntax", "host", "U+005B", 7)], id="3986-3.2.2-invalid-ipv6"),
    pytest.param("http://[::1]x/", [("syntax", "host", "U+0078", 12)], id="3986-3.2.2-after-bracket"),
    pytest.param("http://[::g]/", [("syntax", "host", "U+0067", 10)], id="3986-3.2.2-non-hex"),
    # Hosts and ports of DNS schemes that level "scheme" refuses (no wire form),
    # though the RFC 3987 2.2 grammar allows them; not repeated after a syntax finding.
    pytest.param("http:///x", [("wire", "host", "U+002F", 7)], id="wire-empty-host"),
    pytest.param("http://:80/", [("wire", "host", "U+003A", 7)], id="wire-empty-host-port"),
    pytest.param("http://a..b/", [("wire", "host", "U+002E", 9)], id="wire-empty-label"),
    pytest.param("http://h:65536/", [("wire", "port", "U+0036", 9)], id="wire-port"),
    pytest.param("http://exa mple.com/", [("syntax", "host", "U+0020", 10)], id="wire-space-once"),
    pytest.param("foo:///x", [], id="wire-other-scheme"),
    pytest.param("http://example.com./", [], id="wire-trailing-dot"),
]


@pytest.mark.parametrize(("iri", "expected"), CHECK_CASES)
def test_check(iri: str, expected: list[tuple[str, str, str, int]]) -> None:
    assert kinds(check(iri)) == expected


@pytest.mark.parametrize("char", sorted(BIDI_FORMATTING), ids=lambda c: f"U+{ord(c):04X}")
def test_every_bidi_formatting_character_is_flagged_once(char: str) -> None:
    iri = f"http://example.com/a{char}b"
    found = check(iri)
    assert [(f.kind, f.index) for f in found] == [("bidi-formatting", 20)]
    assert f"U+{ord(char):04X} at index 20" in str(found[0])
    # validate() reports the same character; check() does not report it twice.
    with pytest.raises(ValueError, match=f"U\\+{ord(char):04X}"):
        validate(iri)


def test_findings_are_sorted_by_index() -> None:
    iri = f"http://ex{CYR_A}mple.com/{ALEF}x/a\u200fb"
    indices = [f.index for f in check(iri)]
    assert indices == sorted(i for i in indices if i is not None)
    assert {f.kind for f in check(iri)} == {"mixed-script", "bidi-mixed", "bidi-boundary",
                                           "bidi-formatting"}


# --- components (RFC 3987 section 4.2) ---------------------------------------------------

COMPONENT_CASES = [
    pytest.param(
        "http://u:p@a.b:80/x/y?k=v&z#f",
        [("userinfo", "u:p", 7), ("host", "a", 11), ("host", "b", 13), ("path", "x", 18),
         ("path", "y", 20), ("query", "k", 22), ("query", "v", 24), ("query", "z", 26),
         ("fragment", "f", 28)],
        id="all-components",
    ),
    pytest.param("mailto:a@b.c", [("path", "a@b.c", 7)], id="rootless-path"),
    pytest.param("//h/p", [("host", "h", 2), ("path", "p", 4)], id="network-path-reference"),
    pytest.param("a:b/c", [("path", "b", 2), ("path", "c", 4)], id="scheme-then-path"),
    pytest.param("1a:b/c", [("path", "1a:b", 0), ("path", "c", 5)], id="not-a-scheme"),
    pytest.param("http://[::1]:8/", [], id="ip-literal-skipped"),
]


@pytest.mark.parametrize(("iri", "expected"), COMPONENT_CASES)
def test_components(iri: str, expected: list[tuple[str, str, int]]) -> None:
    got = [(c.name, c.text, c.start) for c in components(iri)]
    assert got == expected
    for c in components(iri):
        assert iri[c.start : c.start + len(c.text)] == c.text


BIDI_COMPONENT_CASES = [
    pytest.param("abc", [], id="ltr"),
    pytest.param("123", [], id="digits"),
    pytest.param(f"{ALEF}{BET}", [], id="rtl"),
    pytest.param(f"{ALEF}-{BET}", [], id="rtl-inner-neutral"),
    pytest.param(f"{ALEF}{SHEVA}{SHEVA}", [], id="rtl-trailing-nsm"),
    pytest.param(f"{ALEF}a", ["bidi-mixed", "bidi-boundary"], id="mixed"),
    pytest.param(f"-{ALEF}", ["bidi-boundary"], id="starts-neutral"),
    pytest.param(f"{ALEF}.", ["bidi-boundary"], id="ends-neutral"),
    pytest.param(f"1{ALEF}1", ["bidi-boundary", "bidi-boundary"], id="both-ends"),
]


@pytest.mark.parametrize(("text", "expected"), BIDI_COMPONENT_CASES)
def test_bidi_component_rules(text: str, expected: list[str]) -> None:
    got = check_bidi_component(Component("path", text, 100))
    assert [f.kind for f in got] == expected
    assert all(f.index is not None and 100 <= f.index < 100 + len(text) for f in got)


@pytest.mark.parametrize(
    ("iri", "component", "index"),
    [
        pytest.param("http://a:8\u200e0/", "port", 10, id="port"),
        pytest.param("http://[::1\u200e]/", "host", 11, id="ip-literal"),
        pytest.param("h\u200e:x", "path", 1, id="not-a-scheme-is-a-path"),
    ],
)
def test_bidi_formatting_outside_bidi_components(iri: str, component: str, index: int) -> None:
    # Port and IP literal are no section 4.2 components; the character is still found.
    found = check_bidi_formatting(iri)
    assert [(f.component, f.index) for f in found] == [(component, index)]


# --- scripts ---------------------------------------------------------------------------

SCRIPT_CASES = [
    pytest.param("a", "Latin", id="latin"),
    pytest.param("\uff41", "Latin", id="fullwidth-latin"),
    pytest.param(CYR_A, "Cyrillic", id="cyrillic"),
    pytest.param(GREEK_O, "Greek", id="greek"),
    pytest.param(ALEF, "Hebrew", id="hebrew"),
    pytest.param(AR_BEH, "Arabic", id="arabic"),
    pytest.param("中", "Han", id="han"),
    pytest.param("ひ", "Hiragana", id="hiragana"),
    pytest.param("カ", "Katakana", id="katakana"),
    pytest.param("한", "Hangul", id="hangul"),
    pytest.param("ㄅ", "Bopomofo", id="bopomofo"),
    pytest.param("क", "Devanagari", id="devanagari"),
    pytest.param("\u093f", "Devanagari", id="devanagari-vowel-sign"),
    pytest.param("1", None, id="digit-common"),
    pytest.param("-", None, id="hyphen-common"),
    pytest.param("\u0301", None, id="combining-inherited"),
    pytest.param("\u30fc", None, id="prolonged-sound-mark-common"),
]


@pytest.mark.parametrize(("char", "script"), SCRIPT_CASES)
def test_script_of(char: str, script: str | None) -> None:
    assert script_of(char) == script


def test_label_scripts_first_indices() -> None:
    assert label_scripts(f"1a{CYR_A}b") == [("Latin", 1), ("Cyrillic", 2)]


HOST_CASES = [
    pytest.param("example.com", [], id="ascii"),
    pytest.param("xn--bcher-kva.example", [], id="valid-a-label"),
    pytest.param("bücher.example", [], id="valid-u-label"),
    pytest.param("xn--zz-.example", ["idn"], id="a-label-trailing-hyphen"),
    pytest.param(f"p{CYR_A}y.example", ["mixed-script"], id="mixed"),
    pytest.param(f"{CYR_A}{CYR_A}.example", ["homograph"], id="whole-script-cyrillic-lookalike"),
    pytest.param("a\u00adb.example", [], id="soft-hyphen-mapped-away"),
]


@pytest.mark.parametrize(("host", "expected"), HOST_CASES)
def test_check_host(host: str, expected: list[str]) -> None:
    assert [f.kind for f in check_host(host)] == expected


def test_finding_str_and_dict() -> None:
    f = Finding("bidi-mixed", "path", "component mixes", "a", 12)
    assert str(f) == "path: component mixes U+0061 at index 12 [bidi-mixed]"
    assert f.to_dict() == {"kind": "bidi-mixed", "component": "path",
                           "message": "component mixes", "codepoint": "U+0061", "index": 12}
    g = Finding("syntax", "host", "bad")
    assert str(g) == "host: bad [syntax]" and g.codepoint is None


def test_messages_cite_sections() -> None:
    text = " ".join(str(f) for f in check(f"http://ex{CYR_A}mple.com/{ALEF}x\u200e"))
    for cite in ("section 4.1", "section 4.2 rule 1", "section 4.2 rule 2", "section 8"):
        assert cite in text


SCRIPT_PROPERTY_CASES = [
    # Letters whose character name does not start with their script's name.
    pytest.param("\u02b0", "Latin", id="modifier-letter-small-h"),
    pytest.param("\u00aa", "Latin", id="feminine-ordinal"),
    pytest.param("\u1d2c", "Latin", id="modifier-letter-capital-a"),
    pytest.param("\u2c80", "Coptic", id="coptic"),
    pytest.param("\u1401", "Canadian_Aboriginal", id="canadian-syllabics"),
    pytest.param("\u07ca", "Nko", id="nko"),
    pytest.param("\u3005", "Han", id="ideographic-iteration-mark"),
]


@pytest.mark.parametrize(("char", "script"), SCRIPT_PROPERTY_CASES)
def test_script_of_follows_the_script_property(char: str, script: str) -> None:
    assert script_of(char) == script


@pytest.mark.parametrize(
    "host", ["x\u02b0y.com", "a\u00aa.com", "\u1d2cb.com"],
)
def test_latin_modifier_letters_are_not_a_second_script(host: str) -> None:
    assert [f for f in check_host(host) if f.kind == "mixed-script"] == []


def _letters_and_marks(planes: range) -> list[str]:
    return [
        chr(cp) for cp in range(planes.start * 0x10000, planes.stop * 0x10000)
        if unicodedata.category(chr(cp))[0] in "LM"
    ]


def _check_scripts(chars: list[str]) -> None:
    import regex

    # Unknown: a character newer than the installed regex knows (no finding then).
    common = regex.compile(r"[\p{Script=Common}\p{Script=Inherited}\p{Script=Unknown}]")
    wrong = []
    for char in chars:
        ours = script_of(char)
        if ours is None:
            ok = common.fullmatch(char) is not None
        else:
            ok = regex.fullmatch(rf"\p{{Script={ours}}}", char) is not None
        if not ok:
            wrong.append(f"U+{ord(char):04X} {ours}")
    assert not wrong, f"{len(wrong)} of {len(chars)}: {wrong[:20]}"


def test_script_of_every_bmp_letter_and_mark_is_its_unicode_script() -> None:
    # UAX 24 Script property, as the regex package (UCD Scripts.txt) has it.
    _check_scripts(_letters_and_marks(range(0, 1)))


@pytest.mark.slow
def test_script_of_every_letter_and_mark_is_its_unicode_script() -> None:
    _check_scripts(_letters_and_marks(range(1, 17)))
