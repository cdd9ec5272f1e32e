"""Evidence for the protocol rung (RFC 3987 section 5.3.4): what servers say about equivalence.

Section 5.3.4 lets a crawler regard two IRIs as equivalent once the protocol shows
it.  Besides permanent redirects (:mod:`iri_scrapy.protocol.rules`) a server says so
in four ways; this module reads them, as pure functions on text (no I/O, no
Scrapy), for the learner that turns evidence into rules:

* ``Clean-param`` lines of robots.txt (Yandex's directive): :func:`parse_clean_param`;
* ``<link rel="canonical">`` in an HTML head (RFC 6596 section 3; the HTML
  Standard's ``link`` element): :func:`canonical_from_html`;
* ``Link: <...>; rel="canonical"`` response headers (RFC 8288 section 3,
  RFC 6596 section 3): :func:`canonical_from_link_headers`;
* equal bodies under two URLs: :func:`content_digest`, a digest that ignores the
  usual per-response noise (and says exactly which).

Everything here reads data from the network: no function raises on any input;
what cannot be read is no evidence (None, or no rule), never a guess.
"""

from __future__ import annotations

import hashlib
import html
import re
from collections.abc import Iterable
from dataclasses import dataclass
from html.parser import HTMLParser

from iri_scrapy.core.errors import IRIScrapyError
from iri_scrapy.core.hosts import lower_ascii
from iri_scrapy.core.query import in_clean_param_scope

# --------------------------------------------------------------------------- Clean-param

#: Yandex: "The rule length is limited to 500 characters."  Longer rules are ignored.
MAX_CLEAN_PARAM_RULE = 500

_CLEAN_PARAM_RE = re.compile(r"clean-param[ \t]*:[ \t]*(.*)", re.IGNORECASE | re.DOTALL)
_LINE_SPLIT_RE = re.compile(r"\r\n|\r|\n")
# Blanks are ASCII only: in UTF-8 read as latin-1, "\xa0" and "\x85" are parts of letters.
_ROBOTS_SPACE = " \t\f\v"
_BOMS = ("\ufeff", "\xef\xbb\xbf")  # the UTF-8 BOM, decoded as UTF-8 or as latin-1


@dataclass(frozen=True)
class CleanParam:
    """One ``Clean-param`` rule: the query parameters *params* (names, case-sensitive)
    do not change the content of pages whose path starts with *prefix*.

    *prefix* is kept as the robots.txt gave it (``/`` when it gave none); ``*`` in it
    stands for any sequence of characters, and a ``*`` is implicitly at its end
    (Yandex: "the prefix ... similar to the one used in the robots.txt file").
    """

    params: frozenset[str]
    prefix: str

    def matches(self, path: str) -> bool:
        """True if *path* (a URL's path, as sent: percent-encoded) is in the rule's scope:
        it starts with :attr:`prefix`, each ``*`` of which matches any sequence
        (:func:`~iri_scrapy.core.query.in_clean_param_scope`: linear, never backtracks)."""
        return in_clean_param_scope(self.prefix, path)


def _clean_param_rule(value: str) -> CleanParam | None:
    """The rule in the value of one ``Clean-param:`` line, or None if it is malformed:
    no parameter, a name with ``=`` or ``?`` in it, more than two fields, or a path
    that starts with neither ``/`` nor ``*`` (a malformed rule is ignored: dropping a
    parameter on a guess could lose pages)."""
    fields = value.split(" ") if "\t" not in value else value.replace("\t", " ").split(" ")
    fields = [field for field in fields if field]
    if not fields or len(fields) > 2:
        return None
    names = [name for name in fields[0].split("&") if name]
    if not names or any("=" in name or "?" in name for name in names):
        return None
    prefix = fields[1] if len(fields) == 2 else "/"
    if not prefix.startswith(("/", "*")):
        return None
    return CleanParam(frozenset(names), prefix)


