"""robots.txt obeyed before the first request of every origin, for every spelling of its host.

:class:`IRIRobotsTxtMiddleware` takes the place of Scrapy's
``RobotsTxtMiddleware`` (downloader middleware priority 100; the add-on installs
it only when ``ROBOTSTXT_OBEY`` is true).  It does what Scrapy's does --
``ROBOTSTXT_PARSER``, ``ROBOTSTXT_USER_AGENT``, ``meta["dont_obey_robotstxt"]``,
``data:``/``file:`` URLs skipped, the stats ``robotstxt/request_count``,
``robotstxt/response_count``, ``robotstxt/response_status_count/<status>``,
``robotstxt/exception_count/<type>`` and ``robotstxt/forbidden``, the
``robots_parsed`` signal where Scrapy has it (2.19+), :class:`IgnoreRequest`
for a disallowed URL, a robots.txt that cannot be downloaded or parsed read as
"allow all" -- with two differences:

* **Every request waits for the parser.**  Scrapy 2.17-2.19 keeps one
  ``Deferred`` per netloc while robots.txt downloads, and every other request
  of that netloc does ``await maybe_deferred_to_future(deferred)``: each await
  adds a callback to the same ``Deferred`` (``Deferred.asFuture`` under asyncio,
  ``inlineCallbacks`` otherwise) that returns ``None``, so the first waiter
  gets the parser and every later waiter gets ``None`` -- "no robots.txt" --
  and is downloaded unchecked, disallowed or not.  The bug came with the
  ``async def process_request`` refactor (scrapy/scrapy#6802, whose author
  noted the waiting branch is not covered by tests; before it each waiter had a
  Deferred of its own); the same symptom was reported long ago as
  scrapy/scrapy#2014.  No upstream issue reports the regression yet: an upstream fix
  (a Deferred per waiter, as here) retires this middleware's first reason.
  Here each waiting request has a Deferred of its own, fired with the parser.
* **One robots.txt per origin** (RFC 9309 section 2.3: the rules of
  ``/robots.txt`` apply to the scheme, host and port it was fetched from),
  keyed by the canonical origin: scheme, host as RFC 3987 section 5.3.3 maps it
  (%-decoded, lowercased, UTS 46 A-labels) and effective port (the scheme's
  default when absent, RFC 3986 section 6.2.3).  ``Example.COM``,
  ``example.com:80`` and ``EXAMPLE.com`` share one fetch, as do ``bücher.test``
  and ``xn--bcher-kva.test``; userinfo is not part of the origin.  robots.txt
  is requested at that canonical origin (``http://example.com/robots.txt``).

Only Scrapy's public API is used (``ExecutionEngine.download_async``, the
``RobotParser.from_crawler`` interface of ``ROBOTSTXT_PARSER``, signals).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from scrapy import Request, signals
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.http import Response
from scrapy.http.request import NO_CALLBACK
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.defer import Deferred

from iri_scrapy.core.errors import IRIError
from iri_scrapy.core.hosts import host_to_ascii
from iri_scrapy.core.schemes import default_port
from iri_scrapy.plugin import compat  # noqa: F401 - checks the installed Scrapy first
from iri_scrapy.plugin.config import load_object

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.robotstxt import RobotParser
    from scrapy.statscollectors import StatsCollector
    from typing_extensions import Self

__all__ = ["IRIRobotsTxtMiddleware"]

logger = logging.getLogger(__name__)

#: Scrapy 2.19+ sends it when a robots.txt has been parsed (absent in 2.17).
_ROBOTS_PARSED: Any = getattr(signals, "robots_parsed", None)


def robots_origin(request: Request) -> tuple[str, str]:
    """``(key, robots.txt URL)`` of *request*'s canonical origin (RFC 9309 section 2.3).

    The key is ``scheme://host:port`` with the host %-decoded, lowercased and
    in UTS 46 A-labels (RFC 3987 section 5.3.3) and the port made explicit
    (RFC 3986 section 6.2.3); the robots.txt URL omits a default port.  A URL
    whose host or port cannot be read is keyed by its scheme and netloc as
    written (Scrapy's key).
    """
    parts = urlsplit(request.url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
        host = parts.hostname
    except ValueError:
        host = None
        port = None
    if not host:
        return f"{scheme}://{parts.netloc}", f"{scheme}://{parts.netloc}/robots.txt"
    ipv6 = ":" in host
    if not ipv6:
        try:
            host = host_to_ascii(unquote(host, errors="strict") if "%" in host else host)
        except (IRIError, UnicodeError):
            host = host.lower()
    shown = f"[{host}]" if ipv6 else host
    default = default_port(scheme)
    effective = str(port) if port is not None else default
    key = f"{scheme}://{shown}:{effective}" if effective else f"{scheme}://{shown}"
    netloc = shown if effective in (None, default) else f"{shown}:{effective}"
    return key, f"{scheme}://{netloc}/robots.txt"


class IRIRobotsTxtMiddleware:
    """Downloader middleware: Scrapy's ``RobotsTxtMiddleware``, every waiter checked, one
    robots.txt per canonical origin (see the module docstring)."""

    DOWNLOAD_PRIORITY: int = 1000

    def __init__(self, crawler: Crawler) -> None:
        if not crawler.settings.getbool("ROBOTSTXT_OBEY"):
            raise NotConfigured
        self.crawler = crawler
        self._default_useragent: str = crawler.settings["USER_AGENT"]
        self._robotstxt_useragent: str | None = crawler.settings["ROBOTSTXT_USER_AGENT"]
        assert crawler.stats is not None
        self._stats: StatsCollector = crawler.stats
        self._parserimpl: Any = load_object(crawler.settings.get("ROBOTSTXT_PARSER"))
        # the parser's dependencies are checked now, as Scrapy does
        self._parserimpl.from_crawler(crawler, b"")
        #: canonical origin -> its parser (None: robots.txt could not be had: allow all)
        self._parsers: dict[str, RobotParser | None] = {}
        #: canonical origin whose robots.txt is on its way -> one Deferred per waiting request
        self._waiting: dict[str, list[Deferred[RobotParser | None]]] = {}

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        """Build for *crawler* (``NotConfigured`` unless ``ROBOTSTXT_OBEY``)."""
        return cls(crawler)

    async def process_request(self, request: Request) -> None:
        """Wait for the robots.txt of *request*'s origin, then drop it if disallowed."""
        if request.meta.get("dont_obey_robotstxt"):
            return
        if request.url.startswith(("data:", "file:")):
            return
        rp = await self.robot_parser(request)
        self._check(rp, request)

    async def robot_parser(self, request: Request) -> RobotParser | None:
        """The parser of *request*'s origin, once parsed (None: allow all)."""
        key, robots_url = robots_origin(request)
        if key in self._parsers:
            return self._parsers[key]
        waiting = self._waiting.get(key)
        if waiting is not None:
            mine: Deferred[RobotParser | None] = Deferred()
            waiting.append(mine)
            return await maybe_deferred_to_future(mine)
        return await self._fetch(key, robots_url, request)

    async def _fetch(self, key: str, robots_url: str, request: Request) -> RobotParser | None:
        """Download and parse *robots_url*; release every request waiting on *key*."""
        self._waiting[key] = []
        robots_request = Request(
            robots_url,
            priority=self.DOWNLOAD_PRIORITY,
            meta={"dont_obey_robotstxt": True},
            callback=NO_CALLBACK,
        )
        rp: RobotParser | None = None
        try:
            try:
                engine = self.crawler.engine
                assert engine is not None
                response = await engine.download_async(robots_request)
                rp = await self._parse(response, request)
            except Exception as exc:  # Scrapy's rule: no robots.txt, allow all
                if not isinstance(exc, IgnoreRequest):
                    logger.error(
                        "Error downloading %(request)s: %(f_exception)s",
                        {"request": robots_request, "f_exception": exc},
                        exc_info=True,
                        extra={"spider": self.crawler.spider},
                    )
                    self._stats.inc_value(f"robotstxt/exception_count/{type(exc)}")
                rp = None
        except BaseException:
            # cancelled (the engine is stopping): nobody waiting is let through
            # unchecked, and the next request of the origin asks again
            for deferred in self._waiting.pop(key, []):
                if not deferred.called:
                    deferred.errback(IgnoreRequest("robots.txt download was cancelled"))
            raise
        self._parsers[key] = rp
        for deferred in self._waiting.pop(key, []):
            if not deferred.called:
                deferred.callback(rp)
        self._stats.inc_value("robotstxt/request_count")
        return rp

    async def _parse(self, response: Response, request: Request) -> RobotParser:
        self._stats.inc_value("robotstxt/response_count")
        self._stats.inc_value(f"robotstxt/response_status_count/{response.status}")
        rp: RobotParser = self._parserimpl.from_crawler(self.crawler, response.body)
        if _ROBOTS_PARSED is not None:
            await self.crawler.signals.send_catch_log_async(
                signal=_ROBOTS_PARSED, robotparser=rp, request=request
            )
        return rp

    def _check(self, rp: RobotParser | None, request: Request) -> None:
        if rp is None:
            return
        useragent: str | bytes | None = self._robotstxt_useragent
        if not useragent:
            useragent = request.headers.get(b"User-Agent", self._default_useragent)
            assert useragent is not None
        if not rp.allowed(request.url, useragent):
            logger.debug(
                "Forbidden by robots.txt: %(request)s",
                {"request": request},
                extra={"spider": self.crawler.spider},
            )
            self._stats.inc_value("robotstxt/forbidden")
            raise IgnoreRequest("Forbidden by robots.txt")
