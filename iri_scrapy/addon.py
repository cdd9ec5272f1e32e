"""The Scrapy add-on: ``ADDONS = {"iri_scrapy.Addon": 0}`` enables the whole plugin.

:meth:`Addon.update_settings` validates the ``IRI_*`` settings (a bad one stops the
crawl before it starts) and sets, at settings priority ``"addon"`` (so the
project's, a spider's or the command line's values win), the IRI fingerprinter
and dupefilter; it *adds* the plugin's middlewares (normalization, protocol, the
IDNA 2008 ``Request()``; a middleware the user already lists keeps the user's
value), puts ours in place of Scrapy's offsite, robots.txt and meta refresh
middlewares and media pipelines unless the user chose, and with ``JOBDIR`` or
``IRI_REDIS_URL`` selects the crash-tolerant scheduler and its middlewares.

Design: docs/plugin.md (the table of parts, and your own values).
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.downloadermiddlewares.offsite import OffsiteMiddleware
from scrapy.downloadermiddlewares.redirect import MetaRefreshMiddleware
from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware
from scrapy.pipelines.files import FilesPipeline
from scrapy.pipelines.images import ImagesPipeline
from scrapy.settings import SETTINGS_PRIORITIES
from scrapy.utils.request import RequestFingerprinter

from iri_scrapy.core import native
from iri_scrapy.frontier.middlewares import (
    FrontierDownloaderMiddleware,
    FrontierSpiderMiddleware,
)
from iri_scrapy.frontier.options import fsync_setting
from iri_scrapy.frontier.redis_client import is_scrapy_redis_scheduler
from iri_scrapy.plugin import compat  # checks the installed Scrapy first
from iri_scrapy.plugin.config import class_of, is_subclass_path, load_object
from iri_scrapy.plugin.config import setting as iri_setting
from iri_scrapy.plugin.context import CrawlContext
from iri_scrapy.plugin.fingerprinter import BASE_SETTING, IRIRequestFingerprinter, chain_problem
from iri_scrapy.plugin.idna_requests import (
    IDNA2008DownloaderMiddleware,
    IDNA2008ResponseMiddleware,
)
from iri_scrapy.plugin.location import IRILocationMiddleware
from iri_scrapy.plugin.media import IRIFilesPipeline, IRIImagesPipeline
from iri_scrapy.plugin.middleware import IRINormalizationMiddleware, IRISpiderMiddleware
from iri_scrapy.plugin.offsite import IRIOffsiteMiddleware
from iri_scrapy.plugin.refresh import IRIMetaRefreshMiddleware
from iri_scrapy.plugin.report_extension import IRICrawlReport
from iri_scrapy.plugin.robots import IRIRobotsTxtMiddleware

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings
    from typing_extensions import Self


logger = logging.getLogger(__name__)

FINGERPRINTER = "iri_scrapy.IRIRequestFingerprinter"
DUPEFILTER = "iri_scrapy.IRIDupeFilter"
FRONTIER_SCHEDULER = "iri_scrapy.frontier.jobdir.IRIFrontierScheduler"
#: Scrapy's scheduler with the plugin's entry (plugin/entry.py), set in place of Scrapy's
ENTRY_SCHEDULER = "iri_scrapy.plugin.entry.IRIScheduler"
ENTRY_MIXIN = "iri_scrapy.plugin.entry.IRIEntryMixin"
#: The storage of local feed files with the JOBDIR frontier (iri_scrapy.frontier.feeds).
FEED_STORAGE = "iri_scrapy.frontier.feeds.FrontierFeedStorage"
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
    "robots": 100,  # the stock RobotsTxtMiddleware's place (with ROBOTSTXT_OBEY only)
    "protocol": 650,  # process_response before RedirectMiddleware (600)
    "meta_refresh": 580,  # the stock MetaRefreshMiddleware's place
    "spider": 950,  # spider side of every built-in spider middleware
    "frontier": -1000,  # outermost, spider and downloader side (crash-safe JOBDIR)
    "idna": 40,  # before offsite filtering
    "idna_response": 590,  # process_response before MetaRefreshMiddleware (580)
}


#: Settings of scrapy-zyte-api and scrapy-poet naming the fingerprinter they fall back on.
ZYTE_FALLBACK = "ZYTE_API_FALLBACK_REQUEST_FINGERPRINTER_CLASS"
POET_BASE = "SCRAPY_POET_REQUEST_FINGERPRINTER_BASE_CLASS"
POET_FINGERPRINTER = "scrapy_poet.ScrapyPoetRequestFingerprinter"
ZYTE_FINGERPRINTER = "scrapy_zyte_api.ScrapyZyteAPIRequestFingerprinter"

#: (top-level package, class name) of the fingerprinters the add-on chains with.
_FAMILIES = {
    ("scrapy_zyte_api", "ScrapyZyteAPIRequestFingerprinter"): "zyte",
    ("scrapy_poet", "ScrapyPoetRequestFingerprinter"): "poet",
}


def _family(value: Any) -> str | None:
    """``ours``, ``zyte``, ``poet``, ``stock`` (Scrapy's own class), else None.

    By class (a subclass counts as its base), without importing scrapy-zyte-api
    or scrapy-poet: a setting that names theirs has imported them already.
    """
    cls = class_of(value)
    if cls is None:
        return None
    if issubclass(cls, IRIRequestFingerprinter):
        return "ours"
    if cls is RequestFingerprinter:
        return "stock"
    for klass in cls.__mro__:
        family = _FAMILIES.get((klass.__module__.split(".", 1)[0], klass.__qualname__))
        if family is not None:
            return family
    return None


def _enabled(settings: BaseSettings, package: str, names: tuple[str, ...]) -> bool:
    """True if ``ADDONS`` or ``DOWNLOADER_MIDDLEWARES`` enable a class of *package* named
    one of *names* (by path, without importing *package*)."""
    for setting in ("ADDONS", "DOWNLOADER_MIDDLEWARES"):
        for key, value in settings.getwithbase(setting).items():
            if value is None:
                continue
            path = key if isinstance(key, str) else f"{key.__module__}.{key.__qualname__}"
            if path.split(".", 1)[0] == package and path.rsplit(".", 1)[-1] in names:
                return True
    return False


def _poet_enabled(settings: BaseSettings) -> bool:
    """True if scrapy-poet's add-on or its ``InjectionMiddleware`` is enabled."""
    return _enabled(settings, "scrapy_poet", ("Addon", "InjectionMiddleware")) or (
        _family(settings.get("REQUEST_FINGERPRINTER_CLASS")) == "poet"
    )


_is_subclass = is_subclass_path  # "is this setting our class": plugin/config.py


def _listed(components: dict[Any, Any], cls: type) -> bool:
    """True if *cls* is a key of the component priority dict (class or import path)."""
    for key in components:
        try:
            if load_object(key) is cls:
                return True
        except (ImportError, AttributeError, NameError, ValueError):
            continue
    return False


def _protocol_level(context: CrawlContext | None) -> type:
    """The learned protocol level (RFC 3987 section 5.3.4), the optional
    ``iri_scrapy/protocol/`` folder: the one place outside it that imports it.

    Installed: its parts go into the crawl's *context* (``context.protocol``) and
    its middleware is the redirect middleware.  Not installed: the plugin's own
    redirect middleware, and ``IRI_LEVEL = "protocol"`` is refused at start
    (``CrawlContext.rules``).
    """
    try:
        from iri_scrapy.protocol.level import ProtocolLevel
    except ModuleNotFoundError as exc:
        if exc.name not in ("iri_scrapy.protocol", "iri_scrapy.protocol.level"):
            raise
        return IRILocationMiddleware
    if context is not None:
        context.protocol = ProtocolLevel()
    return ProtocolLevel.middleware


class Addon:
    """Enable canonical-URI fetching and IRI deduplication (see the module docstring)."""

    def __init__(self, crawler: Crawler | None = None) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        """Build for *crawler* (Scrapy's add-on manager calls this)."""
        return cls(crawler)

    def update_settings(self, settings: BaseSettings) -> None:
        """Set the plugin's components into *settings* (user values win, see above)."""
        context = None
        if self.crawler is not None:  # the crawl's shared state, read by each component
            context = CrawlContext.install(self.crawler, settings)
        fsync_setting(iri_setting(settings, "IRI_FRONTIER_FSYNC"))
        # what the add-on does once the crawl runs (signals, the Request() seam): an
        # extension, so that this method only edits settings
        settings.setdefault_in_component_priority_dict("EXTENSIONS", AddonExtension, 0)
        self._add_idna2008_middlewares(settings)
        fleet = bool(iri_setting(settings, "IRI_REDIS_URL"))
        self._compose_fingerprinter(settings)
        self._choose_dupefilter(settings, fleet)
        self._swap_stock_middlewares(settings)
        self._add_iri_middlewares(settings, context)
        self._choose_scheduler(settings, fleet)
        # iri_report.json in JOBDIR, IRI_REPORT_FILE (not enabled without either)
        settings.setdefault_in_component_priority_dict("EXTENSIONS", IRICrawlReport, 500)
        self._swap_media_pipelines(settings)

    def _add_idna2008_middlewares(self, settings: BaseSettings) -> None:
        """IDNA2008 on outgoing requests and redirects (IRI_IDNA2008_REQUESTS)."""
        if not iri_setting(settings, "IRI_IDNA2008_REQUESTS"):
            return
        settings.setdefault_in_component_priority_dict(
            "DOWNLOADER_MIDDLEWARES", IDNA2008DownloaderMiddleware, PRIORITIES["idna"])
        settings.setdefault_in_component_priority_dict(
            "DOWNLOADER_MIDDLEWARES", IDNA2008ResponseMiddleware,
            PRIORITIES["idna_response"])

    def _choose_dupefilter(self, settings: BaseSettings, fleet: bool) -> None:
        """Our dupefilter, the Redis one for a fleet or scrapy-redis's scheduler."""
        redis_scheduler = is_scrapy_redis_scheduler(settings.get("SCHEDULER"))
        dupefilter = REDIS_DUPEFILTER if fleet or redis_scheduler else DUPEFILTER
        settings.set("DUPEFILTER_CLASS", dupefilter, priority="addon")
        self._check_class(settings, "DUPEFILTER_CLASS", dupefilter)
        if redis_scheduler and fleet and all(
                settings.getpriority(name) is None
                for name in ("REDIS_URL", "REDIS_HOST", "REDIS_PORT")):
            # scrapy-redis's scheduler reads REDIS_URL only: the queue goes where the
            # seen-set goes (two servers apart are refused by RedisIRIDupeFilter)
            settings.set("REDIS_URL", iri_setting(settings, "IRI_REDIS_URL"), priority="addon")
        if redis_scheduler and not _is_subclass(settings.get("DUPEFILTER_CLASS"), REDIS_DUPEFILTER):
            logger.warning(
                "iri_scrapy.Addon: SCHEDULER is scrapy-redis's and DUPEFILTER_CLASS = %(df)r "
                "keeps its seen-set in this process only: a second run fetches everything "
                "again (use %(ours)s)", {"df": settings.get("DUPEFILTER_CLASS"),
                                          "ours": REDIS_DUPEFILTER},
            )

    def _swap_stock_middlewares(self, settings: BaseSettings) -> None:
        """Replace Scrapy's offsite, robots.txt and meta refresh middlewares unless listed."""
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
        if settings.getbool("ROBOTSTXT_OBEY") and not (
            _listed(downloader, RobotsTxtMiddleware) or _listed(downloader, IRIRobotsTxtMiddleware)
        ):
            settings.set_in_component_priority_dict(
                "DOWNLOADER_MIDDLEWARES", RobotsTxtMiddleware, None
            )
            settings.set_in_component_priority_dict(
                "DOWNLOADER_MIDDLEWARES", IRIRobotsTxtMiddleware, PRIORITIES["robots"]
            )
        if not (
            _listed(downloader, MetaRefreshMiddleware)
            or _listed(downloader, IRIMetaRefreshMiddleware)
        ):
            settings.set_in_component_priority_dict(
                "DOWNLOADER_MIDDLEWARES", MetaRefreshMiddleware, None
            )
            settings.set_in_component_priority_dict(
                "DOWNLOADER_MIDDLEWARES", IRIMetaRefreshMiddleware, PRIORITIES["meta_refresh"]
            )

    def _add_iri_middlewares(self, settings: BaseSettings, context: CrawlContext | None) -> None:
        """The normalization, redirect (protocol) and spider middlewares."""
        settings.setdefault_in_component_priority_dict(
            "DOWNLOADER_MIDDLEWARES", IRINormalizationMiddleware, PRIORITIES["normalization"]
        )
        settings.setdefault_in_component_priority_dict(
            "DOWNLOADER_MIDDLEWARES", _protocol_level(context), PRIORITIES["protocol"]
        )
        settings.setdefault_in_component_priority_dict(
            "SPIDER_MIDDLEWARES", IRISpiderMiddleware, PRIORITIES["spider"]
        )

    def _choose_scheduler(self, settings: BaseSettings, fleet: bool) -> None:
        """The frontier scheduler: Redis for a fleet, SQLite with JOBDIR; else
        Scrapy's own with the entry (plugin/entry.py).  A user's ``SCHEDULER``
        is kept; one without the entry is warned about (:meth:`_check_entry`)."""
        scheduler = None
        if fleet and iri_setting(settings, "IRI_REDIS_SCHEDULER"):
            scheduler = REDIS_SCHEDULER
        elif settings.get("JOBDIR") and iri_setting(settings, "IRI_FRONTIER"):
            scheduler = FRONTIER_SCHEDULER
        settings.set("SCHEDULER", scheduler or ENTRY_SCHEDULER, priority="addon")
        self._check_entry(settings)
        if scheduler is not None:
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
            if scheduler == FRONTIER_SCHEDULER:  # local feed files staged (frontier/feeds.py)
                for scheme in ("", "file"):
                    if settings.getwithbase("FEED_STORAGES").get(scheme) in (
                            None, "scrapy.extensions.feedexport.FileFeedStorage"):
                        settings.set("FEED_STORAGES", {
                            **settings.getdict("FEED_STORAGES"), scheme: FEED_STORAGE},
                            priority="addon")

    @staticmethod
    def _check_entry(settings: BaseSettings) -> None:
        """Warn if ``SCHEDULER`` does not put requests in fetch form as they enter it."""
        value = settings.get("SCHEDULER")
        cls = class_of(value)
        # by the MRO: Scrapy's BaseScheduler metaclass calls any scheduler-like class a
        # subclass of any other
        if cls is None or any(class_of(ours) in cls.__mro__
                              for ours in (ENTRY_MIXIN, FRONTIER_SCHEDULER, REDIS_SCHEDULER)):
            return
        logger.warning(
            "iri_scrapy.Addon: SCHEDULER = %(value)r was set explicitly and is kept; it does "
            "not put requests in fetch form as they enter it, so requests made by other "
            "components (redirects, downloader middlewares, engine.crawl()) go on the wire "
            "as given (their dedup keys are canonical all the same): use "
            "class S(iri_scrapy.plugin.entry.IRIEntryMixin, <that scheduler>) (docs/plugin.md)",
            {"value": value},
        )

    def _swap_media_pipelines(self, settings: BaseSettings) -> None:
        """Our media pipelines for Scrapy's (IRI_MEDIA_PIPELINES)."""
        if not iri_setting(settings, "IRI_MEDIA_PIPELINES"):
            return
        pipelines = settings.getdict("ITEM_PIPELINES")
        for stock_cls, our_cls in MEDIA_PIPELINES:
            if _listed(pipelines, our_cls):
                continue
            with contextlib.suppress(KeyError):  # not listed, or disabled (None)
                settings.replace_in_component_priority_dict(
                    "ITEM_PIPELINES", stock_cls, our_cls
                )

    # --- fingerprinters: compose with scrapy-zyte-api's, scrapy-poet's, the user's ----------

    def _compose_fingerprinter(self, settings: BaseSettings) -> None:
        """Put ``IRIRequestFingerprinter`` into the crawler's fingerprinter chain.

        In either ``ADDONS`` order: scrapy-zyte-api's and scrapy-poet's
        fingerprinters call a fallback / base fingerprinter named by a setting,
        which is set to ours here (to scrapy-poet's for scrapy-zyte-api when
        scrapy-poet is enabled too); theirs stays ``REQUEST_FINGERPRINTER_CLASS``
        if it is, or becomes it when their add-on runs after this one.  Any
        other fingerprinter found in one of those places is not dropped: it
        becomes ours' base (:data:`~iri_scrapy.plugin.fingerprinter.BASE_SETTING`)
        and ours takes its place, with one WARNING line.  The chain actually
        built is checked when the spider opens (:meth:`_verify_fingerprinter`).
        """
        poet = _poet_enabled(settings)
        self._take_slot(settings, POET_BASE, FINGERPRINTER)
        self._take_slot(settings, ZYTE_FALLBACK, POET_FINGERPRINTER if poet else FINGERPRINTER)
        name = "REQUEST_FINGERPRINTER_CLASS"
        family = _family(settings.get(name))
        if family in ("ours", "zyte", "poet"):
            return
        addon = SETTINGS_PRIORITIES["addon"]
        if family == "stock" and (settings.getpriority(name) or 0) <= addon:
            settings.set(name, FINGERPRINTER, priority="addon")
            return
        # Another class, set above the add-ons' priority: scrapy-zyte-api's add-on, if
        # it runs later, could not take its place (as it does without us), so its
        # fingerprinter is put there now, at that priority; ours is its fallback.
        zyte = _enabled(settings, "scrapy_zyte_api", ("Addon",))
        self._take_slot(settings, name, ZYTE_FINGERPRINTER if zyte else FINGERPRINTER)

    def _take_slot(self, settings: BaseSettings, name: str, want: str) -> None:
        """Set fingerprinter setting *name* to *want*; another class there becomes ours' base."""
        value = settings.get(name)
        priority = settings.getpriority(name) or 0
        family = _family(value)
        addon = SETTINGS_PRIORITIES["addon"]
        if value is None or family in ("ours", _family(want)) or (
            family == "stock" and priority <= addon
        ):
            settings.set(name, want, priority="addon")
            return
        if family == "stock":  # Scrapy's own, set explicitly: the user's choice, checked at start
            return
        base = settings.get(BASE_SETTING)
        if base is not None and _family(base) != family and base != value:
            logger.warning(
                "iri_scrapy.Addon: %(name)s = %(value)r is kept (%(base_name)s is already "
                "%(base)r): IRI deduplication may not apply, see the check at start",
                {"name": name, "value": value, "base_name": BASE_SETTING, "base": base},
            )
            return
        if base is None:
            settings.set(BASE_SETTING, value, priority=max(priority, addon))
            logger.warning(
                "iri_scrapy.Addon: %(name)s = %(value)r is composed with IRIRequestFingerprinter "
                "(it becomes %(base_name)s): two requests are duplicates only if both "
                "fingerprinters agree; set %(base_name)s yourself to silence this",
                {"name": name, "value": value, "base_name": BASE_SETTING},
            )
        settings.set(name, want, priority=max(priority, addon))

    @staticmethod
    def _check_class(settings: BaseSettings, name: str, ours: str) -> None:
        """Warn if the user's explicit *name* is not our class or a subclass of it."""
        value = settings.get(name)
        if value == ours:
            return
        if is_subclass_path(value, ours):
            return
        logger.warning(
            "iri_scrapy.Addon: %(name)s = %(value)r was set explicitly and is kept; "
            "IRI deduplication then depends on it (ours: %(ours)s)",
            {"name": name, "value": value, "ours": ours},
        )


class AddonExtension:
    """What :class:`Addon` does once its crawl runs (the add-on enables it in ``EXTENSIONS``).

    Scrapy's add-ons edit settings; what needs the running crawler is here.  With
    ``IRI_IDNA2008_REQUESTS`` it installs the ``Request()`` seam
    (:func:`iri_scrapy.plugin.compat.install_idna2008`, counted) when it is built,
    before the engine, and removes it when the engine stops; when the spider opens
    it checks the fingerprinter chain actually built (``iri_scrapy.Addon:`` lines).
    Without the native fast path (no C compiler at install) one INFO line says so.
    """

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self._seam = False
        if iri_setting(crawler.settings, "IRI_IDNA2008_REQUESTS"):
            compat.install_idna2008()
            self._seam = True
            crawler.signals.connect(self._engine_stopped, signal=signals.engine_stopped)
        crawler.signals.connect(self._verify_fingerprinter, signal=signals.spider_opened)
        if not native.enabled():
            logger.info("iri_scrapy: the native fast path is off (%s): the same keys, "
                        "computed in pure Python", native.why_off())

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        """Build for *crawler* (Scrapy's extension manager calls this)."""
        return cls(crawler)

    def _engine_stopped(self) -> None:
        if self._seam:
            self._seam = False
            compat.uninstall_idna2008()

    def _verify_fingerprinter(self) -> None:
        """At spider open: say loudly if the fingerprinter in use does not key on ours."""
        crawler = self.crawler
        fingerprinter = getattr(crawler, "request_fingerprinter", None)
        problem = chain_problem(fingerprinter, CrawlContext.of(crawler).config)
        if problem is not None:
            logger.warning(
                "iri_scrapy.Addon: IRI deduplication is OFF: the crawler's request "
                "fingerprinter %(fp)s %(problem)s (REQUEST_FINGERPRINTER_CLASS = %(value)r; "
                "see docs/compose.md)",
                {"fp": type(fingerprinter).__qualname__, "problem": problem,
                 "value": crawler.settings.get("REQUEST_FINGERPRINTER_CLASS")},
            )
            return
        if _family(type(fingerprinter)) == "zyte" and crawler.settings.getbool(
            "ZYTE_API_TRANSPARENT_MODE"
        ):
            logger.info(
                "iri_scrapy.Addon: requests sent through Zyte API are fingerprinted by "
                "scrapy-zyte-api (its own URL canonicalization); the dupefilter folds "
                "their canonical key in, the HTTP cache keys on scrapy-zyte-api's alone"
            )
