"""How to install an optional extra: the one wording of every message that names one.

The package is not on PyPI yet, so the published name alone fails ("No matching
distribution found"); each message gives it and the line that works from a clone.
"""

from __future__ import annotations

#: The distribution's name on an index (``pyproject.toml``'s ``[project] name``).
DISTRIBUTION = "iri-scrapy"


def install_hint(extra: str) -> str:
    """``pip install "iri-scrapy[EXTRA]" (or from a clone: pip install ".[EXTRA]")``."""
    return f'pip install "{DISTRIBUTION}[{extra}]" (or from a clone: pip install ".[{extra}]")'
