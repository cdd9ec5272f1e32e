"""Character classes of RFC 3986 section 2 and RFC 3987 section 2.2, by ABNF name.

The sets are ``frozenset`` of one-character strings; the ``*_RE`` strings are
regular-expression character-class bodies for the same sets.
"""

from __future__ import annotations

import string

#: ALPHA = %x41-5A / %x61-7A (RFC 5234 B.1)
ALPHA = frozenset(string.ascii_letters)
#: DIGIT = %x30-39
DIGIT = frozenset(string.digits)
#: HEXDIG = DIGIT / "A" - "F" (case-insensitive in practice, RFC 3986 2.1)
HEXDIG = frozenset(string.hexdigits)
#: unreserved = ALPHA / DIGIT / "-" / "." / "_" / "~" (RFC 3986 2.3)
UNRESERVED = frozenset(string.ascii_letters + string.digits + "-._~")
#: gen-delims = ":" / "/" / "?" / "#" / "[" / "]" / "@" (RFC 3986 2.2)
GEN_DELIMS = frozenset(":/?#[]@")
#: sub-delims = "!" / "$" / "&" / "'" / "(" / ")" / "*" / "+" / "," / ";" / "=" (RFC 3986 2.2)
SUB_DELIMS = frozenset("!$&'()*+,;=")
#: reserved = gen-delims / sub-delims (RFC 3986 2.2)
RESERVED = GEN_DELIMS | SUB_DELIMS
#: The printable US-ASCII characters not allowed in URIs (RFC 3987 3.1):
#: "<", ">", '"', space, "{", "}", "|", "\", "^", and "`".
NOT_ALLOWED_ASCII = frozenset('<>" {}|\\^`')

#: Bidirectional formatting characters that RFC 3987 section 4.1 forbids in IRIs
#: (LRM, RLM, LRE, RLE, PDF, LRO, RLO) plus their later siblings (ALM, and the
#: isolates LRI, RLI, FSI, PDI of Unicode 6.3), which have the same effect.
BIDI_FORMATTING = frozenset(
    "\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u061c\u2066\u2067\u2068\u2069"
)

# ucschar = %xA0-D7FF / %xF900-FDCF / %xFDF0-FFEF / %x10000-1FFFD / ... / %xE1000-EFFFD
_UCSCHAR_RANGES: tuple[tuple[int, int], ...] = (
    (0xA0, 0xD7FF),
    (0xF900, 0xFDCF),
    (0xFDF0, 0xFFEF),
) + tuple((plane << 16, (plane << 16) + 0xFFFD) for plane in range(1, 14)) + (
    (0xE1000, 0xEFFFD),
)
# iprivate = %xE000-F8FF / %xF0000-FFFFD / %x100000-10FFFD
_IPRIVATE_RANGES: tuple[tuple[int, int], ...] = (
    (0xE000, 0xF8FF),
    (0xF0000, 0xFFFFD),
    (0x100000, 0x10FFFD),
)


def is_ucschar(char: str) -> bool:
    """True if *char* is in ``ucschar`` (RFC 3987 section 2.2)."""
    cp = ord(char)
    return any(lo <= cp <= hi for lo, hi in _UCSCHAR_RANGES)


def is_iprivate(char: str) -> bool:
    """True if *char* is in ``iprivate`` (RFC 3987 section 2.2)."""
    cp = ord(char)
    return any(lo <= cp <= hi for lo, hi in _IPRIVATE_RANGES)


def _ranges_re(ranges: tuple[tuple[int, int], ...]) -> str:
    return "".join(f"\\U{lo:08X}-\\U{hi:08X}" for lo, hi in ranges)


#: Regex class body for ``ucschar``.
UCSCHAR_RE = _ranges_re(_UCSCHAR_RANGES)
#: Regex class body for ``iprivate``.
IPRIVATE_RE = _ranges_re(_IPRIVATE_RANGES)
#: Regex class body for ``iunreserved`` = ALPHA / DIGIT / "-" / "." / "_" / "~" / ucschar.
IUNRESERVED_RE = "A-Za-z0-9\\-._~" + UCSCHAR_RE
#: Regex class body for ``sub-delims``.
SUB_DELIMS_RE = "!$&'()*+,;="
