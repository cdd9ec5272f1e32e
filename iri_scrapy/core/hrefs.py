"""Hrefs as a browser reads them: the URL Standard's preprocessing, before RFC 3987.

A link in a page, a ``Location`` header or a ``<base href>`` is read by
browsers with the URL Standard's basic URL parser
(https://url.spec.whatwg.org/#concept-basic-url-parser), which, before any
parsing, **trims** leading and trailing C0 controls and spaces, **removes**
every ASCII tab or newline (U+0009, U+000A, U+000D) anywhere, and, for a
*special* scheme (``ftp``, ``file``, ``http``, ``https``, ``ws``, ``wss``:
https://url.spec.whatwg.org/#special-scheme), reads ``\\`` as ``/`` wherever
``/`` ends a component before the query and fragment (the special authority
slashes, relative slash, authority, host, port, path start and path states;
not in the query or fragment states).  ``..\\index.html`` is ``../index.html``,
``/pa<LF>th.html`` is ``/path.html``, and ``http://h\\@evil.test/`` is host
``h`` with path ``/@evil.test/``: the ``\\`` ends the authority.

:func:`preprocess_href` does exactly that and nothing else, so that the crawl
fetches the resource a browser fetches and contacts the authority a browser
contacts.  The RFC 3987 mapping and normalization run on its output.

The library's :func:`~iri_scrapy.normalize` stays strict RFC 3986/3987: there,
``\\``, a tab or a space is a character of the IRI (percent-encoded by the
mapping of RFC 3987 section 3.1), never a delimiter; what browsers do to
markup is a property of where a string came from (a page), not of the string.
Only the crawl's link paths (``response.follow``/``urljoin``,
``IRILinkExtractor``, redirects, ``<base href>``) call this module.
"""

from __future__ import annotations

import re

#: The URL Standard's special schemes (https://url.spec.whatwg.org/#special-scheme).
SPECIAL_SCHEMES = frozenset({"ftp", "file", "http", "https", "ws", "wss"})

# "C0 control or space" (https://infra.spec.whatwg.org/#c0-control): U+0000 to U+0020
_C0_OR_SPACE = "".join(chr(c) for c in range(0x21))
# "ASCII tab or newline" (https://infra.spec.whatwg.org/#ascii-tab-or-newline)
_TAB_OR_NEWLINE = str.maketrans("", "", "\t\n\r")
# the scheme start and scheme states: ASCII alpha, then alphanumeric, "+", "-", "."
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")


def url_scheme(url: str) -> str | None:
    """The scheme of *url* (lowercase) as the URL Standard's scheme state reads it,
    None when *url* is a relative reference (no scheme before a ``:``)."""
    match = _SCHEME.match(url)
    return match.group()[:-1].lower() if match else None


#: Special schemes whose URLs have an authority (not ``file``, which has its own states):
#: after one, a browser skips any number of slashes, and a same-scheme URL without
#: ``//`` is relative to the base.
_AUTHORITY_SCHEMES = frozenset({"ftp", "http", "https", "ws", "wss"})


def _slash_form(href: str) -> bool:
    """True if *href* starts ``///`` or with an authority scheme not followed by
    exactly ``//`` and a host (``http:page.html``, ``https:host/x``, ``http:///h``)."""
    if href[:3] == "///":
        return True
    colon = href.find(":", 0, 6)
    if colon < 2:
        return False
    rest = href[colon + 1:colon + 4]
    return (rest[:2] != "//" or rest == "///") and href[:colon].lower() in _AUTHORITY_SCHEMES


def needs_preprocessing(href: str) -> bool:
    """True unless :func:`preprocess_href` would return *href* unchanged for any base.

    No leading or trailing C0 control or space, no ASCII tab or newline, no ``\\``,
    no slashes a browser skips or a same-scheme prefix it reads as relative
    (:func:`_slash_form`): the link a page almost always holds (what the callers
    check first).
    """
    return bool(href) and (
        href[0] <= " " or href[-1] <= " " or "\\" in href or "\t" in href
        or "\n" in href or "\r" in href or _slash_form(href)
    )


def preprocess_href(href: str, base_scheme: str | None) -> str:
    """*href* as the URL Standard's basic URL parser reads it, before parsing.

    * https://url.spec.whatwg.org/#concept-basic-url-parser step 1: remove any
      leading and trailing C0 control or space;
    * step 2 (and step 3's "ASCII tab or newline" validation errors): remove
      all ASCII tab or newline;
    * for a special URL (https://url.spec.whatwg.org/#is-special): ``\\`` is read
      as ``/`` in the special authority slashes, special authority ignore
      slashes, relative, relative slash, authority, host, port, path start
      and path states (each says "url is special and c is U+005C (\\)"), which
      is everything before the first ``?`` or ``#``; the query and fragment
      states keep it.  The URL is special when *href*'s own scheme is; a
      relative reference (no scheme) takes its scheme from the base URL,
      *base_scheme* (None: no base, or one whose scheme is unknown).

    * for a special scheme with an authority (``http``, ``https``, ``ws``,
      ``wss``, ``ftp``), the slashes: the "special authority ignore slashes
      state" skips any number of ``/`` (and ``\\``) before the host
      (``https:host/x`` and ``http:////host/`` are ``https://host/x`` and
      ``http://host/``; a relative ``///host/p`` on such a base is
      ``//host/p``), and the "special relative or authority state" reads a URL
      of the base's own scheme without ``//`` as relative (``http:page.html``
      on an ``http`` page is ``page.html``; RFC 3986 section 5.2.2 allows the
      same for backward compatibility, its non-strict parser).

    Every other character is left as it is (a space inside, a form feed,
    ``%5C``): this is the browser's reading, not a normalization.  Idempotent.
    """
    if not needs_preprocessing(href):
        return href
    href = href.strip(_C0_OR_SPACE).translate(_TAB_OR_NEWLINE)
    scheme = url_scheme(href)
    own = scheme is not None
    if scheme is None:
        scheme = base_scheme.lower() if base_scheme else None
    if scheme not in SPECIAL_SCHEMES:
        return href
    if "\\" in href:
        end = len(href)
        for delimiter in "?#":
            at = href.find(delimiter, 0, end)
            if at >= 0:
                end = at
        href = href[:end].replace("\\", "/") + href[end:]
    if scheme not in _AUTHORITY_SCHEMES:
        return href
    if not own:
        return "//" + href.lstrip("/") if href[:3] == "///" else href
    prefix, rest = href[:len(scheme) + 1], href[len(scheme) + 1:]
    if rest[:2] != "//" and base_scheme is not None and scheme == base_scheme.lower():
        # relative to the base, as RFC 3986 5.2.2's non-strict parser reads it; a
        # first segment with a colon is not a scheme (RFC 3986 section 4.2)
        # a C0 or space first would be trimmed if the href were read again (step 1)
        head = rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
        return "./" + rest if rest and (rest[0] <= " " or ":" in head) else rest
    return prefix + "//" + rest.lstrip("/")
