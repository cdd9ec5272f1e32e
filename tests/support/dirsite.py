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
from pathlib import Path
from urllib.parse import unquote

from tests.support.localsite import LocalServer, LocalSite, ProxyHandler
from tests.support.server import Hit, HitLog, resolve_target

__all__ = ["DirServer"]

Rewrite = Callable[[str, bytes], bytes]

_NOT_FOUND = b"<!DOCTYPE html><title>404 Not Found</title><h1>Not Found</h1>\n"


class _DirHTTPServer(LocalServer["DirServer"]):
    def handle_error(self, request: object, client_address: object) -> None:
        """Stay quiet when a crawl that has finished drops its idle connections."""
        exc = sys.exc_info()[1]
        if not isinstance(exc, (ConnectionResetError, BrokenPipeError)):
            super().handle_error(request, client_address)  # type: ignore[arg-type]


class _DirHandler(ProxyHandler):
    server_version = "IriDirSite/1.0"
    server: LocalServer[DirServer]

    def do_GET(self) -> None:  # noqa: N802
        owner = self.server.owner
        host_header = self.headers.get("Host")
        key = resolve_target(self.path, host_header)
        found = None
        if key is not None and key.host == owner.host:
            found = owner.load(unquote(key.path))
        status, (body, ctype) = (200, found) if found else (404, (_NOT_FOUND, "text/html"))
        owner.hits.record(Hit(self.command, self.path, host_header, key, status))
        self.respond(status, body, ctype)


class DirServer(LocalSite):
    """Serve *root* as ``http://<host>/`` on ``127.0.0.1`` (a proxy); a context manager."""

    handler = _DirHandler
    server_class = _DirHTTPServer
    thread_name = "iri-dir-site"

    def __init__(self, root: str | os.PathLike[str], host: str = "site.example",
                 port: int = 0, rewrite: Rewrite | None = None) -> None:
        super().__init__(port)
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            raise NotADirectoryError(str(root))
        self.host = host
        self.rewrite = rewrite
        self.hits = HitLog()
        self._files: dict[str, tuple[bytes, str] | None] = {}
        self._files_lock = threading.Lock()

    @property
    def start_url(self) -> str:
        """The site's root page."""
        return f"http://{self.host}/"

    def reset(self) -> None:
        """Clear the hit log."""
        self.hits.reset()

    def bind(self) -> DirServer:
        """Bind (see :meth:`LocalSite.bind`); each run reads its files afresh, once."""
        if self._httpd is None:
            with self._files_lock:
                self._files.clear()
        return super().bind()

    def load(self, path: str) -> tuple[bytes, str] | None:
        """``(body, content type)`` of the file *path* (decoded, from the root), or None."""
        with self._files_lock:
            if path in self._files:
                return self._files[path]
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
        with self._files_lock:
            self._files[path] = found
        return found
