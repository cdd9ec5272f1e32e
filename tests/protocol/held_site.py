"""A site where a rule learned correctly on one path is wrong on another.

``held.test`` (through a forward proxy on ``127.0.0.1``, as the other crawl
sites): ``/a/N?ref=z`` serves the very page of ``/a/N`` (the server ignores
``ref`` there), so a crawl at level ``protocol`` learns ``drop-param:ref`` for
the host from content evidence; under ``/b/`` the same parameter names another
resource (``/b/N?ref=z`` is the item's ``z`` edition, linked from ``/c/N``), so every
request that rule skips there is a page lost unless it is given back.  99
resources; the server counts the 2xx answers per resource, and each page's
title names its resource (the items of a feed are counted by it).
"""

from __future__ import annotations

import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

HOST = "held.test"
GOOD = 8  # /a/1../a/8: ?ref= is the same page
WRONG = 29  # /b/ and /c/: ?ref=z is another resource


def resources() -> frozenset[str]:
    """Every resource of the site (what a crawl from ``/`` must fetch)."""
    out = {"/", "/a/", "/b/", "/c/"}
    out.update(f"/a/{n}" for n in range(1, GOOD + 1))
    for n in range(1, WRONG + 1):
        out.update((f"/b/{n}", f"/b/{n}?ref=z", f"/c/{n}"))
    return frozenset(out)


def _page(resource: str, text: str, links: list[str]) -> bytes:
    anchors = "".join(f'<li><a href="{href}">{href}</a></li>' for href in links)
    return (f"<!DOCTYPE html><html><head><title>{resource}</title></head><body>"
            f"<h1>{resource}</h1><p>{text}</p><ul>{anchors}</ul></body></html>").encode()


def answer(path: str, query: str) -> tuple[str, bytes] | None:
    """``(resource, body)`` for a request, or None (404).

    The sections are fetched in turn (in Scrapy's LIFO order the link listed
    first is fetched last): ``/a/`` teaches the rule, the items of ``/b/`` are
    fetched, then the pages of ``/c/`` link the ``?ref=z`` editions of ``/b/``,
    which the rule merges with the items fetched before."""
    sections = {"/": ["/a/"], "/a/": ["/b/", *(f"/a/{n}" for n in range(1, GOOD + 1))],
                "/b/": ["/c/", *(f"/b/{n}" for n in range(1, WRONG + 1))],
                "/c/": [f"/c/{n}" for n in range(1, WRONG + 1)]}
    if path in sections and not query:
        return path, _page(path, f"Section {path}.", sections[path])
    parts = path.strip("/").split("/")
    if len(parts) != 2 or parts[0] not in ("a", "b", "c") or not parts[1].isdigit():
        return None
    section, n = parts[0], int(parts[1])
    if not 1 <= n <= (GOOD if section == "a" else WRONG):
        return None
    base = f"/{section}/{n}"
    if section == "a" and query in ("", "ref=z"):  # the server ignores ref here
        return base, _page(base, f"Item {n} of section a.", [f"{base}?ref=z"])
    if query == "":
        links = [f"/b/{n}?ref=z"] if section == "c" else []
        return base, _page(base, f"Item {n} of section {section}.", links)
    if section == "b" and query == "ref=z":
        resource = f"{base}?ref=z"
        return resource, _page(resource, f"Item {n} of section b, edition z, "
                                         "with its own text.", [])
    return None


class HeldSite:
    """The site and its counts, served in a daemon thread; a context manager."""

    def __init__(self) -> None:
        self.ok: Counter[str] = Counter()
        self.hits = 0
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                """Stay quiet."""

            def do_GET(self) -> None:  # noqa: N802
                url = urlsplit(self.path)
                found = answer(url.path, url.query) if url.hostname == HOST else None
                if url.path == "/robots.txt":
                    found = None
                with owner._lock:
                    owner.hits += 1
                    if found is not None:
                        owner.ok[found[0]] += 1
                body = found[1] if found is not None else b"not found"
                self.send_response(200 if found is not None else 404)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def proxy_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    start_urls = [f"http://{HOST}/"]

    def missed(self) -> set[str]:
        """The resources never served with 200."""
        with self._lock:
            return set(resources()) - set(self.ok)

    def served(self, prefix: str) -> int:
        """How many distinct resources under *prefix* were served."""
        with self._lock:
            return sum(1 for r in self.ok if r.startswith(prefix))

    def __enter__(self) -> HeldSite:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
