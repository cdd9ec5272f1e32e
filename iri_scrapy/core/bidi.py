"""Presentation checks of an IRI: bidi, IDN and mixed-script host labels.

The analyses behind ``iri-scrapy check``, pure and without Scrapy.  Each check
returns :class:`Finding` objects naming the component, the character
(``U+XXXX``) and its index in the text as given:

* ``bidi-formatting``: a bidirectional formatting character (LRM, RLM, LRE,
  RLE, PDF, LRO, RLO, and ALM and the isolates LRI, RLI, FSI, PDI), which
  "MUST NOT" appear in an IRI (RFC 3987 section 4.1).
* ``bidi-mixed``: a component that uses both right-to-left (bidi class R or
  AL) and left-to-right (class L) characters, against rule 1 of RFC 3987
  section 4.2 ("A component SHOULD NOT use both right-to-left and left-to-right
  characters").
* ``bidi-boundary``: a component with right-to-left characters that does not
  start with one, or does not end with one (possibly followed by nonspacing
  marks, class NSM), against rule 2 of section 4.2 (draft-iri-bidi-guidelines
  section 3 adds the NSM allowance).
* ``idn``: a host label that fails UTS 46 ToASCII (via
  :func:`iri_scrapy.core.hosts.host_to_ascii`), or an ``xn--`` label that is no
  valid A-label (RFC 3987 section 3.1, RFC 5891).
* ``mixed-script``: a host label whose letters come from scripts that no
  writing system combines (Latin with Cyrillic, Greek with Latin...): a
  homograph risk (RFC 3987 section 8, UTS 39 section 5.1 "highly restrictive").
  Common and Inherited characters (digits, hyphen, combining marks) do not
  count; Han with Hiragana/Katakana, Bopomofo or Hangul, each also with Latin,
  are accepted as single writing systems.
* ``homograph``: a host label written entirely in one script other than Latin
  whose letters all read as ASCII (``xn--80ak6aa92e``, Cyrillic ``аррӏе``, reads
  as ``apple``): a whole-script confusable (UTS 39 section 4, Confusable
  Detection; the letters and their readings are Unicode's ``confusables.txt``
  prototypes, :mod:`iri_scrapy.core.confusables`), the test browsers make
  before they show a label in Unicode (Chromium's IDN spoof checker).  As there,
  a label is accepted under a TLD in its script (``.рф``) or a ccTLD of it
  (``.ru``, ``.gr``...: :data:`~iri_scrapy.core.confusables.SCRIPT_TLDS`).
* ``wire``: a host or port of a scheme known to use DNS (http, https, ws, wss,
  ftp) that cannot be on the wire, which level ``scheme`` refuses
  (:func:`iri_scrapy.core.hosts.dns_wire_host`: an empty host or label, a forbidden
  host code point of the URL Standard after percent-decoding, a host ending in a
  number that is no IPv4 address, an invalid IP literal; a port above 65535),
  unless another finding is at the same index.
* ``syntax``: the first violation of the RFC 3987 section 2.2 grammar that
  :func:`iri_scrapy.validate` reports (other than bidi formatting characters,
  which are all reported above).

Components for the bidi rules are those of section 4.2: iuserinfo, each label
of ireg-name, each path segment, and, as section 4.2 suggests for the usual
name/value syntax, each name and each value of the query; and the fragment.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

import regex

from iri_scrapy.core.charclasses import BIDI_FORMATTING
from iri_scrapy.core.confusables import SCRIPT_TLDS, ascii_reading
from iri_scrapy.core.errors import IRIError, IRIHostError, describe_at, describe_char
from iri_scrapy.core.hosts import host_to_ascii, host_to_unicode
from iri_scrapy.core.parsing import SPLIT_RE, split_authority, split_match, validate
from iri_scrapy.core.schemes import uses_dns

_RTL = frozenset({"R", "AL"})
_LTR = "L"
_NSM = "NSM"


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem: its kind, component, message and, when it is about one, char and index."""

    kind: str
    component: str
    message: str
    char: str | None = None
    index: int | None = None

    @property
    def codepoint(self) -> str | None:
        return None if self.char is None else describe_char(self.char)

    def __str__(self) -> str:
        return f"{self.component}: {self.message}{describe_at(self.char, self.index)} [{self.kind}]"

    def to_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "component": self.component,
            "message": self.message,
            "codepoint": self.codepoint,
            "index": self.index,
        }


