"""A small web application with the aliases real ones make, honest or lying.

``app.test`` (through a forward proxy on ``127.0.0.1``, as the other crawl
sites) serves three families of aliases, each linked in pairs (or triples) so a
crawl at level ``protocol`` can learn one rule per family from equal content:

* ``/search?q=N&cols=a,b`` also as ``/search?cols=a%2Cb&q=N&x=`` (another
  order, ``%2C`` for ``,``, an empty parameter): ``query-form`` on ``/search``;
* ``/items/N`` also as ``/items/N?view=full`` (the default view spelled out),
  while ``?view=short`` is another page: ``drop-pair:view=full``;
* ``/docs?page=N`` also as ``/docs/Start?page=N`` (a section served at its
  default child): ``alias-path:/docs/Start>/docs``.

With ``lie=True`` the aliases of the items numbered above :data:`HONEST` are
other resources (the empty ``x=`` shows an extended list, ``view=full`` adds
the comments, ``/docs/Start`` its own page): a rule learned on the first items
is wrong on the rest, and every alias it skipped must be given back.  The server
counts the 2xx answers per resource; each page's title names its resource.
With ``gzip=True`` it compresses every page for a client that accepts it, as most
real servers do, and stamps each answer with the time it was served in milliseconds
(so two answers of one page differ on the wire but not in what a reader sees beside
a clock): the evidence must read what the spider gets, not the wire bytes.
Lists link the items last first, each item's own spelling after its aliases:
in Scrapy's LIFO order the first items are fetched first, the item before its
aliases (a rule learned on them is checked by the samples of what it merges).
"""

from __future__ import annotations

import gzip as gzip_codec
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

HOST = "app.test"
N = 14  # items per family
HONEST = 4  # with lie=True, the items above this one have aliases of their own


def _page(resource: str, text: str, links: tuple[str, ...] | list[str] = ()) -> tuple[str, bytes]:
    anchors = "".join(f'<li><a href="{href}">{href}</a></li>' for href in links)
    body = (f"<!DOCTYPE html><html><head><title>{resource}</title></head><body>"
            f"<h1>{resource}</h1><p>{text}</p><ul>{anchors}</ul></body></html>")
    return resource, body.encode()


def resources(lie: bool) -> frozenset[str]:
    """Every resource of the site (what a crawl from ``/`` must fetch)."""
    out = {"/", "/search/", "/items/", "/docs"}
    for n in range(1, N + 1):
        out.update((f"/search?q={n}&cols=a,b", f"/items/{n}", f"/items/{n}?view=short",
                    f"/docs?page={n}"))
        if lie and n > HONEST:
            out.update((f"/search?cols=a%2Cb&q={n}&x=", f"/items/{n}?view=full",
                        f"/docs/Start?page={n}"))
    return frozenset(out)


def _pairs(*spellings: str, alias_first: bool) -> tuple[str, ...]:
    """The links to one item: its own spelling (the last) after its aliases, or
    before them with *alias_first* (then in LIFO order the aliases come first)."""
    return spellings[::-1] if alias_first else spellings


def answer(path: str, query: str, lie: bool,
           alias_first: bool = False) -> tuple[str, bytes] | None:
    """``(resource, body)`` for a request, or None (404)."""
    if path == "/" and not query:
        return _page("/", "Home.", ["/docs", "/items/", "/search/"])
    if path == "/search/" and not query:
        links = [u for n in range(N, 0, -1)
                 for u in _pairs(f"/search?cols=a%2Cb&q={n}&x=", f"/search?q={n}&cols=a,b",
                                 alias_first=alias_first)]
        return _page("/search/", "Searches.", links)
    if path == "/items/" and not query:
        links = [u for n in range(N, 0, -1)
                 for u in _pairs(f"/items/{n}?view=full", f"/items/{n}?view=short",
                                 f"/items/{n}", alias_first=alias_first)]
        return _page("/items/", "Items.", links)
    if path in ("/docs", "/docs/Start") and not query:
        return _page("/docs", "The docs.", [
            u for n in range(N, 0, -1) for u in _pairs(
                f"/docs/Start?page={n}", f"/docs?page={n}", alias_first=alias_first)])
    name, _, value = query.partition("=")
    if path == "/search" and query:
        pairs = sorted(query.replace("%2C", ",").split("&"))
        q = dict(p.partition("=")[::2] for p in pairs).get("q", "")
        if not q.isdigit() or not 1 <= int(q) <= N or "cols=a,b" not in pairs:
            return None
        if lie and int(q) > HONEST and "x=" in pairs:
            return _page(f"/search?cols=a%2Cb&q={q}&x=", f"Extended search {q}.")
        return _page(f"/search?q={q}&cols=a,b", f"Search {q}: results a and b.")
    if path.startswith("/items/") and path[7:].isdigit() and 1 <= int(path[7:]) <= N:
        n = int(path[7:])
        if query == "view=short":
            return _page(f"/items/{n}?view=short", f"Item {n}, short.")
        if query == "view=full" and lie and n > HONEST:
            return _page(f"/items/{n}?view=full", f"Item {n}, with its comments.")
        if query in ("", "view=full"):
            return _page(f"/items/{n}", f"Item {n}, in full.")
        return None
    if path in ("/docs", "/docs/Start") and name == "page" and value.isdigit():
        n = int(value)
        if not 1 <= n <= N:
            return None
        if path == "/docs/Start" and lie and n > HONEST:
            return _page(f"/docs/Start?page={n}", f"The start page's own page {n}.")
        return _page(f"/docs?page={n}", f"Page {n} of the docs.")
    return None


class AppSite:
    """The site and its counts, served in a daemon thread; a context manager."""

    def __init__(self, lie: bool = False, alias_first: bool = False, gzip: bool = False) -> None:
        self.lie = lie
        self.gzip = gzip
        self.alias_first = alias_first
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
                found = (answer(url.path, url.query, owner.lie, owner.alias_first)
                         if url.hostname == HOST else None)
                with owner._lock:
                    owner.hits += 1
                    if found is not None:
                        owner.ok[found[0]] += 1
                body = found[1] if found is not None else b"not found"
                self.send_response(200 if found is not None else 404)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                if owner.gzip and "gzip" in self.headers.get("Accept-Encoding", ""):
                    stamp = f"<p>served {time.time_ns() // 1_000_000}</p></body>".encode()
                    body = gzip_codec.compress(body.replace(b"</body>", stamp), mtime=0)
                    self.send_header("Content-Encoding", "gzip")
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
            return set(resources(self.lie)) - set(self.ok)

    def __enter__(self) -> AppSite:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
