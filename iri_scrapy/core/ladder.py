"""The comparison ladder of RFC 3987 section 5.3, as explicit levels and rungs.

Each rung is a pure function from :class:`IRIReference` to :class:`IRIReference`
that cites its section; :func:`normalize` applies the rungs of a level in ladder
order and writes the result in URI form (``form="uri"``, what a crawler fetches)
or IRI form (``form="iri"``, what a person reads).

There is one climb (:func:`climb`, a generator of ``(rung, reference)``) and one
options object (:class:`NormalizeOptions`); normalize, equivalent, rungs_applied,
``explain`` and ``dedupe`` all climb through it.  Two shortcuts give the same
strings faster: a regular expression that recognizes URIs already canonical
(``fast_path``, most crawl URLs) and a one-pass composition of the rungs
(``fused_path``); every example table runs through all three (tests/support/paths.py).

The public names are the facade's (``iri_scrapy.normalize``, ``Level``, ...)
and, from this module's path, its ``__all__``: the rungs.  The other names
without a leading underscore (``climb``, ``NormalizeOptions``, ``fast_path``,
``fused_path``, ``render``, ``apply_rung``, ``clear_caches``, ...) are the internal
API other modules of the package and its tests use; no module imports a
``_private`` name of another.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum, IntEnum
from functools import cache, lru_cache
from typing import Literal, Protocol

from iri_scrapy.core import native
from iri_scrapy.core.errors import IRIError, IRISyntaxError
from iri_scrapy.core.hosts import (
    WireHostError,
    check_dns_port,
    dns_wire_host,
    ends_in_number,
    host_to_ascii,
    lower_ascii,
    remap_label,
)
from iri_scrapy.core.mapping import decode_component, encode_component, uri_to_iri
from iri_scrapy.core.parsing import (
    SCHEME_RE,
    WHITESPACE,
    IRIReference,
    check_str,
    component_starts,
    guard_path,
    parse,
    split_authority,
    split_match,
)
from iri_scrapy.core.resolve import remove_dot_segments
from iri_scrapy.core.schemes import DEFAULT_PORTS, DNS_SCHEMES, default_port, scheme_path, uses_dns
from iri_scrapy.core.surt import reorder


class RulesHook(Protocol):
    """What level PROTOCOL applies (RFC 3987 section 5.3.4): a map of canonical
    URIs (level SCHEME output) to the spelling the protocol taught, idempotent.

    The core's hook for protocol-based normalization: the core learns nothing
    itself.  :class:`iri_scrapy.protocol.rules.ProtocolRules` (the optional
    ``iri_scrapy/protocol/`` folder) is one; any object with this method is.
    """

    def apply(self, uri: str, /) -> str:
        """*uri* mapped to the spelling learned for it (``apply(apply(u)) == apply(u)``)."""
        ...

__all__ = [
    "case_normalize",
    "character_normalize",
    "percent_normalize",
    "path_segment_normalize",
    "scheme_normalize",
]

#: Version of the canonical form.  Stored keys (JOBDIR files, Redis keys) record
#: it, so that a change of the ladder never mixes keys silently.
#: 2: an escape at index 0 of a component is decoded like any other; escapes that
#: would make a scheme of a relative reference's first segment stay; a non-ASCII
#: mailto domain keeps its case (and uppercase hex).
#: 3: with nfc=True, NFC is applied to a label of a DNS host only where UTS 46 maps
#: it as it maps the label (``q\u0345\u0301j.com`` keeps its domain); a DNS host
#: ending in a number that is no IPv4 address is refused (URL Standard).
CANONICALIZATION_VERSION = 3

Form = Literal["uri", "iri", "surt"]  # "surt": see iri_scrapy.core.surt
#: The forms :func:`normalize` writes through the ladder (a new one is added here
#: and in ``render``); ``"surt"`` is the canonical URI reordered by
#: :func:`iri_scrapy.core.surt.reorder`, handled first in :func:`normalize`.
FORMS: tuple[str, ...] = ("uri", "iri")


class Level(IntEnum):
    """The levels of the comparison ladder; each includes the ones below it."""

    SIMPLE = 1  #: 5.3.1 simple string comparison
    SYNTAX = 2  #: 5.3.2 syntax-based normalization
    SCHEME = 3  #: 5.3.3 scheme-based normalization
    PROTOCOL = 4  #: 5.3.4 protocol-based normalization

    @classmethod
    def coerce(cls, value: Level | int | str) -> Level:
        """Accept a :class:`Level`, its number, or its name in any case (``"scheme"``)."""
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            try:
                return cls[value.strip().upper()]
            except KeyError:
                names = ", ".join(level.name.lower() for level in cls)
                raise ValueError(f"unknown level {value!r}; expected one of {names}") from None
        return cls(value)


# The levels as module constants for the per-URL code: reading an enum member as a
# class attribute (``Level.SCHEME``) costs about as much as a short regex search
# on CPython 3.11.
_SYNTAX, _SCHEME, _PROTOCOL = Level.SYNTAX, Level.SCHEME, Level.PROTOCOL


class Rung(Enum):
    """One rung of the ladder: its section, its name and the level it belongs to."""

    SIMPLE = "5.3.1"
    CASE = "5.3.2.1"
    CHARACTER = "5.3.2.2"
    PERCENT = "5.3.2.3"
    PATH = "5.3.2.4"
    SCHEME = "5.3.3"
    PROTOCOL = "5.3.4"

    @property
    def section(self) -> str:
        return self.value

    @property
    def title(self) -> str:
        return _RUNG_TITLES[self]

    @property
    def level(self) -> Level:
        return _RUNG_LEVELS[self]

    @property
    def key(self) -> str:
        """Short lowercase name, used in stats keys (``case``, ``percent``...)."""
        return self.name.lower()


_RUNG_TITLES = {
    Rung.SIMPLE: "simple string comparison",
    Rung.CASE: "case normalization",
    Rung.CHARACTER: "character normalization (NFC)",
    Rung.PERCENT: "percent-encoding normalization",
    Rung.PATH: "path segment normalization",
    Rung.SCHEME: "scheme-based normalization",
    Rung.PROTOCOL: "protocol-based normalization",
}
_RUNG_LEVELS = {
    Rung.SIMPLE: Level.SIMPLE,
    Rung.CASE: Level.SYNTAX,
    Rung.CHARACTER: Level.SYNTAX,
    Rung.PERCENT: Level.SYNTAX,
    Rung.PATH: Level.SYNTAX,
    Rung.SCHEME: Level.SCHEME,
    Rung.PROTOCOL: Level.PROTOCOL,
}

# --- component helpers -----------------------------------------------------------

_PCT_RE = re.compile(r"%([0-9A-Fa-f]{2})")
_PCT_LOWER_RE = re.compile(r"%(?:[a-f][0-9A-Fa-f]|[0-9A-F][a-f])")
_UNRESERVED_OCTETS = {
    f"{b:02X}": chr(b)
    for b in range(128)
    if chr(b).isalnum() or chr(b) in "-._~"
}
# Characters that make a percent-decoded host unusable as a host: keep it encoded.
_HOST_UNSAFE_RE = re.compile(r"[\x00-\x20\x7f%/?#@:\[\]\\<>\"{}|^`]")


def _upper_pct(value: str | None) -> str | None:
    """Uppercase the hex digits of every ``%hh`` (RFC 3987 section 5.3.2.1)."""
    if value is None or "%" not in value or not _PCT_LOWER_RE.search(value):
        return value
    return _PCT_LOWER_RE.sub(lambda m: m.group().upper(), value)


_HEX = frozenset("0123456789ABCDEFabcdef")


def _fix_escape(m: re.Match[str]) -> str:
    """Decode an escape of an unreserved octet, else uppercase it (5.3.2.1, 5.3.2.3).

    A hex digit is not decoded right after a stray ``%`` (or ``%`` and one hex
    digit): ``%%36%31`` would otherwise become ``%61``, a new escape, and a second
    normalization would change it again.
    """
    hexdigits = m.group(1).upper()
    char = _UNRESERVED_OCTETS.get(hexdigits)
    if char is None:
        return "%" + hexdigits
    if char in _HEX:
        text, start = m.string, m.start()
        # Bounds checked: at the start of a component there is nothing before the
        # escape (a negative index would wrap to the end of the component).
        if (start >= 1 and text[start - 1] == "%") or (
            start >= 2 and text[start - 2] == "%" and text[start - 1] in _HEX
        ):
            return "%" + hexdigits
    return char


def _percent(value: str, component: str) -> str:
    """Decode escapes of unreserved octets, uppercase the rest, then map to a URI."""
    if "%" in value:
        value = _PCT_RE.sub(_fix_escape, value)
    return encode_component(value, component)


def _percent_path(path: str, relative: bool) -> str:
    """The percent rung on a path; *relative*: the reference has no scheme and no
    authority.

    RFC 3986 section 4.2: "A path segment that contains a colon character (e.g.,
    "this:that") cannot be used as the first segment of a relative-path
    reference, as it would be mistaken for a scheme name."  Such a text was read
    as a relative reference because what precedes the colon is not a scheme
    (``%68ttp:``); decoding must not make it one (``http:``), which would change
    the parse of the result.  Its escapes then stay, uppercased (5.3.2.1).
    """
    if relative and ":" in path:
        colon = path.index(":")
        head = path[:colon]
        if "%" in head and "/" not in head and SCHEME_RE.fullmatch(_percent(head, "path")):
            return (_upper_pct(head) or "") + _percent(path[colon:], "path")
    return _percent(path, "path")


def _percent_host(host: str) -> str:
    """The percent rung on a reg-name: letters it decodes are lowercased too, since
    the host is case-insensitive (5.3.2.1) and decoding comes after that rung."""
    bad = _REG_NAME_DELIMS_RE.search(host)
    if bad is not None:
        raise IRISyntaxError(
            "delimiter not allowed in a reg-name host (RFC 3986 section 3.2.2)",
            component="host", char=bad.group(), index=bad.start(), text=host,
        )
    host = _percent(host, "host")
    return _upper_pct(lower_ascii(host)) or "" if "%" in host else lower_ascii(host)


_REG_NAME_DELIMS_RE = re.compile(r"[:\[\]]")
_ESCAPE_RE = re.compile(r"%[0-9A-Fa-f]{2}")


# Characters whose NFC is a reserved or not-allowed ASCII character (U+037E GREEK
# QUESTION MARK -> ";", U+1FEF GREEK VARIA -> "`"): NFC would give them a syntactic
# meaning they never had, so they are kept as they are.  (The only other character
# whose NFC is ASCII is U+212A KELVIN SIGN -> "K", which is data.)
_NFC_OPAQUE_RE = re.compile("[\u037e\u1fef]")


# NFC runs on the text between these: escapes (kept opaque, so that a combining
# mark after "%7C" never composes with its "C") and every ASCII character that is
# not a letter or digit.  Those are delimiters or data with a syntactic role, and
# NFC must never compose one away: "=", "<" and ">" followed by U+0338 COMBINING
# LONG SOLIDUS OVERLAY compose to U+2260, U+226E and U+226F.  (Splitting changes
# nothing else: an ASCII character is a starter, so canonical reordering never
# crosses it, and no composition has an ASCII second character.)
_NFC_SPLIT_RE = re.compile(r"(%[0-9A-Fa-f]{2}|[\x00-\x2f\x3a-\x40\x5b-\x60\x7b-\x7f])")


def _nfc(value: str | None, component: str, allow_private: bool = False) -> str | None:
    """NFC of a component's characters, escapes and delimiters kept, result in URI form.

    Percent-encoded UTF-8 is decoded first (so that ``C%CC%A7`` and ``Ç`` meet);
    escapes that stay (ASCII, or not appropriate in an IRI) and ASCII delimiters
    split the text, and each piece is normalized alone (see ``_NFC_SPLIT_RE``).
    """
    if value is None or (value.isascii() and "%" not in value):
        return value
    decoded = decode_component(value, allow_private=allow_private, ascii_too=False)
    if decoded.isascii():
        return decoded
    decoded = _NFC_OPAQUE_RE.sub(lambda m: _pct_char(m.group()), decoded)
    if unicodedata.is_normalized("NFC", decoded):
        return encode_component(decoded, component)
    pieces = _NFC_SPLIT_RE.split(decoded)
    # Even indexes are the text between delimiters, odd ones the delimiters.
    pieces[::2] = [unicodedata.normalize("NFC", p) for p in pieces[::2]]
    return encode_component("".join(pieces), component)


def _nfc_path(path: str, relative: bool) -> str:
    """NFC of a path; in a reference with no scheme and no authority, the text
    before a colon in the first segment is left alone if NFC would make it a
    scheme (``%E2%84%AA:``, U+212A KELVIN SIGN, would become the scheme ``K:``;
    RFC 3986 section 4.2, as for the percent rung)."""
    out = _nfc(path, "path") or ""
    if relative and out != path and ":" in out:
        colon = out.index(":")
        if "/" not in out[:colon] and SCHEME_RE.fullmatch(out[:colon]):
            # NFC adds or removes no delimiter: the colon is the first one of *path*.
            colon = path.index(":")
            return path[:colon] + (_nfc(path[colon:], "path") or "")
    return out


def _nfc_dns_host(host: str, nfc_host: str) -> str:
    """The labels of *nfc_host* (the NFC of *host*, both in URI form) that UTS 46
    maps as it maps the same label of *host*, the labels of *host* elsewhere.

    RFC 3987 5.3.2.2 NFC must not change which domain a host names (5.3.3
    compares A-labels).  UTS 46 section 4 maps each code point (step 1), then
    normalizes to NFC (step 2): NFC first does not always commute with that.
    U+0345 COMBINING GREEK YPOGEGRAMMENI has combining class 240, so NFC puts it
    after U+0301 (class 230), but UTS 46 maps it to U+03B9, a starter, and the
    acute then goes on another base: ``q\u0345\u0301j`` is ``xn--qj-58b``, its
    NFC ``q\u0301\u0345j`` is ``xn--qj-8tb05e``, another domain.  So a label gets
    its NFC only where the two map to the same string (then they have the same
    A-label, or fail ToASCII alike); otherwise, or if either is not UTF-8 or not
    mappable, it stays as it was.  With this, NFC never splits what ``nfc=False``
    merged at level SCHEME and never merges different domains at any level.
    NFC and the escapes never add or remove a full stop, so labels correspond.
    """
    labels, nfc_labels = host.split("."), nfc_host.split(".")
    if len(labels) != len(nfc_labels):
        return host
    return ".".join(
        new if new == old or _same_uts46_mapping(old, new) else old
        for old, new in zip(labels, nfc_labels, strict=True)
    )


def _same_uts46_mapping(a: str, b: str) -> bool:
    """Whether UTS 46 (section 4 steps 1-2: map, then NFC) maps the percent-decoded
    labels *a* and *b* to the same string."""
    da, db = _decode_host_escapes(a), _decode_host_escapes(b)
    if da is None or db is None:
        return False
    try:
        return remap_label(da) == remap_label(db)
    except ValueError:  # idna.IDNAError (a UnicodeError): a disallowed code point
        return False


def _pct_char(char: str) -> str:
    return "%" + char.encode("utf-8").hex("%").upper()


def _is_hierarchical(ref: IRIReference) -> bool:
    return ref.host is not None or ref.path.startswith("/")


# --- the rungs ------------------------------------------------------------------


def case_normalize(ref: IRIReference) -> IRIReference:
    """Case normalization (RFC 3987 section 5.3.2.1).

    "The hexadecimal digits within a percent-encoding triplet ... should be
    normalized to use uppercase letters"; "the scheme and US-ASCII only host
    are case insensitive and therefore should be normalized to lowercase".
    Only the ASCII letters of a host are lowercased (case of non-ASCII host
    characters is the business of IDNA, section 5.3.3); IP literals, IPv6 hex
    included, go to lowercase.  Every other component keeps its case.
    """
    host = ref.host
    if host:
        host = _upper_pct(lower_ascii(host) if not host.startswith("[") else host.lower())
    return IRIReference(
        lower_ascii(ref.scheme) if ref.scheme else ref.scheme,
        _upper_pct(ref.userinfo),
        host,
        ref.port,
        _upper_pct(ref.path) or "",
        _upper_pct(ref.query),
        _upper_pct(ref.fragment),
    )


def character_normalize(ref: IRIReference) -> IRIReference:
    """Character normalization to NFC (RFC 3987 section 5.3.2.2), only on request.

    "Equivalence of IRIs MUST rely on the assumption that IRIs are appropriately
    pre-character-normalized rather than apply character normalization", so
    :func:`normalize` applies this rung only with ``nfc=True`` (for IRIs that
    come from a non-digital form or a non-UCS charset, where NFC is required).
    It runs after the percent rung, on the URI form: percent-encoded UTF-8 is
    decoded, normalized and encoded again, so that ``C%CC%A7`` and ``Ç`` meet.
    NFKC is never applied.

    NFC can give an uppercase ASCII letter (U+212A KELVIN SIGN is canonically
    "K"), so the host is lowercased again after it: the case rung (5.3.2.1),
    which runs before, says the host is case-insensitive.

    The host of a scheme known to use domain names is converted with ToASCII
    (3.1, 5.3.3: UTS 46, which maps each code point and only then normalizes to
    NFC, section 4 steps 1-2), so NFC there is applied to a label only where UTS
    46 maps the label and its NFC to the same string (``_nfc_dns_host``): NFC
    first can name another domain.
    """
    host = ref.host
    if host and not host.startswith("["):
        nfc_host = _nfc(host, "host")
        if nfc_host is not host and nfc_host:
            if nfc_host != host and uses_dns(ref.scheme):
                nfc_host = _nfc_dns_host(host, nfc_host)
            host = _upper_pct(lower_ascii(nfc_host))
    return IRIReference(
        ref.scheme,
        _nfc(ref.userinfo, "userinfo"),
        host,
        ref.port,
        _nfc_path(ref.path, ref.scheme is None and ref.host is None),
        _nfc(ref.query, "query", allow_private=True),
        _nfc(ref.fragment, "fragment"),
    )


def percent_normalize(ref: IRIReference) -> IRIReference:
    """Percent-encoding normalization (RFC 3987 section 5.3.2.3).

    "Decoding any percent-encoded octet sequence that corresponds to an
    unreserved character"; escapes of reserved characters (``%2F``, ``%3D``,
    ``%26``...) keep their meaning and stay.  To align an IRI with a URI "the
    percent-encoding of both IRIs to be compared has to be aligned ... by
    converting both IRIs to URIs (see section 3.1)": non-ASCII characters become
    UTF-8 ``%HH``, uppercase.  The host is mapped the same way (without IDNA,
    which is scheme-based, 5.3.3).
    """
    host = ref.host
    if host:
        host = encode_component(host, "host") if host.startswith("[") else _percent_host(host)
    return IRIReference(
        ref.scheme,
        None if ref.userinfo is None else _percent(ref.userinfo, "userinfo"),
        host,
        None if ref.port is None else encode_component(ref.port, "port"),
        _percent_path(ref.path, ref.scheme is None and ref.host is None),
        None if ref.query is None else _percent(ref.query, "query"),
        None if ref.fragment is None else _percent(ref.fragment, "fragment"),
    )


def path_segment_normalize(ref: IRIReference) -> IRIReference:
    """Path segment normalization (RFC 3987 section 5.3.2.4, RFC 3986 5.2.4).

    Dot-segments are removed from the path of hierarchical IRIs (those with an
    authority or an absolute path); a rootless path (``mailto:``, ``urn:``) or
    a relative path is left alone, since its dots are data or not yet resolved.
    """
    if not _is_hierarchical(ref) or "/." not in ref.path:
        return ref
    return IRIReference(
        ref.scheme, ref.userinfo, ref.host, ref.port, remove_dot_segments(ref.path),
        ref.query, ref.fragment,
    )


@lru_cache(maxsize=65536)
def _dns_host(host: str) -> str:
    """The canonical form of a reg-name of a DNS scheme (RFC 3987 3.1, 5.3.3).

    Percent-encoded UTF-8 is decoded (``r%C3%A9sum%C3%A9`` is the section 3.1
    "instead of" spelling of ``résumé``) unless that yields characters a host
    cannot hold, then UTS 46 ToASCII gives A-labels.  Raises IRIHostError.
    """
    if "%" in host:
        text = _decode_host_escapes(host)
        if text is not None and not _HOST_UNSAFE_RE.search(text):
            host = text
    if host.isascii():
        return _upper_pct(lower_ascii(host)) or ""
    return host_to_ascii(host)


def _decode_host_escapes(host: str) -> str | None:
    """Decode every ``%HH`` of a host as UTF-8, or ``None`` if that is not legal UTF-8."""
    out = bytearray()
    i, n = 0, len(host)
    while i < n:
        c = host[i]
        if c == "%" and _is_hex2(host[i + 1 : i + 3]):
            out.append(int(host[i + 1 : i + 3], 16))
            i += 3
        else:
            # surrogatepass: a lone surrogate (possible when the public rung gets
            # a raw reference) makes the result illegal UTF-8, hence None.
            out += c.encode("utf-8", "surrogatepass")
            i += 1
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _is_hex2(s: str) -> bool:
    return len(s) == 2 and all(c in "0123456789abcdefABCDEF" for c in s)


def _canonical_port(scheme: str | None, port: str | None) -> str | None:
    if port is None or port == "":
        return None
    if not port.isdigit() or not port.isascii():
        bad = next(c for c in port if not ("0" <= c <= "9"))
        raise IRIError(
            "port is not a decimal number (RFC 3986 section 3.2.3)",
            component="port",
            char=bad,
            index=port.index(bad),
            text=port,
        )
    if uses_dns(scheme):
        check_dns_port(port)
    port = port.lstrip("0") or "0"
    if scheme is not None and port == default_port(scheme):
        return None
    return port


_NON_ASCII_ESCAPE_RE = re.compile(r"%[89A-Fa-f][0-9A-Fa-f]")


def _mailto_path(path: str) -> str:
    """Lowercase the domain of each address of a mailto path (RFC 6068 section 2:
    ``domain`` is case-insensitive; the local part is not), if it is US-ASCII
    only, as for a host (RFC 3987 section 5.3.2.1: "US-ASCII only host").  The
    hex digits of its escapes stay uppercase (5.3.2.1).  A non-ASCII domain keeps
    its case: lowercasing its ASCII letters alone would not commute with NFC
    (``A%CC%81`` would give ``á``, ``Á`` stays), so ``nfc=True`` would split what
    ``nfc=False`` merged."""
    out = []
    for address in path.split(","):
        local, at, domain = address.rpartition("@")
        if at and domain.isascii() and not _NON_ASCII_ESCAPE_RE.search(domain):
            address = local + at + (_upper_pct(lower_ascii(domain)) or "")
        out.append(address)
    return ",".join(out)


def scheme_normalize(ref: IRIReference) -> IRIReference:
    """Scheme-based normalization (RFC 3987 section 5.3.3, RFC 3986 6.2.3).

    "An explicit ':port', for which the port is empty or the default for the
    scheme, is equivalent to one where the port and its ':' delimiter are
    elided" (default ports in :data:`iri_scrapy.core.schemes.DEFAULT_PORTS`; leading
    zeros of a port are dropped, it is a number); "an empty path ... should be
    normalized to a path of '/'" for the authority-based schemes we know; and
    "IDN components and their conversions to punycode" compare equal: the
    reg-name of a DNS scheme becomes UTS 46 A-labels.  "Other scheme-specific
    normalizations are possible": the domain of a ``mailto`` address is
    lowercased if it is US-ASCII only (RFC 6068 section 2; RFC 3986 6.2.3's
    example), in the RFC 6068 form only (no authority: ``mailto://h/a@B.com`` is
    not an address), with uppercase hex kept (5.3.2.1).  Delimiters of empty
    components (``?``, ``#``) are never removed.
    """
    scheme = ref.scheme
    host = ref.host
    path = ref.path
    if host and uses_dns(scheme) and not host.startswith("["):
        host = _dns_host(host)
    if host is not None and uses_dns(scheme):
        host = dns_wire_host(host)
    if scheme == "mailto" and host is None and "@" in path:
        # Only the RFC 6068 form "mailto:" addresses; "mailto://" is not it.
        path = _mailto_path(path)
    path = scheme_path(scheme, host is not None, path)
    return IRIReference(
        scheme, ref.userinfo, host, _canonical_port(scheme, ref.port), path, ref.query,
        ref.fragment,
    )


def protocol_normalize(ref: IRIReference, rules: RulesHook | None) -> IRIReference:
    """Protocol-based normalization (RFC 3987 section 5.3.4).

    Applies what *rules* learned from the protocol (permanent redirects that
    only add or remove a trailing slash).  Without rules it changes nothing.
    """
    if rules is None:
        return ref
    uri = ref.unsplit()
    new = rules.apply(uri)
    return ref if new == uri else parse(new)


# --- fast path -------------------------------------------------------------------

# An escape that is already canonical: uppercase hex, not an unreserved octet.
CANONICAL_ESCAPE = "%(?:[01][0-9A-F]|2[0-9A-CF]|3[A-F]|40|5[B-E]|60|7[B-DF]|[89A-F][0-9A-F])"
_URI_CHARS = "A-Za-z0-9\\-._~!$&'()*+,;=:@/%"
# Possessive quantifiers: a mismatch (a non-ASCII character, say) fails at once
# instead of backtracking through the path.  (Python 3.11+; on 3.10 plain ones.)
_PLUS = "+" if sys.version_info >= (3, 11) else ""
#: The character classes of the fast path (also the native one's tables: core/native.py).
FAST_SCHEME_FIRST = "a-z"
FAST_SCHEME_CHARS = "a-z0-9+.\\-"  # scheme, lowercase
FAST_HOST_CHARS = "a-z0-9\\-._~!$&'()*+,;="  # host: lowercase reg-name, no escapes
FAST_PATH_CHARS = _URI_CHARS
FAST_QUERY_CHARS = _URI_CHARS + "?"  # query and fragment
_FAST_RE = re.compile(
    "([" + FAST_SCHEME_FIRST + "][" + FAST_SCHEME_CHARS + "]*" + _PLUS + ")://"
    "([" + FAST_HOST_CHARS + "]+" + _PLUS + ")"
    "(?::([1-9][0-9]{0,4}))?"  # port without leading zeros
    "(/[" + FAST_PATH_CHARS + "]*" + _PLUS + ")?"  # path
    "(?:\\?[" + FAST_QUERY_CHARS + "]*" + _PLUS + ")?"  # query
    "(?:#([" + FAST_QUERY_CHARS + "]*" + _PLUS + "))?"  # fragment
)
_NOT_CANONICAL_ESCAPE_RE = re.compile("%(?!" + CANONICAL_ESCAPE[1:] + ")")
_DOT_SEGMENT_RE = re.compile(r"/\.\.?(?:/|\Z)")


def reference_fast_path(text: str, keep_fragment: bool) -> str | None:
    """Return *text* (less its fragment if asked) if it is already canonical at
    level SCHEME in URI form, else ``None``: one regular expression plus two
    cheap checks, which is what most crawl URLs need.  Proven equal to the climb
    by every example table (tests/support/paths.py).  The reference of the
    native :func:`fast_path` (:mod:`iri_scrapy.core.native`), which must agree
    with it on every input."""
    m = _FAST_RE.fullmatch(text)
    if m is None:
        return None
    scheme, host, port, path, fragment = m.groups()
    if (host[0] == "." or ".." in host or ends_in_number(host) or port is not None
            and len(port) == 5 and port > "65535") and scheme in DEFAULT_PORTS:
        # refused by hosts.dns_wire_host (empty label, not an IPv4 address) or
        # check_dns_port; a valid IPv4 address is left to the fused path
        return None
    if "%" in text and _NOT_CANONICAL_ESCAPE_RE.search(text):
        return None
    if path is not None:
        if "/." in path and _DOT_SEGMENT_RE.search(path):
            return None
    elif scheme_path(scheme, True, ""):
        return None  # the empty-path rule would write "/" (5.3.3)
    if port is not None and port == DEFAULT_PORTS.get(scheme):
        return None
    if fragment is not None and not keep_fragment:
        return text[: m.start(5) - 1]
    return text


#: The fast path in use: the native one when it was built (and not turned off with
#: ``IRISCRAPY_NATIVE=0``), else :func:`reference_fast_path`.  Callers pass ASCII text
#: (non-ASCII text is never canonical in URI form; the native one would convert it).
_FAST_CLASSES = native.CharClasses(
    scheme_first=FAST_SCHEME_FIRST, scheme=FAST_SCHEME_CHARS, host=FAST_HOST_CHARS,
    path=FAST_PATH_CHARS, query=FAST_QUERY_CHARS)
fast_path = native.fast_path(
    reference_fast_path, classes=_FAST_CLASSES, canonical_escape=CANONICAL_ESCAPE)


def reference_iri_path(text: str) -> str | None:
    """Pure Python has no IRI shortcut: a non-ASCII text takes the fused path."""
    return None


#: An IRI mapped to its URI (RFC 3987 3.1, ``mapping.iri_to_uri``) for :func:`fast_path`,
#: or ``None`` (then the fused path answers): the native IRI path when it was built
#: (:mod:`iri_scrapy.core.native`), which answers only where no rule can refuse.
iri_path = native.iri_path(reference_iri_path, classes=_FAST_CLASSES)


# --- fused path ----------------------------------------------------------------------
#
# The rungs above, composed by hand for one IRI without building an intermediate
# IRIReference per rung.  It must give exactly ``unsplit`` of the climb: every
# example table runs through it (tests/support/paths.py), and Hypothesis checks it too.

@lru_cache(maxsize=65536)
def _host_chain(host: str, scheme_based: bool) -> str:
    """Host through case (5.3.2.1), percent (5.3.2.3) and, if asked, scheme (5.3.3) rungs."""
    if not host:
        return host
    if host.startswith("["):
        return _upper_pct(encode_component(host.lower(), "host")) or ""
    host = lower_ascii(host)
    if scheme_based and "%" not in host and not _HOST_UNSAFE_RE.search(host):
        # Shortcut: the percent rung would encode the non-ASCII characters and
        # _dns_host decode them again; the result is the same.
        return host if host.isascii() else host_to_ascii(host)
    host = _percent_host(host)
    return _dns_host(host) if scheme_based else host


@lru_cache(maxsize=65536)
def _dns_host_chain(host: str) -> str:
    """The host of a DNS scheme through the case, percent and scheme rungs (5.3.2.1,
    5.3.2.3, 5.3.3) and on the wire (``hosts.dns_wire_host``, 5.3.3), or the
    :class:`IRIHostError` they raise: one cache for both (a host costs one lookup)."""
    return dns_wire_host.__wrapped__(_host_chain.__wrapped__(host, True), host)


def fused_path(text: str, lvl: Level, keep_fragment: bool) -> str | None:
    """Levels SYNTAX to PROTOCOL (without NFC nor protocol rules) in one pass, in
    URI form; ``None`` means "climb the rungs" (RFC 3987 sections 5.3.2-5.3.3)."""
    fused = _fused(text, lvl, keep_fragment, False)
    return None if fused is None else fused[0]


def fused_rungs(text: str, options: NormalizeOptions) -> tuple[str, tuple[Rung, ...]] | None:
    """``canonical_and_rungs`` in one pass, for an ASCII URI with an authority and a
    reg-name host at level SCHEME or PROTOCOL without rules (RFC 3987 5.3.2-5.3.3), the
    key the fused path's; None: climb instead."""
    if not text.isascii() or options.nfc or options.level < _SCHEME or (
            options.rules is not None and options.level >= _PROTOCOL):
        return None
    fused = _fused(text, options.level, options.keep_fragment, True)
    if fused is None or fused[1] < 0:
        return None
    return fused[0], _mask_rungs(fused[1])


def _fused(text: str, lvl: Level, keep_fragment: bool, track: bool) -> tuple[str, int] | None:
    """The fused path, and with *track* the mask of the rungs that changed a component
    (-1: not tracked for this text, see :func:`fused_rungs`)."""
    scheme, authority, path, query, fragment = split_match(text.strip(WHITESPACE)).groups()
    mask = 0
    if scheme is not None:
        if not scheme.islower():  # a scheme is ASCII and starts with a letter
            scheme = lower_ascii(scheme)
            mask = _CASE
        if scheme == "mailto":
            return None
    if track and (scheme is None or authority is None):
        mask = -1
    scheme_based = lvl >= _SCHEME
    dns = scheme_based and scheme in DNS_SCHEMES
    out = [] if scheme is None else [scheme, ":"]
    if authority is not None:
        userinfo, host, port = split_authority(authority)
        out.append("//")
        if userinfo is not None:
            out += (_percent(userinfo, "userinfo"), "@")
            if track and mask >= 0:
                mask |= _text_rungs(userinfo, "userinfo")
        out.append(_dns_host_chain(host) if dns else _host_chain(host, False))
        if track and mask >= 0:
            mask = -1 if host.startswith("[") else mask | _host_rungs(host, dns)
        if port is not None:
            raw_port, encoded = port, encode_component(port, "port")
            port = _canonical_port(scheme, encoded) if scheme_based else encoded
            if port is not None:
                out += (":", port)
            if track and mask >= 0:
                mask |= (_PERCENT if encoded != raw_port else 0) | (
                    _SCHEME_BIT if port != encoded else 0)
    if track and mask >= 0:
        case = _upper_pct(path) or ""
        mask |= _CASE if case != path else 0
        original, path = case, _percent_path(case, scheme is None and authority is None)
        mask |= _PERCENT if path != original else 0
    else:
        path = _percent_path(path, scheme is None and authority is None)
    if "/." in path and (authority is not None or path.startswith("/")):
        dotless = remove_dot_segments(path)
        mask |= _PATH if dotless != path and mask >= 0 else 0
        path = dotless
    if scheme_based and not path:
        path = scheme_path(scheme, authority is not None, path)
        mask |= _SCHEME_BIT if path and mask >= 0 else 0
    out.append(path if authority is not None else guard_path(path, False))
    if query is not None:
        out += ("?", _percent(query, "query"))
        if track and mask >= 0:
            mask |= _text_rungs(query, "query")
    if fragment is not None and keep_fragment:
        out += ("#", _percent(fragment, "fragment"))
        if track and mask >= 0:
            mask |= _text_rungs(fragment, "fragment")
    return "".join(out), mask


# --- the rungs of one pass -----------------------------------------------------------
#
# What the climb's per-rung comparison (canonical_and_rungs) finds, computed in the fused
# pass component by component: each component goes through the rungs' own functions in
# ladder order, and a rung "changed the spelling" when it changed a component.
# tests/core/test_fused_rungs.py checks key and rungs against the climb.

_CASE, _PERCENT, _PATH, _SCHEME_BIT = 1, 2, 4, 8
_RUNG_BITS = ((_CASE, Rung.CASE), (_PERCENT, Rung.PERCENT), (_PATH, Rung.PATH),
              (_SCHEME_BIT, Rung.SCHEME))


# The native alias rungs (dedupe as a batch) count with these bits and decode these escapes.
native.aliases(_UNRESERVED_OCTETS, CANONICAL_ESCAPE, encode_component, _RUNG_BITS)


@lru_cache(maxsize=1024)
def _mask_rungs(mask: int) -> tuple[Rung, ...]:
    return tuple(rung for bit, rung in _RUNG_BITS if mask & bit)


@lru_cache(maxsize=65536)
def _host_rungs(host: str, dns: bool) -> int:
    """The rungs that change a reg-name *host*: case, percent, and for a DNS scheme the
    scheme rung (case_normalize, percent_normalize, scheme_normalize on the host)."""
    mask = 0
    if host:
        after = _upper_pct(lower_ascii(host)) or ""
        mask |= _CASE if after != host else 0
        host, after = after, _percent_host(after) if after else after
        mask |= _PERCENT if after != host else 0
        host = after
    if dns:
        after = dns_wire_host(_dns_host(host) if host else host)
        mask |= _SCHEME_BIT if after != host else 0
    return mask


def _text_rungs(value: str, component: str) -> int:
    """The case and percent rungs on userinfo, query or fragment."""
    case = _upper_pct(value) or ""
    return (_CASE if case != value else 0) | (
        _PERCENT if _percent(case, component) != case else 0)


# --- the climb ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NormalizeOptions:
    """How to normalize: the level of the ladder and the switches of :func:`normalize`.

    Built once by each public function from its keyword arguments and passed
    down, instead of repeating them in every signature.  A frozen, slotted
    dataclass rather than a NamedTuple: options are not a sequence, must not
    compare equal to a tuple nor unpack by position (``form`` may gain values,
    such as a SURT form), and fields are named at every use.  :class:`IRIReference`
    stays the one value type of the domain; this is configuration.
    """

    level: Level = Level.SCHEME
    form: str = "uri"
    keep_fragment: bool = True
    nfc: bool = False
    rules: RulesHook | None = None

    def __post_init__(self) -> None:
        if self.level.__class__ is not Level:
            object.__setattr__(self, "level", Level.coerce(self.level))
        if self.form not in FORMS:
            raise bad_form(self.form)

    @property
    def rungs(self) -> tuple[Rung, ...]:
        """The rungs applied after 5.3.1, in ladder order (RFC 3987 section 5.3)."""
        return _rungs(self.level, self.nfc)


def bad_form(form: object) -> ValueError:
    """The error for a *form* not in :data:`FORMS`."""
    return ValueError(f"form must be one of {', '.join(map(repr, FORMS))}, not {form!r}")


@cache
def _rungs(level: Level, nfc: bool) -> tuple[Rung, ...]:
    if level is Level.SIMPLE:
        return ()
    rungs = (Rung.CASE, Rung.PERCENT) + ((Rung.CHARACTER,) if nfc else ()) + (Rung.PATH,)
    if level >= Level.SCHEME:
        rungs += (Rung.SCHEME,)
    if level >= Level.PROTOCOL:
        rungs += (Rung.PROTOCOL,)
    return rungs


def apply_rung(rung: Rung, ref: IRIReference, rules: RulesHook | None = None) -> IRIReference:
    """Apply one rung to *ref* (SIMPLE is the identity)."""
    if rung is Rung.CASE:
        return case_normalize(ref)
    if rung is Rung.CHARACTER:
        return character_normalize(ref)
    if rung is Rung.PERCENT:
        return percent_normalize(ref)
    if rung is Rung.PATH:
        return path_segment_normalize(ref)
    if rung is Rung.SCHEME:
        return scheme_normalize(ref)
    if rung is Rung.PROTOCOL:
        return protocol_normalize(ref, rules)
    return ref


def drop_fragment(ref: IRIReference) -> IRIReference:
    """*ref* without its fragment: the retrieval comparison (RFC 3987 section 5.1)."""
    if ref.fragment is None:
        return ref
    return IRIReference(ref.scheme, ref.userinfo, ref.host, ref.port, ref.path, ref.query, None)


def climb(
    text_or_ref: str | IRIReference, options: NormalizeOptions = NormalizeOptions()
) -> Iterator[tuple[Rung, IRIReference]]:
    """Climb the comparison ladder (RFC 3987 section 5.3): yield ``(Rung.SIMPLE,
    ref)`` for the parsed text (less its fragment unless ``keep_fragment``,
    section 5.1), then each rung of ``options.level`` with the reference after it.

    The one climb of the package: :func:`normalize` (when neither shortcut
    applies), :func:`rungs_applied`, :func:`canonical_and_rungs`, ``explain``
    and the dupefilter's per-rung statistics all iterate it.  An error raised on
    a component points at its index in the whole input when a text is given.
    """
    text = text_or_ref if isinstance(text_or_ref, str) else None
    ref = parse(text) if text is not None else text_or_ref
    assert isinstance(ref, IRIReference)
    if not options.keep_fragment:
        ref = drop_fragment(ref)
    yield Rung.SIMPLE, ref
    rules = options.rules
    for rung in options.rungs:
        try:
            ref = apply_rung(rung, ref, rules)
        except IRIError as exc:
            raise (exc if text is None else with_context(exc, text)) from None
        yield rung, ref


def render(ref: IRIReference, options: NormalizeOptions) -> str:
    """The string of *ref* at the top of the climb, in ``options.form``.

    Level SIMPLE: the text itself (5.3.1, see ``simple_text``), mapped to a URI
    (section 3.1) only for ``form="uri"``; above it, ``unsplit`` of the climbed
    reference, written by :func:`render_uri`.
    """
    if options.level is Level.SIMPLE:
        return simple_text(ref) if options.form == "iri" else _percent_only(ref)
    return render_uri(ref.unsplit(), options.level, options.form)


def render_uri(uri: str, level: Level, form: str) -> str:
    """A canonical URI written in *form*: itself, or the IRI it maps to (RFC 3987
    section 3.2, with ToUnicode hosts for DNS schemes at level SCHEME and up)."""
    if form == "uri":
        return uri
    scheme = uri[: uri.find(":")] if ":" in uri else None
    return uri_to_iri(uri, unicode_host=level >= Level.SCHEME and uses_dns(scheme))


def climb_path(text: str, options: NormalizeOptions) -> str:
    """:func:`normalize` by the climb alone, without the fast and fused shortcuts;
    an error points at its index in *text*."""
    try:
        for _rung, ref in climb(text, options):  # noqa: B007 - the last step is the result
            pass
        return render(ref, options)
    except IRIError as exc:
        raise with_context(exc, text) from None


def canonical(text: str, options: NormalizeOptions) -> str:
    """:func:`normalize` with the options built (the fast path, else the fused
    path, else the climb); an error points at its index in *text*."""
    return normalize(text, options.level, form=options.form,  # type: ignore[arg-type]
                     keep_fragment=options.keep_fragment, nfc=options.nfc,
                     rules=options.rules)


_COMPONENTS = frozenset(("scheme", "userinfo", "host", "port", "path", "query", "fragment"))


def with_context(exc: IRIError, text: str) -> IRIError:
    """Point an error raised on a component at the character and its index in the
    whole input *text*, as the caller wrote it (errors.py: "its index in the input").

    A rung raises on the component as the rungs before it made it: the host
    lowercased (5.3.2.1), escapes of unreserved characters decoded and non-ASCII
    characters percent-encoded (5.3.2.3, 3.1), the host percent-decoded for
    ToASCII (5.3.3).  When that text is not the component as written, the
    character is found in the written component (see ``_locate``) and the error
    names the character written there (``%`` for a character written as an escape).
    """
    if isinstance(exc, WireHostError):
        exc = exc.in_input(text)
    if exc.index is None or not exc.text or exc.text == text or exc.char is None:
        return exc
    if exc.component not in _COMPONENTS:
        pos = text.find(exc.text)
        if pos >= 0:
            exc.relocate(exc.char, pos + exc.index, text)
        return exc
    # Where the component starts (the same text may occur before it: a host also
    # written in the userinfo).
    start = component_starts(text).get(exc.component)
    if start is None:
        return exc
    at = start + exc.index
    if text.startswith(exc.text, start) and text[at : at + 1] == exc.char:
        exc.relocate(exc.char, at, text)
        return exc
    written = getattr(parse(text), exc.component) or ""
    found = _locate(exc.text, exc.index, written)
    if found is None:
        exc.relocate(exc.char, None, text)
    else:
        exc.relocate(text[start + found], start + found, text)
    return exc


def _decoded_positions(value: str) -> tuple[str, list[int]]:
    """*value* with every escape run that is UTF-8 decoded (ASCII included; other
    octets kept as their three characters), and the index in *value* of each
    character of the result (of its first octet's ``%``)."""
    if "%" not in value:
        return value, list(range(len(value)))
    out: list[str] = []
    where: list[int] = []
    i, n = 0, len(value)
    while i < n:
        if value[i] != "%" or not _is_hex2(value[i + 1 : i + 3]):
            out.append(value[i])
            where.append(i)
            i += 1
            continue
        data, starts = bytearray(), []
        while i < n and value[i] == "%" and _is_hex2(value[i + 1 : i + 3]):
            data.append(int(value[i + 1 : i + 3], 16))
            starts.append(i)
            i += 3
        k = 0
        while k < len(data):
            b = data[k]
            length = 1 if b < 0x80 else 2 if 0xC2 <= b <= 0xDF else 3 if 0xE0 <= b <= 0xEF \
                else 4 if 0xF0 <= b <= 0xF4 else 0
            try:
                char = bytes(data[k : k + length]).decode("utf-8") if length else ""
            except UnicodeDecodeError:
                char = ""
            if len(char) == 1:
                out.append(char)
                where.append(starts[k])
                k += length
            else:
                out += value[starts[k] : starts[k] + 3]
                where += [starts[k], starts[k] + 1, starts[k] + 2]
                k += 1
    return "".join(out), where


def _same_char(a: str, b: str) -> bool:
    return a == b or (a.isascii() and b.isascii() and a.lower() == b.lower())


def _locate(processed: str, index: int, written: str) -> int | None:
    """The index in *written* (a component as the input has it) of the character
    at *index* of *processed* (the same component after some rungs), or ``None``.

    Both are percent-decoded (``_decoded_positions``), so that an escape and its
    character meet, and compared with ASCII case folded (the host is lowercased);
    the character is the n-th of its kind in both.  If NFC composed it, the base
    character it was composed from is looked for instead.
    """
    chars, where = _decoded_positions(processed)
    p = next((k for k in range(len(where) - 1, -1, -1) if where[k] <= index), None)
    if p is None:
        return None
    char = chars[p]
    nth = sum(1 for c in chars[:p] if _same_char(c, char))
    w_chars, w_where = _decoded_positions(written)
    for wanted in dict.fromkeys((char, unicodedata.normalize("NFD", char)[0])):
        hits = [k for k, c in enumerate(w_chars) if _same_char(c, wanted)]
        if hits:
            return w_where[hits[min(nth, len(hits) - 1)]]
    return None


def normalize_reference(
    iri: str,
    level: Level | int | str = Level.SCHEME,
    *,
    form: Form = "uri",
    keep_fragment: bool = True,
    nfc: bool = False,
    rules: RulesHook | None = None,
) -> str:
    """The canonical string of *iri* at *level* of the ladder (RFC 3987 section 5.3).

    ``form="uri"`` gives the ASCII URI a crawler fetches: at level SCHEME and up,
    A-label hosts for DNS schemes and %-encoded UTF-8 everywhere else (section
    3.1); below SCHEME, a non-ASCII host is %-encoded (IDNA is scheme-based).
    ``form="iri"`` gives the readable IRI (section 3.2, with ToUnicode hosts at
    level SCHEME and up).  ``keep_fragment=False`` gives the retrieval key:
    "when IRIs are compared to select (or avoid) a network action ... fragment
    components (if any) should be excluded" (section 5.1).  ``nfc=True`` adds
    character normalization (5.3.2.2), off by default.  At level PROTOCOL,
    *rules* (a :class:`RulesHook`, e.g. the protocol level's) supply what was
    learned from the protocol.  Level SIMPLE returns the text itself (section
    5.3.1: the comparison "MUST NOT map IRIs to URIs"), mapped to a URI only
    when ``form="uri"`` asks for it; white space that dropping the fragment
    leaves at the end is data and stays, percent-encoded (see ``simple_text``).

    With the native fast path built, ``normalize`` answers the calls the fast path
    takes (a str at level SCHEME, form ``"uri"``) in C and hands every other call to
    ``normalize_reference``, this function in Python (:func:`native.entry`).

    Idempotent for every level and form.  Raises :class:`IRIError` for text
    that has no canonical form (a host that fails IDNA, a non-numeric port, a
    lone surrogate).  Relative references are normalized too (``IRI-reference``,
    RFC 3987 section 2.2), so ``""``, the empty same-document reference (RFC 3986
    section 4.4), is its own canonical form, as ``"#"`` and ``"?"`` are, and
    is no error; a caller that needs a URL checks for a scheme first.
    """
    lvl = level if level.__class__ is Level else Level.coerce(level)
    if form == "surt":  # the canonical URI reordered (iri_scrapy.core.surt, its defaults)
        return reorder(normalize(iri, lvl, form="uri", keep_fragment=keep_fragment, nfc=nfc,
                                 rules=rules))
    # fast_path's pattern holds ASCII characters only: an IRI is first mapped to its URI.
    if form == "uri" and lvl >= _SCHEME and not nfc and iri.__class__ is str:
        uri = iri if iri.isascii() else iri_path(iri)
        fast = None if uri is None else fast_path(uri, keep_fragment)
        if fast is not None:
            if lvl is _PROTOCOL and rules is not None:
                return rules.apply(fast)
            return fast
    check_str(iri, "normalize")
    if form not in FORMS:
        raise bad_form(form)
    try:
        if lvl >= _SYNTAX and not nfc:
            uri = fused_path(iri, lvl, keep_fragment)
            if uri is not None:
                if lvl is _PROTOCOL and rules is not None:
                    uri = rules.apply(uri)
                return uri if form == "uri" else render_uri(uri, lvl, form)
    except IRIError as exc:
        raise with_context(exc, iri) from None
    return climb_path(iri, NormalizeOptions(lvl, form, keep_fragment, nfc, rules))


# The package's ``normalize``: normalize_reference, with the calls the native fast path
# answers answered in C (native.entry); without the native module, the reference itself.
# (A plain comment: autodoc then documents it by its docstring, the reference's.)
normalize = native.entry(normalize_reference, (_SCHEME, _PROTOCOL))


def simple_text(ref: IRIReference) -> str:
    """The text of *ref* for simple string comparison (RFC 3987 section 5.3.1).

    It is the text itself (after Weber's preprocessing, which :func:`parse` does),
    less the fragment when asked (section 5.1).  Dropping a fragment can leave
    white space at the end (``http://h/a #f``): that space is data of the path,
    not padding, and a second pass would strip it (and the syntax level would
    keep it, ``a%20``), so it is written percent-encoded, its only spelling in
    an IRI (section 3.1 step 2).
    """
    text = ref.unsplit()
    stripped = text.rstrip(WHITESPACE)
    if len(stripped) == len(text):
        return text
    return stripped + encode_component(text[len(stripped) :], "iri")


def _percent_only(ref: IRIReference) -> str:
    """Section 3.1 mapping with no normalization (for level SIMPLE, form="uri")."""
    def enc(value: str | None, component: str) -> str | None:
        return None if value is None else encode_component(value, component)

    host = ref.host
    if host:
        host = encode_component(host, "host")
    return IRIReference(
        ref.scheme, enc(ref.userinfo, "userinfo"), host, enc(ref.port, "port"),
        encode_component(ref.path, "path"), enc(ref.query, "query"),
        enc(ref.fragment, "fragment"),
    ).unsplit()


def retrieval_key(iri: str) -> str:
    """The key to fetch *iri* once: level SCHEME, URI form, fragment excluded.

    "When IRIs are compared to select (or avoid) a network action, such as
    retrieval of a representation, fragment components (if any) should be
    excluded from the comparison" (RFC 3987 section 5.1).
    """
    return normalize(iri, Level.SCHEME, keep_fragment=False)


def surt(
    iri: str,
    level: Level | int | str = Level.SCHEME,
    *,
    keep_fragment: bool = False,
    nfc: bool = False,
    rules: RulesHook | None = None,
    include_scheme: bool = False,
    drop_www: bool = True,
    trailing_comma: bool = False,
    reverse_ipaddr: bool = True,
) -> str:
    """The SURT key of *iri*: its canonical URI at *level*, host reordered
    (:mod:`iri_scrapy.core.surt` says what the options do and why).

    Raises :class:`~iri_scrapy.IRIError` as :func:`normalize` does.
    """
    uri = normalize(iri, level, form="uri", keep_fragment=keep_fragment, nfc=nfc, rules=rules)
    return reorder(uri, include_scheme=include_scheme, drop_www=drop_www,
                   trailing_comma=trailing_comma, reverse_ipaddr=reverse_ipaddr)


def equivalent(
    a: str,
    b: str,
    level: Level | int | str = Level.SCHEME,
    *,
    keep_fragment: bool = True,
    nfc: bool = False,
    rules: RulesHook | None = None,
) -> bool:
    """True if *a* and *b* are equivalent at *level* of the ladder (RFC 3987 5.3).

    Compares the ``form="uri"`` canonical strings (at level SIMPLE the texts
    themselves, section 5.3.1); comparison methods "are
    designed to minimize false negatives while strictly avoiding false
    positives" (section 5.1).
    """
    lvl = Level.coerce(level)
    # 5.3.1: simple string comparison "MUST NOT map IRIs to URIs".
    options = NormalizeOptions(lvl, "iri" if lvl is Level.SIMPLE else "uri", keep_fragment, nfc,
                               rules)
    check_str(a, "equivalent")
    check_str(b, "equivalent")
    return canonical(a, options) == canonical(b, options)


def canonical_and_rungs(text: str, options: NormalizeOptions) -> tuple[str, tuple[Rung, ...]]:
    """``normalize(text, ...)`` in URI form and the rungs that changed *text* on the
    way (what :func:`rungs_applied` returns), in one climb of the ladder (RFC 3987
    section 5.3).  Already-canonical URIs take the fast path (no rung applied).
    Raises :class:`IRIError` as :func:`normalize` does (the same error).
    """
    level = options.level
    if level >= _SCHEME and not options.nfc and text.isascii() and (
        options.rules is None or level < _PROTOCOL
    ):
        fast = fast_path(text, options.keep_fragment)
        if fast is not None:
            return fast, ()
    if level is Level.SIMPLE:
        return climb_path(text, options), ()
    try:
        one_pass = fused_rungs(text, options)
    except IRIError:
        canonical(text, options)  # raise what normalize() raises (its index in text)
        raise
    if one_pass is not None:
        return one_pass
    applied: list[Rung] = []
    try:
        steps = climb(text, options)
        _, ref = next(steps)
        before = ref.unsplit()
        for rung, new in steps:
            if new == ref:  # same components, same string: skip the unsplit
                continue
            ref = new
            after = ref.unsplit()
            if after != before:
                applied.append(rung)
            before = after
    except IRIError:
        # The fused path may meet the error first, with its own wording:
        # raise what normalize() raises.
        canonical(text, options)
        raise
    return before, tuple(applied)


def rungs_applied(
    iri: str,
    level: Level | int | str = Level.SCHEME,
    *,
    keep_fragment: bool = True,
    nfc: bool = False,
    rules: RulesHook | None = None,
) -> tuple[Rung, ...]:
    """The rungs that changed *iri* on its way to its canonical form, in order.

    An empty tuple means the text was already canonical (simple string
    comparison suffices).  Used for per-rung statistics of duplicates.
    """
    check_str(iri, "rungs_applied")
    if Level.coerce(level) is Level.SIMPLE:
        return ()
    options = NormalizeOptions(Level.coerce(level), "uri", keep_fragment, nfc, rules)
    return canonical_and_rungs(iri, options)[1]


def clear_caches() -> None:
    """Empty the host caches of the ladder (benchmarks measure cold caches with it)."""
    for fn in (_host_chain, _dns_host_chain, _dns_host):
        fn.cache_clear()
    native.clear_caches()
