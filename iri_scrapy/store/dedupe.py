"""Streaming deduplication of URL lists by canonical form (RFC 3987 section 5.3).

The logic behind ``iri-scrapy dedupe``, pure and without Scrapy: feed lines to
a :class:`Deduper` one at a time; it keeps one 64-bit fingerprint of the
canonical key of each distinct resource, never the lines, so memory grows only
with the number of distinct resources.  The fingerprints live in the compact
open-addressing table of :mod:`iri_scrapy.store.fpstore` (shared with the Scrapy
dupefilter; core, it imports no Scrapy): 8 bytes a slot, 10.7 to 21.3
bytes per entry, about 32 at most while the table doubles.  Two different keys
are merged with probability below n**2 / 2**65 for n distinct resources
(3e-4 for 10**8).

Two lines are the same resource when their ``normalize(..., form="uri")``
strings are equal at the chosen level (section 5.3's ladder; by default without
fragments, the retrieval comparison of section 5.1).  For every URL line the
rungs that changed its spelling on the way to the canonical form are counted
(what :func:`iri_scrapy.core.ladder.rungs_applied` returns, computed in the
same climb as the key by :func:`iri_scrapy.core.ladder.canonical_and_rungs`); a
line that was already canonical counts under ``simple`` (section 5.3.1).  The
counts are kept apart for duplicates (``by_rung``) and first spellings
(``first_by_rung``): their sum, :meth:`DedupeStats.spellings_by_rung`, depends on
the canonical key of each line only, never on which spelling came first
(``HTTP://EXAMPLE.COM`` then ``http://example.com/``, or the other way round:
case 1, scheme 1, simple 1 either way).

With *samples*, :class:`Deduper` also keeps what ``dedupe --report`` shows, in
bounded memory: the hosts with most duplicates (:data:`MAX_HOSTS` counters, the
smallest dropped when full, so the counts are lower bounds past that), and up to
:data:`MAX_CLUSTERS` alias clusters (a first spelling and up to
:data:`MAX_CLUSTER_SPELLINGS` - 1 others), found among the last
:data:`RECENT_FIRSTS` first spellings.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from hashlib import blake2b
from typing import Any

from iri_scrapy.core import native
from iri_scrapy.core.errors import IRIError
from iri_scrapy.core.ladder import (
    Form,
    Level,
    NormalizeOptions,
    Rung,
    canonical,
    canonical_and_rungs,
    render_uri,
)
from iri_scrapy.core.parsing import SCHEME_RE, WHITESPACE, preprocess
from iri_scrapy.core.query import rewrite_query
from iri_scrapy.core.surt import reorder
from iri_scrapy.store.fpstore import FingerprintSet

#: Counted beside the ladder's rungs, not one of them: the fragment dropped for the
#: retrieval key (RFC 3987 section 5.1), by dedupe (a line whose fragment was dropped)
#: and by the crawl's dupefilter (``decided_by/fragment``); one label in both reports.
FRAGMENT = "fragment"
FRAGMENT_LABEL = ("5.1", "fragment dropped (retrieval key)")
#: Keys of :attr:`DedupeStats.by_rung`: the rungs in ladder order, then :data:`FRAGMENT`.
RUNG_KEYS: tuple[str, ...] = (*(r.key for r in Rung), FRAGMENT)
#: Bounds of :class:`Samples` (``dedupe --report``).
MAX_HOSTS = 4096
MAX_CLUSTERS = 24
MAX_CLUSTER_SPELLINGS = 6
RECENT_FIRSTS = 4096
MAX_SAMPLED_LENGTH = 2048


def fingerprint(key: str) -> int:
    """The 64-bit BLAKE2b fingerprint (RFC 7693) of a canonical key (UTF-8)."""
    digest = blake2b(key.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big")


#: A byte that was not UTF-8 (``surrogateescape``), a control character (C0, DEL, C1).
_REFUSED = re.compile("[\x00-\x1f\x7f-\x9f\udc80-\udcff]")
_UNDECODABLE = re.compile("[\udc80-\udcff]")
#: RFC 3986 section 3.1 (RFC 3987 keeps it): ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) ":"
_SCHEME = re.compile(SCHEME_RE.pattern + ":")
#: The common case in one match: a scheme, then no refused character, no white space around.
_PLAIN = re.compile(SCHEME_RE.pattern + ":[^\x00-\x1f\x7f-\x9f\udc80-\udcff]*\\Z")
_CONTROL_NAMES = {0x00: "NUL", 0x09: "tab", 0x0A: "line feed", 0x0D: "carriage return",
                  0x1B: "escape", 0x7F: "DEL"}


def byte_column(line: str, index: int) -> int:
    """The 1-based byte position in the line as read of the character at *index* of
    *line* (UTF-8; an undecodable byte kept as a surrogate escape is one byte)."""
    try:
        return len(line[:index].encode("utf-8", "surrogateescape")) + 1
    except UnicodeEncodeError:  # another lone surrogate, not from the reader
        return len(line[:index].encode("utf-8", "surrogatepass")) + 1


def undecodable_byte(line: str) -> str | None:
    """``"invalid UTF-8 byte 0xC9 at index 2"`` for the first byte of *line* that was
    not UTF-8 (decoded with ``errors="surrogateescape"``), or None.  The index is
    0-based, in characters of the line as decoded (each undecodable byte one
    character), as the library's errors count."""
    m = _UNDECODABLE.search(line)
    if m is None:
        return None
    byte = ord(m.group()) - 0xDC00
    return f"invalid UTF-8 byte 0x{byte:02X} at index {m.start()}"


