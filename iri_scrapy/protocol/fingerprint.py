"""What a crawler gets from a page, compared modulo what changes by chance (RFC 3987 section 5.3.4).

Two spellings are one resource only if a crawler gets the same from both: the
visible text and the outlinks.  A :class:`Fingerprint` is a page cut into
*blocks*, each a pair (label, content): a run of visible text between two
block-level tags, labelled by its first word if it reads as a word (wherever the
markup puts it: an AMP copy of a page has its text in other elements), else by
its element path (tag names and classes without digits) and its first two words
(a number or token read as ``#``); and every outlink and name
in an attribute (``href``, ``src``, ``data-*``, ``poster``, ``action``, ``title``,
``alt``, and the ``content`` of ``<meta>``), labelled by its element path and
attribute, a URL cut into its path and one block per query parameter (labelled by
the parameter's name).  Comments, scripts, styles, ``<noscript>`` and
``<template>`` are not what a crawler reads.

Which blocks change by chance is not guessed from a list of shapes: it is learned
per site (:class:`Volatility`) from two fetches of one spelling
(:meth:`Volatility.learn`), the "template diff" of Bar-Yossef and Rajagopalan
(WWW 2002) applied to one page against itself: a block whose content changed has
a volatile label; where the blocks that changed at one element path are not the
same labels on both sides (blocks came, went, or were replaced by others: a
rotating widget, a random list), that path is volatile.  Two pages are the
same (:meth:`Volatility.same`) when every block one has and the other lacks has a
volatile label or path, they share at least one block, and the rest stand in the
same order (a listing sorted otherwise shows the same blocks: it is another page;
where two fetches of one spelling showed blocks in another order, a shuffled tag
cloud, their paths are left out of that).  Why not shingles or
SimHash (Broder 1997, Charikar 2002, Manku et al. 2007): they estimate how much of
two pages is equal, and a 16-character part number that differs weighs what a
16-character nonce does; only the second fetch tells them apart.  Everything here
reads data from the network: no function raises on any input.
"""

from __future__ import annotations

import hashlib
import html
import os
import re
import struct
import sys
from array import array
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import repeat
from operator import itemgetter

_BLAKE8 = hashlib.blake2b(digest_size=8)
_INT64 = struct.Struct("<q").unpack  # int.from_bytes(..., "little", signed=True)

#: At most this many characters of a body are read, and this many blocks kept.
SCAN_LIMIT = 512 * 1024
MAX_BLOCKS = 4096

# Whichever comes first: a comment (to "-->" or the end), or a script/style/noscript/
# template element with its contents (to its end tag or the end), as a tokenizer sees them.
_HIDDEN_RE = re.compile(
    r"<(?=[!sSnNtT])(?:!--[^-]*(?:-(?!-!?>)[^-]*)*(?:--!?>|\Z)"
    r"|(script|style|noscript|template)\b[^<>]*>[^<]*(?:<(?!/\1\s*>)[^<]*)*(?:</\1\s*>|\Z))",
    re.IGNORECASE | re.DOTALL,
)
_HTML_START_RE = re.compile(r"\s*<[A-Za-z!?/]")
# At each "<" (split on it: the text of a part after it is read once): a tag if a
# letter, "!", "?" or "/" follows and a ">" comes before the next "<" (a letter,
# optionally after "/": its name, to a space or "/", then its attributes), else
# the "<" alone; text runs between.
_TAG_NAME_RE = re.compile(r"(/?)([A-Za-z][^\s/<>]*)")
#: A tag whose attributes name one of these, then "=", may keep an attribute.
_KEPT_HINTS = ("href", "src", "data-", "title", "alt", "content", "action", "poster")
_KEPT_HINT_RE = re.compile(rf"(?:{'|'.join(map(re.escape, _KEPT_HINTS))})\s*=", re.I)
_ATTR_RE = re.compile(r"""([^\s"'<>/=]+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]*)))?""")
_CLASS_OK_RE = re.compile(r"[A-Za-z_-]+\Z")
_PUNCTUATION = "\"'()[]{}<>.,:;!?*-_/|"
_BLOCK_TAGS = frozenset({
    "address", "article", "aside", "blockquote", "body", "br", "button", "dd", "details",
    "dialog", "div", "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form", "h1",
    "h2", "h3", "h4", "h5", "h6", "head", "header", "hr", "html", "input", "label", "li",
    "main", "nav", "ol", "option", "p", "pre", "section", "select", "summary", "table",
    "tbody", "td", "textarea", "tfoot", "th", "thead", "tr", "ul",
})
_VOID_TAGS = frozenset({
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
    "track", "wbr",
})
_URL_ATTRS = frozenset({"href", "src", "poster", "action"})
_NAME_ATTRS = frozenset({"title", "alt"})
_MAX_DEPTH = 64
_EXACT = -0x5EED  # the label of an opaque digest's one block (never volatile)


