"""Hosts: IDNA conversion (UTS 46) and host case rules.

RFC 3987 section 3.1 lets a system convert an ireg-name with ToASCII, label by
label; section 5.3.3 lets IDN and punycode spellings compare equal.  We use the
``idna`` package's UTS 46 processing (non-transitional, IDNA 2008), which is what
browsers and DNS registries use today; RFC 3987 names IDNA 2003 (RFC 3490),
whose mapping differs for a few characters (``ß``, ``ς``, ZWJ/ZWNJ): with IDNA
2003 ``faß.de`` would become ``fass.de``, another registered domain.
Conversions are cached per host.
"""

from __future__ import annotations

import ipaddress
import re
import unicodedata
from collections.abc import Callable
from functools import lru_cache

import idna

from iri_scrapy.core.errors import IRIHostError, IRIScrapyError
from iri_scrapy.core.parsing import component_starts, parse
from iri_scrapy.core.punycode import punycode_encode
from iri_scrapy.core.shorten import shorten

_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_CODEPOINT_RE = re.compile(r"U\+([0-9A-Fa-f]{4,6})")
# reg-name = *( unreserved / pct-encoded / sub-delims ) (RFC 3986 3.2.2), lowercase
# after ToASCII; a "%" produced by the mapping is not an escape.
_NOT_REG_NAME_RE = re.compile(r"[^a-z0-9\-._~!$&'()*+,;=]")


def lower_ascii(text: str) -> str:
    """Lowercase the US-ASCII letters of *text* only (RFC 3987 section 5.3.2.1)."""
    return text.translate(_ASCII_LOWER)


def _host_error(host: str, label: str, exc: Exception, start: int) -> IRIHostError:
    """Build an error naming the label, and the character when idna names one."""
    m = _CODEPOINT_RE.search(str(exc))
    char: str | None = None
    index: int | None = None
    if m:
        char = chr(int(m.group(1), 16))
        pos = host.find(char)
        index = start + pos if pos >= 0 else None
    if char is None:
        bad = next((c for c in label if not c.isascii()), None) or (label[:1] or None)
        char = bad
        if bad is not None:
            pos = host.find(bad)
            index = start + pos if pos >= 0 else None
    return IRIHostError(
        f"IDNA ToASCII (UTS 46) failed for label {shorten(label)!r}: {shorten(str(exc))}",
        component="host",
        char=char,
        index=index,
        text=host,
    )


def _too_long(host: str, octets: int, start: int) -> IRIHostError:
    """A host whose ToASCII result has (at least) *octets* octets, more than DNS allows."""
    return IRIHostError(
        f"the host's A-label form has {octets:,} octets or more, past the {MAX_DNS_NAME} "
        "of a DNS name (RFC 1034 section 3.1; UTS 46 VerifyDnsLength)",
        component="host", index=start, text=host,
    )


# Full stops that UTS 46 maps to U+002E (section 4, step 1 mapping), applied
# first so that the host can be split and each label converted (and cached) alone:
# the UTS 46 mapping and NFC never act across a full stop.
_DOTS = str.maketrans({"\u3002": ".", "\uff0e": ".", "\uff61": "."})
#: The longest domain name in text form, in octets, without a trailing root dot: 255
#: octets on the wire (RFC 1034 section 3.1, RFC 1035 section 2.3.4) less the length
#: octets.  UTS 46 section 4.2 (VerifyDnsLength) checks the same on ToASCII's result.
MAX_DNS_NAME = 253


_IDNA_UNICODE = getattr(idna, "unicode_version", "?")


@lru_cache(maxsize=8192)
def _map_char(char: str) -> str:
    """UTS 46 mapping of one code point (section 4 step 1, non-transitional, no
    STD3 rules), cached: ``idna.uts46_remap`` (public API) on the code point
    alone.  The mapping has no context, and NFC of the joined, per-code-point NFC
    results equals NFC of the joined raw results, so :func:`remap_label` gives what
    ``uts46_remap`` gives on the whole label.  Raises ``idna.InvalidCodepoint``
    for a disallowed code point."""
    if char >= "\x80" and unicodedata.category(char) == "Cn":
        # idna's tables may be of a newer Unicode than this Python's: NFC and the
        # bidi rule cannot be applied to a code point Python does not know, and a
        # result must not depend on which Python runs it.
        raise idna.InvalidCodepoint(
            f"Codepoint U+{ord(char):04X} is not assigned in this Python's Unicode "
            f"{unicodedata.unidata_version} (idna's tables: {_IDNA_UNICODE})"
        )
    return idna.uts46_remap(char, std3_rules=False)


