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

import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType

from tests.support.server import host_to_alabel, serve_in_thread, stop_serving

__all__ = ["ROBOTS_TXT", "RobotsServer"]

ROBOTS_TXT = b"User-agent: *\nDisallow: /private/\n"


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, owner: RobotsServer) -> None:
        self.owner = owner
        super().__init__(("127.0.0.1", 0), _Handler)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 30
    server: _Server

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        """Stay quiet."""

    def do_GET(self) -> None:  # noqa: N802
        owner = self.server.owner
        target = self.path
        if target.startswith("http://"):
            rest = target[len("http://"):]
            cut = rest.find("/")
            authority, path = (rest, "/") if cut < 0 else (rest[:cut], rest[cut:])
        else:
            authority, path = self.headers.get("Host") or "", target
        host = host_to_alabel(authority) or authority
        path = path.split("?", 1)[0]
        owner.record(host, path)
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
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class RobotsServer:
    """The proxy on ``127.0.0.1``, in a daemon thread; a context manager."""

    def __init__(self, robots_delay: float = 1.0, broken: frozenset[str] = frozenset()) -> None:
        self.robots_delay = robots_delay
        self.broken = broken
        self._lock = threading.Lock()
        self._hits: Counter[tuple[str, str]] = Counter()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    def record(self, host: str, path: str) -> None:
        with self._lock:
            self._hits[(host, path)] += 1

    def hits(self) -> Counter[tuple[str, str]]:
        """A copy of the hit counts per ``(host, path)``."""
        with self._lock:
            return Counter(self._hits)

    def reset(self) -> None:
        with self._lock:
            self._hits.clear()

    @property
    def proxy_url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def __enter__(self) -> RobotsServer:
        self._httpd = _Server(self)
        self._thread = serve_in_thread(self._httpd, "iri-robots-site")
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._httpd is not None:
            stop_serving(self._httpd, self._thread)
            self._httpd = None
