"""A local web whose servers care about the exact bytes on the wire.

Like :mod:`tests.support.server`, a loopback forward proxy serving several
hosts, and an independent oracle (no ``iri_scrapy`` core import), but closer to
legacy servers:

* each host has a **charset**: its pages are encoded in it (declared in
  ``<meta charset>``, and in the ``Content-Type`` header for some hosts), and
  the server decodes the *query* of a request target in that charset, the
  path always as UTF-8.  A query that does not decode is a 404; a query in
  another charset that happens to decode names another (usually missing)
  resource, as on a real server;
* **raw routes** answer one exact request path-and-query (byte for byte, case
  of ``%hh`` included), for servers that insist on a spelling: a redirect from
  one spelling to another, a page served only under one spelling.

Resources are keyed ``ResourceKey(host A-label, path, query)`` with path and
query decoded (Unicode text), or with the raw target for raw routes.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from urllib.parse import unquote_to_bytes

import idna

from tests.support.localsite import LocalServer, LocalSite, ProxyHandler
from tests.support.server import Hit, HitLog
from tests.support.site import ResourceKey, remove_dot_segments

__all__ = ["WireHost", "WirePage", "WireRoute", "WireSite", "WireServer", "RAW"]

#: The query of a :class:`ResourceKey` for a raw route: the raw path-and-query is its path.
RAW = "\x00raw"


def alabel(host: str) -> str | None:
    """The A-label of *host* (IDNA 2008, UTS 46 non-transitional), None if not a host."""
    host = host.strip().rstrip(".").lower()
    if host.endswith(":80"):
        host = host[:-3]
    try:
        return idna.encode(host, uts46=True).decode("ascii")
    except (idna.IDNAError, UnicodeError):
        return None


@dataclass(frozen=True)
class WireHost:
    """A host as humans write it, the charset of its pages and queries."""

    name: str
    charset: str = "utf-8"
    header_charset: bool = True  # also declare the charset in Content-Type

    @property
    def alabel(self) -> str:
        value = alabel(self.name)
        assert value is not None, self.name
        return value


@dataclass(frozen=True)
class WirePage:
    """A 200 page at *path* (and *query*, None = no ``?``), decoded text."""

    host: WireHost
    path: str
    query: str | None = None
    links: tuple[str, ...] = ()  # hrefs, written into the page as they are
    head: str = ""  # extra markup in <head> (<base href>, <meta http-equiv=refresh>)
    title: str = ""
    body: bytes | None = None  # served as is instead of the rendered page
    markup: str = ""  # extra markup in <body>, as is (a <form>)

    @property
    def key(self) -> ResourceKey:
        return ResourceKey(self.host.alabel, self.path, self.query)

    def render(self) -> bytes:
        if self.body is not None:
            return self.body
        esc = html.escape
        body = "".join(f'<a href="{esc(h, quote=True)}">{esc(h)}</a>\n' for h in self.links)
        text = (
            f'<!DOCTYPE html><html><head><meta charset="{self.host.charset}">'
            f"<title>{esc(self.title or self.path)}</title>{self.head}</head>"
            f"<body><h1>{esc(self.title or self.path)}</h1>\n{body}{self.markup}</body></html>\n"
        )
        return text.encode(self.host.charset)


@dataclass(frozen=True)
class WireRoute:
    """An exact request path-and-query (as sent) on *host*: a redirect or a page."""

    host: WireHost
    target: str  # raw path and query, e.g. "/pref%c3%a9"
    status: int = 200
    location: str | None = None
    page: WirePage | None = None  # the page served (status 200)

    @property
    def key(self) -> ResourceKey:
        return ResourceKey(self.host.alabel, self.target, RAW)


@dataclass
class WireSite:
    """Hosts, pages and raw routes."""

    hosts: tuple[WireHost, ...]
    pages: tuple[WirePage, ...] = ()
    routes: tuple[WireRoute, ...] = ()
    start_urls: tuple[str, ...] = ()
    _pages: dict[ResourceKey, WirePage] = field(default_factory=dict, init=False, repr=False)
    _routes: dict[tuple[str, str], WireRoute] = field(
        default_factory=dict, init=False, repr=False
    )
    _hosts: dict[str, WireHost] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self._hosts = {h.alabel: h for h in self.hosts}
        self._pages = {p.key: p for p in self.pages}
        self._routes = {(r.host.alabel, r.target): r for r in self.routes}

    @property
    def page_keys(self) -> frozenset[ResourceKey]:
        return frozenset(self._pages)

    def resolve(self, host_ascii: str, rest: bytes) -> tuple[ResourceKey | None, object]:
        """(key, what to serve): a WireRoute, a WirePage, or None (404)."""
        host = self._hosts.get(host_ascii)
        if host is None:
            return None, None
        raw = rest.split(b"#", 1)[0].decode("latin-1")
        route = self._routes.get((host_ascii, raw))
        if route is not None:
            return route.key, route
        path_b, qmark, query_b = raw.encode("latin-1").partition(b"?")
        try:
            path = remove_dot_segments(unquote_to_bytes(path_b).decode("utf-8")) or "/"
            query = unquote_to_bytes(query_b).decode(host.charset) if qmark else None
        except UnicodeDecodeError:
            return ResourceKey(host_ascii, raw, RAW), None
        key = ResourceKey(host_ascii, path, query)
        return key, self._pages.get(key)


class _Handler(ProxyHandler):
    server_version = "IriWireWeb/1.0"
    server: LocalServer[WireServer]

    def do_GET(self) -> None:  # noqa: N802
        rest = self.request_url().encode("latin-1")[7:]
        cut = min([i for i in (rest.find(b"/"), rest.find(b"?")) if i >= 0] or [len(rest)])
        authority, rest = rest[:cut].decode("latin-1"), rest[cut:] or b"/"
        host = alabel(authority)
        key, what = (None, None) if host is None else self.server.owner.site.resolve(host, rest)
        location = None
        ctype = "text/html; charset=utf-8"
        if isinstance(what, WireRoute):
            status, location = what.status, what.location
            page = what.page
        else:
            status, page = (200, what) if isinstance(what, WirePage) else (404, None)
        if page is not None:
            body = page.render()
            ctype = f"text/html; charset={page.host.charset}" if page.host.header_charset \
                else "text/html"
        elif status == 404:
            body = b"<!DOCTYPE html><title>404 Not Found</title><h1>Not Found</h1>\n"
        else:
            body = b"<!DOCTYPE html><title>Moved</title>\n"
        self.server.owner.hits.record(Hit("GET", self.path, self.headers.get("Host"), key, status))
        self.respond(status, body, ctype, [] if location is None else [("Location", location)])


class WireServer(LocalSite):
    """A :class:`WireSite` on ``127.0.0.1`` in a daemon thread; a context manager."""

    handler = _Handler
    thread_name = "iri-wire-web"

    def __init__(self, site: WireSite) -> None:
        super().__init__()
        self.site = site
        self.hits = HitLog()

    def reset(self) -> None:
        self.hits.reset()