def _mapped_or_empty(char: str) -> str:
    """The UTS 46 mapping of *char*, or ``""`` if it is disallowed."""
    try:
        return _map_char(char)
    except (idna.IDNAError, UnicodeError, ValueError):
        return ""


def remap_label(label: str) -> str:
    """``idna.uts46_remap(label, std3_rules=False, transitional=False)``, per code
    point from a cache (the mapping has no context; NFC comes last, as there)."""
    mapped = "".join([_map_char(c) for c in label])
    return mapped if unicodedata.is_normalized("NFC", mapped) else unicodedata.normalize(
        "NFC", mapped
    )


@lru_cache(maxsize=65536)
def _label_to_ascii(label: str) -> str | Exception:
    """UTS 46 ToASCII of one label (mapping, then A-label), or the exception."""
    try:
        mapped = remap_label(label)
    except (idna.IDNAError, UnicodeError, ValueError) as exc:
        return exc
    out = []
    parts = mapped.split(".")  # a mapping may (rarely) produce a full stop
    if len(parts) > 1 and "" in parts:
        # e.g. U+2488 DIGIT ONE FULL STOP maps to "1." under older UTS 46 tables:
        # the host would get an empty label (UTS 46 section 4.2 VerifyDnsLength),
        # whichever idna release is installed.
        culprit = next((c for c in label if "." in _mapped_or_empty(c)), label[:1])
        return idna.IDNAError(
            f"UTS 46 maps U+{ord(culprit):04X} to a full stop, leaving an empty label"
        )
    for part in parts:
        if part.isascii():
            out.append(part)
            continue
        try:
            # idna.alabel() is check_label + the punycode codec + a length check;
            # the same with UTS 46 validity and our faster RFC 3492 encoder.
            _check_label_uts46(part)
            alabel = "xn--" + punycode_encode(part)
        except (idna.IDNAError, UnicodeError, ValueError) as exc:
            return exc
        if len(alabel) > 63:
            return idna.IDNAError(f"Label too long: {alabel!r}")
        out.append(alabel)
    return ".".join(out)


# RFC 5892 Appendix A: the code points whose IDNA 2008 class is CONTEXTJ
# (A.1, A.2) and CONTEXTO (A.3 to A.9).  The lists are closed by the RFC; idna's
# public ``valid_contextj`` / ``valid_contexto`` apply the rules.
_CONTEXTJ = frozenset((0x200C, 0x200D))
_CONTEXTO = frozenset(
    (0x00B7, 0x0375, 0x05F3, 0x05F4, 0x30FB, *range(0x0660, 0x066A), *range(0x06F0, 0x06FA))
)


#: Code point -> (idna's public rule for its context, how the error names it).
_CONTEXT_RULES: dict[int, tuple[Callable[[str, int], bool], str]] = {
    **{cp: (idna.valid_contextj, "joiner ") for cp in _CONTEXTJ},
    **{cp: (idna.valid_contexto, "") for cp in _CONTEXTO},
}


def _check_label_uts46(label: str) -> None:
    """The validity criteria of UTS 46 section 4.1 on a mapped label.

    ``idna.check_label`` (strict IDNA 2008) also refuses code points that are not
    PVALID, such as the NV8 symbols of ``i❤.ws`` or ``☃.com``; UTS 46 (what
    browsers and registries use) allows them.  So the criteria are applied one by
    one with idna's public functions: NFC (criterion 1), hyphens (2, 3), no
    initial combining mark (5), each code point valid or deviation in the UTS 46
    table (6: its mapping is itself), CheckJoiners (7: the CONTEXTJ rules of RFC
    5892), the CONTEXTO rules of RFC 5892 (as IDNA 2008 registries apply them),
    and CheckBidi (8: RFC 5893).
    """
    if not label:
        raise idna.IDNAError("Empty Label")
    idna.check_nfc(label)
    idna.check_hyphen_ok(label)
    idna.check_initial_combiner(label)
    for pos, char in enumerate(label):
        cp = ord(char)
        rule = _CONTEXT_RULES.get(cp)
        if rule is not None:
            valid, what = rule
            try:
                ok = valid(label, pos)
            except ValueError:
                ok = False
            if not ok:
                raise idna.InvalidCodepointContext(f"{what}U+{cp:04X} not allowed in {label!r}")
        elif cp >= 0x80 and _map_char(char) != char:
            raise idna.InvalidCodepoint(f"Codepoint U+{cp:04X} not valid in a mapped label")
    idna.check_bidi(label)