def _shape(word: str) -> str:
    """A word of a label: itself (lowercased) if it reads as a word (letters, one
    case or capitalized, at most 15), else ``#`` (a number, a token)."""
    word = word.strip(_PUNCTUATION)
    if word.isalpha() and len(word) <= 15 and (word.islower() or word.istitle() or word.isupper()):
        return word.lower()
    return "#"


def _h(*parts: object) -> int:
    """A 64-bit hash of *parts*, the same in every process (a fingerprint is kept
    in ``JOBDIR`` and compared after a resume: Python's ``hash`` of a string is
    not, PEP 456)."""
    return _hs("\x1f".join(map(str, parts)))


def _hs(text: str) -> int:
    """:func:`_h` of parts already joined by ``"\x1f"`` (a copy of a made hash
    object costs half a new one)."""
    h = _BLAKE8.copy()
    h.update(text.encode("utf-8", "surrogatepass"))
    return _INT64(h.digest())[0]


@dataclass(frozen=True, eq=False)
class Fingerprint:
    """A page as blocks (see the module doc): parallel arrays sorted by *pairs*, the
    hash of each block's (label, content); *labels* and *paths* its label and its
    element path; *places* where it stands in the page (its index in document
    order: a listing in another order is another page).  :attr:`digest` hashes
    every pair in document order (equal digests: equal pages)."""

    pairs: array[int]
    labels: array[int]
    paths: array[int]
    places: array[int]
    digest: bytes

    @property
    def empty(self) -> bool:
        """No block: a page with no text nor link says nothing about the resource."""
        return not self.pairs

    @classmethod
    def of_blocks(cls, blocks: list[tuple[int, int, int]]) -> Fingerprint:
        """From ``(pair, label, path)`` triples in document order."""
        places = sorted(range(len(blocks)), key=blocks.__getitem__)
        ordered = [blocks[i] for i in places]
        return cls._of(array("q", (b[0] for b in ordered)), array("q", (b[1] for b in ordered)),
                       array("q", (b[2] for b in ordered)), array("q", places))

    @classmethod
    def _of(cls, pairs: array[int], labels: array[int], paths: array[int],
            places: array[int]) -> Fingerprint:
        # the sorted pairs and where each stands: the page's blocks in order
        digest = hashlib.blake2b(pairs.tobytes() + places.tobytes(), digest_size=16).digest()
        return cls(pairs, labels, paths, places, digest)

    def in_order(self) -> list[int]:
        """The indexes of the blocks (into the sorted arrays) in document order."""
        return sorted(range(len(self.places)), key=self.places.__getitem__)

    def to_record(self) -> bytes:
        """The fingerprint as stored (:meth:`from_record`): its digest, then its
        four arrays, little-endian."""
        parts = [array("q", a) for a in (self.pairs, self.labels, self.paths, self.places)]
        if sys.byteorder != "little":
            for a in parts:
                a.byteswap()
        return self.digest + b"".join(a.tobytes() for a in parts)

    @classmethod
    def from_record(cls, data: bytes) -> Fingerprint:
        """The fingerprint :meth:`to_record` stored, read as data (its size checked,
        at most :data:`MAX_BLOCKS` blocks, its places a permutation; its digest
        computed again); raises ``ValueError``."""
        body = data[16:]
        n, rest = divmod(len(body), 32)
        if len(data) < 16 or rest or n > MAX_BLOCKS:
            raise ValueError(f"not a stored page fingerprint ({len(data)} bytes)")
        parts = []
        for i in range(4):
            a = array("q")
            a.frombytes(body[i * 8 * n:(i + 1) * 8 * n])
            if sys.byteorder != "little":
                a.byteswap()
            parts.append(a)
        if sorted(parts[3]) != list(range(n)):
            raise ValueError("not a stored page fingerprint (its places are not a permutation)")
        return cls._of(*parts)

    @classmethod
    def exact(cls, digest: bytes) -> Fingerprint:
        """One opaque block: equal to another only if *digest* is (a binary body)."""
        return cls.of_blocks([(_h(_EXACT, digest), _EXACT, _EXACT)])


