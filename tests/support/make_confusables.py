"""Regenerate the whole-script confusables table from Unicode's ``confusables.txt``.

Usage (from the repository root, with a copy of the UTS #39 data file)::

    python -m tests.support.make_confusables PATH/TO/confusables.txt

It writes ``tests/data/unicode_confusables_latin.jsonl`` (the lines of the file the
table is derived from, verbatim, one record each) and rewrites the table between the
``# BEGIN GENERATED`` and ``# END GENERATED`` lines of
``iri_scrapy/core/confusables.py``.  ``tests/core/test_confusables.py`` derives the
table again from the JSON Lines file and compares.

Which letters: every lower-case (or caseless) letter of a script other than Latin,
Common and Inherited whose prototype (UTS #39 section 4, the skeleton's
per-character mapping) is the prototype of an ASCII lower-case letter or digit, or
a sequence of them: the letter then reads as that ASCII text (``а`` U+0430 as
``a``, ``ӏ`` U+04CF as ``l``).  Three ASCII characters have a prototype of their
own (``m`` is ``rn``, ``0`` is ``O``, ``1`` is ``l``); their lines are kept too.
"""

from __future__ import annotations

import json
import re
import sys
import unicodedata
from pathlib import Path

import regex

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "unicode_confusables_latin.jsonl"
MODULE = REPO / "iri_scrapy" / "core" / "confusables.py"
ASCII = "abcdefghijklmnopqrstuvwxyz0123456789"
_NOT_OTHER = regex.compile(r"[\p{Script=Latin}\p{Script=Common}\p{Script=Inherited}]")


def parse_line(line: str) -> tuple[str, str] | None:
    """``(source character(s), prototype)`` of one data line of confusables.txt."""
    data = line.split("#", 1)[0].strip()
    if not data:
        return None
    src, tgt, _kind = (f.strip() for f in data.split(";"))
    return ("".join(chr(int(x, 16)) for x in src.split()),
            "".join(chr(int(x, 16)) for x in tgt.split()))


def ascii_prototypes(protos: dict[str, str]) -> dict[str, str]:
    """prototype -> the ASCII character it stands for (a letter before a digit)."""
    out: dict[str, str] = {}
    for c in ASCII:
        out.setdefault(protos.get(c, c), c)
    return out


def reads_as(prototype: str, inverse: dict[str, str]) -> str | None:
    """The ASCII text whose skeleton is *prototype*, or None."""
    best: dict[int, str] = {0: ""}
    for i in range(len(prototype)):
        if i not in best:
            continue
        for key, char in inverse.items():
            if prototype.startswith(key, i) and i + len(key) not in best:
                best[i + len(key)] = best[i] + char
    return best.get(len(prototype))


def script_of(char: str) -> str:
    """The Unicode Script property of *char* (one of :data:`SCRIPTS`)."""
    for name in SCRIPTS:
        try:
            if regex.match(rf"\p{{Script={name}}}", char):
                return name
        except regex.error:  # a script newer than the installed regex's Unicode data
            continue
    raise ValueError(f"no script for U+{ord(char):04X}")


def _scripts() -> list[str]:
    from iri_scrapy.core.bidi import SCRIPTS as ALL

    return list(ALL)


SCRIPTS = _scripts()


def derive(lines: list[tuple[int, str]]) -> tuple[list[dict[str, object]], dict[str, str]]:
    """The records to keep and the table (letter -> ASCII reading) from numbered lines."""
    protos: dict[str, str] = {}
    where: dict[str, tuple[int, str]] = {}
    for number, line in lines:
        parsed = parse_line(line)
        if parsed is not None:
            protos[parsed[0]] = parsed[1]
            where[parsed[0]] = (number, line.rstrip("\n"))
    inverse = ascii_prototypes(protos)
    records: list[dict[str, object]] = []
    for c in ASCII:
        if c in where:
            number, raw = where[c]
            records.append({"line": number, "text": raw, "char": c, "prototype": protos[c],
                            "reads_as": c, "script": "Common" if c.isdigit() else "Latin"})
    table: dict[str, str] = {}
    for src, proto in protos.items():
        if len(src) != 1 or unicodedata.category(src)[0] != "L" or _NOT_OTHER.match(src):
            continue
        if src.lower() != src:
            continue  # host labels are compared lower-cased (UTS 46 maps case)
        latin = reads_as(proto, inverse)
        if latin is None:
            continue
        table[src] = latin
        number, raw = where[src]
        records.append({"line": number, "text": raw, "char": src, "prototype": proto,
                        "reads_as": latin, "script": script_of(src)})
    records.sort(key=lambda r: int(r["line"]))  # type: ignore[call-overload]
    return records, table


def render_table(table: dict[str, str]) -> str:
    rows = sorted(table.items(), key=lambda kv: (script_of(kv[0]), ord(kv[0])))
    out = ["LATIN_LOOKALIKES: dict[str, str] = {"]
    for char, latin in rows:
        out.append(f'    "\\u{ord(char):04x}": "{latin}",  # {unicodedata.name(char)}'
                   if ord(char) <= 0xFFFF else
                   f'    "\\U{ord(char):08x}": "{latin}",  # {unicodedata.name(char)}')
    out.append("}")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    src = Path(argv[0])
    text = src.read_text(encoding="utf-8-sig")
    header = [line for line in text.splitlines()[:12] if line.startswith("#")]
    lines = list(enumerate(text.splitlines(), 1))
    records, table = derive(lines)
    with DATA.open("w", encoding="utf-8") as f:
        for r in records:
            r = {"source": "confusables.txt " + " ".join(h.lstrip("# ") for h in header
                                                         if h.startswith(("# Version", "# Date"))),
                 **r}
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    module = MODULE.read_text(encoding="utf-8")
    new = re.sub(r"(# BEGIN GENERATED[^\n]*\n).*?(\n# END GENERATED)",
                 lambda m: m.group(1) + render_table(table) + m.group(2), module, flags=re.S)
    MODULE.write_text(new, encoding="utf-8")
    print(f"{len(records)} records, {len(table)} letters")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