@dataclass(frozen=True, slots=True)
class Component:
    """A bidi component (RFC 3987 section 4.2): its name, text and start index."""

    name: str
    text: str
    start: int


def _split_spans(text: str, seps: str, start: int) -> Iterator[tuple[str, int]]:
    pos = 0
    for piece in re.split("[" + re.escape(seps) + "]", text):
        yield piece, start + pos
        pos += len(piece) + 1


def components(text: str) -> list[Component]:
    """The bidi components of *text* (section 4.2), with their indices in *text*.

    The whole text is split (RFC 3986 appendix B, as given: no white space is
    stripped); empty components are left out.  The scheme and the port are
    ASCII by syntax and are not components.
    """
    m = split_match(text)
    out: list[Component] = []
    if m.group(2) is not None:
        offset = m.start(2)
        userinfo, host, _port = split_authority(m.group(2))
        if userinfo is not None:
            out.append(Component("userinfo", userinfo, offset))
            offset += len(userinfo) + 1
        if not host.startswith("["):
            for label, i in _split_spans(host, ".", offset):
                out.append(Component("host", label, i))
    for seg, i in _split_spans(m.group(3), "/", m.start(3)):
        out.append(Component("path", seg, i))
    if m.group(4) is not None:
        for part, i in _split_spans(m.group(4), "&;=", m.start(4)):
            out.append(Component("query", part, i))
    if m.group(5) is not None:
        out.append(Component("fragment", m.group(5), m.start(5)))
    return [c for c in out if c.text]


def _locate(text: str, i: int) -> str:
    """The component of index *i* that is no bidi component (scheme, port, IP literal)."""
    m = SPLIT_RE.match(text)
    assert m is not None
    if m.group(1) is not None and i < m.end(1):
        return "scheme"
    if m.group(2) is not None and m.start(2) <= i < m.end(2):
        userinfo, host, _port = split_authority(m.group(2))
        host_start = m.start(2) + (0 if userinfo is None else len(userinfo) + 1)
        return "host" if i < host_start + len(host) else "port"
    return "iri"


def check_bidi_formatting(text: str) -> list[Finding]:
    """Every bidi formatting character of *text* (RFC 3987 section 4.1)."""
    comps = components(text)
    out = []
    for i, ch in enumerate(text):
        if ch in BIDI_FORMATTING:
            name = next(
                (c.name for c in comps if c.start <= i < c.start + len(c.text)), None
            ) or _locate(text, i)
            out.append(
                Finding(
                    "bidi-formatting",
                    name,
                    f"bidi formatting character {unicodedata.name(ch, '?')} not allowed "
                    "(RFC 3987 section 4.1)",
                    ch,
                    i,
                )
            )
    return out