# The flags of code_point_facts.
FACT_MARK, FACT_RTL, FACT_CONTEXT = 1, 2, 4
# The bidi classes that make a label a "bidi label" (RFC 5893 section 1.4), for which
# idna.check_bidi applies the rule; for any other label it returns True at once.
_RTL_CLASSES = frozenset(("R", "AL", "AN"))


def code_point_facts(cp: int) -> tuple[str | None, int] | None:
    """What :func:`_label_to_ascii` reads of one code point, for the native IRI path
    (core/_iripath.c, which asks once per code point and keeps the answer): ``None`` if
    the UTS 46 mapping disallows it (:func:`_map_char`), else its mapping (``None``:
    itself) and flags: FACT_MARK, a combining mark (``idna.check_initial_combiner``
    refuses one first in a label); FACT_RTL, a right-to-left or Arabic digit bidi class
    (the label then goes through ``idna.check_bidi``); FACT_CONTEXT, a CONTEXTJ or
    CONTEXTO code point (RFC 5892 rules).  The native path answers only a label none of
    whose rules can refuse it, and leaves every other to this module."""
    char = chr(cp)
    try:
        mapped = _map_char(char)
    except (idna.IDNAError, UnicodeError, ValueError):
        return None
    flags = (FACT_MARK if unicodedata.category(char)[0] == "M" else 0) | (
        FACT_RTL if unicodedata.bidirectional(char) in _RTL_CLASSES else 0) | (
        FACT_CONTEXT if cp in _CONTEXT_RULES else 0)
    return (None if mapped == char else mapped), flags


def _to_ascii_cached(host: str) -> str | Exception:
    out = []
    for label in host.translate(_DOTS).split("."):
        if label.isascii():
            out.append(lower_ascii(label))
            continue
        result = _label_to_ascii(label)
        if isinstance(result, Exception):
            return result
        out.append(result)
    return ".".join(out)


def _mapped_dot_empty_label(host: str) -> int | None:
    """The index of a non-ASCII full stop (U+3002, U+FF0E, U+FF61) beside which a
    label is empty, else None.  UTS 46 maps them to ".": ``。c`` would become
    ``.c``, another name than the one written (a trailing one is the root, kept)."""
    previous = -1
    for i, char in enumerate(host):
        if char == "." or char in "\u3002\uff0e\uff61":
            if i == previous + 1:
                if char != ".":
                    return i
                if previous >= 0 and host[previous] != ".":
                    return previous
            previous = i
    return None


def host_to_ascii(host: str, *, start: int = 0, dns_name: bool = False) -> str:
    """Convert a reg-name host to A-labels with UTS 46 ToASCII (RFC 3987 3.1, 5.3.3).

    ASCII hosts are only lowercased (no IDNA validation, so hosts with ``_`` and
    other names found in real crawls keep working).  A host that fails is an
    :class:`IRIHostError` naming the label and, where known, the character;
    *start* is the host's index in the whole IRI, for the error.  ``dns_name=True``
    (the mapping of RFC 3987 3.1 and 3.2) also refuses a non-ASCII full stop that
    leaves an empty label: ``。c`` would become ``.c``, no DNS name (UTS 46 with
    VerifyDnsLength, RFC 1034 section 3.1), where a browser (the URL Standard)
    takes it as written.
    """
    if host.isascii():
        return lower_ascii(host)
    # Each full stop is one octet of ToASCII's result: a host with too many is refused
    # before the work per label, whose memory grows with the number of labels.
    dots = sum(host.count(dot) for dot in ".\u3002\uff0e\uff61")
    if dots - 1 > MAX_DNS_NAME:
        raise _too_long(host, dots - 1, start)
    dot = _mapped_dot_empty_label(host) if dns_name else None
    if dot is not None:
        raise IRIHostError(
            f"UTS 46 maps {host[dot]!r} to '.', which leaves an empty label (RFC 1034 "
            "section 3.1): the host names no DNS name",
            component="host", char=host[dot], index=start + dot, text=host,
        )
    result = _to_ascii_cached(host)
    if isinstance(result, Exception):
        label = next((lab for lab in host.split(".") if not lab.isascii()), host)
        raise _host_error(host, label, result, start)
    length = len(result) - result.endswith(".")
    if length > MAX_DNS_NAME:
        raise _too_long(host, length, start)
    bad = _NOT_REG_NAME_RE.search(result)
    if bad is not None:
        # UTS 46 maps e.g. U+FF03 FULLWIDTH NUMBER SIGN to "#": a delimiter (or "%",
        # space) in the host would change the structure of the URI.
        culprit = next(
            (c for c in host if not c.isascii() and bad.group() in _mapped_or_empty(c)),
            bad.group(),
        )
        pos = host.find(culprit)
        raise IRIHostError(
            f"UTS 46 maps {culprit!r} to {bad.group()!r}, which a host cannot contain",
            component="host",
            char=culprit,
            index=start + pos if pos >= 0 else None,
            text=host,
        )
    return result


