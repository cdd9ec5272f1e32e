"""SURT keys (Sort-friendly URI Reordering Transform) built on the RFC 3987 canonical URI.

A SURT writes the host's labels in reverse order, comma-separated, before the
path, so that a sorted list of URLs groups them by domain:
``http://www.Example.com:80/a?b`` becomes ``com,example)/a?b``.  Heritrix, the
Wayback Machine's CDX index and Common Crawl's URL index use this shape (the
``surt`` package on PyPI is their Python implementation).

Ours differs in what comes *before* the reordering: the URI is first brought to
its canonical form at a level of the RFC 3987 section 5.3 ladder
(:func:`iri_scrapy.surt` normalizes, scheme level and no fragment by default,
then calls :func:`reorder`), and nothing else.  The Internet Archive's
canonicalizer also lowercases the path and query, sorts the query parameters,
strips session ids and trailing slashes: those merge different resources
(``/Page`` and ``/page``, ``?a=1&b=2`` and ``?b=2&a=1``), which RFC 3987
section 5.1 says a comparison must avoid.  So two spellings get the same SURT
here exactly when they have the same canonical URI.

This module is the reordering alone: it takes a canonical URI and imports only the
parser, so the ladder (``normalize(form="surt")``) can use it.

Options (the ones the ``surt`` package offers, with its defaults):

``include_scheme`` (False)
    write ``http://(com,example)/a`` instead of ``com,example)/a`` (Heritrix
    writes ``http://(com,example,)/a``: add ``trailing_comma=True``).
``drop_www`` (True)
    drop a leading ``www``, ``www2``... label (the ``surt`` package's
    "host massage"), so ``www.example.com`` and ``example.com`` share a key.
    This is the one merge beyond RFC 3987 we offer, because the tools do it by
    default; pass False for keys that never merge two hosts.
``trailing_comma`` (False)
    end the host (and port) with a comma: ``com,example,)``, ``com,example:8080,)``.
``reverse_ipaddr`` (True)
    reverse an IPv4 address like a host name (``4,3,2,1)``); IPv6 literals are
    never reversed.

User information stays, before the host (``user@com,example)/``): the ``surt``
package drops it by default, but it can name another resource.  A reference
without an authority (``mailto:``, ``urn:``, ``data:``) has no host
to reorder: its SURT is its canonical URI.
"""

from __future__ import annotations

import re

from iri_scrapy.core.parsing import parse

_WWW = re.compile(r"www\d*\.")
_IPV4 = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}\Z")


def reorder(
    uri: str,
    *,
    include_scheme: bool = False,
    drop_www: bool = True,
    trailing_comma: bool = False,
    reverse_ipaddr: bool = True,
) -> str:
    """The SURT key of the canonical URI *uri*: its host's labels reversed, nothing else changed.

    *uri* must already be canonical (:func:`iri_scrapy.normalize` with ``form="uri"``);
    :func:`iri_scrapy.surt` is both steps.
    """
    ref = parse(uri)
    if ref.host is None:
        return uri
    host = ref.host
    if host.startswith("[") or (not reverse_ipaddr and _IPV4.match(host)):
        key = host  # an IP literal is never reversed; IPv4 only when asked
    else:
        if drop_www:
            m = _WWW.match(host)
            if m is not None and m.end() < len(host):
                host = host[m.end():]
        labels = host.split(".")
        labels.reverse()
        key = ",".join(labels)
    if ref.userinfo is not None:
        key = ref.userinfo + "@" + key
    if ref.port is not None:
        key += ":" + ref.port
    if trailing_comma:
        key += ","
    out = f"{ref.scheme}://({key})" if include_scheme else f"{key})"
    out += ref.path or ("/" if ref.query is not None or ref.fragment is not None else "")
    if ref.query is not None:
        out += "?" + ref.query
    if ref.fragment is not None:
        out += "#" + ref.fragment
    return out
