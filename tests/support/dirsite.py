"""A static file server for a local HTML tree, as a forward proxy for one host.

Used by ``benchmarks/bench_crawl.py --site DIR`` to crawl a real site (e.g.
Debian's ``python3-doc``, ``/usr/share/doc/python3/html``): every request
whose host is *host* (absolute-form, through the proxy, or origin-form with
that ``Host``) is served from the file its %-decoded path names under *root*
(a directory: its ``index.html``); anything else is a 404.  Files are read
once and kept in memory, so the server costs the crawl as little as possible.
*rewrite*, if given, turns each HTML file's bytes into what is served (called once
per file with its path), e.g. to give every link a session id the server ignores
(``benchmarks/bench_sid.py``).
Hits are recorded in a :class:`~tests.support.server.HitLog`.

Like the rest of :mod:`tests.support`, nothing here imports the IRI core.
"""

from __future__ import annotations

import mimetypes
import os
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from urllib.parse import unquote

from tests.support.server import (
    Hit,
    HitLog,
    resolve_target,
    serve_in_thread,
    stop_serving,
)

__all__ = ["DirServer"]

Rewrite = Callable[[str, bytes], bytes]

_NOT_FOUND = b"<!DOCTYPE html><title>404 Not Found</title><h1>Not Found</h1>\n"


class _DirHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr: tuple[str, int], root: Path, host: str, hits: HitLog,
                 rewrite: Rewrite | None = None) -> None:
        self.root = root
        self.rewrite = rewrite
        self.host = host
        self.hits = hits
        self.files: dict[str, tuple[bytes, str] | None] = {}
        self.files_lock = threading.Lock()
        super().__init__(addr, _DirHandler)

    def handle_error(self, request: object, client_address: object) -> None:
        """Stay quiet when a crawl that has finished drops its idle connections."""
        exc = sys.exc_info()[1]
        if not isinstance(exc, (ConnectionResetError, BrokenPipeError)):
            super().handle_error(request, client_address)  # type: ignore[arg-type]

    def load(self, path: str) -> tuple[bytes, str] | None:
        """``(body, content type)`` of the file *path* (decoded, from the root), or None."""
        with self.files_lock:
            if path in self.files:
                return self.files[path]
        target = (self.root / path.lstrip("/")).resolve()
        found: tuple[bytes, str] | None = None
        if target == self.root or self.root in target.parents:
            if target.is_dir():
                target = target / "index.html"
            if target.is_file():
                ctype = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
                if ctype.startswith("text/"):
                    ctype += "; charset=utf-8"
                body = target.read_bytes()
                if self.rewrite is not None and ctype.startswith("text/html"):
                    body = self.rewrite(path, body)
                found = (body, ctype)
        with self.files_lock:
            self.files[path] = found
        return found


class _DirHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "IriDirSite/1.0"
    timeout = 30
    server: _DirHTTPServer

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        """Stay quiet."""

    def do_GET(self) -> None:  # noqa: N802
        host_header = self.headers.get("Host")
        key = resolve_target(self.path, host_header)
        found = None
        if key is not None and key.host == self.server.host:
            found = self.server.load(unquote(key.path))
        status, (body, ctype) = (200, found) if found else (404, (_NOT_FOUND, "text/html"))
        self.server.hits.record(Hit(self.command, self.path, host_header, key, status))
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class DirServer:
    """Serve *root* as ``http://<host>/`` on ``127.0.0.1`` (a proxy); a context manager."""

    def __init__(self, root: str | os.PathLike[str], host: str = "site.example",
                 port: int = 0, rewrite: Rewrite | None = None) -> None:
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            raise NotADirectoryError(str(root))
        self.host = host
        self.rewrite = rewrite
        self.hits = HitLog()
        self._addr = ("127.0.0.1", port)
        self._httpd: _DirHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def start_url(self) -> str:
        """The site's root page."""
        return f"http://{self.host}/"

    @property
    def proxy_url(self) -> str:
        """``http://127.0.0.1:PORT``, to use as an HTTP proxy."""
        if self._httpd is None:
            raise RuntimeError("server not started")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def reset(self) -> None:
        """Clear the hit log."""
        self.hits.reset()

    def __enter__(self) -> DirServer:
        self._httpd = _DirHTTPServer(self._addr, self.root, self.host, self.hits, self.rewrite)
        self._thread = serve_in_thread(self._httpd, "iri-dir-site")
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._httpd is not None:
            stop_serving(self._httpd, self._thread)
            self._httpd = None
            self._thread = None
