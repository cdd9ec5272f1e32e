"""Thin Scrapy adapters over the pure IRI core (the core never imports Scrapy)."""

from . import compat  # noqa: F401 - checks the installed Scrapy (see compat.py)
