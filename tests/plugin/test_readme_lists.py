"""The documentation's lists match the code, so they cannot drift.

Every stats key the package sets is on docs/stats.md; every ``"IRI_..."`` setting
the package reads is a row of docs/settings.md, whose default column agrees with
``iri_scrapy.plugin.config.SETTINGS`` (the one table the code reads its defaults
from); every ``finish_reason`` the package
defines (``REASON_* = "..."``) and every unnormalizable reason is on its page.
The README stays a five-minute read: at most 15,000 characters.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import iri_scrapy
from iri_scrapy.plugin import links
from iri_scrapy.plugin.config import SETTINGS as SETTINGS_TABLE

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
STATS = (DOCS / "stats.md").read_text(encoding="utf-8")
SETTINGS = (DOCS / "settings.md").read_text(encoding="utf-8")
PACKAGE = Path(iri_scrapy.__file__).resolve().parent
SOURCES = sorted(PACKAGE.rglob("*.py"))


def _code() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in SOURCES)


def _listed(key: str, text: str) -> bool:
    """*key* in *text*, as itself or under a ``prefix/*`` or ``prefix/<...>`` row."""
    if f"`{key}" in text:
        return True
    parts = key.split("/")
    return any(f"`{'/'.join(parts[:i])}/*`" in text or f"`{'/'.join(parts[:i])}/<" in text
               for i in range(2, len(parts)))


def test_every_stats_key_is_on_the_stats_page() -> None:
    keys = set()
    for path in [*PACKAGE.glob("plugin/*.py"), *PACKAGE.glob("frontier/*.py"), PACKAGE / "addon.py"]:
        keys |= set(re.findall(r'"(iri/[a-z_/]+[a-z_])"', path.read_text(encoding="utf-8")))
    assert keys, "no stats keys found"
    assert {k for k in keys if not _listed(k, STATS)} == set()


def test_every_setting_is_a_row_of_the_settings_page() -> None:
    names = set(re.findall(r'"(IRI_[A-Z0-9_]+)"', _code())) | set(SETTINGS_TABLE)
    assert len(names) >= 25, names
    rows = set(re.findall(r"^\| `(IRI_[A-Z0-9_]+)` \|", SETTINGS, re.M))
    assert names - rows == set(), "settings the code reads that docs/settings.md lacks"
    assert rows - names == set(), "rows of docs/settings.md that the code never reads"


def test_the_settings_pages_defaults_are_the_codes() -> None:
    """A literal default on the page equals SETTINGS' default; a computed one is None there."""
    cells = dict(re.findall(r"^\| `(IRI_[A-Z0-9_]+)` \| (.*?) \|", SETTINGS, re.M))
    wrong = {}
    for name, spec in SETTINGS_TABLE.items():
        cell = cells[name]
        literal = re.fullmatch(r"`([^`]+)`", cell)
        try:
            value = ast.literal_eval(literal[1]) if literal else None
        except (ValueError, SyntaxError):
            value, literal = None, None
        if spec.default is None:
            ok = not literal or isinstance(value, str)  # unset, or computed (a key template)
        else:
            ok = literal is not None and value == spec.default
        if not ok:
            wrong[name] = (cell, spec.default)
    assert wrong == {}


def test_every_finish_reason_and_unnormalizable_reason_is_documented() -> None:
    reasons = set(re.findall(r'^REASON_[A-Z_]+ = "(iri_[a-z_]+)"', _code(), re.M))
    assert len(reasons) >= 10, reasons
    assert {r for r in reasons if f"| `{r}` |" not in SETTINGS} == set()
    for reason in links.REASONS:
        assert f"`{reason}`" in STATS


def test_the_readme_is_short() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme) <= 15_000, f"README.md is {len(readme):,} characters: move reference to docs/"
