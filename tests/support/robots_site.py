"""A local forward proxy whose hosts all serve a disallowing robots.txt, slowly.

Every host answers ``/robots.txt`` with ``User-agent: *`` / ``Disallow: /private/``
after *robots_delay* seconds (so that the crawl's other requests are waiting on it
when it arrives), every other path with a small HTML page (no links) -- except
hosts listed in *broken*, whose robots.txt is answered with a line that is not
HTTP, and the connection closed (a download error: Scrapy then allows everything;
a connection closed without an answer would be retried by Twisted's pool).  Each hit is counted per
``(A-label host, path)``, hosts resolved as :func:`tests.support.server.host_to_alabel`
does (so ``Example.COM``, ``example.com:80``, ``bücher.test`` and
``xn--bcher-kva.test`` count as their one host).  Listens on 127.0.0.1 only.
"""

from __future__ import annotations

import time
from collections import Counter

from tests.support.localsite import LocalServer, LocalSite, Log, ProxyHandler
from tests.support.server import host_to_alabel

__all__ = ["ROBOTS_TXT", "RobotsServer"]

ROBOTS_TXT = b"User-agent: *\nDisallow: /private/\n"


class _Handler(ProxyHandler):
    server: LocalServer[RobotsServer]

    def do_GET(self) -> None:  # noqa: N802
        owner = self.server.owner
        rest = self.request_url()[len("http://"):]
        cut = rest.find("/")
        authority, path = (rest, "/") if cut < 0 else (rest[:cut], rest[cut:])
        host = host_to_alabel(authority) or authority
        path = path.split("?", 1)[0]
        owner._log.record((host, path))
        if path == "/robots.txt":
            if host in owner.broken:  # not HTTP: a download error, which no client retries
                self.close_connection = True
                self.wfile.write(b"NOT HTTP\r\n\r\n")
                return
            time.sleep(owner.robots_delay)  # robots.txt is slow: requests pile up behind it
            body, ctype = ROBOTS_TXT, "text/plain"
        else:
            body = f"<!DOCTYPE html><title>{host}{path}</title>\n".encode()
            ctype = "text/html; charset=utf-8"
        self.respond(200, body, ctype)


class RobotsServer(LocalSite):
    """The proxy on ``127.0.0.1``, in a daemon thread; a context manager."""

    handler = _Handler
    thread_name = "iri-robots-site"

    def __init__(self, robots_delay: float = 1.0, broken: frozenset[str] = frozenset()) -> None:
        super().__init__()
        self.robots_delay = robots_delay
        self.broken = broken
        self._log: Log[tuple[str, str]] = Log()

    def hits(self) -> Counter[tuple[str, str]]:
        """A copy of the hit counts per ``(host, path)``."""
        return Counter(self._log.entries())

    def reset(self) -> None:
        self._log.reset()