_SKIP = (0, "", "")  # a tag not looked at (inline, nothing kept), "<!...>": no text
_LONE = (2, "", "")  # the "<" alone: what follows it is text
_START, _END, _KEPT = 1, 3, 4  # a block-level tag, its end, an inline tag with a kept attribute
_LOOKED_AT = re.compile(b"\x01")
_LONE_AT = re.compile(b"\x02")
_CODE = {0: 0, _START: 1, _END: 1, _KEPT: 1, 2: 2}  # a kind: skipped, looked at, alone
_HEAD, _SEP, _TAIL = itemgetter(0), itemgetter(1), itemgetter(2)


def _kind(head: str) -> tuple[int, str, str]:
    """What a "<" followed by *head* and ">" is: a kind, its tag, its attributes."""
    m = _TAG_NAME_RE.match(head)
    if m is None:
        return _SKIP if head[:1] in ("!", "?", "/") else _LONE
    tag, attrs = m.group(2).lower(), head[m.end():]
    if tag in _BLOCK_TAGS:
        return (_END if m.group(1) else _START, tag, attrs)
    if not m.group(1) and attrs and _KEPT_HINT_RE.search(attrs) is not None:
        return (_KEPT, tag, attrs)
    return _SKIP


_kind_kept = lru_cache(maxsize=4096)(_kind)


def _kind_of(head: str) -> tuple[int, str, str]:
    """:func:`_kind`, kept from page to page for short tags (a site's pages share
    most of their tags; at most 4,096 tags of 128 characters are kept)."""
    return _kind_kept(head) if len(head) <= 128 else _kind(head)


#: What a tag yields (by its parent's path, its tag and its attributes), the hash
#: of a label or a path (by what it hashes), the label of a run led by a word (by
#: that word): each a function of its key alone, so kept from page to page (a
#: site's pages share their header, menus and footer); emptied past this many.
_KEPT_PER_TABLE = 16384
_TAGS: dict[tuple[int, str, str], tuple[int, list[tuple[int, int, int]]]] = {}
_HASHES: dict[str, int] = {}
_LED: dict[str, int] = {}


