"""Scrapy commands registered by the package (entry point group ``scrapy.commands``).

``fetch``: :class:`~iri_scrapy.adapters.compat.IRIFetchCommand`, Scrapy's
``scrapy fetch`` that, when the settings enable ``iri_scrapy.Addon``, builds
its request with the add-on's IDNA 2008 ``Request()`` (Scrapy builds it before
any add-on runs).  Without the add-on it is Scrapy's command unchanged.  If
the installed Scrapy is outside the supported range, Scrapy's own command is
registered instead, so that no ``scrapy`` command breaks because this package
is installed.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__all__ = ["FetchCommand"]

FetchCommand: Any
try:
    from .compat import IRIFetchCommand as FetchCommand
except ImportError:  # an unsupported Scrapy: the stock command, untouched
    FetchCommand = import_module("scrapy.commands.fetch").Command
