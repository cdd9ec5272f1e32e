"""Mapping IRIs to URIs (RFC 3987 section 3.1) and URIs to IRIs (section 3.2)."""

from __future__ import annotations

import codecs
import re
import unicodedata
from functools import lru_cache

from iri_scrapy.core.charclasses import BIDI_FORMATTING, UNRESERVED, is_iprivate, is_ucschar
from iri_scrapy.core.errors import IRIEncodingError, IRIError
from iri_scrapy.core.hosts import host_to_ascii, host_to_unicode, lower_ascii
from iri_scrapy.core.parsing import (
    SCHEME_RE,
    IRIReference,
    check_str,
    component_starts,
    parse,
    preprocess,
)
from iri_scrapy.core.schemes import uses_dns

# Characters mapped by step 2 of section 3.1: every non-ASCII character (ucschar,
# iprivate, and for leniency any other), the ASCII controls and DEL (Weber 5.3),
# and the printable ASCII characters not allowed in URIs.  Never "%", "#", "[", "]".
# One negated class (a search with two alternatives costs twice as much): all but
# the printable ASCII characters other than  " < > \ ^ ` { | }.  A run may then mix
# both kinds; its UTF-8 octets are encoded one by one all the same.
_TO_ENCODE_RE = re.compile("[^!#-;=?-\\[\\]_a-z~]+")
_SURROGATE_RE = re.compile("[\ud800-\udfff]")
_PCT_RUN_RE = re.compile(r"(?:%[0-9A-Fa-f]{2})+")
_UTF8_CHARSETS = frozenset({"utf-8", "utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le",
                            "utf-32-be", "utf-8-sig"})


def _pct(data: bytes) -> str:
    """``%HH`` for every octet, uppercase hex (section 3.1 step 2.2)."""
    return "%" + data.hex("%").upper()


def _encode_run(m: re.Match[str]) -> str:
    return _pct(m.group().encode("utf-8"))


def encode_component(value: str, component: str = "iri", *, start: int = 0, text: str = "") -> str:
    """Percent-encode what section 3.1 step 2 maps, as UTF-8, uppercase hex.

    Existing escapes, reserved characters, ``%``, ``#``, ``[`` and ``]`` are kept.
    A lone surrogate cannot be encoded: :class:`IRIEncodingError` names it.
    """
    try:
        return _TO_ENCODE_RE.sub(_encode_run, value)
    except UnicodeEncodeError:
        m = _SURROGATE_RE.search(value)
        assert m is not None
        raise IRIEncodingError(
            "lone surrogate cannot be encoded as UTF-8",
            component=component,
            char=m.group(),
            index=start + m.start(),
            text=text or value,
        ) from None


def _charset_name(charset: str) -> str:
    try:
        return codecs.lookup(charset).name
    except LookupError:
        raise IRIEncodingError(
            f"unknown query_encoding {charset!r}", component="query"
        ) from None


def _encode_query(value: str, charset: str, *, start: int, text: str) -> str:
    """Encode a query in a document charset (the http/https case of section 3.1).

    A character the charset cannot hold is written the way browsers submit it,
    as a numeric character reference, percent-encoded (``%26%23NNNN%3B``; URL
    Standard, "percent-encode after encoding").  The result is what a server
    receives from a browser following the same link in that page.
    """
    def run(m: re.Match[str]) -> str:
        out = []
        for ch in m.group():
            try:
                out.append(_pct(ch.encode(charset)))
            except UnicodeEncodeError:
                out.append(f"%26%23{ord(ch)}%3B")
        return "".join(out)

    try:
        return _TO_ENCODE_RE.sub(run, value)
    except UnicodeEncodeError:
        return encode_component(value, "query", start=start, text=text)