class _Blocks:
    """Cuts markup into blocks: only block-level tags and tags with a kept attribute
    are looked at one by one; the text between two block-level tags is one run."""

    def __init__(self) -> None:
        self.out: list[tuple[int, int, int]] = []
        self.stack: list[tuple[str, int]] = [("", 0)]
        for table in (_TAGS, _HASHES, _LED):
            if len(table) > _KEPT_PER_TABLE:
                table.clear()
        self.tags = _TAGS
        self.hashes = _HASHES
        self.led = _LED

    def h(self, text: str) -> int:
        """:func:`_hs`, kept for the page (labels and paths repeat)."""
        known = self.hashes.get(text)
        if known is None:
            known = self.hashes[text] = _hs(text)
        return known

    def markup(self, body: str) -> None:
        """The blocks of *body* (its hidden parts removed); stops past MAX_BLOCKS.

        Cut at each "<", each part at its first ">" (what is before it is the
        tag); what each tag is, is found once per distinct tag, and only the
        tags that matter are visited one by one: the rest is done by the
        string methods, whatever the part count.
        """
        first, *parts = body.split("<")
        if not parts:
            self.run(first)
            return
        cut = list(map(str.partition, parts, repeat(">")))
        heads = list(map(_HEAD, cut))
        kinds = {head: _kind_of(head) for head in set(heads)}
        codes = bytearray(map({head: _CODE[k[0]] for head, k in kinds.items()}.__getitem__, heads))
        texts = [first, *map(_TAIL, cut)]  # the text after each "<" (a tag's end)
        seps = list(map(_SEP, cut))
        if "" in seps:  # no ">" before the next "<": the "<" alone
            for i, sep in enumerate(seps):
                if not sep:
                    codes[i] = 2
        for m in _LONE_AT.finditer(codes):
            texts[m.start() + 1] = parts[m.start()]
        at = 0  # where the current run of text begins in *texts*
        for m in _LOOKED_AT.finditer(codes):
            i = m.start()
            kind, tag, attrs = kinds[heads[i]]
            if kind == _KEPT:
                self.start(tag, attrs, False)
            else:
                text = " ".join(texts[at:i + 1])
                if text and not text.isspace():
                    self.run(text)
                at = i + 1
                if kind == _END:
                    self.end(tag)
                else:
                    self.start(tag, attrs, True)
            if len(self.out) > MAX_BLOCKS:
                return
        self.run(" ".join(texts[at:]))

    def run(self, text: str) -> None:
        """One run of text (between two block-level tags, or a line)."""
        words = (html.unescape(text) if "&" in text else text).split()
        if not words:
            return
        path = self.stack[-1][1]
        # a run led by a word is known by its words wherever the markup puts
        # it (an AMP copy of a page); one led by a number or token, by its place
        label = self.led.get(words[0])
        if label is None:
            first = _shape(words[0])
            if first != "#":
                label = self.led[words[0]] = self.h("\x1f" + first)
            else:
                label = self.h(f"{path}\x1f#\x1f{_shape(words[1]) if len(words) > 1 else ''}")
        self.out.append((_hs("\x1f" + " ".join(words)), label, path))

    def start(self, tag: str, attrs: str, block: bool) -> None:
        parent = self.stack[-1][1]
        key = (parent, tag, attrs)
        known = self.tags.get(key)
        if known is None:
            mark = len(self.out)
            path = self.element(parent, tag, attrs, block)
            self.tags[key] = (path, self.out[mark:])
        else:
            path = known[0]
            self.out += known[1]
        if block and tag not in _VOID_TAGS and len(self.stack) < _MAX_DEPTH:
            self.stack.append((tag, path))

    def element(self, path: int, tag: str, attrs: str, block: bool) -> int:
        """The element path of a *tag* under *path*; its kept attributes' blocks."""
        values: dict[str, str] = {}
        if attrs:
            for name, double, single, bare in _ATTR_RE.findall(attrs):
                name = name.lower()
                if name not in values:
                    values[name] = double or single or bare
        if block:
            cls = values.get("class")
            classes = ".".join(sorted(c for c in cls.split() if _CLASS_OK_RE.match(c))) \
                if cls else ""
            path = self.h(f"{path}\x1f{tag}\x1f{classes}")
        else:
            path = self.h(f"{path}\x1f{tag}")
        if values:
            self.attributes(tag, path, values)
        return path

    def attributes(self, tag: str, path: int, values: dict[str, str]) -> None:
        for name, value in values.items():
            if name in _URL_ATTRS or (name.startswith("data-") and ("/" in value or "." in value)):
                self.url(path, name, value)
            elif name in _NAME_ATTRS or name.startswith("data-") or (
                    tag == "meta" and name == "content"):
                value = " ".join(html.unescape(value).split()) if "&" in value else \
                    " ".join(value.split())
                if value:
                    label = self.h(f"{path}\x1f{name}")
                    self.out.append((self.h(f"{name}\x1f{value}"), label, label))

    def url(self, path: int, attr: str, value: str) -> None:
        value = html.unescape(value).strip() if "&" in value else value.strip()
        value = value.split("#", 1)[0]
        head, _, query = value.partition("?")
        label = self.h(f"{path}\x1f{attr}")
        self.out.append((self.h("@\x1f" + head), label, label))
        for pair in dict.fromkeys(query.split("&")) if query else ():  # a repeated pair once
            name, _, val = pair.partition("=")
            sub = self.h(f"{label}\x1f{name}")
            self.out.append((self.h(f"?\x1f{name}\x1f{val}"), sub, sub))

    def end(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                return


#: What the C cutter (``_blocks.c``) is handed besides the definitions above (it
#: holds none of its own): the whitespace of ``str.split()`` (none past U+3000), and
#: the characters ``_KEPT_HINT_RE``'s IGNORECASE folds onto an ASCII letter of its
#: names, on whose pages it leaves the cut to :class:`_Blocks`.
_SPACES = "".join(chr(c) for c in range(0x3001) if chr(c).isspace())
_FOLDED = "\u0130\u0131\u017f"


def _native_cut() -> Callable[[str], bytes | None] | None:
    """The C cutter: :meth:`_Blocks.markup`'s blocks as :meth:`Fingerprint.of_blocks`
    orders them (its four arrays, native int64; None where the reference must cut),
    or None: not built, or turned off with ``IRISCRAPY_NATIVE=0``
    (tests/protocol/test_fingerprint_same.py)."""
    if os.environ.get("IRISCRAPY_NATIVE", "1") == "0":
        return None
    try:
        from iri_scrapy.protocol import _blocks  # type: ignore[attr-defined]
    except ImportError:
        return None
    _blocks.configure(_SPACES, _FOLDED, html.unescape, _shape, tuple(sorted(_BLOCK_TAGS)),
                      tuple(sorted(_VOID_TAGS)), _KEPT_HINTS, tuple(sorted(_URL_ATTRS)),
                      tuple(sorted(_NAME_ATTRS)), _PUNCTUATION, MAX_BLOCKS, _MAX_DEPTH)
    cut: Callable[[str], bytes | None] = _blocks.cut
    return cut


_CUT = _native_cut()


def _of_markup(markup: str) -> Fingerprint:
    """The fingerprint of *markup* (hidden parts removed): cut in C, else by :class:`_Blocks`."""
    if _CUT is not None:
        data = _CUT(markup)
        if data is not None:
            flat = array("q")
            flat.frombytes(data)
            n = len(flat) // 4
            return Fingerprint._of(flat[:n], flat[n:2 * n], flat[2 * n:3 * n], flat[3 * n:])
    blocks = _Blocks()
    blocks.markup(markup)
    return Fingerprint.of_blocks(blocks.out[:MAX_BLOCKS])


def fingerprint(body: str) -> Fingerprint:
    """The blocks of *body* (markup if its first non-blank character is ``<``, else
    one block per line); see the module doc.  Never raises."""
    if not isinstance(body, str):
        return Fingerprint.of_blocks([])
    body = body[:SCAN_LIMIT].lstrip("\ufeff")
    if _HTML_START_RE.match(body):
        return _of_markup(_HIDDEN_RE.sub(" ", body))
    blocks = _Blocks()
    for line in body.splitlines()[:MAX_BLOCKS]:
        blocks.run(line)
    return Fingerprint.of_blocks(blocks.out[:MAX_BLOCKS])


def _unmatched(a: Fingerprint, b: Fingerprint) -> tuple[list[int], list[int], int]:
    """Indexes of *a*'s and *b*'s blocks the other lacks (as multisets), and how many match."""
    i = j = matched = 0
    only_a: list[int] = []
    only_b: list[int] = []
    pa, pb = a.pairs, b.pairs
    while i < len(pa) and j < len(pb):
        if pa[i] == pb[j]:
            matched += 1
            i += 1
            j += 1
        elif pa[i] < pb[j]:
            only_a.append(i)
            i += 1
        else:
            only_b.append(j)
            j += 1
    only_a += range(i, len(pa))
    only_b += range(j, len(pb))
    return only_a, only_b, matched


@dataclass
class Volatility:
    """What changes by chance between two fetches of one spelling on one site: block
    labels and element paths (see the module doc), and the paths whose blocks come
    in another order (a shuffled tag cloud)."""

    labels: set[int] = field(default_factory=set)
    paths: set[int] = field(default_factory=set)
    orders: set[int] = field(default_factory=set)
    #: fetch pairs learned from
    pairs: int = 0

    def learn(self, a: Fingerprint, b: Fingerprint) -> int:
        """Learn from two fetches *a*, *b* of one spelling; the blocks that changed."""
        only_a, only_b, _ = _unmatched(a, b)
        self.pairs += 1
        sides: list[dict[int, Counter[int]]] = [{}, {}]
        for side, mine, fp in ((sides[0], only_a, a), (sides[1], only_b, b)):
            for k in mine:
                self.labels.add(fp.labels[k])
                side.setdefault(fp.paths[k], Counter())[fp.labels[k]] += 1
        for path in sides[0].keys() | sides[1].keys():
            if sides[0].get(path) != sides[1].get(path):  # blocks came, went, or changed label
                self.paths.add(path)
        # what else stands in another order: the paths of the blocks between the
        # longest common head and tail of the two sequences
        first, second = self._sequence(a), self._sequence(b)
        if first != second:
            head = 0
            while head < min(len(first), len(second)) and first[head] == second[head]:
                head += 1
            tail = 0
            while tail < min(len(first), len(second)) - head and \
                    first[-1 - tail] == second[-1 - tail]:
                tail += 1
            for seq in (first, second):
                self.orders.update(path for _, path in seq[head:len(seq) - tail])
        return len(only_a) + len(only_b)

    def _chance(self, fp: Fingerprint, k: int) -> bool:
        return fp.labels[k] in self.labels or fp.paths[k] in self.paths

    def _sequence(self, fp: Fingerprint) -> list[tuple[int, int]]:
        """*fp*'s blocks that do not change by chance, nor stand in another order by
        chance, in document order: (pair, path)."""
        labels, paths, orders = self.labels, self.paths, self.orders
        return [(fp.pairs[k], fp.paths[k]) for k in fp.in_order()
                if fp.labels[k] not in labels and fp.paths[k] not in paths
                and fp.paths[k] not in orders]

    def same(self, a: Fingerprint, b: Fingerprint) -> bool:
        """True if a crawler gets the same from *a* and *b*: they share a block,
        every block one lacks changes by chance on this site, and the rest stands
        in the same order (a listing sorted otherwise is another page)."""
        if a.digest == b.digest:
            return not a.empty
        only_a, only_b, matched = _unmatched(a, b)
        if not matched:
            return False
        return all(self._chance(a, k) for k in only_a) and all(
            self._chance(b, k) for k in only_b) and \
            [pair for pair, _ in self._sequence(a)] == [pair for pair, _ in self._sequence(b)]

    def _stuck(self, a: Fingerprint, b: Fingerprint, *,
               both: bool) -> list[tuple[int, int, int]]:
        """The (path, label, pair) of each block of *a* (and of *b*, with *both*) the
        other lacks and that is not known to change by chance; ``[]`` also when
        they share no block (nothing learned could make them the same)."""
        only_a, only_b, matched = _unmatched(a, b)
        if not matched:
            return []
        sides = ((a, only_a), (b, only_b)) if both else ((a, only_a),)
        return [(fp.paths[k], fp.labels[k], fp.pairs[k]) for fp, only in sides for k in only
                if not self._chance(fp, k)]

    @staticmethod
    def _few(stuck: list[tuple[int, int, int]]) -> bool:
        """There is a difference, at one or two element paths and with one or two
        labels: what noise makes (a widget, the session id in a page's links).
        Three places or more: another resource (the lines of a text page share
        one path, so they count by label)."""
        return bool(stuck) and len({path for path, _, _ in stuck}) <= 2 and \
            len({label for _, label, _ in stuck}) <= 2

    def explainable(self, a: Fingerprint, b: Fingerprint) -> bool:
        """True if what differs between *a* and *b* (beyond what is known to change
        by chance) could be noise a calibration has not seen yet (:meth:`_few`):
        worth fetching one of them again.  Pages that share no block, that differ
        in three places or more, or only in the order of what they share (a
        listing sorted otherwise), are other resources."""
        return self._few(self._stuck(a, b, both=True))

    def repeated(self, first: Fingerprint, other: Fingerprint, again: Fingerprint) -> bool:
        """True if *again* (a later fetch of the page that served *first*) served
        again every block of *first* that *other* lacks and that is not known to
        change by chance, and they are few (:meth:`_few`): it shows nothing about
        them (noise with few values repeats by chance: a widget, the session id in
        a page's links), and fetching it again may."""
        stuck = self._stuck(first, other, both=False)
        if not self._few(stuck):
            return False
        served = set(again.pairs)
        return all(pair in served for _, _, pair in stuck)

    def digest(self, fp: Fingerprint) -> bytes:
        """A digest of *fp*'s blocks that do not change by chance (as known now)."""
        if not self.labels and not self.paths:
            return fp.digest
        kept = array("q", (p for k, p in enumerate(fp.pairs) if not self._chance(fp, k)))
        return hashlib.blake2b(kept.tobytes(), digest_size=16).digest()