def parse_clean_param(robots_txt: str) -> list[CleanParam]:
    """The ``Clean-param`` rules of a robots.txt, in file order, duplicates dropped.

    Yandex's syntax (https://yandex.com/support/webmaster/controlling-robot/robots-txt.html,
    section Clean-param): ``Clean-param: p0[&p1&p2&..&pn] [path]``.  The directive is
    intersectional: it counts wherever it is in the file, whatever the ``User-agent``
    group around it.  Its name is matched case-insensitively, parameter names are
    case-sensitive, the path is a prefix (``/`` when absent).  Fields are separated by
    spaces and tabs (ASCII blanks only); text after ``#`` is a comment; a rule longer
    than :data:`MAX_CLEAN_PARAM_RULE` (500) characters, comment and surrounding blanks
    excluded, is ignored, as Yandex does; malformed lines are ignored.  *robots_txt*
    may be bytes decoded as latin-1 (a UTF-8 BOM read either way is skipped).  Never
    raises.
    """
    if not isinstance(robots_txt, str):
        return []
    for bom in _BOMS:
        if robots_txt.startswith(bom):
            robots_txt = robots_txt[len(bom):]
    rules: dict[CleanParam, None] = {}
    for line in _LINE_SPLIT_RE.split(robots_txt):
        rule_text = line.split("#", 1)[0].strip(_ROBOTS_SPACE)
        if len(rule_text) > MAX_CLEAN_PARAM_RULE:
            continue
        match = _CLEAN_PARAM_RE.match(rule_text)
        if match is None:
            continue
        rule = _clean_param_rule(match.group(1))
        if rule is not None:
            rules.setdefault(rule)
    return list(rules)


# --------------------------------------------------------------------------- canonical links

#: :func:`canonical_from_html` reads at most this many characters of a document.
HTML_SCAN_LIMIT = 64 * 1024

_HTML_SPACE = " \t\n\f\r"  # ASCII whitespace (HTML Standard, "split on ASCII whitespace")
# Start tags the HTML Standard's "in head" and "after head" insertion modes keep in the
# head (or before it); any other start tag, or text other than whitespace, starts the body.
_HEAD_TAGS = frozenset({
    "html", "head", "base", "basefont", "bgsound", "link", "meta", "title", "noscript",
    "noframes", "style", "script", "template",
})
_TEXT_INSIDE = frozenset({"title", "noscript", "noframes", "style", "script", "template"})


class _BodyStarts(IRIScrapyError):
    """Raised by the head reader to stop the parser where the body starts."""


class _HeadLinks(HTMLParser):
    """Collects the hrefs of ``<link rel=canonical>`` in the document head (the first
    only, if *first_only*)."""

    def __init__(self, first_only: bool) -> None:
        super().__init__(convert_charrefs=True)
        self.first_only = first_only
        self.found: list[str] = []
        self.open: list[str] = []  # the raw-text, RCDATA and ignored elements open

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.open:  # markup in a title, noscript or template: not in the head's tree
            if tag in _TEXT_INSIDE:
                self.open.append(tag)
        elif tag not in _HEAD_TAGS:
            raise _BodyStarts
        elif tag == "link":
            self._link(attrs)
        elif tag in _TEXT_INSIDE:
            self.open.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "link" or tag not in _TEXT_INSIDE:
            self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        if tag in self.open:
            while self.open and self.open.pop() != tag:
                pass
        elif tag == "body" and not self.open:
            raise _BodyStarts

    def handle_data(self, data: str) -> None:
        if not self.open and data.strip(_HTML_SPACE):
            raise _BodyStarts

    def _link(self, attrs: list[tuple[str, str | None]]) -> None:
        first: dict[str, str] = {}
        for name, value in attrs:  # a repeated attribute: the first one counts
            first.setdefault(name, value or "")
        if "canonical" not in lower_ascii(first.get("rel", "")).split():
            return
        href = first.get("href", "").strip(_HTML_SPACE)
        if href:
            self.found.append(href)
            if self.first_only:
                raise _BodyStarts  # (not the body: enough read)