def check_bidi_component(comp: Component) -> list[Finding]:
    """The rules of RFC 3987 section 4.2 for one component.

    1. no mix of right-to-left (R, AL) and left-to-right (L) characters;
    2. a component with right-to-left characters starts with one and ends with
       one, possibly followed by nonspacing marks (NSM; draft-iri-bidi-guidelines
       section 3).
    """
    text = comp.text
    # Formatting characters (RLM is class R, ALM class AL) are reported by
    # check_bidi_formatting; here they count as neutral.
    classes = ["BN" if c in BIDI_FORMATTING else unicodedata.bidirectional(c) for c in text]
    rtl = [i for i, b in enumerate(classes) if b in _RTL]
    if not rtl:
        return []
    out = []
    ltr = next((i for i, b in enumerate(classes) if b == _LTR), None)
    if ltr is not None:
        out.append(
            Finding(
                "bidi-mixed",
                comp.name,
                "component mixes right-to-left and left-to-right characters "
                "(RFC 3987 section 4.2 rule 1); first left-to-right one",
                text[ltr],
                comp.start + ltr,
            )
        )
    if classes[0] not in _RTL:
        out.append(
            Finding(
                "bidi-boundary",
                comp.name,
                "component with right-to-left characters does not start with one "
                f"(RFC 3987 section 4.2 rule 2); starts with bidi class {classes[0]}",
                text[0],
                comp.start,
            )
        )
    end = len(classes) - 1
    while end > 0 and classes[end] == _NSM:
        end -= 1
    if classes[end] not in _RTL:
        out.append(
            Finding(
                "bidi-boundary",
                comp.name,
                "component with right-to-left characters does not end with one "
                f"(RFC 3987 section 4.2 rule 2); ends with bidi class {classes[end]}",
                text[end],
                comp.start + end,
            )
        )
    return out


# --- scripts ---------------------------------------------------------------------

#: The Unicode scripts (long property value names, PropertyValueAliases.txt ``sc``)
#: that letters and marks can have, other than Common, Inherited and Unknown.
#: Which one a character has is asked of the ``regex`` package, which follows the
#: Unicode Character Database (Scripts.txt); tests/core/test_bidi.py checks that every
#: letter and mark of every plane gets its script from this list.
SCRIPTS: tuple[str, ...] = (
    "Latin", "Greek", "Cyrillic", "Armenian", "Hebrew", "Arabic", "Syriac", "Thaana",
    "Nko", "Samaritan", "Mandaic", "Devanagari", "Bengali", "Gurmukhi", "Gujarati",
    "Oriya", "Tamil", "Telugu", "Kannada", "Malayalam", "Sinhala", "Thai", "Lao",
    "Tibetan", "Myanmar", "Georgian", "Hangul", "Ethiopic", "Cherokee",
    "Canadian_Aboriginal", "Ogham", "Runic", "Tagalog", "Hanunoo", "Buhid", "Tagbanwa",
    "Khmer", "Mongolian", "Limbu", "Tai_Le", "New_Tai_Lue", "Buginese", "Tai_Tham",
    "Balinese", "Sundanese", "Batak", "Lepcha", "Ol_Chiki", "Braille", "Glagolitic",
    "Tifinagh", "Han", "Hiragana", "Katakana", "Bopomofo", "Yi", "Lisu", "Vai", "Bamum",
    "Syloti_Nagri", "Phags_Pa", "Saurashtra", "Kayah_Li", "Rejang", "Javanese", "Cham",
    "Tai_Viet", "Meetei_Mayek", "Coptic", "Linear_B", "Lycian", "Carian", "Old_Italic",
    "Gothic", "Old_Permic", "Ugaritic", "Old_Persian", "Deseret", "Shavian", "Osmanya",
    "Osage", "Elbasan", "Caucasian_Albanian", "Vithkuqi", "Todhri", "Linear_A",
    "Cypriot", "Imperial_Aramaic", "Palmyrene", "Nabataean", "Hatran", "Phoenician",
    "Lydian", "Sidetic", "Meroitic_Hieroglyphs", "Meroitic_Cursive", "Kharoshthi",
    "Old_South_Arabian", "Old_North_Arabian", "Manichaean", "Avestan",
    "Inscriptional_Parthian", "Inscriptional_Pahlavi", "Psalter_Pahlavi", "Old_Turkic",
    "Old_Hungarian", "Hanifi_Rohingya", "Garay", "Yezidi", "Old_Sogdian", "Sogdian",
    "Old_Uyghur", "Chorasmian", "Elymaic", "Brahmi", "Kaithi", "Sora_Sompeng", "Chakma",
    "Mahajani", "Sharada", "Khojki", "Multani", "Khudawadi", "Grantha", "Tulu_Tigalari",
    "Newa", "Tirhuta", "Siddham", "Modi", "Takri", "Ahom", "Dogra", "Warang_Citi",
    "Dives_Akuru", "Nandinagari", "Zanabazar_Square", "Soyombo", "Pau_Cin_Hau",
    "Sunuwar", "Bhaiksuki", "Marchen", "Masaram_Gondi", "Gunjala_Gondi", "Tolong_Siki",
    "Makasar", "Kawi", "Cuneiform", "Cypro_Minoan", "Egyptian_Hieroglyphs",
    "Anatolian_Hieroglyphs", "Gurung_Khema", "Mro", "Tangsa", "Bassa_Vah",
    "Pahawh_Hmong", "Kirat_Rai", "Medefaidrin", "Miao", "Tangut", "Nushu",
    "Khitan_Small_Script", "Duployan", "SignWriting", "Nyiakeng_Puachue_Hmong", "Toto",
    "Wancho", "Nag_Mundari", "Ol_Onal", "Mende_Kikakui", "Adlam",
)


