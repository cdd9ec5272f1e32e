"""One crawl's shared state, built by the add-on and handed to each component.

The plugin's components of one crawler share state: the config read from the
settings, the stamper (one per-request cache: each request's canonicalization
and its fingerprint), the canonicalizer with the spellings servers redirected to,
the protocol rules and what is being learned (RFC 3987 section 5.3.4), the
frontier scheduler the frontier middlewares answer to, the crawl report, the
warnings already given.  They hold it in one :class:`CrawlContext`, which
:class:`iri_scrapy.Addon` (built per crawler by Scrapy) puts into the crawler's
settings under :data:`SETTING` at priority ``"addon"``; each component's
``from_crawler`` reads it with :meth:`CrawlContext.of`.  No attribute is set on
the crawler and no module holds a registry keyed by crawler (both hidden from
Scrapy and from the user; ``tests/test_architecture.py`` checks it).  Scrapy
copies settings (``copy()``, ``frozencopy()``): a context copies as itself, and
refuses pickling (it holds live objects).  A component named by hand without
the add-on gets a private context read from the same settings: it works alone,
only shares nothing (a frontier middleware, which must reach its scheduler,
refuses to start then, naming the add-on).

The context only holds; each part is built by its own module on first use
(``Stamper.of``, ``Canonicalizer.of``), so this module imports none of them (no
import circle).  The learned protocol level (RFC 3987 section 5.3.4, the
optional ``iri_scrapy/protocol/`` folder) is reached through :attr:`protocol`,
which the add-on sets when the folder is there: the plugin and the frontier
import nothing of that folder, and ``IRI_LEVEL = "protocol"`` without it is
refused at start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn

from iri_scrapy.core.ladder import Level
from iri_scrapy.plugin.config import IRIConfig

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings


#: The settings key the add-on stores the crawl's context under.
SETTING = "IRI_CRAWL_CONTEXT"

#: What to do when a component needs the add-on's shared context.
ADDON_LINE = 'enable the add-on: ADDONS = {"iri_scrapy.Addon": 0}'

_UNSET: Any = object()


class CrawlContext:
    """The shared state of one crawler's plugin components (see the module docstring)."""

    def __init__(self, crawler: Crawler | None = None, *, shared: bool = False) -> None:
        self.crawler = crawler
        #: True if the add-on built it (every component of the crawler holds this one)
        self.shared = shared
        self._config: IRIConfig | None = None
        self._rules: Any = _UNSET
        #: the protocol level's parts (:class:`iri_scrapy.protocol.level.ProtocolLevel`),
        #: set by the add-on when ``iri_scrapy/protocol/`` is installed, else None
        self.protocol: Any = None
        #: the :class:`~iri_scrapy.plugin.stamp.Stamper` (``Stamper.of``)
        self.stamper: Any = None
        #: the :class:`~iri_scrapy.plugin.middleware.Canonicalizer` (``Canonicalizer.of``)
        self.canon: Any = None
        #: the :class:`~iri_scrapy.protocol.learned.Learned` of :attr:`rules`, built by the
        #: protocol level (:meth:`learned_of_rules`)
        self.learned: Any = None
        #: the frontier scheduler open for this crawler, which the frontier
        #: middlewares answer to (``answered``/``failed``), or None
        self.frontier: Any = None
        #: the crawl report extension (:class:`~iri_scrapy.plugin.report_extension.IRICrawlReport`)
        self.report: Any = None
        #: reasons of skipped links already logged as a WARNING (the first of each)
        self.warned: set[str] = set()

    @classmethod
    def of(cls, crawler: Crawler | None) -> CrawlContext:
        """The add-on's context of *crawler*, else a private one (see the module docstring)."""
        if crawler is not None:
            context = crawler.settings.get(SETTING)
            if isinstance(context, CrawlContext) and context.crawler is crawler:
                return context
        return cls(crawler)

    @classmethod
    def install(cls, crawler: Crawler | None, settings: BaseSettings) -> CrawlContext:
        """A shared context for *crawler*, stored in *settings* (the add-on calls this)."""
        context = cls(crawler, shared=True)
        settings.set(SETTING, context, priority="addon")
        return context

    # Scrapy copies settings deeply; the context is one object per crawler.
    def __copy__(self) -> CrawlContext:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> CrawlContext:
        return self

    def __reduce__(self) -> NoReturn:
        raise TypeError("a CrawlContext holds one crawl's live objects and is not pickled")

    def register_frontier(self, scheduler: Any) -> None:
        """*scheduler* answers for this crawl (until :meth:`unregister_frontier`)."""
        self.frontier = scheduler

    def unregister_frontier(self, scheduler: Any) -> None:
        """*scheduler* no longer answers for this crawl (a no-op if another one does)."""
        if self.frontier is scheduler:
            self.frontier = None

    @property
    def stats(self) -> Any:
        """The crawler's stats collector, or None."""
        return getattr(self.crawler, "stats", None)

    @property
    def config(self) -> IRIConfig:
        """The crawler's config, read once: an unusable setting refuses the start.

        One ERROR line naming the setting, ``finish_reason`` ``iri_bad_setting`` and
        exit status 1 (:func:`iri_scrapy.plugin.refusal.refuse_start`); the components
        are built with the defaults meanwhile, and no request is sent.
        """
        config = self._config
        if config is None:
            crawler = self.crawler
            if crawler is None:
                config = self._config = IRIConfig()
                return config
            try:
                config = self._config = IRIConfig.from_settings(crawler.settings)
                if self.protocol is not None:  # its settings (IRI_PROTOCOL_RULES_FILE)
                    self.protocol.check(config)
            except ValueError as exc:
                from iri_scrapy.plugin.refusal import REASON_BAD_SETTING, refuse_start

                config = self._config = IRIConfig()
                refuse_start(crawler, REASON_BAD_SETTING,
                             f"{exc}: fix the setting (docs/settings.md)", exc)
        return config

    @property
    def rules(self) -> Any:
        """The crawl's protocol rules at level PROTOCOL
        (:class:`iri_scrapy.protocol.rules.ProtocolRules`), else ``None``.

        One instance, shared by the fingerprinter (which applies it), the dupefilter
        and the middleware that learns from redirects; loaded from
        ``IRI_PROTOCOL_RULES_FILE`` when there is one.  Shared through the add-on's
        context only: a crawler's component without it refuses the start (each
        would learn and apply rules of its own, silently); so does a crawl at
        level PROTOCOL where ``iri_scrapy/protocol/`` is not installed.
        """
        rules = self._rules
        if rules is _UNSET:
            config = self.config
            rules = None
            if config.level >= Level.PROTOCOL and self.crawler is not None:
                from iri_scrapy.plugin.refusal import REASON_BAD_SETTING, refuse_start

                why = None
                if not self.shared:
                    why = ("IRI_LEVEL = 'protocol': the learned rules are shared "
                           f"through the add-on's crawl context: {ADDON_LINE}")
                elif self.protocol is None:
                    why = ("IRI_LEVEL = 'protocol': this installation has no learned "
                           "protocol level (the optional iri_scrapy/protocol/ folder): "
                           "install iri_scrapy with it, or choose IRI_LEVEL = 'scheme'")
                if why is None:
                    rules = self.protocol.rules(config)
                else:
                    error = ValueError(why)
                    refuse_start(self.crawler, REASON_BAD_SETTING, str(error), error)
            self._rules = rules
        return rules

    def learned_of_rules(self) -> Any:
        """The crawl's one :class:`~iri_scrapy.protocol.learned.Learned` of :attr:`rules`
        (what learned rules skipped), None below level PROTOCOL."""
        if self.rules is None:
            return None
        return self.protocol.learned(self)
