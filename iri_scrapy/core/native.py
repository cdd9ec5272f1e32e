"""The optional native fast path: the ladder's "already canonical?" test in C.

``iri_scrapy.core._fastpath`` is built from ``_fastpath.c`` when a C compiler is at hand
(abi3: one wheel per platform for every Python 3.10+); without one, the install still
works and :func:`fast_path` hands back the pure-Python reference, which gives the same
key for every input (tests/core/test_native.py, over the corpora and generated
mutations).  The C code holds no rule of its own: its character classes, its table of
canonical escapes (RFC 3986 6.2.2.1-2), the default ports and DNS schemes (RFC 3987
5.3.3) and the URL Standard's "ends in a number" host check (its first and last
characters as classes, the rest a call back) are all built here from the Python
definitions and handed to it once.  ``IRISCRAPY_NATIVE=0`` in the environment
turns it off (benchmarks, a bug report).  Design and figures: docs/benchmarks.md.

The IRI path (``_iripath.c``, in the same module) maps an IRI to its URI (RFC 3987
3.1: UTF-8 escapes, UTS 46 ToASCII hosts) for that test, and answers only what no
rule can refuse: its classes and DNS schemes come from here too, each code point's
UTS 46 mapping and flags from ``hosts.code_point_facts`` (the ``idna`` package's
tables), NFC and CheckBidi from ``unicodedata`` and ``idna`` themselves.

The alias rungs (``_aliases.c``, for ``iri-scrapy dedupe``'s batch loop and the C
``normalize``) give the key and the rungs of an ASCII URL the fast path refuses (case,
percent-encoding, dot segments, default port, empty path: what ``ladder.fused_rungs``
gives), with the unreserved octets, the characters the percent rung encodes and the
rungs' bits from the ladder (:func:`aliases`); every key they give must pass the fast
path, the rest goes to the Python ladder.
"""

from __future__ import annotations

import enum
import inspect
import os
import re
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeVar

import idna

from iri_scrapy.core.hosts import NUMBER_END, NUMBER_START, code_point_facts, ends_in_number
from iri_scrapy.core.schemes import DEFAULT_PORTS, DNS_SCHEMES

#: The environment variable that turns the native fast path off ("0").
ENV = "IRISCRAPY_NATIVE"

FastPath = Callable[[str, bool], "str | None"]
Normalize = TypeVar("Normalize", bound=Callable[..., str])
IRIPath = Callable[[str], "str | None"]

# The bits of the C module's class table (_fastpath.c, enum at its top).
_SCHEME_FIRST, _SCHEME, _HOST, _PATH, _QUERY, _NUMBER_END, _NUMBER_START = 1, 2, 4, 8, 16, 32, 64


@dataclass(frozen=True)
class CharClasses:
    """The fast path's character classes, as the bodies of regular-expression ``[...]``."""

    scheme_first: str
    scheme: str
    host: str
    path: str
    query: str


def _module() -> ModuleType | None:
    if os.environ.get(ENV, "1") == "0":
        return None
    try:
        from iri_scrapy.core import _fastpath  # type: ignore[attr-defined]
    except ImportError:
        return None
    module: ModuleType = _fastpath
    return module


#: The compiled module, or None (not built, or turned off).
MODULE = _module()


def class_table(classes: CharClasses) -> bytes:
    """128 bytes: for each ASCII character, the bits of the classes that hold it."""
    bits = [(classes.scheme_first, _SCHEME_FIRST), (classes.scheme, _SCHEME),
            (classes.host, _HOST), (classes.path, _PATH), (classes.query, _QUERY)]
    compiled = [(re.compile("[" + body + "]"), bit) for body, bit in bits]
    table = bytearray(128)
    for code in range(128):
        char = chr(code)
        for pattern, bit in compiled:
            if pattern.fullmatch(char):
                table[code] |= bit
        if char in NUMBER_END:
            table[code] |= _NUMBER_END
        if char in NUMBER_START:
            table[code] |= _NUMBER_START
    return bytes(table)


def escape_table(canonical_escape: str) -> bytes:
    """256 bytes: 1 where ``%XX`` (uppercase hex) of that octet matches *canonical_escape*."""
    pattern = re.compile(canonical_escape)
    return bytes(1 if pattern.fullmatch(f"%{octet:02X}") else 0 for octet in range(256))


def scheme_table() -> tuple[tuple[str, str, bool], ...]:
    """(scheme, default port or "", uses DNS) for every scheme with a scheme-based rule."""
    names = sorted(set(DEFAULT_PORTS) | DNS_SCHEMES)
    if any(not DEFAULT_PORTS.get(name, "x") for name in names):
        raise ValueError("the native fast path reads an empty default port as 'none'")
    return tuple((name, DEFAULT_PORTS.get(name, ""), name in DNS_SCHEMES) for name in names)


def fast_path(reference: FastPath, *, classes: CharClasses, canonical_escape: str) -> FastPath:
    """The native fast path configured with these definitions, or *reference* without one."""
    if MODULE is None:
        return reference
    MODULE.configure(class_table(classes), escape_table(canonical_escape), scheme_table(),
                     ends_in_number)
    native: FastPath = MODULE.fast_path
    return native


def entry(reference: Normalize, levels: tuple[Any, Any]) -> Normalize:
    """*reference* (``normalize``) as a C function that answers the fast path's calls itself.

    The calls the fast path answers (a str at level SCHEME, or PROTOCOL without rules;
    form "uri"; no NFC) cost one C call instead of a Python one; every other call goes
    to *reference* with the same arguments, so results and errors are the reference's.
    *levels* are the two fast levels (``Level.SCHEME``, ``Level.PROTOCOL``).  Without the
    module, *reference* itself.  The C function carries the reference's docstring and
    signature (``__text_signature__``), module and name, and pickles by reference.
    """
    if MODULE is None:
        return reference
    doc = f"normalize{_text_signature(reference)}\n--\n\n{inspect.getdoc(reference)}"
    function: Normalize = MODULE.configure_entry(reference, levels, doc, reference.__module__)
    return function


