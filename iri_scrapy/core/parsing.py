"""Parsing IRI references into components (RFC 3987 section 2.2, RFC 3986 appendix B).

``parse`` is lenient the way real pages need (Weber, draft-weber-iri-guidelines-01,
section 5): characters the grammar does not allow are kept as they are and are
percent-encoded later, on the way to a URI.  ``validate`` is the strict check
against the RFC 3987 section 2.2 grammar and the section 4.1 bidi rule.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from iri_scrapy.core.charclasses import (
    BIDI_FORMATTING,
    IPRIVATE_RE,
    IUNRESERVED_RE,
    SUB_DELIMS_RE,
)
from iri_scrapy.core.errors import IRISyntaxError

# Shared with the other core modules, not part of the package API: SPLIT_RE,
# SCHEME_RE, split_match, guard_path, WHITESPACE, check_str (one definition each).

#: Weber section 4 step 1: only these ASCII whitespace characters are stripped.
WHITESPACE = " \t\r\n"

# RFC 3986 appendix B, with DOTALL so that a newline does not end the match.
# Groups: 1 scheme, 2 authority, 3 path, 4 query, 5 fragment.
_AFTER_SCHEME = r"(?://([^/?#]*))?([^?#]*)(?:\?([^#]*))?(?:#(.*))?"
SPLIT_RE = re.compile(r"(?:([^:/?#]+):)?" + _AFTER_SCHEME, re.DOTALL)
# scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )   (RFC 3986 3.1)
_SCHEME = r"[A-Za-z][A-Za-z0-9+.\-]*"
SCHEME_RE = re.compile(_SCHEME)
# SPLIT_RE whose group 1 is only a scheme: the same split as SPLIT_RE then, when
# its group 1 is not a scheme, the text read as a relative reference (the
# optional group fails and the match starts again at index 0).  A scheme has no
# ":", "/", "?" nor "#", so when group 1 matches here it is SPLIT_RE's group 1.
_SPLIT_SCHEME_RE = re.compile("(?:(" + _SCHEME + "):)?" + _AFTER_SCHEME, re.DOTALL)


def split_match(text: str) -> re.Match[str]:
    """The RFC 3986 appendix B match of *text* (groups 1-5: scheme, authority,
    path, query, fragment), read as a relative reference when what precedes the
    first ``:`` is not a scheme (Weber section 5.1; RFC 3986 section 4.2).

    The one split of the package: :func:`parse`, :func:`component_starts` and the
    fused path of :mod:`iri_scrapy.core.ladder` all use it.
    """
    m = _SPLIT_SCHEME_RE.match(text)
    assert m is not None  # the pattern matches every string
    return m


def guard_path(path: str, has_authority: bool) -> str:
    """The path as written in a reference: without an authority a path may not
    start with ``//`` (RFC 3986 section 3.3), so ``/.`` is put before it (what
    RFC 3986 section 5.2.4's note does after dot-segment removal produced it);
    ``/./`` removes as a dot-segment, so the path keeps its meaning."""
    if not has_authority and path.startswith("//"):
        return "/." + path
    return path


@dataclass(frozen=True, slots=True)
class IRIReference:
    """The components of an IRI reference (RFC 3986 section 3, RFC 3987 section 2.2).

    ``None`` means the component (and its delimiter) is absent; ``""`` means it is
    present but empty, so ``http://h/?`` (query ``""``) and ``http://h/`` (query
    ``None``) stay different.  ``host`` is ``None`` exactly when there is no
    authority (``//``).  ``port`` is kept as text: ``""`` for ``http://h:/``.
    """

    scheme: str | None
    userinfo: str | None
    host: str | None
    port: str | None
    path: str
    query: str | None
    fragment: str | None

    @property
    def authority(self) -> str | None:
        """The authority as written back: ``[userinfo "@"] host [":" port]``."""
        if self.host is None:
            return None
        out = self.host
        if self.userinfo is not None:
            out = self.userinfo + "@" + out
        if self.port is not None:
            out = out + ":" + self.port
        return out

    def unsplit(self) -> str:
        """Recompose the reference (RFC 3986 section 5.3)."""
        parts: list[str] = []
        if self.scheme is not None:
            parts.append(self.scheme + ":")
        authority = self.authority
        if authority is not None:
            parts.append("//" + authority)
        parts.append(guard_path(self.path, authority is not None))
        if self.query is not None:
            parts.append("?" + self.query)
        if self.fragment is not None:
            parts.append("#" + self.fragment)
        return "".join(parts)

    __str__ = unsplit


def preprocess(text: str) -> str:
    """Strip leading and trailing ASCII whitespace (Weber section 4, step 1).

    Only SPACE, TAB, CR and LF are removed; other Unicode white space is data.
    """
    return text.strip(WHITESPACE)


def split_authority(authority: str) -> tuple[str | None, str, str | None]:
    """Split an authority into ``(userinfo, host, port)`` (Weber sections 5.2.1-5.2.3).

    The userinfo ends at the last ``@`` (what user agents do, so the host is the
    one a request would go to); an IP-literal host runs to its ``]``; otherwise
    the port is what follows the last ``:``.
    """
    userinfo: str | None = None
    at = authority.rfind("@")
    if at >= 0:
        userinfo, authority = authority[:at], authority[at + 1 :]
    if authority.startswith("["):
        end = authority.find("]")
        if end >= 0 and (end + 1 == len(authority) or authority[end + 1] == ":"):
            host = authority[: end + 1]
            port = authority[end + 2 :] if end + 1 < len(authority) else None
            return userinfo, host, port
        return userinfo, authority, None
    colon = authority.rfind(":")
    if colon >= 0:
        return userinfo, authority[:colon], authority[colon + 1 :]
    return userinfo, authority, None


def parse(text: str) -> IRIReference:
    """Parse an IRI reference into its components, leniently.

    RFC 3986 appendix B (which RFC 3987 section 2.2 keeps), after Weber's
    preprocessing (section 4).  A scheme that is not ``ALPHA *( ALPHA / DIGIT /
    "+" / "-" / "." )`` makes the text a relative reference (Weber 5.1).  No
    character is rejected: use :func:`validate` for the strict check.
    """
    if not isinstance(text, str):
        raise TypeError(f"parse() takes str, not {type(text).__name__}")
    scheme, authority, path, query, fragment = split_match(preprocess(text)).groups()
    if authority is None:
        return IRIReference(scheme, None, None, None, path, query, fragment)
    userinfo, host, port = split_authority(authority)
    return IRIReference(scheme, userinfo, host, port, path, query, fragment)


def component_starts(text: str) -> dict[str, int]:
    """The index in *text* (as given, before preprocessing) at which each component
    that :func:`parse` finds starts, for errors that name an index in the input."""
    lead = len(text) - len(text.lstrip(WHITESPACE))
    body = preprocess(text)
    m = split_match(body)
    names = ("scheme", "authority", "path", "query", "fragment")
    out = {name: lead + m.start(i) for i, name in enumerate(names, 1) if m.group(i) is not None}
    authority = out.pop("authority", None)
    if authority is not None:
        userinfo, host, port = split_authority(m.group(2))
        out["host"] = authority
        if userinfo is not None:
            out["userinfo"] = authority
            out["host"] += len(userinfo) + 1
        if port is not None:
            out["port"] = out["host"] + len(host) + 1
    return out


# --- strict validation (RFC 3987 section 2.2) ------------------------------------

_PCT = "%(?![0-9A-Fa-f]{2})"
_IPCHAR = IUNRESERVED_RE + SUB_DELIMS_RE + ":@%"


def _bad(allowed: str) -> re.Pattern[str]:
    """A pattern finding the first character outside *allowed*, or a bad '%'."""
    return re.compile(f"[^{allowed}]|{_PCT}")


_BAD_USERINFO = _bad(IUNRESERVED_RE + SUB_DELIMS_RE + ":%")
_BAD_REG_NAME = _bad(IUNRESERVED_RE + SUB_DELIMS_RE + "%")
_BAD_PORT = re.compile(r"[^0-9]")
_BAD_PATH = _bad(_IPCHAR + "/")
_BAD_QUERY = _bad(_IPCHAR + IPRIVATE_RE + "/?")
_BAD_FRAGMENT = _bad(_IPCHAR + "/?")
_BAD_SCHEME = re.compile(r"^[^A-Za-z]|[^A-Za-z0-9+.\-]")
_BIDI_RE = re.compile("[" + "".join(sorted(BIDI_FORMATTING)) + "]")
# IPvFuture = "v" 1*HEXDIG "." 1*( unreserved / sub-delims / ":" ) (RFC 3986 3.2.2);
# "v" is an ABNF literal, case-insensitive (RFC 5234 section 2.3).
_IPVFUTURE_RE = re.compile(r"[vV][0-9A-Fa-f]+\.[A-Za-z0-9\-._~!$&'()*+,;=:]+")
# ZoneID = 1*( unreserved / pct-encoded ), after "%25" (RFC 6874 section 2).
_ZONE_ID_BAD_RE = re.compile(r"[^A-Za-z0-9\-._~%]|%(?![0-9A-Fa-f]{2})")


def _check(
    pattern: re.Pattern[str], value: str | None, start: int, component: str, text: str
) -> None:
    if not value:
        return
    hits = [m for m in (pattern.search(value), _BIDI_RE.search(value)) if m is not None]
    if not hits:
        return
    first = min(hits, key=lambda m: m.start())
    i = first.start()
    char = value[i]
    if char in BIDI_FORMATTING:
        why = "bidi formatting character not allowed (RFC 3987 section 4.1)"
    elif char == "%":
        why = "'%' not followed by two hexadecimal digits (RFC 3986 section 2.1)"
    else:
        why = "character not allowed (RFC 3987 section 2.2)"
    raise IRISyntaxError(why, component=component, char=char, index=start + i, text=text)


def validate(text: str) -> IRIReference:
    """Check *text* strictly against the IRI-reference grammar of RFC 3987 section 2.2.

    ``ucschar`` is allowed everywhere but the scheme and port, ``iprivate`` only in
    the query, bidi formatting characters nowhere (section 4.1).  Raises an
    :class:`IRISyntaxError` (or :class:`IRIError`) for the first violation, naming
    component, character (``U+XXXX``) and index; returns the parsed reference.
    Leading and trailing white space is not stripped here: it is a violation.
    """
    if not isinstance(text, str):
        raise TypeError(f"validate() takes str, not {type(text).__name__}")
    m = SPLIT_RE.match(text)
    assert m is not None
    scheme_text = m.group(1)
    if scheme_text is not None and not SCHEME_RE.fullmatch(scheme_text):
        # Not a scheme: the reference is relative and its first segment has a ":",
        # which ipath-noscheme does not allow (RFC 3986 section 4.2).
        bad = _BAD_SCHEME.search(scheme_text)
        i = bad.start() if bad else 0
        raise IRISyntaxError(
            "invalid scheme (RFC 3986 section 3.1)",
            component="scheme",
            char=scheme_text[i],
            index=i,
            text=text,
        )
    if m.group(2) is not None:
        start = m.start(2)
        authority = m.group(2)
        userinfo, host, port = split_authority(authority)
        offset = start
        if userinfo is not None:
            _check(_BAD_USERINFO, userinfo, offset, "userinfo", text)
            offset += len(userinfo) + 1
        _validate_host(host, offset, text)
        if port is not None:
            _check(_BAD_PORT, port, offset + len(host) + 1, "port", text)
    _check(_BAD_PATH, m.group(3), m.start(3), "path", text)
    if m.group(4) is not None:
        _check(_BAD_QUERY, m.group(4), m.start(4), "query", text)
    if m.group(5) is not None:
        _check(_BAD_FRAGMENT, m.group(5), m.start(5), "fragment", text)
    return parse(text)


def _validate_host(host: str, start: int, text: str) -> None:
    """ihost = IP-literal / IPv4address / ireg-name (RFC 3987 section 2.2)."""
    if host.startswith("["):
        inner = host[1:-1] if host.endswith("]") else host[1:]
        if host.endswith("]"):
            if _IPVFUTURE_RE.fullmatch(inner):
                return
            # IP-literal = "[" ( IPv6address / IPv6addrz / IPvFuture ) "]" and
            # IPv6addrz = IPv6address "%25" ZoneID (RFC 6874 section 2).  Python's
            # ipaddress takes "%" alone (RFC 4007 text form), which a URI may not.
            addr, pct, zone = inner.partition("%")
            if pct:
                _validate_zone_id(zone, start + 1 + len(addr), text)
            try:
                ipaddress.IPv6Address(addr)
                return
            except ValueError:
                inner = addr
        end = host.find("]")
        bad = next((i for i, c in enumerate(inner) if c not in "0123456789abcdefABCDEF:."), None)
        if end < 0:
            # Unclosed: the "[" that opens it (the text after it may be all hex).
            i, why = 0, "IP literal without its closing ']'"
        elif end + 1 < len(host):
            i, why = end + 1, "text after the closing ']' of an IP literal"
        else:
            # A character no IP literal holds; else the "%" of a zone ID after what
            # is no IPv6 address; else the "[" of a literal that is no address.
            i = 1 + bad if bad is not None else 1 + len(inner) if host[1 + len(inner)] != "]" else 0
            why = "invalid IP literal"
        raise IRISyntaxError(
            f"{why} (RFC 3986 section 3.2.2)",
            component="host",
            char=host[i],
            index=start + i,
            text=text,
        )
    _check(_BAD_REG_NAME, host, start, "host", text)


def _validate_zone_id(zone: str, start: int, text: str) -> None:
    """*zone* follows the "%" at *start*: "25" then ZoneID (RFC 6874 section 2)."""
    if not zone.startswith("25") or len(zone) == 2:
        raise IRISyntaxError(
            "a zone identifier is '%25' and at least one character (RFC 6874 section 2)",
            component="host", char="%", index=start, text=text,
        )
    bad = _ZONE_ID_BAD_RE.search(zone, 2)
    if bad is not None:
        raise IRISyntaxError(
            "character not allowed in a zone identifier (RFC 6874 section 2)",
            component="host", char=zone[bad.start()], index=start + 1 + bad.start(), text=text,
        )


def check_str(text: object, function: str) -> str:
    """Raise ``TypeError`` unless *text* is a ``str`` (shared argument check)."""
    if not isinstance(text, str):
        raise TypeError(f"{function}() takes str, not {type(text).__name__}")
    return text

