"""Evidence for the protocol rung (RFC 3987 section 5.3.4): what servers say about equivalence.

Section 5.3.4 lets a crawler regard two IRIs as equivalent once the protocol shows
it.  Besides permanent redirects (:mod:`iri_scrapy.protocol.rules`) a server says so
in four ways; this module reads three of them, as pure functions on text (no I/O,
no Scrapy), for the learner that turns evidence into rules:

* ``Clean-param`` lines of robots.txt (Yandex's directive): :func:`parse_clean_param`;
* ``<link rel="canonical">`` in an HTML head (RFC 6596 section 3; the HTML
  Standard's ``link`` element): :func:`canonical_from_html`;
* ``Link: <...>; rel="canonical"`` response headers (RFC 8288 section 3,
  RFC 6596 section 3): :func:`canonical_from_link_headers`;
* (the fourth, the same content under two URLs, is :mod:`.fingerprint`, compared
  modulo what changes by chance on the site: :mod:`.calibration`).

Everything here reads data from the network: no function raises on any input;
what cannot be read is no evidence (None, or no rule), never a guess.
"""

from __future__ import annotations

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
_CANONICAL_RE = re.compile("canonical", re.IGNORECASE | re.ASCII)
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
    # no way to spell rel=canonical (its token is compared ASCII case-insensitively:
    # no need to lowercase a whole non-ASCII head, which costs a millisecond)
    if "canonical" not in text and "&#" not in text and _CANONICAL_RE.search(text) is None:
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