def _script_pattern() -> regex.Pattern[str]:
    """One alternative per script this ``regex`` knows, each a named group: the
    group that matches a character names its Script property (UAX 24).  A script
    newer than the installed ``regex`` is left out (its letters then count as
    Common: no false finding)."""
    known = []
    for name in SCRIPTS:
        try:
            regex.compile(rf"\p{{Script={name}}}")
        except regex.error:
            continue
        known.append(rf"(?P<{name}>\p{{Script={name}}})")
    return regex.compile("|".join(known))


_SCRIPT_RE = _script_pattern()
#: Sets of scripts that one writing system uses together (UTS 39 section 5.1,
#: "highly restrictive"): Japanese, Chinese with Bopomofo, Korean; each with Latin.
_COMPATIBLE: tuple[frozenset[str], ...] = (
    frozenset({"Latin", "Han", "Hiragana", "Katakana"}),
    frozenset({"Latin", "Han", "Bopomofo"}),
    frozenset({"Latin", "Han", "Hangul"}),
)


@lru_cache(maxsize=4096)
def script_of(char: str) -> str | None:
    """The Unicode Script property (UAX 24, Scripts.txt) of a letter or mark, or
    ``None`` for Common and Inherited ones and for every other character.

    Digits, punctuation and symbols do not count (UTS 39 section 5.1 resolves
    Common and Inherited to every script), nor do combining marks shared by
    scripts (``U+0301``, Inherited) or ``U+30FC`` KATAKANA-HIRAGANA PROLONGED
    SOUND MARK (Common).  Asked of the ``regex`` package, which follows the
    Unicode Character Database: ``ʰ`` (U+02B0) and ``ª`` (U+00AA) are Latin.
    """
    if unicodedata.category(char)[0] not in "LM":
        return None
    m = _SCRIPT_RE.match(char)
    return None if m is None else m.lastgroup


def label_scripts(label: str) -> list[tuple[str, int]]:
    """The scripts of *label* in order of first use, each with the index of its first letter."""
    seen: dict[str, int] = {}
    for i, ch in enumerate(label):
        script = script_of(ch)
        if script is not None and script not in seen:
            seen[script] = i
    return list(seen.items())


def _mixed(scripts: list[tuple[str, int]]) -> bool:
    names = {s for s, _ in scripts}
    return len(names) > 1 and not any(names <= ok for ok in _COMPATIBLE)