def not_text(line: str) -> str | None:
    """Why *line* (one line of input, without its end of line) is not a line of text,
    or None: a byte that is not UTF-8 or a control character inside it (C0 including
    tab and NUL, DEL, C1).  White space around the line (space, tab, CR, LF) is not
    data and is ignored, as by the core.  Positions as in :func:`undecodable_byte`."""
    stripped = line.strip(WHITESPACE)
    start = len(line) - len(line.lstrip(WHITESPACE))
    m = _REFUSED.search(line, start, start + len(stripped))
    if m is None:
        return None
    cp = ord(m.group())
    if cp >= 0xDC80:
        return undecodable_byte(line)
    name = _CONTROL_NAMES.get(cp)
    what = f"U+{cp:04X} ({name})" if name else f"U+{cp:04X}"
    return f"control character {what} at index {m.start()}: not allowed in a URL"


def refusal(line: str) -> str | None:
    """Why *line* (one line of a URL list, without its end of line) is not a URL at
    all, or None: not text (:func:`not_text`: an undecodable byte, a control
    character inside it) or no scheme.

    Positions are 0-based character indices in the line (each undecodable byte one
    character), as in the library's errors (``index``).  White space around
    the line (space, tab, CR, LF) is not data and is ignored, as by the core.
    """
    if _PLAIN.match(line) is not None:
        return None
    why = not_text(line)
    if why is not None:
        return why
    stripped = line.strip(WHITESPACE)
    start = len(line) - len(line.lstrip(WHITESPACE))
    if _SCHEME.match(stripped) is None:
        if stripped.startswith("\ufeff"):  # a UTF-8 BOM at the start of a file
            return f"byte order mark U+FEFF at index {start}: not part of a URL"
        return "no scheme: not an absolute URL"
    return None


def written_form(uri: str, level: Level, form: Form) -> str:
    """The canonical URI *uri* written in *form*: itself, the IRI it maps to
    (:func:`~iri_scrapy.core.ladder.render_uri`) or its SURT key.  The query
    heuristics rewrite the URI (the key); the other forms are written from it."""
    return reorder(uri) if form == "surt" else render_uri(uri, level, form)


@lru_cache(maxsize=256)
def _rung_keys(climbed: tuple[Rung, ...], fragment: bool) -> tuple[str, ...]:
    """The keys of the rungs *climbed*, then :data:`FRAGMENT` if the fragment was dropped."""
    return (*(r.key for r in climbed), *((FRAGMENT,) if fragment else ()))


class Outcome(enum.Enum):
    """What became of one input line."""

    UNIQUE = "unique"  #: first spelling of a resource: written out
    DUPLICATE = "duplicate"  #: a resource seen before: dropped
    BLANK = "blank"  #: empty or white space only: dropped, counted
    REJECT = "reject"  #: not a URL, or no canonical form: reported, never silently dropped


@dataclass(frozen=True, slots=True)
class Reject:
    """A line refused or that could not be normalized: its 1-based number and why."""

    line: int
    error: str


