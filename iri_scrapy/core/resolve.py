"""Reference resolution (RFC 3986 section 5.2, used unchanged by RFC 3987 section 6.5)."""

from __future__ import annotations

from functools import lru_cache

from iri_scrapy.core.errors import IRIError
from iri_scrapy.core.parsing import IRIReference, check_str, parse


def remove_dot_segments(path: str) -> str:
    """Remove ``.`` and ``..`` segments (RFC 3986 section 5.2.4), in linear time.

    A literal transcription of the five rules A-E; the output buffer is a list of
    the segments moved by rule E, each with its leading "/", so that "remove the
    last segment and its preceding '/'" is a ``pop``.
    """
    if "/." not in path and not path.startswith("."):
        return path  # no segment starts with "."
    out: list[str] = []
    i, n = 0, len(path)
    while i < n:
        if path.startswith("../", i):  # A
            i += 3
        elif path.startswith("./", i):  # A
            i += 2
        elif path.startswith("/./", i):  # B: "/./" -> "/"
            i += 2
        elif i + 2 == n and path.startswith("/.", i):  # B: "/." at the end -> "/"
            out.append("/")
            i = n
        elif path.startswith("/../", i):  # C: "/../" -> "/", pop
            i += 3
            if out:
                out.pop()
        elif i + 3 == n and path.startswith("/..", i):  # C: "/.." at the end
            if out:
                out.pop()
            out.append("/")
            i = n
        elif (i + 1 == n and path[i] == ".") or (i + 2 == n and path.startswith("..", i)):  # D
            i = n
        else:  # E: move the first segment, with its leading "/", to the output
            j = path.find("/", i + 1 if path[i] == "/" else i)
            if j < 0:
                j = n
            out.append(path[i:j])
            i = j
    return "".join(out)


def _merge(base: IRIReference, path: str) -> str:
    """Merge a relative-path reference with the base path (RFC 3986 section 5.2.3)."""
    if base.host is not None and base.path == "":
        return "/" + path
    return base.path[: base.path.rfind("/") + 1] + path


# A page's links are all resolved against its base: parsed once (IRIReference is frozen).
_parse_base = lru_cache(maxsize=256)(parse)


def resolve(base: str, reference: str, *, strict: bool = True) -> str:
    """Resolve *reference* against the absolute IRI *base* (RFC 3986 section 5.2.2).

    Works on IRIs directly: resolution does not depend on the IRI-to-URI mapping
    (RFC 3987 section 6.5).  With ``strict=False`` a reference whose scheme equals
    the base's is treated as relative (the backward-compatible parser of 5.2.2,
    so that ``http:g`` against ``http://a/b/c/d;p?q`` gives ``http://a/b/c/g``).
    Raises :class:`IRIError` if *base* has no scheme (RFC 3986 section 5.2.1).
    """
    check_str(base, "resolve")
    check_str(reference, "resolve")
    b = _parse_base(base)
    r = parse(reference)
    if b.scheme is None:
        raise IRIError(
            "base IRI must be absolute (RFC 3986 section 5.2.1)",
            component="scheme",
            text=base,
        )
    r_scheme = r.scheme
    if not strict and r_scheme is not None and r_scheme.lower() == b.scheme.lower():
        r_scheme = None
    if r_scheme is not None:
        t = IRIReference(
            r_scheme, r.userinfo, r.host, r.port, remove_dot_segments(r.path), r.query, r.fragment
        )
    elif r.host is not None:
        t = IRIReference(
            b.scheme, r.userinfo, r.host, r.port, remove_dot_segments(r.path), r.query, r.fragment
        )
    else:
        if r.path == "":
            path = b.path
            query = r.query if r.query is not None else b.query
        else:
            path = remove_dot_segments(r.path if r.path.startswith("/") else _merge(b, r.path))
            query = r.query
        t = IRIReference(b.scheme, b.userinfo, b.host, b.port, path, query, r.fragment)
    return t.unsplit()