@lru_cache(maxsize=65536)
def host_to_unicode(host: str) -> str:
    """Convert ``xn--`` labels to Unicode with ToUnicode (RFC 3987 section 3.2.1).

    A label that is not a valid A-label is kept as it is (the conversion is
    optional, and an invalid label must not be invented into characters).
    """
    if "xn--" not in host.lower():
        return host
    out = []
    for label in host.split("."):
        if label[:4].lower() == "xn--":
            try:
                out.append(idna.ulabel(label.lower()))
                continue
            except (idna.IDNAError, UnicodeError, ValueError):
                pass
        out.append(label)
    return ".".join(out)


def clear_caches() -> None:
    """Empty this module's caches (benchmarks measure cold caches with it)."""
    for fn in (_map_char, _label_to_ascii, host_to_unicode, dns_wire_host):
        fn.cache_clear()


# --- hosts on the wire (level SCHEME, DNS schemes) ----------------------------------
#
# RFC 3987 section 3.1 maps an ireg-name of a scheme "known to use domain names"
# with ToASCII, and section 5.3.3 compares hosts after that conversion; a host that
# has no such conversion has no canonical form at level SCHEME.  What "cannot be on
# the wire" is taken from the URL Standard's host parser (what browsers and HTTP
# libraries accept): the forbidden host code points and the forbidden domain code
# points (C0 controls, "%", DEL), after percent-decoding of the host.  Lower levels
# (5.3.1, 5.3.2) stay lenient (Weber, draft-weber-iri-guidelines-01 section 5): they
# give a string, and SCHEME refuses that string exactly when it refuses the input,
# since the decision depends only on the decoded characters, which the case and
# percent rungs do not change.

# URL Standard, "forbidden host code point" and "forbidden domain code point".
_FORBIDDEN_HOST_RE = re.compile(r"[\x00-\x20#/:<>?@\[\\\]^|%\x7f]")
_ESCAPE_RE = re.compile(r"%[0-9A-Fa-f]{2}")
_HEXDIGITS = frozenset("0123456789abcdefABCDEF")
# IPvFuture = "v" 1*HEXDIG "." 1*( unreserved / sub-delims / ":" ) (RFC 3986 3.2.2).
_IPVFUTURE_RE = re.compile(r"[vV][0-9A-Fa-f]+\.[A-Za-z0-9\-._~!$&'()*+,;=:]+")
# ZoneID = 1*( unreserved / pct-encoded ) (RFC 6874 section 2), after "%25".
_ZONE_ID_RE = re.compile(r"(?:[A-Za-z0-9\-._~]|%[0-9A-Fa-f]{2})+")


class WireHostError(IRIHostError):
    """An :class:`IRIHostError` of :func:`dns_wire_host` or :func:`check_dns_port`:
    a host or port of a DNS scheme that cannot be on the wire.  Raised without the
    input (a rung sees the host as the rungs before it made it; :attr:`host` is
    that host), :meth:`in_input` points it at the host as written in the input."""

    host: str | None = None

    def in_input(self, text: str) -> IRIHostError:
        """The same refusal, its index in *text* (the input the rungs started from)."""
        written = parse(text).host
        if written is None or self.host is None:
            return self
        try:
            _wire_host(self.host, written)
        except _WireError as exc:
            return _wire_error(exc, written, text)
        return self


