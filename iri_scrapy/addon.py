"""The Scrapy add-on: ``ADDONS = {"iri_scrapy.Addon": 0}`` enables the whole plugin.

:meth:`Addon.update_settings` sets, at settings priority ``"addon"``:

* ``REQUEST_FINGERPRINTER_CLASS = "iri_scrapy.IRIRequestFingerprinter"``
* ``DUPEFILTER_CLASS = "iri_scrapy.IRIDupeFilter"``
* ``SPIDER_MIDDLEWARES``: ``plugin.middleware.IRISpiderMiddleware``: 950
* ``DOWNLOADER_MIDDLEWARES``: ``plugin.offsite.IRIOffsiteMiddleware``: 50 (and
  Scrapy's ``OffsiteMiddleware``: None), ``IRINormalizationMiddleware``: 60,
  ``plugin.protocol_mw.IRIProtocolMiddleware``: 650

The rule for values the user set explicitly:

* ``REQUEST_FINGERPRINTER_CLASS`` and ``DUPEFILTER_CLASS`` are set with priority
  ``"addon"`` (15): they replace Scrapy's defaults (0) and ``scrapy crawl``'s
  command defaults (10), but a value from the project's ``settings.py`` (20), a
  spider's ``custom_settings`` (30) or the command line (40) wins.  If that
  value is not one of ours (or a subclass), a warning says that IRI
  deduplication is then up to it.
* Middlewares are only *added*: a middleware of ours that the user already
  lists (with any priority, or ``None`` to disable it) keeps the user's value.
* Stock offsite filtering is replaced by ours unless the user lists Scrapy's
  ``OffsiteMiddleware`` or ours in ``DOWNLOADER_MIDDLEWARES`` (then offsite
  filtering is the user's choice and is left alone).
* Scrapy's ``FilesPipeline``/``ImagesPipeline`` listed in ``ITEM_PIPELINES`` are
  replaced by :class:`~iri_scrapy.plugin.media.IRIFilesPipeline` /
  ``IRIImagesPipeline`` at the same priority (a stored file's path then depends
  only on its resource), unless ``IRI_MEDIA_PIPELINES = False``.  Subclasses
  of the stock classes are left alone.

With ``JOBDIR`` set and ``IRI_FRONTIER`` true (the default), the add-on also
sets ``SCHEDULER = "iri_scrapy.frontier.jobdir.IRIFrontierScheduler"`` (priority
``"addon"``: a ``SCHEDULER`` of your own wins) and adds its two middlewares,
``FrontierSpiderMiddleware`` and ``FrontierDownloaderMiddleware``, outermost
(:data:`PRIORITIES` ``"frontier"``): a crawl killed at any moment loses no
scheduled request (:mod:`iri_scrapy.frontier.jobdir`).

With ``IRI_REDIS_URL`` set, the add-on selects ``DUPEFILTER_CLASS =
"iri_scrapy.RedisIRIDupeFilter"`` and, unless ``IRI_REDIS_SCHEDULER = False``,
``SCHEDULER = "iri_scrapy.RedisIRIScheduler"`` (a queue shared by a fleet of
workers, with leases; :mod:`iri_scrapy.frontier.redis_scheduler`) with
``RedisSchedulerSpiderMiddleware`` and ``FrontierDownloaderMiddleware``
outermost, instead of the ``JOBDIR`` frontier (both at priority ``"addon"``).

``Request()`` URLs (IDNA 2008): unless ``IRI_IDNA2008_REQUESTS = False``, the
add-on rebinds the ``safe_url_string`` that ``Request()`` and w3lib's
``<base href>``/meta refresh parsers call to
:func:`~iri_scrapy.plugin.compat.idna2008_safe_url_string` (UTS 46
non-transitional hosts, a bare ``?`` kept, w3lib's function otherwise), for as
long as the crawler runs: every URL that enters Scrapy (``start_urls``,
``Request()`` in ``start()`` or callbacks, media pipelines, ``SitemapSpider``,
meta refresh, ``scrapy shell``/``fetch``) keeps its IDNA 2008 host.

The ``IRI_*`` settings are validated here, so a bad ``IRI_LEVEL`` stops the
crawl before it starts.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.downloadermiddlewares.offsite import OffsiteMiddleware
from scrapy.pipelines.files import FilesPipeline
from scrapy.pipelines.images import ImagesPipeline

from iri_scrapy.frontier.jobdir import (
    FrontierDownloaderMiddleware,
    FrontierSpiderMiddleware,
    fsync_setting,
)
from iri_scrapy.plugin import compat  # checks the installed Scrapy first
from iri_scrapy.plugin.config import IRIConfig, load_object
from iri_scrapy.plugin.media import IRIFilesPipeline, IRIImagesPipeline
from iri_scrapy.plugin.middleware import IRINormalizationMiddleware, IRISpiderMiddleware
from iri_scrapy.plugin.offsite import IRIOffsiteMiddleware
from iri_scrapy.plugin.protocol_mw import IRIProtocolMiddleware

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings
    from typing_extensions import Self

__all__ = [
    "Addon", "FINGERPRINTER", "DUPEFILTER", "FRONTIER_SCHEDULER", "MEDIA_PIPELINES", "PRIORITIES",
    "REDIS_DUPEFILTER", "REDIS_SCHEDULER",
]

logger = logging.getLogger(__name__)

FINGERPRINTER = "iri_scrapy.IRIRequestFingerprinter"
DUPEFILTER = "iri_scrapy.IRIDupeFilter"
FRONTIER_SCHEDULER = "iri_scrapy.frontier.jobdir.IRIFrontierScheduler"
REDIS_DUPEFILTER = "iri_scrapy.RedisIRIDupeFilter"
REDIS_SCHEDULER = "iri_scrapy.RedisIRIScheduler"

#: Stock media pipelines the add-on replaces (same priority) in ``ITEM_PIPELINES``.
MEDIA_PIPELINES: tuple[tuple[type, type], ...] = (
    (FilesPipeline, IRIFilesPipeline),
    (ImagesPipeline, IRIImagesPipeline),
)

#: Component priorities used by the add-on.
PRIORITIES: dict[str, int] = {
    "offsite": 50,  # the stock OffsiteMiddleware's place
    "normalization": 60,  # right after offsite; process_response runs late (sees final class)
    "protocol": 650,  # process_response before RedirectMiddleware (600)
    "spider": 950,  # spider side of every built-in spider middleware
    "frontier": -1000,  # outermost, spider and downloader side (crash-safe JOBDIR)
}


def _listed(components: dict[Any, Any], cls: type) -> bool:
    """True if *cls* is a key of the component priority dict (class or import path)."""
    for key in components:
        try:
            if load_object(key) is cls:
                return True
        except (ImportError, AttributeError, NameError, ValueError):
            continue
    return False


class Addon:
    """Enable canonical-URI fetching and IRI deduplication (see the module docstring)."""

    def __init__(self, crawler: Crawler | None = None) -> None:
        self.crawler = crawler
        self._seam = False

    def _engine_stopped(self) -> None:
        if self._seam:
            self._seam = False
            compat.uninstall_idna2008()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        """Build for *crawler* (Scrapy's add-on manager calls this)."""
        return cls(crawler)

    def update_settings(self, settings: BaseSettings) -> None:
        """Set the plugin's components into *settings* (user values win, see above)."""
        IRIConfig.from_settings(settings)  # fail early on bad IRI_* values
        fsync_setting(settings.get("IRI_FRONTIER_FSYNC"))
        if settings.getbool("IRI_IDNA2008_REQUESTS", True) and not self._seam:
            compat.install_idna2008()
            self._seam = True
            if self.crawler is not None:
                self.crawler.signals.connect(self._engine_stopped, signal=signals.engine_stopped)
        fleet = bool(settings.get("IRI_REDIS_URL"))
        for name, ours in (
            ("REQUEST_FINGERPRINTER_CLASS", FINGERPRINTER),
            ("DUPEFILTER_CLASS", REDIS_DUPEFILTER if fleet else DUPEFILTER),
        ):
            settings.set(name, ours, priority="addon")
            self._check_class(settings, name, ours)

        downloader = settings.getdict("DOWNLOADER_MIDDLEWARES")
        user_offsite = _listed(downloader, OffsiteMiddleware) or _listed(
            downloader, IRIOffsiteMiddleware
        )
        if not user_offsite:
            settings.set_in_component_priority_dict(
                "DOWNLOADER_MIDDLEWARES", OffsiteMiddleware, None
            )
            settings.set_in_component_priority_dict(
                "DOWNLOADER_MIDDLEWARES", IRIOffsiteMiddleware, PRIORITIES["offsite"]
            )
        settings.setdefault_in_component_priority_dict(
            "DOWNLOADER_MIDDLEWARES", IRINormalizationMiddleware, PRIORITIES["normalization"]
        )
        settings.setdefault_in_component_priority_dict(
            "DOWNLOADER_MIDDLEWARES", IRIProtocolMiddleware, PRIORITIES["protocol"]
        )
        settings.setdefault_in_component_priority_dict(
            "SPIDER_MIDDLEWARES", IRISpiderMiddleware, PRIORITIES["spider"]
        )
        scheduler = None
        if fleet and settings.getbool("IRI_REDIS_SCHEDULER", True):
            scheduler = REDIS_SCHEDULER
        elif settings.get("JOBDIR") and settings.getbool("IRI_FRONTIER", True):
            scheduler = FRONTIER_SCHEDULER
        if scheduler is not None:
            settings.set("SCHEDULER", scheduler, priority="addon")
            spider_mw: type = FrontierSpiderMiddleware
            if scheduler == REDIS_SCHEDULER:
                from iri_scrapy.frontier.redis_scheduler import RedisSchedulerSpiderMiddleware

                spider_mw = RedisSchedulerSpiderMiddleware
            settings.setdefault_in_component_priority_dict(
                "SPIDER_MIDDLEWARES", spider_mw, PRIORITIES["frontier"]
            )
            settings.setdefault_in_component_priority_dict(
                "DOWNLOADER_MIDDLEWARES", FrontierDownloaderMiddleware, PRIORITIES["frontier"]
            )
        if settings.getbool("IRI_MEDIA_PIPELINES", True):
            pipelines = settings.getdict("ITEM_PIPELINES")
            for stock_cls, our_cls in MEDIA_PIPELINES:
                if _listed(pipelines, our_cls):
                    continue
                with contextlib.suppress(KeyError):  # not listed, or disabled (None)
                    settings.replace_in_component_priority_dict(
                        "ITEM_PIPELINES", stock_cls, our_cls
                    )

    @staticmethod
    def _check_class(settings: BaseSettings, name: str, ours: str) -> None:
        """Warn if the user's explicit *name* is not our class or a subclass of it."""
        value = settings.get(name)
        if value == ours:
            return
        try:
            theirs, mine = load_object(value), load_object(ours)
        except (ImportError, AttributeError, NameError, ValueError):
            return
        if isinstance(theirs, type) and isinstance(mine, type) and issubclass(theirs, mine):
            return
        logger.warning(
            "iri_scrapy.Addon: %(name)s = %(value)r was set explicitly and is kept; "
            "IRI deduplication then depends on it (ours: %(ours)s)",
            {"name": name, "value": value, "ours": ours},
        )
