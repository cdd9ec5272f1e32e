"""``RedisIRIScheduler``: a crash-tolerant shared frontier for a fleet of crawlers.

``SCHEDULER = "iri_scrapy.RedisIRIScheduler"`` (the add-on selects it, with
:class:`~iri_scrapy.RedisIRIDupeFilter`, when ``IRI_REDIS_URL`` is set).  Every
worker takes requests from one queue in Redis; a request handed out is *leased*
to one worker (``IRI_REDIS_LEASE_SECONDS``) and removed only when it is answered,
as for :class:`~iri_scrapy.frontier.jobdir.IRIFrontierScheduler`.  A dead
worker's leases go back to the queue, a request being deduplicated is first
written as the worker's *intent*, each change is one Lua script, and a Redis
that lost or evicted the crawl's keys, or went back to older data (the crawl's
clock behind what a worker saw), stops the crawl (``iri_frontier_lost``)
instead of losing pages silently.  At ``IRI_LEVEL = "protocol"`` the rules the
fleet learned and the requests they skipped are kept beside the queue
(:mod:`iri_scrapy.protocol.redis_store`).  :class:`RedisIRIScheduler` is
:class:`~.scheduler.FrontierScheduler` over the Redis back-end
(:mod:`.redis_backend`, opened by :mod:`.redis_start`); this module reads its
settings.

Design: docs/redis-fleet.md (keys, scripts, intents); Redis configuration and
loss detection: docs/redis.md; stored records: docs/frontier.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from iri_scrapy.frontier.middlewares import FrontierSpiderMiddleware
from iri_scrapy.frontier.options import max_inflight_setting
from iri_scrapy.frontier.redis_backend import (
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_KEY,
    DEFAULT_LEASE_SECONDS,
    RedisBackend,
)
from iri_scrapy.frontier.redis_client import (
    DEFAULT_RETRY_SECONDS,
    DEFAULT_SOCKET_TIMEOUT,
    client_kwargs_from_settings,
)
from iri_scrapy.frontier.scheduler import FrontierScheduler
from iri_scrapy.plugin import compat  # noqa: F401 - checks the installed Scrapy first
from iri_scrapy.plugin.config import load_object, setting

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.dupefilters import BaseDupeFilter
    from scrapy.statscollectors import StatsCollector
    from typing_extensions import Self

__all__ = ["RedisSchedulerSpiderMiddleware"]


def _positive_seconds(settings: Any, name: str, default: float, *, zero_ok: bool) -> float:
    value = settings.get(name)
    if value is None:
        return default
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = -1.0
    if isinstance(value, bool) or number < 0 or (number == 0 and not zero_ok):
        raise ValueError(f"{name} must be a number of seconds > 0, got {value!r}")
    return number


class RedisIRIScheduler(FrontierScheduler):
    """A Scrapy scheduler whose queue is shared through Redis, with leases (module doc).

    Built by Scrapy through :meth:`from_crawler`.  The dupefilter is
    ``DUPEFILTER_CLASS`` (the add-on: :class:`~iri_scrapy.RedisIRIDupeFilter`);
    with one whose seen-set is not in Redis the fleet does not share it (warned).
    Its state for operators and tests (worker name, epoch, counters, keys,
    ``heartbeat()``, ``abandon()``) is the back-end's: :attr:`backend`.
    """

    backend: RedisBackend

    def __init__(
        self,
        dupefilter: BaseDupeFilter,
        *,
        crawler: Crawler | None = None,
        stats: StatsCollector | None = None,
        redis_url: str = "redis://localhost:6379/0",
        key: str = DEFAULT_KEY,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        retry_seconds: float = DEFAULT_RETRY_SECONDS,
        socket_timeout: float = DEFAULT_SOCKET_TIMEOUT,
        redis_params: dict[str, Any] | None = None,
        max_inflight: int = 16,
        flush_on_start: bool = False,
        stall_seconds: float = 360.0,
        cluster: bool = False,
        project: str = "scrapybot",
    ) -> None:
        super().__init__(dupefilter, stats=stats, crawler=crawler,
                         max_inflight=max_inflight, stall_seconds=stall_seconds)
        self.backend = RedisBackend(
            self, redis_url=redis_url, key=key, lease_seconds=lease_seconds,
            idle_timeout=idle_timeout, retry_seconds=retry_seconds,
            socket_timeout=socket_timeout, redis_params=redis_params,
            flush_on_start=flush_on_start, cluster=cluster, project=project)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        kwargs: dict[str, Any] = dict(  # settings checked before the dupefilter is built
            crawler=crawler,
            stats=crawler.stats,
            **client_kwargs_from_settings(settings),
            key=str(setting(settings, "IRI_REDIS_SCHEDULER_KEY") or DEFAULT_KEY),
            lease_seconds=_positive_seconds(
                settings, "IRI_REDIS_LEASE_SECONDS", DEFAULT_LEASE_SECONDS, zero_ok=False),
            idle_timeout=_positive_seconds(
                settings, "IRI_REDIS_IDLE_TIMEOUT", DEFAULT_IDLE_TIMEOUT, zero_ok=True),
            max_inflight=max_inflight_setting(settings),
            flush_on_start=setting(settings, "IRI_REDIS_FLUSH_ON_START"),
            stall_seconds=max(60.0, 2 * settings.getfloat("DOWNLOAD_TIMEOUT", 180)),
            project=str(settings.get("BOT_NAME") or "scrapybot"),
        )
        df_cls = load_object(settings["DUPEFILTER_CLASS"])
        from_crawler = getattr(df_cls, "from_crawler", None)
        dupefilter = from_crawler(crawler) if from_crawler is not None else df_cls()
        return cls(dupefilter, **kwargs)


class RedisSchedulerSpiderMiddleware(FrontierSpiderMiddleware):
    """Outermost spider middleware for :class:`RedisIRIScheduler` (the add-on adds it).

    The frontier's middleware: it schedules each request of a callback's output
    itself (``crawler.engine.crawl``) as soon as it comes out of the other
    middlewares, so the lease is acknowledged (when the output ends) only after
    every request in it is in Redis (see :class:`FrontierSpiderMiddleware`).
    """
