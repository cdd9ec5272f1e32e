"""The scaffolding every local test site shares: a forward proxy on loopback, in a thread.

Each web of :mod:`tests.support` (the alias web of :mod:`~tests.support.server`, the
messy, generated, robots, directory and wire sites) is an HTTP/1.1 server on
``127.0.0.1`` at a free port that a crawl uses as its HTTP proxy, so that made-up
hosts need no DNS: requests arrive in absolute form (RFC 9112 section 3.2.2).  That
part is defined here once: :class:`LocalServer` (a threading server holding its
site object), :class:`ProxyHandler` (keep-alive, quiet, :meth:`~ProxyHandler.request_url`,
:meth:`~ProxyHandler.respond`), :class:`Log` (a thread-safe record of the requests
answered) and :class:`LocalSite` (the site object's base: binds, serves in a daemon
thread, a context manager).  What each site answers stays in its own module.  Like
the rest of :mod:`tests.support`, nothing here imports the IRI core.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, ClassVar, Generic, TypeVar

__all__ = ["LocalServer", "LocalSite", "Log", "ProxyHandler", "serve_in_thread", "stop_serving"]

T = TypeVar("T")
O = TypeVar("O", covariant=True)  # noqa: E741
_S = TypeVar("_S", bound="LocalSite")


class Log(Generic[T]):
    """Thread-safe record of what a site answered, in arrival order."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: list[T] = []

    def record(self, entry: T) -> None:
        """Append *entry*."""
        with self._lock:
            self._entries.append(entry)

    def reset(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._entries.clear()

    def entries(self) -> list[T]:
        """A copy of all entries, in order."""
        with self._lock:
            return list(self._entries)


class LocalServer(ThreadingHTTPServer, Generic[O]):
    """A threading HTTP server whose handlers reach their site object as ``server.owner``."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr: tuple[str, int], handler: type[BaseHTTPRequestHandler],
                 owner: O) -> None:
        self.owner = owner
        super().__init__(addr, handler)


class ProxyHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 with keep-alive (idle connections closed after 30 s), no access log."""

    protocol_version = "HTTP/1.1"
    timeout = 30
    server: LocalServer[Any]

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        """Stay quiet."""

    def request_url(self) -> str:
        """The URL requested: the absolute-form target as sent, or ``http://`` + the
        ``Host`` header + the origin-form target."""
        target = self.path
        if target[:7].lower() == "http://":
            return target
        return f"http://{self.headers.get('Host') or ''}{target}"

    def respond(self, status: int, body: bytes, ctype: str,
                headers: Iterable[tuple[str, str]] = (), send_body: bool = True) -> None:
        """Send *status*, ``Content-Type``, ``Content-Length``, *headers*, then *body*
        (not for ``HEAD``: *send_body* false)."""
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        if send_body:
            self.wfile.write(body)


def serve_in_thread(httpd: ThreadingHTTPServer, name: str) -> threading.Thread:
    """Serve *httpd* in a started daemon thread (polling for shutdown every 0.1 s)."""
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.1},
                              name=name, daemon=True)
    thread.start()
    return thread


def stop_serving(httpd: ThreadingHTTPServer, thread: threading.Thread | None) -> None:
    """Stop :func:`serve_in_thread`'s loop, close the socket, wait for the thread (5 s)."""
    httpd.shutdown()
    httpd.server_close()
    if thread is not None:
        thread.join(timeout=5)


class LocalSite:
    """A site object served by :attr:`handler` on ``127.0.0.1`` in a daemon thread.

    ``with site:`` binds (port 0: a free one), serves, and stops on exit; a
    subclass sets :attr:`handler` (and :attr:`thread_name`) and calls
    ``super().__init__(port)``.
    """

    handler: ClassVar[type[ProxyHandler]]
    server_class: ClassVar[type[LocalServer[Any]]] = LocalServer
    thread_name = "iri-local-site"

    def __init__(self, port: int = 0, host: str = "127.0.0.1") -> None:
        self._addr = (host, port)
        self._httpd: LocalServer[Any] | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The port actually bound (valid once started)."""
        if self._httpd is None:
            raise RuntimeError(f"{type(self).__name__} is not running (use it as a context manager)")
        return int(self._httpd.server_address[1])

    @property
    def proxy_url(self) -> str:
        """``http://127.0.0.1:PORT``, to use as an HTTP proxy."""
        return f"http://127.0.0.1:{self.port}"

    def bind(self: _S) -> _S:
        """Bind the listening socket (so :attr:`port` is known); returns self."""
        if self._httpd is None:
            self._httpd = self.server_class(self._addr, self.handler, self)
        return self

    def start(self: _S) -> _S:
        """Bind and serve in a daemon thread; returns self."""
        if self._thread is None:
            self.bind()
            assert self._httpd is not None
            self._thread = serve_in_thread(self._httpd, self.thread_name)
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._httpd is not None:
            stop_serving(self._httpd, self._thread)
            self._httpd = None
            self._thread = None

    def __enter__(self: _S) -> _S:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