def _head_links(document: str, first_only: bool) -> list[str]:
    if not isinstance(document, str):
        return []
    text = document[:HTML_SCAN_LIMIT]
    low = text.lower()
    if "canonical" not in low and "&#" not in low:  # no way to spell rel=canonical
        return []
    reader = _HeadLinks(first_only)
    try:
        reader.feed(text)
        reader.close()
    except _BodyStarts:
        pass
    except Exception:  # html.parser on hostile input: what was read so far stands
        pass
    return reader.found


def canonical_links_from_html(document: str) -> list[str]:
    """The hrefs of every ``<link rel=canonical>`` in the head of *document*, in order
    (see :func:`canonical_from_html`); several different ones are conflicting evidence
    (search engines then ignore them all)."""
    return _head_links(document, first_only=False)


def canonical_from_html(document: str) -> str | None:
    """The raw href of the first ``<link>`` in the head of *document* whose ``rel``
    has the token ``canonical`` (RFC 6596 section 3; HTML Standard 4.2.4 and 4.6.7:
    ``rel`` is a set of space-separated tokens, ASCII case-insensitive), or None.

    The head ends where the HTML Standard's tree construction (13.2.6) starts the
    body: at ``<body>``, at any start tag that does not belong in a head (``<div>``,
    ``<p>``, ``<img>``...) or at text that is not whitespace; a link after that is in
    the body and ignored (as search engines ignore it).  A link after ``</head>`` but
    before the body still counts (the parser puts it in the head).  Links in
    comments, ``<title>``, ``<script>``, ``<style>``, ``<noscript>`` and
    ``<template>`` are ignored.  Attribute values may be quoted with ``"`` or ``'``
    or unquoted; the first of repeated attributes counts; character references in
    them are decoded (what :func:`html.unescape` does); ASCII whitespace around the
    href is stripped, and a link with an empty or missing href is skipped.  The href
    is returned unresolved: the caller resolves it against the document's base URL.
    Reads at most :data:`HTML_SCAN_LIMIT` characters (64 KiB) with the standard
    library's ``html.parser`` (which accepts broken HTML) and stops at the first
    canonical link or at the body; never raises.
    """
    found = _head_links(document, first_only=True)
    return found[0] if found else None


def _quoted_string(value: str, i: int) -> tuple[str, int]:
    """RFC 8288 appendix B.4 (RFC 7230 3.2.6 ``quoted-string``): *value* [*i*] is a
    DQUOTE; returns the unquoted string and the index after the closing DQUOTE."""
    out: list[str] = []
    i += 1
    n = len(value)
    while i < n:
        c = value[i]
        if c == "\\":
            i += 1
            if i < n:
                out.append(value[i])
        elif c == '"':
            return "".join(out), i + 1
        else:
            out.append(c)
        i += 1
    return "".join(out), i


def _skip_ows(value: str, i: int) -> int:
    n = len(value)
    while i < n and value[i] in " \t":
        i += 1
    return i


def _link_values(value: str) -> Iterable[tuple[str, list[tuple[str, str]]]]:
    """RFC 8288 appendix B.2, "Parsing a Link Field Value": ``(target, params)`` for
    each link of one ``Link`` field value; parameter names lowercased."""
    i, n = 0, len(value)
    while i < n:
        i = _skip_ows(value, i)
        if i >= n or value[i] != "<":
            return
        end = value.find(">", i + 1)
        if end < 0:
            return
        target = value[i + 1:end]
        i = end + 1
        params: list[tuple[str, str]] = []
        while True:  # appendix B.3, "Parsing Parameters"
            i = _skip_ows(value, i)
            if i >= n or value[i] != ";":
                break
            i = _skip_ows(value, i + 1)
            start = i
            while i < n and value[i] not in " \t=;,":
                i += 1
            name = lower_ascii(value[start:i])
            i = _skip_ows(value, i)
            param = ""
            if i < n and value[i] == "=":
                i = _skip_ows(value, i + 1)
                if i < n and value[i] == '"':
                    param, i = _quoted_string(value, i)
                else:
                    start = i
                    while i < n and value[i] not in ";,":
                        i += 1
                    param = value[start:i].rstrip(" \t")
            params.append((name, param))
        yield target, params
        comma = value.find(",", i)  # anything up to the next link is not understood
        if comma < 0:
            return
        i = comma + 1


