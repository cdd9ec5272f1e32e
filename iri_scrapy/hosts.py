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
from functools import lru_cache

import idna

from .errors import IRIHostError

__all__ = ["host_to_ascii", "host_to_unicode", "lower_ascii"]

_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_CODEPOINT_RE = re.compile(r"U\+([0-9A-Fa-f]{4,6})")


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


@lru_cache(maxsize=65536)
def _to_ascii_cached(host: str) -> str | Exception:
    try:
        mapped = idna.uts46_remap(host, std3_rules=False, transitional=False)
    except (idna.IDNAError, UnicodeError, ValueError) as exc:
        return exc
    labels = mapped.split(".")
    out = []
    for label in labels:
        if label.isascii():
            out.append(label)
            continue
        try:
            out.append(idna.alabel(label).decode("ascii"))
        except (idna.IDNAError, UnicodeError, ValueError) as exc:
            return ValueError(f"{label!r}: {exc}")
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
