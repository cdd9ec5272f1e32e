"""The query and fragment toolkit: one definition of each way a URI's query and fragment are cut.

RFC 3986 section 3.5: the fragment is everything after the first ``#`` (no ``#``
appears before it), and section 5.1 of RFC 3987 leaves it out when comparing for
retrieval: :func:`split_fragment`, :func:`strip_fragment`.  Section 3.4: the query
is everything after the first ``?`` up to the fragment; its ``name=value`` pairs
joined by ``&`` are a convention (HTML forms), not syntax, so pairs are cut as
text, never decoded: :func:`split_query`, :func:`query_pairs`, :func:`param_name`,
:func:`join_query`, :func:`drop_params`, :func:`sort_params`.  The opt-in
heuristics (not RFC 3987: dropping parameters by name glob, sorting the pairs)
are :func:`rewrite_query`, shared by the plugin, the CLI and Spark.

Patterns read from a server or a file (robots.txt ``Clean-param`` path prefixes,
``drop-param`` rules of a rules document, parameter name globs of a setting) are
matched by :class:`Glob`, a hand-written matcher that never backtracks: a pattern
is cut at its ``*`` into fixed-length segments, and each segment after the first
is found at its leftmost place (a fixed-length segment placed leftmost leaves the
most room to the rest), so a match costs O(len(text) * len(pattern)) at worst,
and ``str.find`` per segment when the segments are plain text.  Name globs have
:func:`fnmatch.fnmatchcase`'s meaning (``*``, ``?``, ``[seq]``, ``[!seq]``,
case-sensitive); a ``Clean-param`` prefix knows ``*`` only (Yandex).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Container, Iterable
from functools import lru_cache

# --------------------------------------------------------------------------- fragment (3.5)


def split_fragment(uri: str) -> tuple[str, str]:
    """``(uri without fragment, "#fragment" or "")``: cut at the first ``#``."""
    i = uri.find("#")
    return (uri, "") if i < 0 else (uri[:i], uri[i:])


def strip_fragment(uri: str) -> str:
    """*uri* without its fragment (and without the ``#``): its retrieval form (5.1)."""
    i = uri.find("#")
    return uri if i < 0 else uri[:i]


# --------------------------------------------------------------------------- query (3.4)


def split_query(uri: str) -> tuple[str, str, str]:
    """``(before, "?" or "", query)`` of *uri* without fragment: cut at the first ``?``."""
    return uri.partition("?")


def query_pairs(query: str) -> list[str]:
    """The ``&``-separated pairs of *query*, as written (an empty query is one empty pair)."""
    return query.split("&")


def param_name(pair: str) -> str:
    """The name of one query pair: the text before its first ``=`` (all of it if none)."""
    return pair.partition("=")[0]


def join_query(pairs: Iterable[str]) -> str:
    """The query of *pairs*, joined by ``&``."""
    return "&".join(pairs)


def drop_params(pairs: Iterable[str], names: Container[str]) -> list[str]:
    """*pairs* without those whose :func:`param_name` is in *names* (every occurrence).

    *names* is a set of exact names or a :class:`NameGlobs` (name globs)."""
    return [pair for pair in pairs if param_name(pair) not in names]


def sort_params(pairs: Iterable[str]) -> list[str]:
    """*pairs* in code point order of the whole pair (name, then ``=``, then value)."""
    return sorted(pairs)


def rewrite_query(uri: str, drop_query_params: Iterable[str] = (), sort_query: bool = False) -> str:
    """The opt-in query heuristics (not RFC 3987) on a canonical URI: the pairs whose
    name matches one of the globs *drop_query_params* dropped, the rest sorted with
    *sort_query*; ``?`` goes when no pair is left; the fragment is kept.  A URI
    without ``?`` is returned as it is."""
    globs = tuple(drop_query_params)
    if not globs and not sort_query:
        return uri
    head, fragment = split_fragment(uri)
    base, q, query = split_query(head)
    if not q:
        return uri
    pairs = query_pairs(query)
    if globs:
        pairs = drop_params(pairs, name_globs(globs))
    if sort_query:
        pairs = sort_params(pairs)
    return base + ("?" + join_query(pairs) if pairs else "") + fragment


# --------------------------------------------------------------------------- globs

#: One character of a segment: itself, None (``?``: any character) or a class.
_Item = str | re.Pattern[str] | None
#: Characters between two ``*``: plain text, or items when ``?`` or a class is in it.
_Segment = str | tuple[_Item, ...]