def canonical_from_link_headers(values: Iterable[str]) -> str | None:
    """The target of the first link whose ``rel`` has ``canonical`` in the ``Link``
    header *values* (several links, comma-separated, may share one value), or None.

    RFC 8288 section 3 and its appendix B parsing algorithm: ``<URI-Reference>`` then
    ``;``-separated parameters in any order, values a token or a quoted-string; only
    the first ``rel`` of a link counts (section 3.3), a space-separated list of
    relation types compared ASCII case-insensitively (section 2.1.1).  A value that
    stops parsing (no ``<``, no ``>``) keeps the links read before it.  The target is
    returned unresolved, ASCII whitespace around it stripped; an empty one is
    skipped.  Bytes are read as latin-1 (RFC 9110 section 5.5).  Never raises.
    """
    if isinstance(values, (str, bytes)):  # one value given bare, not in a list
        values = [values]
    try:
        for value in values:
            if isinstance(value, bytes):
                value = value.decode("latin-1")
            if not isinstance(value, str):
                continue
            for target, params in _link_values(value):
                rel = next((v for k, v in params if k == "rel"), "")
                target = target.strip(_HTML_SPACE)
                if target and "canonical" in lower_ascii(rel).split():
                    return target
    except Exception:  # an iterable that fails: what it gave so far had no canonical
        return None
    return None


# --------------------------------------------------------------------------- content digest

_HTML_START_RE = re.compile(r"\s*<[A-Za-z!?/]")
# Whichever comes first: a comment (to "-->" or the end), or a script/style/noscript/
# template element with its contents (to its end tag or the end), as a tokenizer sees them.
# (The loops are unrolled, [^-]* and [^<]*, which the engine runs far faster than .*?)
_HIDDEN_RE = re.compile(
    r"<(?=[!sSnNtT])(?:!--[^-]*(?:-(?!-!?>)[^-]*)*(?:--!?>|\Z)"
    r"|(script|style|noscript|template)\b[^<>]*>[^<]*(?:<(?!/\1\s*>)[^<]*)*(?:</\1\s*>|\Z))",
    re.IGNORECASE | re.DOTALL,
)
_MEDIA_TAGS = "img|iframe|video|audio|source|embed|amp-img|amp-iframe|amp-video|amp-audio|amp-anim"
# (the lookahead lets most tags fail on their first letter: twice as fast)
_KEPT_ATTR_TAG_RE = re.compile(
    rf"<(?=[aeimsvAEIMSV])(?:(?:{_MEDIA_TAGS})\s|meta\s)[^<>]*>", re.IGNORECASE)
_ATTR_RE = re.compile(r"""([^\s"'<>/=]+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]*)))?""")
_KEPT_META = frozenset({"description", "og:title", "og:description"})
_TAG_RE = re.compile(r"<[A-Za-z/!?][^<>]*>")

