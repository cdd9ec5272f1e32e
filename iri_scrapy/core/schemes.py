"""Scheme knowledge used by scheme-based normalization (RFC 3987 section 5.3.3)."""

from __future__ import annotations

from types import MappingProxyType

#: Default port of each scheme whose definition gives one.  An explicit port
#: equal to it is elided by scheme-based normalization (RFC 3987 5.3.3,
#: RFC 3986 6.2.3).
DEFAULT_PORTS = MappingProxyType(
    {
        "http": "80",  # RFC 9110 4.2.1
        "https": "443",  # RFC 9110 4.2.2
        "ws": "80",  # RFC 6455 3
        "wss": "443",  # RFC 6455 3
        "ftp": "21",  # RFC 1738 3.2
    }
)

#: Schemes "known to use domain names in ireg-name" (RFC 3987 3.1): their
#: ireg-name goes through IDNA ToASCII, and an empty path with an authority is "/".
DNS_SCHEMES = frozenset(DEFAULT_PORTS)


def default_port(scheme: str) -> str | None:
    """The default port of *scheme* (lowercase), or ``None`` if it has none we know."""
    return DEFAULT_PORTS.get(scheme)


def uses_dns(scheme: str | None) -> bool:
    """True if *scheme* (lowercase) is known to use DNS names in its host (RFC 3987 3.1)."""
    return scheme in DNS_SCHEMES


def scheme_path(scheme: str | None, has_authority: bool, path: str) -> str:
    """The empty-path rule of scheme-based normalization (RFC 3987 5.3.3, RFC 3986
    6.2.3): "an empty path component should be normalized to a path of '/'" for a
    scheme known to use DNS names (:data:`DNS_SCHEMES`), when there is an
    authority.  Every other path is returned as it is.

    The one definition of the rule: the scheme rung, the fused path and the fast
    path of :mod:`iri_scrapy.core.ladder` all ask it.
    """
    if path == "" and has_authority and scheme in DNS_SCHEMES:
        return "/"
    return path