class Glob:
    """A compiled wildcard pattern, matched without backtracking (see the module doc).

    ``Glob(pattern)`` has :func:`fnmatch.fnmatchcase`'s meaning; with
    ``star_only=True`` only ``*`` is special (``?`` and ``[`` are themselves); with
    ``prefix=True`` the pattern need match only a prefix of the text (an implicit
    ``*`` at its end).
    """

    __slots__ = ("pattern", "prefix", "_segments")

    def __init__(self, pattern: str, *, star_only: bool = False, prefix: bool = False) -> None:
        self.pattern = pattern
        self.prefix = prefix
        segments: list[_Segment] = []
        for part in _cut_at_stars(pattern, star_only):
            chars = [item for item in part if isinstance(item, str)]
            segments.append("".join(chars) if len(chars) == len(part) else tuple(part))
        self._segments = tuple(segments)

    def __repr__(self) -> str:
        return f"Glob({self.pattern!r}, prefix={self.prefix})"

    def match(self, text: str) -> bool:
        """True if *text* matches the pattern (whole, or a prefix with ``prefix=True``)."""
        segments = self._segments
        first = segments[0]
        if not _at(first, text, 0, len(text)):
            return False
        pos = len(first)
        end = len(text)
        if len(segments) == 1:
            return self.prefix or pos == end
        middle = segments[1:]
        if not self.prefix:
            last = segments[-1]
            end -= len(last)
            if end < pos or not _at(last, text, end, len(text)):
                return False
            middle = segments[1:-1]
        for segment in middle:
            found = _find(segment, text, pos, end)
            if found < 0:
                return False
            pos = found + len(segment)
        return True


def _cut_at_stars(pattern: str, star_only: bool) -> list[list[_Item]]:
    """The segments of *pattern* between its ``*`` (one more than the stars), each a
    list of items: a character, None for ``?``, a compiled class for ``[...]``
    (fnmatch's own reading of the bracket: where it ends, ranges, ``!``)."""
    segments: list[list[_Item]] = [[]]
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        i += 1
        if c == "*":
            segments.append([])
        elif star_only:
            segments[-1].append(c)
        elif c == "?":
            segments[-1].append(None)
        elif c == "[":
            j = _bracket_end(pattern, i)
            if j < 0:
                segments[-1].append("[")
            else:
                segments[-1].append(_char_class(pattern[i - 1 : j + 1]))
                i = j + 1
        else:
            segments[-1].append(c)
    return segments


def _bracket_end(pattern: str, i: int) -> int:
    """The index of the ``]`` closing the bracket opened just before *i*, or -1
    (as :func:`fnmatch.translate` scans: a leading ``!`` then ``]`` are members)."""
    j, n = i, len(pattern)
    if j < n and pattern[j] == "!":
        j += 1
    if j < n and pattern[j] == "]":
        j += 1
    while j < n and pattern[j] != "]":
        j += 1
    return j if j < n else -1


@lru_cache(maxsize=1024)
def _char_class(bracket: str) -> re.Pattern[str]:
    """One ``[...]`` as fnmatch reads it: a pattern of exactly one character (a class
    cannot backtrack), so its members are fnmatch's, ranges and all."""
    return re.compile(fnmatch.translate(bracket))


def _at(segment: _Segment, text: str, pos: int, end: int) -> bool:
    """Whether *segment* matches *text* at *pos*, ending by *end*."""
    if isinstance(segment, str):
        return text.startswith(segment, pos, end)
    if pos + len(segment) > end:
        return False
    for k, item in enumerate(segment):
        ch = text[pos + k]
        if item is None:
            continue
        if isinstance(item, str):
            if item != ch:
                return False
        elif item.match(ch) is None:
            return False
    return True


def _find(segment: _Segment, text: str, pos: int, end: int) -> int:
    """The leftmost index from *pos* where *segment* matches, ending by *end*, or -1."""
    if isinstance(segment, str):
        return text.find(segment, pos, end)
    for start in range(pos, end - len(segment) + 1):
        if _at(segment, text, start, end):
            return start
    return -1


@lru_cache(maxsize=4096)
def _glob(pattern: str, star_only: bool, prefix: bool) -> Glob:
    return Glob(pattern, star_only=star_only, prefix=prefix)


def glob_match(pattern: str, text: str) -> bool:
    """:func:`fnmatch.fnmatchcase` (*text*, *pattern*), without backtracking."""
    return _glob(pattern, False, False).match(text)


class NameGlobs:
    """Parameter name globs as a container: ``name in NameGlobs(("utm_*",))`` is True
    when one glob matches the whole name (fnmatch, case-sensitive)."""

    __slots__ = ("globs",)

    def __init__(self, patterns: Iterable[str]) -> None:
        self.globs = tuple(_glob(p, False, False) for p in patterns)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and any(g.match(name) for g in self.globs)


@lru_cache(maxsize=256)
def name_globs(patterns: tuple[str, ...]) -> NameGlobs:
    """The (cached) :class:`NameGlobs` of *patterns*."""
    return NameGlobs(patterns)


def in_clean_param_scope(prefix: str, path: str) -> bool:
    """True if *path* (as sent: percent-encoded) is under the robots.txt ``Clean-param``
    path *prefix*: it starts with it, each ``*`` of it matching any sequence; ``""``
    and ``/`` (no path given) cover every path."""
    if prefix in ("", "/"):
        return True
    if "*" not in prefix:
        return path.startswith(prefix)
    return _glob(prefix, True, True).match(path)