# The text's noise is found on its UTF-8 bytes, where bytes.translate is fast whatever
# the script: ASCII whitespace becomes " " (runs collapsed), then a copy with every
# digit turned into "0" is scanned for the shapes of dates, times and epochs with a
# pattern that starts with the literal "0" (so the regex engine skips to the next
# digit); each candidate is checked on the real digits.  Tokens are found on a copy
# with letters and digits turned into "a" and every other byte into " ".
_SPACE_TABLE = bytes.maketrans(b"\t\n\r\f\v", b"     ")
_ZERO_TABLE = bytes.maketrans(b"123456789", b"000000000")
_TOKEN_TABLE = bytes(
    0x61 if chr(i).isascii() and chr(i).isalnum() else 0x2D if i == 0x2D else 0x20
    for i in range(256)
)
_SPACES_RE = re.compile(rb"  +")
_MONTHS = rb"Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec"
_ZONE_NAMES = rb"(?:GMT|UTC?|[ECMP][SD]T|Z)(?![A-Za-z])"
# The shapes, after the first digit (hence the lookbehind: not after a digit, ".", ":", "-").
_SHAPE_RE = re.compile(
    rb"0(?<![0.:\-]0)(?:"
    rb"(?P<iso>000-00-00(?:[T ]0?0:00(?::00(?:[.,]0{1,9})?)?(?:Z|[+-]00:?00)?)?)(?![0\-])"
    rb"|(?P<rfc>0? ?(?:" + _MONTHS + rb") 0000 0?0:00(?::00)?"
    rb"(?: ?(?:[+-]0000|" + _ZONE_NAMES + rb"))?)"
    rb"|(?P<time>0?:00(?::00(?:[.,]0{1,9})?)?)(?![0:])"
    rb"|(?P<epoch>0{9}(?:000)?)(?!0)"
    rb")"
)
_D = rb"[0-9]"
_HOUR_MIN = rb"(?:[01]?" + _D + rb"|2[0-3]):[0-5]" + _D
_TIME_OK = _HOUR_MIN + rb"(?::(?:[0-5]" + _D + rb"|60)(?:[.,]" + _D + rb"{1,9})?)?"
_VALID = {
    # ISO 8601 calendar date (month 01-12, day 01-31), time and zone
    "iso": re.compile(
        _D + rb"{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]" + _D + rb"|3[01])"
        rb"(?:[T ]" + _TIME_OK + rb"(?:Z|[+-](?:[01]" + _D + rb"|2[0-3]):?[0-5]" + _D + rb")?)?"),
    # RFC 5322 section 3.3 date-time (its day of week, if any, is found before it)
    "rfc": re.compile(
        rb"(?:0?[1-9]|[12]" + _D + rb"|3[01]) ?(?:" + _MONTHS + rb") " + _D + rb"{4} "
        + _HOUR_MIN + rb"(?::(?:[0-5]" + _D + rb"|60))?"
        rb"(?: ?(?:[+-]" + _D + rb"{4}|" + _ZONE_NAMES + rb"))?"),
    "time": re.compile(_TIME_OK),
    # epoch seconds 1000000000-4999999999 (2001-2128), or milliseconds in that span
    "epoch": re.compile(rb"[1-4]" + _D + rb"{9}(?:" + _D + rb"{3})?"),
}
_DAY_BEFORE_RE = re.compile(rb"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), ?\Z")
# Literal prefixes, the engine's fast search: a run of 16 letters or digits (found
# at its start, the first place 16 occur in a row); a UUID's middle.
_TOKEN_RE = re.compile(rb"aaaaaaaaaaaaaaaaa*")
_UUID_MIDDLE_RE = re.compile(rb"-aaaa-aaaa-aaaa-")
_UUID_RE = re.compile(rb"[0-9A-Fa-f]{8}(?:-[0-9A-Fa-f]{4}){3}-[0-9A-Fa-f]{12}")
_MASK = b"\x00"