@dataclass(slots=True)
class DedupeStats:
    """Counters of a dedupe run (the closing report)."""

    lines: int = 0
    unique: int = 0
    duplicates: int = 0
    blank: int = 0
    unparseable: int = 0
    by_rung: dict[str, int] = field(default_factory=lambda: dict.fromkeys(RUNG_KEYS, 0))
    first_by_rung: dict[str, int] = field(default_factory=lambda: dict.fromkeys(RUNG_KEYS, 0))
    rejects: list[Reject] = field(default_factory=list)
    fingerprint_bytes: int = 0
    peak_fingerprint_bytes: int = 0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dictionary (the ``--json-report`` file)."""
        return {
            "lines": self.lines,
            "unique": self.unique,
            "duplicates": self.duplicates,
            "blank": self.blank,
            "unparseable": self.unparseable,
            "duplicates_by_rung": dict(self.by_rung),
            "spellings_by_rung": self.spellings_by_rung(),
            "rejects": [{"line": r.line, "error": r.error} for r in self.rejects],
            "rejects_listed": len(self.rejects),
            "fingerprint_bytes": self.fingerprint_bytes,
            "peak_fingerprint_bytes": self.peak_fingerprint_bytes,
        }

    def spellings_by_rung(self) -> dict[str, int]:
        """Every URL line (first spellings and duplicates) under each rung that changed
        its spelling, ``simple`` if none did: from each line's canonical key alone,
        whatever the order of the lines."""
        return {k: self.by_rung[k] + self.first_by_rung[k] for k in RUNG_KEYS}


@dataclass(slots=True)
class Samples:
    """What ``dedupe --report`` shows besides the counters, in bounded memory."""

    hosts: dict[str, int] = field(default_factory=dict)
    hosts_pruned: bool = False
    clusters: dict[str, list[str]] = field(default_factory=dict)
    recent: dict[str, str] = field(default_factory=dict)

    def first(self, key: str, line: str) -> None:
        """A first spelling: remembered among the last :data:`RECENT_FIRSTS`."""
        if len(self.clusters) >= MAX_CLUSTERS or len(line) > MAX_SAMPLED_LENGTH:
            return
        recent = self.recent
        recent[key] = line
        if len(recent) > RECENT_FIRSTS:
            del recent[next(iter(recent))]

    def duplicate(self, key: str, line: str) -> None:
        """A duplicate spelling of *key*: counted for its host, maybe sampled."""
        host = _host_of(key)
        hosts = self.hosts
        hosts[host] = hosts.get(host, 0) + 1
        if len(hosts) > MAX_HOSTS:
            keep = sorted(hosts.items(), key=lambda kv: -kv[1])[: MAX_HOSTS // 2]
            self.hosts = dict(keep)
            self.hosts_pruned = True
        spellings = self.clusters.get(key)
        if spellings is not None:
            if len(spellings) < MAX_CLUSTER_SPELLINGS and line not in spellings and len(
                    line) <= MAX_SAMPLED_LENGTH:
                spellings.append(line)
        elif len(self.clusters) < MAX_CLUSTERS and key in self.recent:
            first = self.recent.pop(key)
            if line != first and len(line) <= MAX_SAMPLED_LENGTH:
                self.clusters[key] = [first, line]
            if len(self.clusters) >= MAX_CLUSTERS:
                self.recent.clear()

    def top_hosts(self, n: int = 15) -> list[tuple[str, int]]:
        """The *n* hosts with most duplicates, most first."""
        return sorted(self.hosts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]


def _host_of(key: str) -> str:
    """The host of a canonical key (URI form): between ``//`` and the path, without
    userinfo and port; ``""`` for a key without authority."""
    rest = key.partition(":")[2]
    if not rest.startswith("//"):
        return ""
    authority = rest[2:].split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
    host = authority.rpartition("@")[2]
    if host.startswith("["):
        return host.split("]", 1)[0] + "]"
    return host.split(":", 1)[0]


class Deduper:
    """Keep the first spelling of each distinct resource of a stream of lines.

    ``process(line)`` returns the :class:`Outcome` and the text to write for a
    unique line (the line as given, or its canonical form in *form* when
    *canonical* is true); for a reject, the error text.  *max_rejects* bounds
    how many rejects are remembered with their line numbers (all are counted).
    A line that is not a URL at all (:func:`refusal`) is a reject too.

    *drop_query_params* (name globs) and *sort_query* are the opt-in query
    heuristics, not RFC 3987 (:func:`iri_scrapy.core.query.rewrite_query`, as the
    plugin's ``IRI_DROP_QUERY_PARAMS`` and ``IRI_SORT_QUERY``): applied to each
    canonical key; a line they changed is counted under the rungs that changed
    its spelling before them (they are no rung of the ladder).
    """

    def __init__(
        self,
        level: Level | int | str = Level.SCHEME,
        *,
        keep_fragment: bool = False,
        nfc: bool = False,
        canonical: bool = False,
        form: Form = "uri",
        max_rejects: int = 20,
        rung_stats: bool = True,
        samples: bool = False,
        drop_query_params: Iterable[str] = (),
        sort_query: bool = False,
    ) -> None:
        self.level = Level.coerce(level)
        self.drop_query_params = tuple(drop_query_params)
        self.sort_query = sort_query
        self.keep_fragment = keep_fragment
        self.nfc = nfc
        self.canonical = canonical
        self.form: Form = form
        self.max_rejects = max_rejects
        self.rung_stats = rung_stats
        #: The seen-set: the native one when built (the batch loop adds to it too).
        table = native.fingerprint_table()
        self.seen: Any = FingerprintSet() if table is None else table
        # The key: URI form (the form only changes what is written out).
        self.options = NormalizeOptions(self.level, "uri", keep_fragment, nfc)
        self.out_options = NormalizeOptions(self.level, form, keep_fragment, nfc)
        self.stats = DedupeStats()
        #: What ``--report`` shows (with *samples*), else None.
        self.samples: Samples | None = Samples() if samples else None

    @property
    def heuristics(self) -> bool:
        """True if an opt-in query heuristic is on."""
        return self.sort_query or bool(self.drop_query_params)

    def classify(self, line: str) -> tuple[Outcome | None, str, tuple[str, ...], str]:
        """What the ladder says of one line, before the seen-set; counts nothing.

        ``(None, key, rungs, out)`` for a URL: its canonical key (URI form), the
        keys of the rungs that changed it, then :data:`FRAGMENT` if its fragment was
        dropped (with *rung_stats*; empty when already canonical)
        and the text to write if it is the first spelling; ``(Outcome.BLANK, "",
        (), "")`` or ``(Outcome.REJECT, error, (), "")``.  :meth:`process` and
        :mod:`iri_scrapy.integrations.spark` both decide through it.
        """
        if not preprocess(line):
            return Outcome.BLANK, "", (), ""
        refused = refusal(line)
        if refused is not None:
            return Outcome.REJECT, refused, (), ""
        rungs: tuple[str, ...] = ()
        try:
            if self.rung_stats:
                key, climbed = canonical_and_rungs(line, self.options)
                # The first "#" of a URL starts its fragment (RFC 3986 section 3.5).
                rungs = _rung_keys(climbed, not self.keep_fragment and "#" in line)
            else:
                key = canonical(line, self.options)
            if self.heuristics:
                key = rewrite_query(key, self.drop_query_params, self.sort_query)
            out = line
            if self.canonical and self.form == "uri":
                out = key
            elif self.canonical and self.heuristics:
                out = written_form(key, self.level, self.form)
            elif self.canonical:
                out = canonical(line, self.out_options)
        except IRIError as exc:
            return Outcome.REJECT, str(exc), (), ""
        return None, key, rungs, out

    def add(self, fp: int, rungs: tuple[str, ...]) -> bool:
        """Count a URL of fingerprint *fp* (:func:`fingerprint` of its key): True when
        it is the first of its resource, else a duplicate counted under its *rungs*."""
        stats = self.stats
        first = self.seen.add(fp)
        if first:
            stats.unique += 1
            by_rung = stats.first_by_rung
        else:
            stats.duplicates += 1
            by_rung = stats.by_rung
        if self.rung_stats:
            if not rungs:
                by_rung["simple"] += 1
            for rung in rungs:
                by_rung[rung] += 1
        return first

    def process(self, line: str) -> tuple[Outcome, str]:
        """Classify one line (without its end-of-line characters)."""
        stats = self.stats
        stats.lines += 1
        outcome, key, rungs, out = self.classify(line)
        if outcome is not None:
            if outcome is Outcome.BLANK:
                stats.blank += 1
                return outcome, ""
            return self._reject(key)
        if self.add(fingerprint(key), rungs):
            if self.samples is not None:
                self.samples.first(key, line)
            return Outcome.UNIQUE, out
        if self.samples is not None:
            self.samples.duplicate(key, line)
        return Outcome.DUPLICATE, ""

    def _reject(self, error: str) -> tuple[Outcome, str]:
        stats = self.stats
        stats.unparseable += 1
        if len(stats.rejects) < self.max_rejects:
            stats.rejects.append(Reject(stats.lines, error))
        return Outcome.REJECT, error

    def finish(self) -> DedupeStats:
        """Fill in the memory figures and return the statistics."""
        self.stats.fingerprint_bytes = self.seen.nbytes
        # While a segment grows, its old and new tables are both alive.
        self.stats.peak_fingerprint_bytes = max(
            self.stats.peak_fingerprint_bytes, self.seen.peak_nbytes
        )
        return self.stats
