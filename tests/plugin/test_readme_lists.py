"""README's lists match the code: every stats key and finish_reason the plugin sets."""

from __future__ import annotations

import re
from pathlib import Path

import iri_scrapy
from iri_scrapy.plugin import links, refusal

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
PACKAGE = Path(iri_scrapy.__file__).resolve().parent


def _listed(key: str) -> bool:
    """*key* in README, as itself or under a ``prefix/*`` or ``prefix/<...>`` row."""
    if f"`{key}" in README:
        return True
    parts = key.split("/")
    return any(f"`{'/'.join(parts[:i])}/*`" in README or f"`{'/'.join(parts[:i])}/<" in README
               for i in range(2, len(parts)))


def test_every_stats_key_is_in_the_readme() -> None:
    keys = set()
    for path in [*PACKAGE.glob("plugin/*.py"), *PACKAGE.glob("frontier/*.py"), PACKAGE / "addon.py"]:
        keys |= set(re.findall(r'"(iri/[a-z_/]+[a-z_])"', path.read_text(encoding="utf-8")))
    assert keys, "no stats keys found"
    assert {k for k in keys if not _listed(k)} == set()


def test_unnormalizable_reasons_and_finish_reasons_are_in_the_readme() -> None:
    for reason in links.REASONS:
        assert f"`{reason}`" in README
    for name in dir(refusal):
        if name.startswith("REASON_"):
            assert f"`{getattr(refusal, name)}`" in README