def iri_to_uri(iri: str, *, idna: bool = True, query_encoding: str = "utf-8") -> str:
    """Map an IRI (reference) to a URI (reference) (RFC 3987 section 3.1).

    Step 2: every ``ucschar`` and ``iprivate`` character becomes UTF-8 ``%HH``
    with uppercase hex; so do the printable ASCII characters not allowed in URIs
    (space ``<`` ``>`` ``"`` ``{`` ``}`` ``|`` ``\\`` ``^`` `````) and, leniently
    (Weber section 5), ASCII controls.  ``%``, ``#``, ``[`` and ``]`` are never
    converted and existing escapes are not re-encoded, so the mapping is the
    identity on URIs and idempotent.

    With ``idna=True`` a non-ASCII reg-name host of a scheme "known to use
    domain names in ireg-name" (section 3.1; :data:`iri_scrapy.core.schemes.DNS_SCHEMES`)
    is converted with ToASCII (UTS 46, non-transitional), label by label, cached
    per host; a host that fails is an :class:`~iri_scrapy.IRIHostError` naming
    the label ("this would mean that the IRI cannot be resolved").  Other hosts
    (other schemes, relative references, and hosts holding escapes, which
    ToASCII cannot take) are percent-encoded like the rest, as with
    ``idna=False`` (the "instead of" form of section 3.1), so that the IRI a
    URI converts to (section 3.2) maps back to it.

    ``query_encoding``: for http and https, the query of an IRI from a page in a
    non-UCS charset is encoded in that charset (the special case of section 3.1);
    a character it cannot hold becomes ``%26%23NNNN%3B`` as browsers send it.
    UCS-based charsets (UTF-8/16/32) mean UTF-8.
    """
    check_str(iri, "iri_to_uri")
    stripped = preprocess(iri)
    charset = _charset_name(query_encoding) if query_encoding.lower() != "utf-8" else "utf-8"
    if charset not in _UTF8_CHARSETS:
        ref = parse(stripped)
        if ref.scheme is not None and ref.scheme.lower() in ("http", "https"):
            return _map_ref(ref, iri, idna=idna, charset=charset)
    if _TO_ENCODE_RE.search(stripped) is None:
        return stripped  # already a URI: the identity
    return _map_ref(parse(stripped), iri, idna=idna, charset="utf-8")


def _map_ref(ref: IRIReference, text: str, *, idna: bool, charset: str) -> str:
    """Map the components of *ref*; *text* is the input, for error indexes."""
    starts = component_starts(text)
    host = ref.host
    if (
        host is not None
        and idna
        and not host.isascii()
        and not host.startswith("[")
        and "%" not in host
        and uses_dns(None if ref.scheme is None else lower_ascii(ref.scheme))
    ):
        try:
            host = host_to_ascii(host, start=starts["host"], dns_name=True)
        except IRIError as exc:
            exc.relocate(exc.char, exc.index, text)  # the index is already in *text*
            raise
    elif host is not None:
        host = encode_component(host, "host", start=starts["host"], text=text)
    path = encode_component(ref.path, "path", start=starts.get("path", 0), text=text)
    query = ref.query
    if query is not None:
        qstart = starts["query"]
        if charset == "utf-8":
            query = encode_component(query, "query", start=qstart, text=text)
        else:
            query = _encode_query(query, charset, start=qstart, text=text)
    fragment = ref.fragment
    if fragment is not None:
        fragment = encode_component(fragment, "fragment", start=starts["fragment"], text=text)
    userinfo = ref.userinfo
    if userinfo is not None:
        userinfo = encode_component(userinfo, "userinfo", start=starts["userinfo"], text=text)
    port = ref.port
    if port is not None:
        port = encode_component(port, "port", start=starts["port"], text=text)
    scheme = ref.scheme
    if scheme is not None:
        scheme = encode_component(scheme, "scheme", text=text)
    return IRIReference(scheme, userinfo, host, port, path, query, fragment).unsplit()


# --- URI to IRI (section 3.2) ----------------------------------------------------

# Unicode categories kept percent-encoded as "not appropriate" (section 6.1 asks
# to avoid characters that cannot be seen or that look like delimiters or spaces).
_INVISIBLE_CATEGORIES = frozenset({"Zs", "Zl", "Zp", "Cf", "Cc", "Cs", "Co"})


@lru_cache(maxsize=8192)
def _appropriate(char: str, allow_private: bool) -> bool:
    """Whether *char* may appear decoded in an IRI (sections 2.2, 4.1 and 6.1)."""
    if char in BIDI_FORMATTING:
        return False
    if is_iprivate(char):
        return allow_private
    if not is_ucschar(char):
        return False
    return unicodedata.category(char) not in _INVISIBLE_CATEGORIES