def _text_signature(function: Callable[..., Any]) -> str:
    """*function*'s signature as ``inspect`` reads it back from a C docstring."""
    parts, star = [], False
    for param in inspect.signature(function).parameters.values():
        if param.kind is param.KEYWORD_ONLY and not star:
            parts.append("*")
            star = True
        text = param.name
        if param.default is not param.empty:
            value = param.default
            text += "=" + (f"{type(value).__name__}.{value.name}" if isinstance(value, enum.Enum)
                           else repr(value))
        parts.append(text)
    return "(" + ", ".join(parts) + ")"


def iri_path(reference: IRIPath, *, classes: CharClasses) -> IRIPath:
    """The native IRI path (an IRI to the URI of RFC 3987 3.1, or None) configured with
    these classes, or *reference* without one."""
    if MODULE is None:
        return reference
    bits = (_SCHEME_FIRST, _SCHEME, _HOST, _PATH, _QUERY)
    MODULE.configure_iri(class_table(classes), bits, DNS_SCHEMES, code_point_facts,
                         unicodedata.is_normalized, idna.check_bidi)
    native: IRIPath = MODULE.iri_to_uri
    return native


#: The keys of the rungs the native alias rungs count (``alias_key``'s mask bits, the
#: middle of ``dedupe_block``'s by-rung tuples), in that order: set by :func:`aliases`.
ALIAS_RUNG_KEYS: tuple[str, ...] = ()


def encoded_table(encode: Callable[[str], str]) -> bytes:
    """128 bytes: 1 where *encode* (the percent rung's mapping of a component, RFC 3987
    3.1 step 2) writes that printable ASCII character as its escape ``%XX``, 0 where it
    keeps it; anything else it might do is refused (ValueError)."""
    table = bytearray(128)
    for octet in range(0x20, 0x7F):
        char = chr(octet)
        written = encode(char)
        if written == f"%{octet:02X}":
            table[octet] = 1
        elif written != char:
            raise ValueError(f"the percent rung writes {char!r} as {written!r}")
    return bytes(table)


def aliases(unreserved: Mapping[str, str], canonical_escape: str, encode: Callable[[str], str],
            rung_bits: tuple[tuple[int, Any], ...]) -> None:
    """Hand the native alias rungs (``_aliases.c``) their definitions: *unreserved*
    (``"7E"`` -> ``"~"``: the escapes the percent rung decodes, RFC 3986 2.3), checked
    against *canonical_escape* (an uppercase escape is canonical exactly when it is not
    decoded), *encode* (``mapping.encode_component``: which printable characters the
    percent rung writes as escapes, :func:`encoded_table`) and *rung_bits* (the fused
    pass's ``(bit, Rung)`` of the case, percent, path and scheme rungs).  Nothing
    without the module."""
    global ALIAS_RUNG_KEYS
    if MODULE is None:
        return
    table = bytes(1 if f"{octet:02X}" in unreserved else 0 for octet in range(128))
    canonical = escape_table(canonical_escape)
    if any(unreserved.get(f"{octet:02X}", chr(octet)) != chr(octet)
           or table[octet] == canonical[octet] for octet in range(128)):
        raise ValueError("the unreserved octets and the canonical escapes disagree")
    MODULE.configure_aliases(table, encoded_table(encode), tuple(bit for bit, _ in rung_bits))
    ALIAS_RUNG_KEYS = tuple(rung.key for _, rung in rung_bits)


def clear_caches() -> None:
    """Forget the code points' facts the IRI path asked (benchmarks measure cold caches)."""
    if MODULE is not None:
        MODULE.clear_iri()


def enabled() -> bool:
    """Whether keys are computed with the native fast path."""
    return MODULE is not None


def why_off() -> str:
    """Why the native fast path is off, in a few words (for one INFO line)."""
    if os.environ.get(ENV, "1") == "0":
        return f"{ENV}=0"
    return "built without a C compiler"


def fingerprint_table() -> Any | None:
    """A new native set of 64-bit fingerprints (``FingerprintTable``: the same
    segments, growth and memory as ``iri_scrapy.store.fpstore.FingerprintSet``,
    the set :func:`dedupe_block` adds to), or None without the native module."""
    return None if MODULE is None else MODULE.FingerprintTable()


#: ``dedupe_block(table, block, start, keep_fragment, write_key) -> (stop, next, out,
#: first, duplicates, first_by_rung, duplicates_by_rung)``: the native batch loop of
#: ``iri-scrapy dedupe`` (``_batch.c``; :mod:`iri_scrapy.store.dedupe_batch`), or None.
#: The by-rung tuples count "simple", the :data:`ALIAS_RUNG_KEYS`, then the fragment.
#: With a sixth argument true (record), three bytes objects follow: a fingerprint, a rungs
#: byte and a first flag per answered line (:func:`iri_scrapy.store.dedupe_batch.records`).
DedupeBlock = Callable[[Any, bytes, int, bool, bool],
                       tuple[int, int, bytes, int, int, tuple[int, ...], tuple[int, ...]]]


def dedupe_block() -> DedupeBlock | None:
    """The native batch loop (see :data:`DedupeBlock`), or None without the module."""
    return None if MODULE is None else MODULE.dedupe_block  # type: ignore[no-any-return]
