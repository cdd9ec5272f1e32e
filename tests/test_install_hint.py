"""One wording for "install this extra": the published name and the line that works from a clone.

The package is not on PyPI yet, so ``pip install "iri-scrapy[redis]"`` alone fails; every
message that asks for an extra comes from :func:`iri_scrapy.core.extras.install_hint`, and
no other module of the package spells a ``pip install`` line of its own in code.
"""

from __future__ import annotations

import re
from pathlib import Path

import iri_scrapy
from iri_scrapy.core.extras import install_hint

PACKAGE = Path(iri_scrapy.__file__).resolve().parent
# The checkout's (or, against an installed wheel, the copy of the tests') pyproject.toml.
PYPROJECT = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text(encoding="utf-8")


def test_the_wording_names_both_forms_and_real_extras() -> None:
    assert install_hint("redis") == (
        'pip install "iri-scrapy[redis]" (or from a clone: pip install ".[redis]")')
    assert re.search(r'^name = "iri-scrapy"$', PYPROJECT, re.M)
    for extra in ("redis", "spark", "docs", "test"):
        assert re.search(rf"^{extra} = \[", PYPROJECT, re.M), extra


def test_no_module_spells_its_own_install_line() -> None:
    """Outside core/extras.py, ``pip install`` appears only in docstrings that give both forms."""
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "extras.py":
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            if "pip install" in line:
                assert "or from a clone" in line, f"{path.relative_to(PACKAGE)}: {line.strip()}"