def _noise_spans(text: bytes) -> list[tuple[int, int]]:
    """The spans of *text* (whitespace already collapsed) to mask, sorted, merged."""
    spans: list[tuple[int, int]] = []
    for m in _SHAPE_RE.finditer(text.translate(_ZERO_TABLE)):
        kind = m.lastgroup or ""
        start, end = m.span()
        valid = _VALID[kind].match(text, start, end)  # the longest valid head of the shape
        if valid is None:
            continue
        if kind == "rfc":
            day = _DAY_BEFORE_RE.search(text, max(0, start - 6), start)
            if day is not None:
                start = day.start()
        spans.append((start, valid.end()))
    tokens = text.translate(_TOKEN_TABLE)
    for m in _TOKEN_RE.finditer(tokens):
        start, end = m.span()
        if not text[start:end].isdigit() and not text[start:end].isalpha():
            spans.append((start, end))
    if b"-" in text:
        for m in _UUID_MIDDLE_RE.finditer(tokens):
            start, end = m.start() - 8, m.end() + 12
            if (start >= 0 and _UUID_RE.fullmatch(text, start, end) is not None
                    and tokens[start - 1:start] != b"a" and tokens[end:end + 1] != b"a"):
                spans.append((start, end))
    if len(spans) < 2:
        return spans
    spans.sort()
    merged = [spans[0]]
    for start, end in spans[1:]:
        if start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _masked(text: bytes) -> bytes:
    """*text* with ASCII whitespace runs collapsed to one space and its noise masked."""
    text = _SPACES_RE.sub(b" ", text.translate(_SPACE_TABLE)).strip(b" ")
    spans = _noise_spans(text)
    if not spans:
        return text
    pieces: list[bytes] = []
    last = 0
    for start, end in spans:
        pieces += (text[last:start], _MASK)
        last = end
    pieces.append(text[last:])
    return b"".join(pieces)


def _kept_attributes(match: re.Match[str]) -> str:
    """The content an attribute carries in a media or ``<meta>`` tag, as text."""
    tag = match.group(0)
    attrs: dict[str, str] = {}
    for m in _ATTR_RE.finditer(tag, 1):
        attrs.setdefault(lower_ascii(m.group(1)), m.group(2) or m.group(3) or m.group(4) or "")
    if tag[1:5].lower() == "meta":
        name = lower_ascii(attrs.get("name") or attrs.get("property") or "")
        return f" {attrs.get('content', '')} " if name in _KEPT_META else " "
    return f" {attrs.get('src', '')} "


def _content_bytes(body: str) -> bytes:
    if not isinstance(body, str):
        return b""
    for bom in _BOMS:
        if body.startswith(bom):
            body = body[len(bom):]
    if _HTML_START_RE.match(body):
        body = _HIDDEN_RE.sub(" ", body)
        body = _KEPT_ATTR_TAG_RE.sub(_kept_attributes, body)
        body = _TAG_RE.sub(" ", body)
        if "&" in body:
            body = html.unescape(body)
    if "\xa0" in body:
        body = body.replace("\xa0", " ")
    return _masked(body.encode("utf-8", "surrogatepass"))


def content_text(body: str) -> str:
    """The text :func:`content_digest` hashes: *body* with its noise removed or masked
    (each masked token becomes one NUL), whitespace collapsed to single spaces."""
    return _content_bytes(body).decode("utf-8", "surrogatepass")