class _WireError(IRIScrapyError):
    """A host refused on the wire: the reason and the index in the host spelling."""

    def __init__(self, reason: str, index: int | None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.index = index


def ipv6_text(addr: str) -> str:
    """The canonical text of an IPv6 address (RFC 5952 section 4): lowercase hex,
    no leading zeros (4.1), ``::`` for the longest run of two or more zero fields,
    the first if two are as long (4.2), never for one field (4.2.2).

    Written here rather than taken from ``str(ipaddress.IPv6Address)``, whose
    output for IPv4-mapped addresses changed in Python 3.13 (``::ffff:1.2.3.4``):
    a canonical form must not depend on which Python computes it.  Embedded IPv4
    is written in hex too (``::ffff:1.2.3.4`` is ``::ffff:102:304``), as the URL
    Standard's IPv6 serializer does, so what browsers send: RFC 5952 section 5
    RECOMMENDS the mixed notation for the well-known IPv4-embedding prefixes; we
    deviate (README, "What the RFC leaves open") so that every spelling of an
    address has the one the wire uses.  Raises ``ValueError`` for an invalid
    address.
    """
    value = int(ipaddress.IPv6Address(addr))
    fields = [(value >> (112 - 16 * i)) & 0xFFFF for i in range(8)]
    best_start, best_len, i = -1, 1, 0
    while i < 8:
        if fields[i] == 0:
            j = i
            while j < 8 and fields[j] == 0:
                j += 1
            if j - i > best_len:
                best_start, best_len = i, j - i
            i = j
        else:
            i += 1
    hexes = [f"{f:x}" for f in fields]
    if best_start < 0:
        return ":".join(hexes)
    return ":".join(hexes[:best_start]) + "::" + ":".join(hexes[best_start + best_len :])


def _ip_literal(host: str) -> str:
    """The wire form of an IP-literal (RFC 3986 3.2.2, RFC 6874 2), or _WireError.

    IPv6 in RFC 5952 canonical text (the zone ID, ``%25`` and its ZoneID, kept as
    the lower rungs left it); IPvFuture as it is (the case rung folded it).
    """
    end = host.find("]")
    if end < 0:
        raise _WireError("IP literal without its closing ']' (RFC 3986 section 3.2.2)", 0)
    if end + 1 < len(host):
        raise _WireError("text after the closing ']' of an IP literal (RFC 3986 3.2.2)", end + 1)
    inner = host[1:end]
    if _IPVFUTURE_RE.fullmatch(inner):
        return host
    addr, pct, zone = inner.partition("%")
    if pct and not (zone.startswith("25") and _ZONE_ID_RE.fullmatch(zone, 2)):
        raise _WireError(
            "a zone identifier is '%25' then unreserved or pct-encoded characters (RFC 6874 "
            "section 2)", 1 + len(addr),
        )
    try:
        text = ipv6_text(addr)
    except ValueError:
        bad = next((i for i, c in enumerate(addr) if c not in _HEXDIGITS and c not in ":."), None)
        raise _WireError(
            "invalid IPv6 address (RFC 3986 section 3.2.2)", 0 if bad is None else 1 + bad
        ) from None
    return "[" + text + pct + zone + "]"


def _decoded_index(host: str) -> tuple[str, list[int]]:
    """Percent-decode *host* as UTF-8 (URL Standard host parser), with the index in
    *host* of each decoded character; _WireError if the octets are not UTF-8."""
    if "%" not in host:
        return host, list(range(len(host)))
    out = bytearray()
    where: list[int] = []
    i = 0
    while i < len(host):
        if _ESCAPE_RE.match(host, i):
            out.append(int(host[i + 1 : i + 3], 16))
            where.append(i)
            i += 3
        else:
            data = host[i].encode("utf-8", "surrogatepass")
            out += data
            where += [i] * len(data)
            i += 1
    try:
        text = out.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _WireError(
            "percent-encoded octets of the host are not UTF-8 (RFC 3987 section 3.1)",
            where[exc.start],
        ) from None
    # The index of each decoded character is that of its first octet.
    index, pos = [], 0
    for char in text:
        index.append(where[pos])
        pos += len(char.encode("utf-8", "surrogatepass"))
    return text, index


def _reg_name(host: str, spelling: str) -> None:
    """Refuse a reg-name that cannot be on the wire (raises _WireError): *host* as
    the rungs made it, *spelling* as written (for the indexes)."""
    if not host:
        raise _WireError("empty host (RFC 3986 section 3.2.2; URL Standard host parser)",
                         0 if spelling else None)
    text, index = _decoded_index(spelling)
    bad = _FORBIDDEN_HOST_RE.search(text)
    if bad is not None:
        char = bad.group()
        how = "" if spelling[index[bad.start()]] == char else " (percent-encoded)"
        raise _WireError(
            f"U+{ord(char):04X}{how} is a forbidden host code point (URL Standard, host "
            "parsing)", index[bad.start()],
        )
    parts = host.split(".")
    if "" not in parts[:-1]:
        return
    # The k-th label of the host is the k-th label of the spelling (UTS 46 maps
    # the other full stops to "." first; one that maps to nothing leaves it empty).
    k = parts.index("")
    labels = text.translate(_DOTS).split(".")
    at = sum(len(label) + 1 for label in labels[:k]) if k < len(labels) else len(text)
    raise _WireError(
        "empty label (RFC 1034 section 3.1; only a trailing dot is kept)",
        index[at] if at < len(index) else None,
    )


# URL Standard, host parsing: "If asciiDomain ends in a number, then return the
# result of IPv4 parsing asciiDomain", which fails unless it is an IPv4 address.
_RADIX_DIGITS = {10: frozenset("0123456789"), 8: frozenset("01234567"),
                 16: frozenset("0123456789abcdefABCDEF")}


def _ipv4_number(part: str) -> int | None:
    """The URL Standard's IPv4 number parser: decimal, ``0x`` hexadecimal or ``0``
    octal (an empty number after the prefix is 0); ``None`` for failure."""
    if not part:
        return None
    radix = 10
    if len(part) >= 2 and part[0] == "0" and part[1] in "xX":
        part, radix = part[2:], 16
    elif len(part) >= 2 and part[0] == "0":
        part, radix = part[1:], 8
    if not part:
        return 0
    digits = _RADIX_DIGITS[radix]
    if not all(c in digits for c in part):
        return None
    return int(part, radix)


# The last character of a host whose last label can be an IPv4 number (a decimal,
# octal or ``0x`` hexadecimal number; ``0x`` alone is 0), or of one with a trailing
# dot: any other last character answers "no" at once (most hosts: ``.com``).
NUMBER_END = frozenset("0123456789abcdefABCDEFxX.")
# The first character of every IPv4 number (decimal, octal, ``0x`` hexadecimal): a last
# label starting otherwise (``docs.example``, ``.de``) does not end in a number.
NUMBER_START = frozenset("0123456789")


def ends_in_number(host: str) -> bool:
    """The URL Standard's "ends in a number checker" on an ASCII host: its last label
    (less one trailing dot) is all ASCII digits or an IPv4 number (``0x1f``)."""
    if not host or host[-1] not in NUMBER_END:
        return False
    end = len(host) - 1 if host[-1] == "." else len(host)
    last = host[host.rfind(".", 0, end) + 1 : end]
    if not last or last[0] not in NUMBER_START:
        return False
    if last.isascii() and last.isdigit():
        return True
    return _ipv4_number(last) is not None


def _ipv4(host: str, spelling: str) -> None:
    """The URL Standard's IPv4 parser on a host that ends in a number: raise
    _WireError unless it gives an address (the host is then kept as written: its
    other spellings, ``127.1`` or ``0x7f.0.0.1``, are not merged with it)."""
    parts = host.split(".")
    if parts[-1] == "" and len(parts) > 1:
        parts.pop()
    why, bad = "", 0
    numbers = [_ipv4_number(part) for part in parts[:5]]
    if len(parts) > 4:
        why, bad = "it has more than four parts", 4
    elif None in numbers:
        bad = numbers.index(None)
        why = f"{parts[bad]!r} is not a decimal, 0x hexadecimal or 0 octal number"
    else:
        values = [n for n in numbers if n is not None]
        big = next((k for k, n in enumerate(values[:-1]) if n > 255), None)
        limit = 256 ** (5 - len(values))
        if big is not None:
            why, bad = f"its part {parts[big]!r} is above 255", big
        elif values[-1] >= limit:
            why, bad = f"its last part {parts[-1]!r} is above {limit - 1}", len(values) - 1
    if not why:
        return
    raise _WireError(
        f"a host ending in a number is an IPv4 address (URL Standard, host parsing and "
        f"IPv4 parser), and {why}", _label_start(spelling, bad),
    )


def _label_start(spelling: str, k: int) -> int | None:
    """The index in *spelling* of the first character of its *k*-th label (UTS 46
    maps the other full stops to "." first)."""
    try:
        text, index = _decoded_index(spelling)
    except _WireError:
        return None
    labels = text.translate(_DOTS).split(".")
    at = sum(len(label) + 1 for label in labels[:k])
    return index[at] if k < len(labels) and at < len(index) else None


# A host the rungs made that surely goes on the wire: non-empty labels of
# characters that need no check, an optional trailing dot.  The decision on it is
# the decision on its spelling (they have the same percent-decoded characters, or
# ToASCII refused), so the spelling is looked at only to refuse it.
_PLAIN_WIRE_HOST_RE = re.compile(r"[a-z0-9\-_~!$&'()*+,;=]+(?:\.[a-z0-9\-_~!$&'()*+,;=]+)*\.?")


def _wire_host(host: str, spelling: str) -> str:
    if _PLAIN_WIRE_HOST_RE.fullmatch(host):
        if ends_in_number(host):
            _ipv4(host, spelling)
        return host
    if host[:1] == "[":
        try:
            return _ip_literal(host)
        except _WireError:
            if spelling != host:
                # The same decision (the rungs only lowercase and encode), with
                # the index in the spelling.
                _ip_literal(spelling)
            raise
    _reg_name(host, spelling)
    if ends_in_number(host):
        _ipv4(host, spelling)
    return host


@lru_cache(maxsize=65536)
def dns_wire_host(host: str, spelling: str | None = None) -> str:
    """The host of a DNS scheme at level SCHEME as it goes on the wire (RFC 3987
    5.3.3), or an :class:`IRIHostError`.

    *host* is what the case, percent and scheme rungs made of it; *spelling* (by
    default *host*) is the host as written, which the decision is made on (the
    same for every spelling: it depends only on the percent-decoded characters)
    and which the error's index refers to (a :class:`WireHostError`, which
    :meth:`WireHostError.in_input` points at the input).  Cached.

    Refused: an empty host; a reg-name holding, after percent-decoding as UTF-8,
    a forbidden host or domain code point of the URL Standard (C0 controls,
    space, ``#%/:<>?@[\\]^|``, DEL) or octets that are not UTF-8; an empty label
    (a trailing dot is kept: ``example.com.`` may be another virtual host); a
    host that ends in a number (its last label all digits, or ``0x`` hex) and is
    no IPv4 address to the URL Standard's IPv4 parser (``256.1.1.1``, ``a.1``,
    ``example.123``); an unclosed or invalid IP literal, or a zone ID that is not
    ``%25`` ZoneID (RFC 6874 section 2).  IPv6 is written in RFC 5952 canonical text
    (:func:`ipv6_text`); IPvFuture and zone IDs are kept.
    """
    if spelling is None:
        spelling = host
    try:
        return _wire_host(host, spelling)
    except _WireError as exc:
        error = _wire_error(exc, spelling, None)
        error.host = host
        raise error from None


def _wire_error(exc: _WireError, spelling: str, text: str | None) -> WireHostError:
    index = exc.index
    if text is None:
        error = WireHostError(
            exc.reason, component="host", char=None if index is None else spelling[index],
            index=index, text=spelling,
        )
        return error
    start = component_starts(text).get("host", 0)
    at = start + (index or 0)
    char = text[at] if at < len(text) else None
    return WireHostError(exc.reason, component="host", char=char, index=at if char else None,
                         text=text)


def check_dns_port(port: str) -> None:
    """Refuse a port (decimal digits) above 65535 (RFC 9110 4.2, RFC 6455 3, RFC 1738
    3.2: a TCP port is 16 bits), naming its first digit."""
    value = port.lstrip("0")
    if len(value) > 5 or (value and int(value) > 65535):
        significant = len(port) - len(value)
        raise WireHostError(
            "port above 65535 (a TCP port is 16 bits)", component="port",
            char=port[significant], index=significant, text=port,
        )
