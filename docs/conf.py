"""Sphinx configuration: the Markdown pages of docs/ through MyST, the API by autodoc.

Build: ``pip install -e ".[docs]" && sphinx-build -W --keep-going -b html docs docs/_build/html``
(CI builds it with warnings as errors).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from iri_scrapy.version import __version__  # noqa: E402

project = "iri_scrapy"
author = "iri_scrapy contributors"
copyright = "iri_scrapy contributors"  # noqa: A001
version = release = __version__

extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.napoleon"]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build"]
myst_enable_extensions = ["colon_fence"]
myst_heading_anchors = 3
# Some pages (redis.md) start at a second-level heading, as they did inside the README.
suppress_warnings = ["myst.header"]

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": False}

html_theme = "furo"
html_title = f"iri_scrapy {release}"
html_static_path = ["_static"]
html_css_files = ["tables.css"]