def content_digest(body: str) -> bytes:
    """A 16-byte digest (BLAKE2b) of what a page says, equal for two responses of the
    same resource despite the usual per-response noise: evidence that two URLs serve
    one resource (RFC 3987 section 5.3.4, "the protocol teaches").

    A body whose first non-blank character is ``<`` is markup (HTML, XHTML, XML); in it:

    * removed with their contents: HTML comments and ``<script>``, ``<style>``,
      ``<noscript>``, ``<template>`` elements (nonces, inline JSON state, analytics);
    * tags dropped, text kept, character references decoded: markup variants of one
      text (an AMP page and its plain page, other attribute order, classes, ids)
      digest equal; with the tags go every attribute, so ``<input type=hidden>``
      values and ``<meta name=csrf-token content=...>`` never count;
    * two kinds of attribute are kept, as text, because they are content: the ``src``
      of embedded media (``img``, ``iframe``, ``video``, ``audio``, ``source``,
      ``embed`` and their ``amp-`` forms: two photo pages with the same caption
      differ by their image) and the ``content`` of ``<meta name=description>``,
      ``og:title``, ``og:description`` (what differs between two pages of one
      script-rendered site).

    Then, in the text (of markup, or of any other body: plain text, JSON), ASCII
    whitespace and no-break spaces are collapsed to single spaces, and each of these
    is masked to one placeholder (a NUL); the dates, times and epochs only where they
    do not follow a digit, ``.``, ``:`` or ``-``:

    * ISO 8601 calendar dates (month 01-12, day 01-31), with an optional time and
      zone (``2024-05-01``, ``2024-05-01T12:00:00.5+02:00``, ``2024-05-01 12:00``);
    * RFC 5322 section 3.3 / RFC 1123 date-times, day of week included
      (``Mon, 01 Jan 2024 12:00:00 GMT``, ``5 Nov 2024 09:07 +0100``);
    * times of day ``H:MM``, ``HH:MM``, ``HH:MM:SS[.fff]`` (hours 0-23, minutes and
      seconds 0-59);
    * UUIDs (RFC 9562: 8-4-4-4-12 hex digits);
    * epoch times: runs of exactly 10 digits from 1000000000 to 4999999999 (seconds,
      years 2001-2128) or 13 digits from 1000000000000 to 4999999999999
      (milliseconds), not after a ``.`` (a decimal fraction);
    * tokens: runs of 16 or more ASCII letters and digits with at least one of each:
      hex and base64 session ids, CSRF tokens, cache-busters, ISO 8601 basic
      date-times (``20240501T120000Z``).

    Never masked: words (a run of letters alone, however long), numbers of up to 9
    digits (ids, prices, page numbers, years alone), 11- and 12-digit and over
    13-digit numbers, 10- and 13-digit ones outside the epoch span (from 5000000000
    up, so most phone numbers; ISBN-13s, 978... and 979...), invalid dates and times
    (``2024-13-01``, ``76:68``), other date spellings (``05/01/2024``, ``1 May
    2024`` without a time), and tokens cut by any other character (``-``, ``_``,
    ``/``, ``+``, ``=``, ``.``) into pieces under 16 characters (slugs, product
    names, paths; a base64 token cut so keeps its pieces: its pages then digest
    apart, a missed merge, never a false one).

    False-merge risk: two different pages whose texts differ only in masked tokens
    digest equal: a day page of a calendar with no events but its date, two
    listings that differ only by a 16+ character code (a VIN, a hash), pages that
    differ only in a time (a match score "21:15", a verse "3:16"), in a 10-digit
    number that reads as an epoch (a phone number "2125551234"), in an attribute
    other than those kept (a link's href, an image's ``data-src``) or in what a
    script renders.  A body with no text left (an empty page, a script-only shell)
    digests to :data:`EMPTY_DIGEST`, which says nothing about the resource.  So one equal
    digest is a candidate, not proof: the learner confirms it N times and samples.
    """
    return hashlib.blake2b(_content_bytes(body), digest_size=16).digest()


#: The digest of a body with no text left: no evidence that two URLs are one resource.
EMPTY_DIGEST = hashlib.blake2b(b"", digest_size=16).digest()


# --------------------------------------------------------------------------- hosts

def host_prefixed_www(a: str, b: str) -> bool:
    """True if hosts *a* and *b* differ only by a leading ``www.`` label
    (``www.example.com`` and ``example.com``, either order, ASCII case-insensitive).

    False for two equal hosts (they do not differ) and when the bare host has a
    single label (``www.com`` and ``com`` are not one site).  The learner's default
    "same site" test for a canonical link on another host.
    """
    if not isinstance(a, str) or not isinstance(b, str):
        return False
    a, b = lower_ascii(a), lower_ascii(b)
    if len(a) < len(b):
        a, b = b, a
    if not a.startswith("www.") or a[4:] != b:
        return False
    labels = b.rstrip(".").split(".")
    return len(labels) >= 2 and all(labels)