def check_host(host: str, start: int = 0) -> list[Finding]:
    """IDN and mixed-script checks of a reg-name host (RFC 3987 sections 3.1 and 8).

    *start* is the host's index in the whole IRI.  ``xn--`` labels are decoded
    (ToUnicode) first, so a punycode homograph is caught like its Unicode form;
    its findings point at the label's first character.
    """
    if not host or host.startswith("["):
        return []
    out: list[Finding] = []
    if not host.isascii():
        try:
            host_to_ascii(host, start=start)
        except IRIError as exc:
            out.append(
                Finding(
                    "idn",
                    "host",
                    _message(exc),
                    exc.char,
                    exc.index,
                )
            )
    tld = host.rstrip(".").rsplit(".", 1)[-1]
    if tld[:4].lower() == "xn--":
        tld = host_to_unicode(tld.lower())
    for label, i in _split_spans(host, ".", start):
        shown = label
        decoded = False
        if label[:4].lower() == "xn--":
            shown = host_to_unicode(label.lower())
            if shown == label.lower():
                out.append(
                    Finding(
                        "idn",
                        "host",
                        f"label {label!r} is not a valid A-label (RFC 5891 section 5.4)",
                        label[0],
                        i,
                    )
                )
                continue
            decoded = True
        scripts = label_scripts(shown)
        if _mixed(scripts):
            names = " + ".join(s for s, _ in scripts)
            (second, j) = scripts[1]
            what = f"label {label!r}" + (f" ({shown})" if decoded else "")
            out.append(
                Finding(
                    "mixed-script",
                    "host",
                    f"{what} mixes scripts {names}: homograph risk "
                    f"(RFC 3987 section 8); first {second} letter",
                    shown[j],
                    i if decoded else i + j,
                )
            )
        elif len(scripts) == 1 and scripts[0][0] != "Latin":
            found = _whole_script(label, shown, decoded, scripts[0][0], tld, i)
            if found is not None:
                out.append(found)
    return out


def _whole_script(label: str, shown: str, decoded: bool, script: str, tld: str,
                  index: int) -> Finding | None:
    """The ``homograph`` finding of a label of one *script* whose letters all read as
    ASCII (UTS 39 section 4), unless the TLD is of that script or one of its ccTLDs."""
    reading = ascii_reading(shown)
    if reading is None:
        return None
    if tld.lower() in SCRIPT_TLDS.get(script, ()) or any(
        script_of(c) == script for c in tld
    ):
        return None
    what = f"label {label!r}" + (f" ({shown})" if decoded else "")
    return Finding(
        "homograph",
        "host",
        f"{what} is written in {script} letters that all read as ASCII "
        f"{reading!r}: whole-script homograph (UTS 39 section 4; browsers show it "
        "as punycode)",
        shown[0],
        index,
    )


def _message(exc: IRIError) -> str:
    """The text of *exc* without its ``component: `` prefix and ``U+XXXX at index N`` suffix."""
    text = str(exc).removeprefix(exc.component + ": ")
    if exc.char is not None:
        suffix = " " + describe_char(exc.char)
        if exc.index is not None:
            suffix += f" at index {exc.index}"
        text = text.removesuffix(suffix)
    return text


def check(text: str) -> list[Finding]:
    """All findings for *text*, ordered by index (RFC 3987 sections 2.2, 3.1, 4.1, 4.2, 8)."""
    findings = check_bidi_formatting(text)
    for comp in components(text):
        findings += check_bidi_component(comp)
    m = split_match(text)
    if m.group(2) is not None:
        userinfo, host, _port = split_authority(m.group(2))
        offset = m.start(2) + (0 if userinfo is None else len(userinfo) + 1)
        findings += check_host(host, offset)
    wire = _wire_finding(text, m.group(1)) if m.group(2) is not None else None
    try:
        validate(text)
    except IRIError as exc:
        if exc.char is None or exc.char not in BIDI_FORMATTING:
            findings.append(
                Finding(
                    "syntax",
                    exc.component,
                    _message(exc),
                    exc.char,
                    exc.index,
                )
            )
    if wire is not None and all(f.index != wire.index for f in findings):
        findings.append(wire)
    findings.sort(key=lambda f: (-1 if f.index is None else f.index))
    return findings


def _wire_finding(text: str, scheme: str | None) -> Finding | None:
    """The refusal of level ``scheme`` for a DNS scheme's host or port, if any."""
    from iri_scrapy.core.ladder import normalize  # the ladder does not import this module

    if scheme is None or not uses_dns(scheme.lower()):
        return None
    try:
        normalize(text)
    except IRIHostError as exc:
        return Finding("wire", exc.component, _message(exc), exc.char, exc.index)
    except IRIError:
        return None
    return None
