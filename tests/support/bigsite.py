"""A generated web of many pages with aliased links, and a server that answers slowly.

Used by the crash tests of the frontier (``tests/frontier/test_frontier.py``) and by
``benchmarks/bench_frontier.py``: a crawl long enough to be killed at chosen
moments, with a large frontier (every page links to several new pages), and
with every link written under several spellings of the same resource, so that
a resumed crawl that forgot its seen-set fetches aliases again.

Like the rest of :mod:`tests.support`, nothing here imports the IRI core.
"""

from __future__ import annotations

import time

from tests.support.localsite import LocalServer
from tests.support.server import SiteServer, _Handler
from tests.support.site import Host, Link, Resource, Site

__all__ = ["LARGE_HOST", "SlowSiteServer", "large_site", "page_name"]

LARGE_HOST = Host("frontier.example", "en")


def page_name(i: int) -> str:
    """The resource name of page *i*."""
    return f"f{i}"


def _aliases(n: int) -> tuple[str, ...]:
    """Three spellings of ``/p/<n>``: canonical, shouting host with ``:80`` and dot
    segments and a fragment, and the first digit percent-encoded."""
    text = str(n)
    return (
        f"/p/{n}",
        f"HTTP://FRONTIER.Example:80/p/./{n}#top",
        f"/p/%{ord(text[0]):02x}{text[1:]}",
    )


def large_site(pages: int = 1500, fanout: int = 4, aliases: bool = True) -> Site:
    """A site of *pages* pages (plus a home page) on ``frontier.example``.

    Page ``i`` links to its children ``fanout*i + 1 .. fanout*i + fanout`` (a
    tree, so the frontier grows wide), to its parent and to its next sibling;
    with *aliases*, every link is written under the three spellings of
    :func:`_aliases` (otherwise canonical only).  Every page is reachable from
    the start URL ``http://frontier.example/``.
    """
    if pages < 1:
        raise ValueError("pages must be >= 1")
    host = LARGE_HOST
    resources = [Resource("home", host, "/", None, "Frontier home", "",
                          (Link("/p/0", page_name(0)),))]
    for i in range(pages):
        targets = [c for c in range(fanout * i + 1, fanout * i + fanout + 1) if c < pages]
        if i:
            targets.append((i - 1) // fanout)
        if i + 1 < pages:
            targets.append(i + 1)
        links: list[Link] = []
        for t in targets:
            spellings = _aliases(t) if aliases else (f"/p/{t}",)
            links.extend(Link(href, page_name(t)) for href in spellings)
        resources.append(Resource(page_name(i), host, f"/p/{i}", None, f"Page {i}",
                                  "A page of the frontier test web.", tuple(links)))
    return Site(hosts=(host,), resources=tuple(resources),
                start_urls=("http://frontier.example/",))


class _SlowHandler(_Handler):
    server: LocalServer[SlowSiteServer]

    def _answer(self, send_body: bool) -> None:
        latency = self.server.owner.latency
        if latency > 0 and not self.path.startswith("/_iri_scrapy/"):
            time.sleep(latency)
        super()._answer(send_body)


class SlowSiteServer(SiteServer):
    """:class:`SiteServer` that waits *latency* seconds before answering each page."""

    handler = _SlowHandler

    def __init__(self, site: Site, latency: float = 0.01, port: int = 0) -> None:
        super().__init__(site, port)
        self.latency = latency