def _utf8_length(lead: int) -> int:
    if 0xC2 <= lead <= 0xDF:
        return 2
    if 0xE0 <= lead <= 0xEF:
        return 3
    if 0xF0 <= lead <= 0xF4:
        return 4
    return 0


_HEX = frozenset("0123456789ABCDEFabcdef")


def _makes_escape(before: str, out: list[str], ch: str) -> bool:
    """Would decoding hex digit *ch* here complete a new ``%HH`` with a stray ``%``?"""
    if ch not in _HEX:
        return False
    tail = (before + "".join(out[-2:]))[-2:]
    return tail[-1:] == "%" or (tail[:1] == "%" and tail[1:] in _HEX)


def _decode_run(run: str, allow_private: bool, ascii_too: bool, before: str = "") -> str:
    """Decode one run of ``%HH`` triplets (section 3.2 steps 2 to 5).

    *before* is the text just before the run: a hex digit is not decoded after
    a stray ``%`` (``%%36%31`` must not become the new escape ``%61``).
    """
    data = bytes.fromhex(run.replace("%", ""))
    out: list[str] = []
    i, n = 0, len(data)
    while i < n:
        b = data[i]
        if b < 0x80:
            ch = chr(b)
            # Step 2: "%" itself, reserved and not-allowed ASCII stay encoded.
            keep = not (ascii_too and ch in UNRESERVED) or _makes_escape(before, out, ch)
            out.append(run[3 * i : 3 * i + 3] if keep else ch)
            i += 1
            continue
        length = _utf8_length(b)
        if length and i + length <= n:
            chunk = data[i : i + length]
            try:
                ch = chunk.decode("utf-8")  # strict: no overlongs, no surrogates
            except UnicodeDecodeError:
                ch = ""
            if ch:
                # Step 4: characters not appropriate in an IRI are re-encoded.
                out.append(ch if _appropriate(ch, allow_private) else _pct(chunk))
                i += length
                continue
        out.append(_pct(data[i : i + 1]))  # step 3: not part of legal UTF-8
        i += 1
    return "".join(out)


def decode_component(value: str, *, allow_private: bool = False, ascii_too: bool = True) -> str:
    """Decode the escapes of one component as section 3.2 says (steps 2 to 5).

    ``ascii_too=False`` decodes only non-ASCII UTF-8 sequences (used by the
    character-normalization rung, which must not touch ASCII escapes).
    """
    if "%" not in value:
        return value
    def run(m: re.Match[str]) -> str:
        start = m.start()
        return _decode_run(m.group(), allow_private, ascii_too, value[max(0, start - 2) : start])

    return _PCT_RUN_RE.sub(run, value)


@lru_cache(maxsize=8192)
def _unicode_label(label: str) -> str:
    """ToUnicode of one label if ToASCII gives the label back, else the label.

    The label also stays an A-label if its U-label holds a character not
    appropriate in an IRI (section 3.2 step 4 with 4.1 and 6.1: ZWJ and ZWNJ,
    which IDNA 2008 allows in context, are invisible format characters, Cf): in a
    path they stay percent-encoded, and the A-label is the host's encoded form
    (a %-encoded host would map back to another URI, 3.1).
    """
    uni = host_to_unicode(label)
    if uni == label:
        return label
    if any(not c.isascii() and not _appropriate(c, False) for c in uni):
        return label
    try:
        back = host_to_ascii(uni)
    except IRIError:
        return label
    return uni if back == lower_ascii(label) else label


def _unicode_host(host: str) -> str:
    """ToUnicode of the ``xn--`` labels of a host (RFC 3987 section 3.2.1), only
    those that ToASCII maps back to the same A-label (section 3.2: the IRI maps
    back to the URI).  The caller leaves a host that keeps escapes alone: they
    block ToASCII, so ``%40x.xn--zca`` and ``%40x.%C3%9F`` are different URIs
    and must stay different IRIs."""
    if "xn--" not in host.lower():
        return host
    return ".".join(_unicode_label(label) if "xn--" in label.lower() else label
                    for label in host.split("."))


