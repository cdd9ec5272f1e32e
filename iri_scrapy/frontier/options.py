"""The ``JOBDIR`` frontier's own settings, read and checked once (docs/settings.md).

``IRI_FRONTIER_FSYNC`` (milliseconds between syncs, or ``"always"``) and
``IRI_FRONTIER_MAX_INFLIGHT`` (requests handed out and not yet answered; the
fleet scheduler reads it too).  A value that cannot be used raises ``ValueError``
naming the setting: the add-on refuses the start with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from iri_scrapy.plugin import compat  # noqa: F401 - checks the installed Scrapy first
from iri_scrapy.plugin.config import setting

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings


#: ``IRI_FRONTIER_WRITE_RETRY``: seconds a failing store is retried before the crawl closes.
DEFAULT_WRITE_RETRY = 30.0
#: ``IRI_FRONTIER_FSYNC``'s default: milliseconds between syncs of the store.
DEFAULT_FSYNC_MS = 250


def fsync_setting(value: Any) -> int | None:
    """``IRI_FRONTIER_FSYNC`` as milliseconds, or ``None`` for ``"always"``.

    Raises :class:`ValueError` for anything else (a positive number of
    milliseconds, ``0`` meaning ``"always"``).
    """
    if value is None:
        return DEFAULT_FSYNC_MS
    if isinstance(value, str):
        text = value.strip().lower()
        if text == "always":
            return None
        try:
            value = int(text)
        except ValueError:
            raise ValueError(
                f"IRI_FRONTIER_FSYNC must be a number of milliseconds or 'always', got {value!r}"
            ) from None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(
            f"IRI_FRONTIER_FSYNC must be a number of milliseconds or 'always', got {value!r}"
        )
    return None if value == 0 else value



def max_inflight_setting(settings: BaseSettings) -> int:
    """``IRI_FRONTIER_MAX_INFLIGHT``: default ``CONCURRENT_REQUESTS``; ``0``: no cap."""
    value = setting(settings, "IRI_FRONTIER_MAX_INFLIGHT")
    if value is None:
        return max(0, settings.getint("CONCURRENT_REQUESTS", 16))
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = -1
    if isinstance(value, bool) or number < 0 or str(number) != str(value).strip():
        raise ValueError(
            f"IRI_FRONTIER_MAX_INFLIGHT must be a number of requests >= 0, got {value!r}"
        )
    return number
