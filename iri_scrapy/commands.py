"""Scrapy commands registered by the package (entry point group ``scrapy.commands``).

``fetch``: :class:`FetchCommand`, Scrapy's ``scrapy fetch`` that takes a URL whose
scheme is not lower case (``HTTP://...``: :func:`lower_scheme`) and, when the
settings enable ``iri_scrapy.Addon``, builds its request with the add-on's
IDNA 2008 ``Request()`` (Scrapy builds it before any add-on runs).  Without the
add-on it is Scrapy's command unchanged.  If the installed Scrapy is outside the
supported range, Scrapy's own command is registered instead, so that no
``scrapy`` command breaks because this package is installed.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

#: The schemes Scrapy's ``fetch`` takes (``w3lib.url.is_url``, which compares them
#: case-sensitively).
_FETCH_SCHEMES = ("file", "http", "https")


def lower_scheme(url: str) -> str:
    """*url* with its scheme lower-cased when it is one ``scrapy fetch`` takes:
    ``HTTP://Example.com/`` is a URL (schemes are case-insensitive, RFC 3986
    section 3.1), but Scrapy's ``is_url`` reads only ``http://`` and prints usage."""
    scheme, sep, rest = url.partition("://")
    if sep and scheme.lower() in _FETCH_SCHEMES:
        return scheme.lower() + sep + rest
    return url


def addon_wants_idna2008(settings: Any) -> bool:
    """True if *settings* enable ``iri_scrapy.Addon`` and leave ``IRI_IDNA2008_REQUESTS`` on."""
    from iri_scrapy.addon import Addon
    from iri_scrapy.plugin.config import load_object, setting

    if not setting(settings, "IRI_IDNA2008_REQUESTS"):
        return False
    for key, value in settings.getwithbase("ADDONS").items():
        try:
            cls = load_object(key)
        except (ImportError, AttributeError, NameError, ValueError, TypeError):
            continue
        if value is not None and isinstance(cls, type) and issubclass(cls, Addon):
            return True
    return False


FetchCommand: Any
try:
    from iri_scrapy.plugin import compat
except ImportError:  # an unsupported Scrapy: the stock command, untouched
    FetchCommand = import_module("scrapy.commands.fetch").Command
else:

    class FetchCommand(compat.FetchCommand):  # type: ignore[no-redef]
        """``scrapy fetch``, with the IDNA 2008 ``Request()`` of the add-on when it is enabled.

        Scrapy's ``fetch`` command builds its ``Request(url)`` before any crawler (so
        before add-ons run): the add-on's :func:`~iri_scrapy.plugin.compat.install_idna2008`
        (which records the spelling its middlewares convert, in its crawler only) would
        come too late and ``straße.test`` would be fetched as ``strasse.test``.  It
        behaves exactly as Scrapy's unless the settings enable ``iri_scrapy.Addon``.
        """

        def run(self, args: list[str], opts: Any) -> None:
            args = [lower_scheme(args[0])] if len(args) == 1 else args
            if not addon_wants_idna2008(self.settings):
                super().run(args, opts)
                return
            compat.install_idna2008()
            try:
                super().run(args, opts)
            finally:
                compat.uninstall_idna2008()