def _to_ascii_ok(host: str) -> bool:
    """Whether ToASCII (UTS 46, :func:`host_to_ascii`, cached per label) takes *host*."""
    try:
        host_to_ascii(host, dns_name=True)
    except IRIError:
        return False
    return True


# scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )   (RFC 3986 3.1)


def _decode_path(path: str, relative: bool) -> str:
    """Decode a path; in a reference with no scheme and no authority, escapes
    before the first colon of the first segment stay if decoding them would make
    a scheme (``%68ttp:x`` is a relative reference, ``http:x`` is not: RFC 3986
    section 4.2), since the IRI must map back to the URI (section 3.2)."""
    if relative and ":" in path:
        colon = path.index(":")
        head = path[:colon]
        if "%" in head and "/" not in head and SCHEME_RE.fullmatch(decode_component(head)):
            return head + decode_component(path[colon:])
    return decode_component(path)


def uri_to_iri(uri: str, *, unicode_host: bool = False) -> str:
    """Convert a URI (reference) to an IRI (reference) (RFC 3987 section 3.2).

    Escapes that form strictly legal UTF-8 are decoded, except ``%25``, reserved
    characters and ASCII not allowed in URIs (step 2); octets outside legal UTF-8
    are re-encoded (step 3), and so are characters not appropriate in an IRI
    (step 4): bidi formatting characters (section 4.1: LRM, RLM, LRE, RLE, PDF,
    LRO, RLO, ALM and the isolates), characters outside ``ucschar`` (``iprivate``
    is decoded only in the query), and invisible or space characters (Unicode
    categories Zs, Zl, Zp, Cf; section 6.1).  Re-encoded octets use uppercase hex.

    ``unicode_host=True`` converts ``xn--`` labels with ToUnicode (section 3.2.1
    allows it with scheme-specific knowledge; off by default), for the schemes
    known to use DNS only, where :func:`iri_to_uri` applies ToASCII: for the
    others the IRI would not map back to the URI.

    The host of a scheme known to use DNS keeps its escapes if, decoded, it is one
    that ToASCII refuses (``ftp://a.%CC%81a/``: a label cannot begin with a
    combining mark): :func:`iri_to_uri` converts a host without escapes with
    ToASCII (section 3.1), so the decoded IRI would not map back to the URI, which
    section 3.2 says the conversion always does; so ``iri_to_uri(uri_to_iri(u))``
    never raises for a URI whose host was kept.  A decoded host that ToASCII takes
    maps to its A-labels (``http://%C3%9F.de/`` -> ``http://ß.de/`` ->
    ``http://xn--zca.de/``): the host the URI names, since percent-encoded UTF-8 in
    a reg-name is the IDN, looked up in its IDNA form (RFC 3986 section 3.2.2;
    level SCHEME compares them equal, 5.3.3).  With the mapping of 3.1 steps 1-2
    alone (``iri_to_uri(..., idna=False)``, the one 3.1 says applications MUST
    apply) the result maps back to the URI byte for byte.
    """
    check_str(uri, "uri_to_iri")
    text = preprocess(uri)
    if "%" not in text and not (unicode_host and "xn--" in text.lower()):
        return text
    ref = parse(text)
    host = ref.host
    if host is not None and not host.startswith("["):
        dns = uses_dns(None if ref.scheme is None else lower_ascii(ref.scheme))
        decoded = decode_component(host)
        if (dns and "%" not in decoded and not decoded.isascii()
                and not _to_ascii_ok(decoded)):
            decoded = host
        host = decoded
        if unicode_host and "%" not in host and dns:
            host = _unicode_host(host)
    return IRIReference(
        ref.scheme,
        None if ref.userinfo is None else decode_component(ref.userinfo),
        host,
        ref.port,
        _decode_path(ref.path, ref.scheme is None and ref.host is None),
        None if ref.query is None else decode_component(ref.query, allow_private=True),
        None if ref.fragment is None else decode_component(ref.fragment),
    ).unsplit()


def clear_caches() -> None:
    """Empty this module's caches (benchmarks measure cold caches with it)."""
    for fn in (_appropriate, _unicode_label):
        fn.cache_clear()
