"""The protocol level as the add-on hands it to a crawl: the one seam.

The add-on (``iri_scrapy/addon.py``) is the one module outside
``iri_scrapy/protocol/`` that imports it, and only this module.  When the folder
is installed, the add-on puts a :class:`ProtocolLevel` into the crawl's
:class:`~iri_scrapy.plugin.context.CrawlContext` (``context.protocol``) and
lists :attr:`ProtocolLevel.middleware`; the plugin's and the frontier's
components reach the rules (RFC 3987 section 5.3.4), the learner and the stores
through it, and import nothing of the folder.  Without the folder,
``IRI_LEVEL = "protocol"`` is refused at start (``CrawlContext.rules``) and the
other levels run as they do with it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from iri_scrapy.protocol.jobdir_store import ProtocolStore
from iri_scrapy.protocol.learned import Learned, learned_of
from iri_scrapy.protocol.middleware import IRIProtocolMiddleware
from iri_scrapy.protocol.redis_store import RedisProtocolStore
from iri_scrapy.protocol.rules import ProtocolRules

if TYPE_CHECKING:
    import os
    from collections.abc import Callable

    from scrapy import Request

    from iri_scrapy.frontier.codec import RequestCodec
    from iri_scrapy.frontier.sqlite_store import FrontierStore
    from iri_scrapy.plugin.config import IRIConfig
    from iri_scrapy.plugin.context import CrawlContext


def read_rules(path: str) -> ProtocolRules | None:
    """The rules in the JSON file *path* (None if there is no such file yet);
    ValueError if it is not a rules document (read as data, nothing run)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    return ProtocolRules.from_data(json.loads(text))


class ProtocolLevel:
    """What the crawl's components call at level protocol (see the module doc)."""

    #: The downloader middleware the add-on lists (priority 650).
    middleware = IRIProtocolMiddleware

    @staticmethod
    def check(config: IRIConfig) -> None:
        """Refuse an unusable ``IRI_PROTOCOL_RULES_FILE`` (a ValueError naming it)."""
        path = config.protocol_rules_file
        if path is not None:
            try:
                read_rules(path)
            except (OSError, ValueError) as exc:
                raise ValueError(f"IRI_PROTOCOL_RULES_FILE: {path}: {exc}") from None

    @staticmethod
    def rules(config: IRIConfig) -> ProtocolRules:
        """The crawl's rules: empty, or loaded from ``IRI_PROTOCOL_RULES_FILE``."""
        rules = ProtocolRules(min_evidence=config.protocol_min_evidence,
                              sample_every=config.protocol_sample_every)
        if config.protocol_rules_file is not None:
            try:
                loaded = read_rules(config.protocol_rules_file)
            except (OSError, ValueError):
                loaded = None  # refused at start by check()
            if loaded is not None:
                rules.load(loaded.to_data())
        return rules

    @staticmethod
    def learned(context: CrawlContext) -> Learned | None:
        """The crawl's one :class:`Learned` of its rules (kept in *context*)."""
        return learned_of(context)

    @staticmethod
    def jobdir_store(jobdir: str | os.PathLike[str], codec: RequestCodec, learned: Learned,
                     store: Callable[[], FrontierStore | None],
                     seen: Callable[[Request], bool] | None = None) -> ProtocolStore:
        """The JOBDIR frontier's rules file, and what they hold back in its *store*."""
        return ProtocolStore(jobdir, codec, learned, store, seen=seen)

    @staticmethod
    def redis_store(**kwargs: Any) -> RedisProtocolStore:
        """The Redis fleet's keys of the rules and of what they skipped."""
        return RedisProtocolStore(**kwargs)
