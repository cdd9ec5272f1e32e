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
from urllib.parse import urlsplit

from tests.support.localsite import LocalServer, LocalSite, ProxyHandler

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


class _Handler(ProxyHandler):
    server: LocalServer[HeldSite]

    def do_GET(self) -> None:  # noqa: N802
        site = self.server.owner
        url = urlsplit(self.path)
        found = answer(url.path, url.query) if url.hostname == HOST else None
        if url.path == "/robots.txt":
            found = None
        with site._lock:
            site.hits += 1
            if found is not None:
                site.ok[found[0]] += 1
        body = found[1] if found is not None else b"not found"
        self.respond(200 if found is not None else 404, body, "text/html; charset=utf-8")


class HeldSite(LocalSite):
    """The site and its counts, served in a daemon thread; a context manager."""

    handler = _Handler
    thread_name = "held-site"

    def __init__(self) -> None:
        super().__init__()
        self.ok: Counter[str] = Counter()
        self.hits = 0
        self._lock = threading.Lock()

    start_urls = [f"http://{HOST}/"]

    def missed(self) -> set[str]:
        """The resources never served with 200."""
        with self._lock:
            return set(resources()) - set(self.ok)

    def served(self, prefix: str) -> int:
        """How many distinct resources under *prefix* were served."""
        with self._lock:
            return sum(1 for r in self.ok if r.startswith(prefix))
