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

import re
import unicodedata
from functools import lru_cache

import idna

from .errors import IRIHostError
from .punycode import punycode_encode

__all__ = ["host_to_ascii", "host_to_unicode", "lower_ascii"]

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
        f"IDNA ToASCII (UTS 46) failed for label {label!r}: {exc}",
        component="host",
        char=char,
        index=index,
        text=host,
    )


# Full stops that UTS 46 maps to U+002E (section 4, step 1 mapping), applied
# first so that the host can be split and each label converted (and cached) alone:
# the UTS 46 mapping and NFC never act across a full stop.
_DOTS = str.maketrans({"\u3002": ".", "\uff0e": ".", "\uff61": "."})


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
        if cp in _CONTEXTJ:
            try:
                ok = idna.valid_contextj(label, pos)
            except ValueError:
                ok = False
            if not ok:
                raise idna.InvalidCodepointContext(f"joiner U+{cp:04X} not allowed in {label!r}")
        elif cp in _CONTEXTO:
            try:
                ok = idna.valid_contexto(label, pos)
            except ValueError:
                ok = False
            if not ok:
                raise idna.InvalidCodepointContext(f"U+{cp:04X} not allowed in {label!r}")
        elif cp >= 0x80 and _map_char(char) != char:
            raise idna.InvalidCodepoint(f"Codepoint U+{cp:04X} not valid in a mapped label")
    idna.check_bidi(label)


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


def host_to_ascii(host: str, *, start: int = 0) -> str:
    """Convert a reg-name host to A-labels with UTS 46 ToASCII (RFC 3987 3.1, 5.3.3).

    ASCII hosts are only lowercased (no IDNA validation, so hosts with ``_`` and
    other names found in real crawls keep working).  A host that fails is an
    :class:`IRIHostError` naming the label and, where known, the character;
    *start* is the host's index in the whole IRI, for the error.
    """
    if host.isascii():
        return lower_ascii(host)
    result = _to_ascii_cached(host)
    if isinstance(result, Exception):
        label = next((lab for lab in host.split(".") if not lab.isascii()), host)
        raise _host_error(host, label, result, start)
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
    for fn in (_map_char, _label_to_ascii, host_to_unicode):
        fn.cache_clear()
