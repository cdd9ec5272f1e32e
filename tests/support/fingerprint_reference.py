"""The page fingerprint as it was before it was made faster: a frozen copy, the
reference the optimized :func:`iri_scrapy.protocol.fingerprint.fingerprint` must
equal block for block and hash for hash (fingerprints are stored in ``JOBDIR`` and
Redis and compared across processes and versions).  Do not edit: a change of the
fingerprint's output is a change of its stored format, made in both on purpose."""

from __future__ import annotations

import hashlib
import html
import re
from array import array
from collections.abc import Iterable
from dataclasses import dataclass

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
# (a tag ends at the next "<" if no ">" comes first: each character is read once)
_TOKEN_RE = re.compile(r"<(/?)([A-Za-z][^\s/<>]*)([^<>]*)>|<[!?/][^<>]*>|([^<]+)|<")
_ATTR_RE = re.compile(r"""([^\s"'<>/=]+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]*)))?""")
_KEPT_HINT_RE = re.compile(r"(?:href|src|data-|title|alt|content|action|poster)\s*=", re.I)
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
    text = "\x1f".join(map(str, parts)).encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little", signed=True)


@dataclass(frozen=True, eq=False)
class Fingerprint:
    """A page as blocks (see the module doc): parallel arrays sorted by *pairs*, the
    hash of each block's (label, content); *labels* and *paths* its label and its
    element path; *places* its index in document order.  :attr:`digest` hashes the
    pairs and their places (equal digests: equal pages)."""

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
    def of_blocks(cls, blocks: Iterable[tuple[int, int, int]]) -> Fingerprint:
        """From ``(pair, label, path)`` triples in document order: sorted, each
        with its index in the page."""
        ordered = sorted((block, i) for i, block in enumerate(blocks))
        pairs = array("q", (b[0][0] for b in ordered))
        places = array("q", (b[1] for b in ordered))
        digest = hashlib.blake2b(pairs.tobytes() + places.tobytes(), digest_size=16).digest()
        return cls(pairs, array("q", (b[0][1] for b in ordered)),
                   array("q", (b[0][2] for b in ordered)), places, digest)

    @classmethod
    def exact(cls, digest: bytes) -> Fingerprint:
        """One opaque block: equal to another only if *digest* is (a binary body)."""
        return cls.of_blocks([(_h(_EXACT, digest), _EXACT, _EXACT)])


class _Blocks:
    """Cuts markup into blocks (one pass over tags and text)."""

    def __init__(self) -> None:
        self.out: list[tuple[int, int, int]] = []
        self.stack: list[tuple[str, int]] = [("", 0)]
        self.words: list[str] = []
        self.text_path = 0

    def flush(self) -> None:
        if self.words:
            words = self.words
            first = _shape(words[0])
            # a run led by a word is known by its words wherever the markup puts
            # it (an AMP copy of a page); one led by a number or token, by its place
            label = _h("", first) if first != "#" else \
                _h(self.text_path, first, _shape(words[1]) if len(words) > 1 else "")
            self.out.append((_h("", " ".join(words)), label, self.text_path))
            self.words = []

    def text(self, data: str) -> None:
        if "&" in data:
            data = html.unescape(data)
        words = data.split()
        if words:
            if not self.words:
                self.text_path = self.stack[-1][1]
            self.words += words

    def start(self, tag: str, attrs: str) -> None:
        block = tag in _BLOCK_TAGS
        if block:
            self.flush()
        elif not attrs or _KEPT_HINT_RE.search(attrs) is None:
            return  # an inline tag with nothing kept: not in the path (one look)
        path = self.stack[-1][1]
        values: dict[str, str] = {}
        if attrs:
            for m in _ATTR_RE.finditer(attrs):
                name = m.group(1).lower()
                if name not in values:
                    values[name] = m.group(2) or m.group(3) or m.group(4) or ""
        if block:
            cls = values.get("class")
            classes = ".".join(sorted(c for c in cls.split() if _CLASS_OK_RE.match(c))) \
                if cls else ""
            path = _h(path, tag, classes)
        else:
            path = _h(path, tag)
        if values:
            self.attributes(tag, path, values)
        if block and tag not in _VOID_TAGS and len(self.stack) < _MAX_DEPTH:
            self.stack.append((tag, path))

    def attributes(self, tag: str, path: int, values: dict[str, str]) -> None:
        for name, value in values.items():
            if name in _URL_ATTRS or (name.startswith("data-") and ("/" in value or "." in value)):
                self.url(path, name, value)
            elif name in _NAME_ATTRS or name.startswith("data-") or (
                    tag == "meta" and name == "content"):
                value = " ".join(html.unescape(value).split()) if "&" in value else \
                    " ".join(value.split())
                if value:
                    label = _h(path, name)
                    self.out.append((_h(name, value), label, label))

    def url(self, path: int, attr: str, value: str) -> None:
        value = html.unescape(value).strip() if "&" in value else value.strip()
        value = value.split("#", 1)[0]
        head, _, query = value.partition("?")
        label = _h(path, attr)
        self.out.append((_h("@", head), label, label))
        for pair in dict.fromkeys(query.split("&")) if query else ():  # a repeated pair once
            name, _, val = pair.partition("=")
            sub = _h(label, name)
            self.out.append((_h("?", name, val), sub, sub))

    def end(self, tag: str) -> None:
        if tag not in _BLOCK_TAGS:
            return  # inline elements are not in the path
        self.flush()
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                return


def fingerprint(body: str) -> Fingerprint:
    """The blocks of *body* (markup if its first non-blank character is ``<``, else
    one block per line); see the module doc.  Never raises."""
    if not isinstance(body, str):
        return Fingerprint.of_blocks(())
    body = body[:SCAN_LIMIT].lstrip("\ufeff")
    blocks = _Blocks()
    if _HTML_START_RE.match(body):
        body = _HIDDEN_RE.sub(" ", body)
        for m in _TOKEN_RE.finditer(body):
            if m.group(4) is not None:
                blocks.text(m.group(4))
            elif m.group(2) is not None:
                tag = m.group(2).lower()
                if m.group(1):
                    blocks.end(tag)
                else:
                    blocks.start(tag, m.group(3))
            if len(blocks.out) > MAX_BLOCKS:
                break
        blocks.flush()
    else:
        for line in body.splitlines()[:MAX_BLOCKS]:
            blocks.text(line)
            blocks.flush()
    return Fingerprint.of_blocks(blocks.out[:MAX_BLOCKS])
