"""A local "messy site": several made-up hosts full of aliases, with ground truth (issue 23).

Real sites are fetched several times per resource because of aliases no syntax rule
can see (``?replytocom=``, ``?utm_*``, session ids, ``/index.php/x/``, ``?amp``,
``www.``, a missing trailing slash, calendar and search traps).  This module serves
such a site from one :class:`~tests.support.localsite.LocalSite` on ``127.0.0.1``,
acting as an HTTP forward proxy for its hosts (absolute-form request targets, or the
``Host`` header), quiet and bounded, and knows the truth: every URL it answers with
a page maps to a **resource id** (a string; URLs with the same id are the same
resource).  It records every request it answers.

Two modes (:class:`MessySite` ``mode=``):

``"messy"`` -- realistic aliases; an alias serves the same visible text as its
  resource, with per-response noise (a timestamp ``2026-11-25T20:21:05Z``, a CSRF
  token: hidden input of 32 random hex digits, and a cache-buster
  ``<script src="/app.js?v=<random>">``; the shop's item links also carry a random
  ``sid`` per listing response):

  * ``blog.messy.test`` (and ``www.blog.messy.test``, the same pages, canonical to
    the bare host, no redirect): home ``/`` lists 20 posts ``/post/N/``; a post
    declares ``<link rel="canonical" href="http://blog.messy.test/post/N/">`` and
    links ``?replytocom=K`` (3 per post), ``?utm_source=feed&utm_medium=rss``,
    ``/index.php/post/N/``, ``?amp`` (other markup, same text) and the next post
    as ``/post/N+1`` (answered ``301`` to ``/post/N+1/``); every fifth post links
    its predecessor on ``www.``.  8 tag pages ``/tag/T/`` (different bodies) all
    declare the WRONG canonical ``http://blog.messy.test/`` (each is its own
    resource); 5 guides ``/guide/N/`` declare the cross-host canonical
    ``http://mirror.other.test/guide/N/``, which ``mirror.other.test`` serves as
    separate resources (another registrable domain, another chrome);
  * ``shop.messy.test``: robots.txt with ``Clean-param: sid&ref /shop/`` (Yandex);
    listings ``/shop/list?page=P`` (P 1..3) and ``&sort=price`` / ``&sort=name``
    (distinct resources); items ``/shop/item?id=N`` (N 1..30) linked from listings
    as ``&sid=<random>&ref=listP`` (aliases) and ``&color=red`` / ``&color=blue``
    (distinct resources); an item page names its resource in an HTTP header
    ``Link: <http://shop.messy.test/shop/item?id=N[&color=C]>; rel="canonical"``;
  * ``events.messy.test``: ``/cal/2026/MM/`` (12 months, each links the next);
    December links a relative ``next/`` whose pages ``/cal/2026/12/next/next/...``
    all serve one "no more events" resource (``404`` beyond
    :data:`TRAP_CAP` repetitions); ``/search?q=x`` links ``?q=x&q=x`` (one resource,
    same cap).

``"wrong"`` -- every candidate rule is wrong: ``news.wrong.test`` and
  ``www.news.wrong.test`` (different editions), ``store.wrong.test``; ``ref``,
  ``sid``, ``utm_source`` change the body, ``/index.php/a/N/`` differs from
  ``/a/N/``, ``/a/N`` (a summary) differs from ``/a/N/`` -- except for N <= 3,
  where ``/a/N`` answers ``301`` to ``/a/N/`` (three confirmations of a host-wide
  trailing-slash rule that is wrong); every canonical points to ``/`` (the store's
  items say it in a ``Link`` header too); robots.txt
  ``Clean-param`` lists parameters that change the body.  Every distinct URL is its
  own resource (its id is the URL: host, path, sorted query).

Ground truth helpers: :meth:`MessySite.reachable` (resource ids reachable from the
start URLs by following ``<a href>`` links and redirects, computed on the model,
not by crawling), :meth:`MessySite.hits`, :meth:`MessySite.missed`, ... ;
:func:`visible_text` is the page text with the noise removed.

Standalone, to look at it with a browser or curl:
``python -m tests.support.messy_site --mode messy`` prints the proxy URL
(``curl -x http://127.0.0.1:PORT http://blog.messy.test/``).

Like the rest of :mod:`tests.support`, nothing here imports the IRI core.
"""

from __future__ import annotations

import argparse
import contextlib
import html
import http.client
import re
import secrets
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from html.parser import HTMLParser
from urllib.parse import parse_qsl, urldefrag, urlencode, urljoin, urlsplit

from tests.support.localsite import LocalServer, LocalSite, Log, ProxyHandler

__all__ = [
    "MODES",
    "TRAP_CAP",
    "Hit",
    "Link",
    "MessySite",
    "Page",
    "Redirect",
    "answer",
    "render",
    "visible_text",
]

MODES = ("messy", "wrong")

# --- messy mode
BLOG, WWW_BLOG, SHOP, EVENTS, MIRROR = (
    "blog.messy.test", "www.blog.messy.test", "shop.messy.test", "events.messy.test",
    "mirror.other.test",
)
POSTS = 20
REPLIES = 3  # ?replytocom=K links per post
TAGS = ("python", "scrapy", "http", "unicode", "search", "crawl", "data", "web")
GUIDES = 5
LIST_PAGES = 3
PER_PAGE = 10
ITEMS = LIST_PAGES * PER_PAGE  # 30
SORTS = (None, "price", "name")
COLORS = ("red", "blue")
MONTHS = 12
TRAP_CAP = 30
"""Repetitions of a growing trap (``next/``, ``&q=x``) served before ``404``."""
SHOP_ROBOTS = "User-agent: *\nAllow: /\nClean-param: sid&ref /shop/\n"
PLAIN_ROBOTS = "User-agent: *\nAllow: /\n"
UTM_PARAMS = frozenset({"utm_source", "utm_medium", "utm_campaign"})

# --- wrong mode
NEWS, WWW_NEWS, STORE = "news.wrong.test", "www.news.wrong.test", "store.wrong.test"
ARTICLES = 20
SLASH_REDIRECTS = 3  # /a/N -> /a/N/ for N <= 3 only
STORE_ITEMS = 20
NEWS_VARIANTS = {"ref": "homepage", "utm_source": "feed", "sid": "2"}
STORE_VARIANTS = {"sid": "eu", "ref": "partner"}
NEWS_ROBOTS = "User-agent: *\nAllow: /\nClean-param: ref&utm_source&sid /a/\n"
STORE_ROBOTS = "User-agent: *\nAllow: /\nClean-param: sid&ref /\n"

_MAX_MODEL_URLS = 20_000  # the reachability walk is bounded (a model bug fails loudly)
_MODEL_SID = "0000000000000000"  # the sid the model walk uses instead of a random one
_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


# --------------------------------------------------------------------------- the model


@dataclass(frozen=True)
class Link:
    """An ``<a href>`` of a page, as written in the HTML (may be relative)."""

    href: str
    text: str


@dataclass(frozen=True)
class Page:
    """A ``200`` HTML answer: which resource it is and what it shows."""

    resource: str
    site: str
    title: str
    paragraphs: tuple[str, ...]
    links: tuple[Link, ...]
    canonical: str | None = None
    amp: bool = False
    """Rendered with the AMP template (other markup, the same visible text)."""
    link_canonical: str | None = None
    """Sent as an HTTP header ``Link: <...>; rel="canonical"`` (RFC 8288, RFC 6596)."""


@dataclass(frozen=True)
class Redirect:
    """A ``301`` answer (a fetch that serves no resource)."""

    location: str
    status: int = 301


@dataclass(frozen=True)
class _Text:
    """A non-HTML ``200`` answer (robots.txt, app.js)."""

    resource: str
    body: str
    ctype: str


Answer = Page | Redirect | _Text | None
Token = Callable[[], str]


def _params(query: str | None) -> list[tuple[str, str]]:
    return parse_qsl(query, keep_blank_values=True) if query else []


def _single(params: list[tuple[str, str]]) -> dict[str, str] | None:
    """The parameters as a dict, or None if one is repeated."""
    out = dict(params)
    return out if len(out) == len(params) else None


def _home_link(host: str, text: str = "Home") -> Link:
    return Link(f"http://{host}/", text)


def _post_tags(n: int) -> list[str]:
    return sorted({TAGS[n % 8], TAGS[(3 * n) % 8]}, key=TAGS.index)


def _tag_posts(tag: str) -> list[int]:
    return [n for n in range(1, POSTS + 1) if tag in _post_tags(n)]


def _blog(host: str, path: str, query: str | None) -> Answer:
    if path.startswith("/index.php/"):
        path = path[len("/index.php"):]
    params = _single(_params(query))
    if params is None:
        return None
    site = "Messy Blog"
    if path == "/":
        if set(params) - UTM_PARAMS:
            return None
        links = [Link(f"/post/{n}/", f"Post {n}") for n in range(1, POSTS + 1)]
        links += [Link(f"/tag/{t}/", f"Tag {t}") for t in TAGS]
        links += [Link(f"/guide/{g}/", f"Guide {g}") for g in range(1, GUIDES + 1)]
        links += [_home_link(SHOP, "Shop"), _home_link(EVENTS, "Events")]
        return Page(f"{BLOG}/", site, "Messy Blog: home",
                    ("The latest posts of the messy blog.",), tuple(links),
                    canonical=f"http://{BLOG}/")
    m = re.fullmatch(r"/post/([1-9]\d?)(/?)", path)
    if m and int(m[1]) <= POSTS:
        n = int(m[1])
        if not m[2]:
            return Redirect(f"http://{host}{path}/" + (f"?{query}" if query is not None else ""))
        if set(params) - UTM_PARAMS - {"replytocom", "amp"}:
            return None
        if "replytocom" in params and not params["replytocom"].isdigit():
            return None
        links = [Link("/", "Home")]
        links += [Link(f"/tag/{t}/", f"Tag {t}") for t in _post_tags(n)]
        links += [Link(f"/post/{n}/?replytocom={100 * n + k}", f"Reply to comment {k}")
                  for k in range(1, REPLIES + 1)]
        links += [Link(f"/post/{n}/?utm_source=feed&utm_medium=rss", "RSS entry"),
                  Link(f"/index.php/post/{n}/", "Permalink"),
                  Link(f"/post/{n}/?amp", "AMP version")]
        if n > 1:
            prev = (f"http://{WWW_BLOG}/post/{n - 1}/" if n % 5 == 0 else f"/post/{n - 1}/")
            links.append(Link(prev, "Previous post"))
        if n < POSTS:
            links.append(Link(f"/post/{n + 1}", "Next post"))  # no slash: a 301
        paragraphs = (f"This is post number {n} of the messy blog.",
                      f"It is filed under {', '.join(_post_tags(n))}.",
                      *(f"Comment {k} on post {n}: well said, reader {k}."
                        for k in range(1, REPLIES + 1)))
        return Page(f"{BLOG}/post/{n}/", site, f"Post {n}", paragraphs, tuple(links),
                    canonical=f"http://{BLOG}/post/{n}/", amp="amp" in params)
    if params:
        return None
    m = re.fullmatch(r"/tag/([a-z]+)/", path)
    if m and m[1] in TAGS:
        posts = _tag_posts(m[1])
        links = [Link("/", "Home"), *(Link(f"/post/{n}/", f"Post {n}") for n in posts)]
        return Page(f"{BLOG}/tag/{m[1]}/", site, f"Tag {m[1]}",
                    (f"Posts tagged {m[1]}: {', '.join(map(str, posts))}.",), tuple(links),
                    canonical=f"http://{BLOG}/")  # the WRONG canonical
    m = re.fullmatch(r"/guide/([1-9])/", path)
    if m and int(m[1]) <= GUIDES:
        g = int(m[1])
        links = [Link("/", "Home"), Link(f"http://{MIRROR}/guide/{g}/", "Read on the mirror"),
                 *(Link(f"/guide/{h}/", f"Guide {h}") for h in range(1, GUIDES + 1) if h != g)]
        return Page(f"{BLOG}/guide/{g}/", site, f"Guide {g}", _guide_text(g), tuple(links),
                    canonical=f"http://{MIRROR}/guide/{g}/")  # cross-host canonical
    return None


def _guide_text(g: int) -> tuple[str, ...]:
    return (f"Guide {g} explains step {g} of crawling politely.",
            f"Step {g}: read robots.txt, then fetch at most one page a second.")


def _mirror(path: str, query: str | None) -> Answer:
    if query is not None:
        return None
    site = "Other Mirror"
    if path == "/":
        links = [*(Link(f"/guide/{g}/", f"Mirrored guide {g}") for g in range(1, GUIDES + 1)),
                 _home_link(BLOG, "Original blog")]
        return Page(f"{MIRROR}/", site, "Other Mirror: home", ("Guides mirrored here.",),
                    tuple(links), canonical=f"http://{MIRROR}/")
    m = re.fullmatch(r"/guide/([1-9])/", path)
    if m and int(m[1]) <= GUIDES:
        g = int(m[1])
        return Page(f"{MIRROR}/guide/{g}/", site, f"Guide {g} (mirror)",
                    (*_guide_text(g), f"Mirrored from {BLOG}."),
                    (Link("/", "Mirror home"), _home_link(BLOG, "Original blog")),
                    canonical=f"http://{MIRROR}/guide/{g}/")
    return None


def _price(n: int) -> int:
    return 10 + (n * 37) % 97


def _name(n: int) -> str:
    return "".join("abcdefghij"[int(d)] for d in f"{(n * 7919) % 1000:03d}") + f"-{n}"


def _sorted_items(sort: str | None) -> list[int]:
    items = list(range(1, ITEMS + 1))
    if sort == "price":
        items.sort(key=lambda n: (_price(n), n))
    elif sort == "name":
        items.sort(key=_name)
    return items


def _listing_query(page: int, sort: str | None) -> str:
    return f"page={page}" + (f"&sort={sort}" if sort else "")


def _shop(path: str, query: str | None, token: Token) -> Answer:
    params = _single(_params(query))
    if params is None:
        return None
    site = "Messy Shop"
    if path == "/" and not params:
        links = [*(Link(f"/shop/list?{_listing_query(1, s)}", f"Catalogue sorted by {s or 'default'}")
                   for s in SORTS),
                 _home_link(BLOG, "Blog"), _home_link(EVENTS, "Events")]
        return Page(f"{SHOP}/", site, "Messy Shop: home", ("Welcome to the shop.",),
                    tuple(links))
    if path == "/shop/list":
        if set(params) - {"page", "sort"} or params.get("page") not in {
                str(p) for p in range(1, LIST_PAGES + 1)}:
            return None
        sort = params.get("sort")
        if sort not in SORTS:
            return None
        page = int(params["page"])
        items = _sorted_items(sort)[(page - 1) * PER_PAGE: page * PER_PAGE]
        sid = token()  # a new session id in every listing response
        links = [Link("/", "Shop home"),
                 *(Link(f"/shop/item?id={n}&sid={sid}&ref=list{page}", f"Item {n}")
                   for n in items)]
        if page > 1:
            links.append(Link(f"/shop/list?{_listing_query(page - 1, sort)}", "Previous page"))
        if page < LIST_PAGES:
            links.append(Link(f"/shop/list?{_listing_query(page + 1, sort)}", "Next page"))
        links += [Link(f"/shop/list?{_listing_query(page, s)}", f"Sort by {s or 'default'}")
                  for s in SORTS if s != sort]
        rows = tuple(f"Item {n}: {_name(n)}, {_price(n)} EUR" for n in items)
        return Page(f"{SHOP}/shop/list?{_listing_query(page, sort)}", site,
                    f"Catalogue page {page} sorted by {sort or 'default'}", rows, tuple(links))
    if path == "/shop/item":
        if set(params) - {"id", "sid", "ref", "color"}:
            return None
        ident = params.get("id", "")
        if not ident.isdigit() or not 1 <= int(ident) <= ITEMS or ident != str(int(ident)):
            return None
        color = params.get("color")
        if color is not None and color not in COLORS:
            return None
        n = int(ident)
        resource = f"{SHOP}/shop/item?id={n}" + (f"&color={color}" if color else "")
        listing = _sorted_items(None).index(n) // PER_PAGE + 1
        return Page(resource, site, f"Item {n}" + (f" in {color}" if color else ""),
                    (f"{_name(n)} costs {_price(n)} EUR.", f"Colour: {color or 'standard'}."),
                    (Link("/", "Shop home"), Link(f"/shop/item?id={n}", "Standard colour"),
                     *(Link(f"/shop/item?id={n}&color={c}", f"In {c}") for c in COLORS),
                     Link(f"/shop/list?page={listing}", "Back to the catalogue")),
                    link_canonical=f"http://{resource}")  # the header names the resource
    return None


def _month_path(m: int) -> str:
    return f"/cal/2026/{m:02d}/"


def _events(path: str, query: str | None) -> Answer:
    params = _params(query)
    site = "Messy Events"
    if path == "/" and not params:
        links: tuple[Link, ...] = (
            Link(_month_path(1), "January 2026"), Link("/search?q=x", "Search for x"),
            _home_link(BLOG, "Blog"))
        return Page(f"{EVENTS}/", site, "Messy Events: home", ("What is on in 2026.",), links)
    if path == "/search":
        if not params or any(p != ("q", "x") for p in params) or len(params) > TRAP_CAP:
            return None
        more = "?" + "&".join(["q=x"] * (len(params) + 1))  # relative: the query grows
        links = (Link("/", "Events home"), Link(_month_path(3), "Concert in March"),
                 Link(_month_path(7), "Festival in July"), Link(more, "More results"))
        return Page(f"{EVENTS}/search?q=x", site, "Search results for x",
                    ("2 events match x.",), links)
    if params:
        return None
    m = re.fullmatch(r"/cal/2026/(\d\d)/((?:next/)*)", path)
    if m and 1 <= int(m[1]) <= MONTHS and m[1] == f"{int(m[1]):02d}":
        month, reps = int(m[1]), len(m[2]) // len("next/")
        if reps and month != MONTHS:
            return None
        if reps > TRAP_CAP:
            return None
        if reps:
            links = (Link("/", "Events home"), Link(_month_path(MONTHS), "December"),
                     Link("next/", "Next month"))
            return Page(f"{EVENTS}/cal/2026/12/next/", site, "No more events",
                        ("There are no more events planned.",), links)
        months = [Link("/", "Events home")]
        if month > 1:
            months.append(Link(_month_path(month - 1), "Previous month"))
        months.append(Link(_month_path(month + 1) if month < MONTHS else "next/", "Next month"))
        return Page(f"{EVENTS}{_month_path(month)}", site, f"Events in 2026-{month:02d}",
                    (f"Meetup on 2026-{month:02d}-{10 + month:02d}.",), tuple(months))
    m = re.fullmatch(r"/cal/2026/(\d\d)", path)
    if m and 1 <= int(m[1]) <= MONTHS:
        return Redirect(f"http://{EVENTS}{path}/")
    return None


def _wrong_id(host: str, path: str, params: list[tuple[str, str]]) -> str:
    return f"{host}{path}" + (f"?{urlencode(sorted(params))}" if params else "")


def _news(host: str, path: str, query: str | None) -> Answer:
    params = _params(query)
    single = _single(params)
    if single is None or len(single) > 1:
        return None
    edition = "Local edition" if host == NEWS else "International edition"
    other = WWW_NEWS if host == NEWS else NEWS
    canonical = f"http://{host}/"  # every canonical points to the home page: all wrong
    resource = _wrong_id(host, path, params)
    if path == "/" and not params:
        links: tuple[Link, ...] = (
            *(Link(f"/a/{n}/", f"Article {n}") for n in range(1, ARTICLES + 1)),
                 _home_link(other, "Other edition"), _home_link(STORE, "Store"))
        return Page(resource, "Wrong News", f"{edition}: home", (f"Today's {edition}.",),
                    tuple(links), canonical=canonical)
    m = re.fullmatch(r"(/index\.php)?/a/([1-9]\d?)(/?)", path)
    if not m or int(m[2]) > ARTICLES:
        return None
    n, index, slash = int(m[2]), bool(m[1]), bool(m[3])
    back = (Link("/", "Home"), Link(f"/a/{n}/", f"Article {n}"))
    if index:
        if params or not slash:
            return None
        return Page(resource, "Wrong News", f"Article {n}: print view ({edition})",
                    (f"Printable article {n} of the {edition}, with all footnotes.",), back,
                    canonical=canonical)
    if not slash:
        if params:
            return None
        if n <= SLASH_REDIRECTS:
            return Redirect(f"http://{host}/a/{n}/")
        return Page(resource, "Wrong News", f"Article {n}: summary ({edition})",
                    (f"Summary of article {n} of the {edition}.",), back, canonical=canonical)
    if params:
        (name, value), = params
        if NEWS_VARIANTS.get(name) != value:
            return None
        return Page(resource, "Wrong News", f"Article {n} ({edition}, {name}={value})",
                    (f"Article {n} of the {edition} as shown for {name} {value}.",), back,
                    canonical=canonical)
    links = (Link("/", "Home"), Link(f"/a/{n}", "Summary"),
             Link(f"/index.php/a/{n}/", "Print view"),
             *(Link(f"/a/{n}/?{k}={v}", f"Variant {k}") for k, v in NEWS_VARIANTS.items()))
    return Page(resource, "Wrong News", f"Article {n} ({edition})",
                (f"Full text of article {n} of the {edition}.",), links, canonical=canonical)


def _store(path: str, query: str | None) -> Answer:
    params = _params(query)
    single = _single(params)
    if single is None:
        return None
    resource = _wrong_id(STORE, path, params)
    canonical = f"http://{STORE}/"
    if path == "/" and not params:
        links = (*(Link(f"/item?id={n}", f"Item {n}") for n in range(1, STORE_ITEMS + 1)),
                 _home_link(NEWS, "News"))
        return Page(resource, "Wrong Store", "Wrong Store: home", ("All items.",), links,
                    canonical=canonical)
    if path != "/item":
        return None
    ident = single.pop("id", "")
    if not ident.isdigit() or ident != str(int(ident)) or not 1 <= int(ident) <= STORE_ITEMS:
        return None
    n = int(ident)
    if len(single) > 1 or any(STORE_VARIANTS.get(k) != v for k, v in single.items()):
        return None
    variant = ", ".join(f"{k} {v}" for k, v in single.items()) or "standard"
    links = (Link("/", "Store home"), Link(f"/item?id={n}", "Standard price"),
             *(Link(f"/item?id={n}&{k}={v}", f"Price for {k} {v}")
               for k, v in STORE_VARIANTS.items()))
    return Page(resource, "Wrong Store", f"Item {n} ({variant})",
                (f"Item {n} costs {_price(n) + len(variant)} units for {variant}.",), links,
                canonical=canonical, link_canonical=canonical)


_ROBOTS = {
    "messy": {SHOP: SHOP_ROBOTS},
    "wrong": {NEWS: NEWS_ROBOTS, WWW_NEWS: NEWS_ROBOTS, STORE: STORE_ROBOTS},
}
_HOSTS = {
    "messy": frozenset({BLOG, WWW_BLOG, SHOP, EVENTS, MIRROR}),
    "wrong": frozenset({NEWS, WWW_NEWS, STORE}),
}
_START = {
    "messy": (f"http://{BLOG}/", f"http://{SHOP}/", f"http://{EVENTS}/"),
    "wrong": (f"http://{NEWS}/", f"http://{STORE}/"),
}


def _split(url: str) -> tuple[str, str, str | None] | None:
    """``(host, path, query or None)`` of an absolute ``http`` URL; None if unusable.

    The host is lowercased and ``:80`` dropped (another port: None); the fragment is
    ignored; path and query are compared as sent (the site's links need no escapes).
    """
    parts = urlsplit(url)
    if parts.scheme.lower() != "http" or parts.hostname is None:
        return None
    try:
        port = parts.port
    except ValueError:
        return None
    if port not in (None, 80):
        return None
    query = parts.query if (parts.query or "?" in url.split("#", 1)[0]) else None
    return parts.hostname.lower().rstrip("."), parts.path or "/", query


def answer(mode: str, url: str, token: Token = lambda: secrets.token_hex(8)) -> Answer:
    """What the site answers for the absolute ``http`` *url* in *mode* (None: ``404``).

    *token* makes the shop's per-response session ids (random by default).
    """
    split = _split(url)
    if split is None:
        return None
    host, path, query = split
    if host not in _HOSTS[mode]:
        return None
    if path == "/robots.txt" and query is None:
        return _Text(f"{host}/robots.txt", _ROBOTS[mode].get(host, PLAIN_ROBOTS), "text/plain")
    if path == "/app.js":
        return _Text(f"{host}/app.js", "/* the messy site's script */\n", "text/javascript")
    if host in (BLOG, WWW_BLOG):
        return _blog(host, path, query)
    if host == MIRROR:
        return _mirror(path, query)
    if host == SHOP:
        return _shop(path, query, token)
    if host == EVENTS:
        return _events(path, query)
    if host in (NEWS, WWW_NEWS):
        return _news(host, path, query)
    return _store(path, query)


# --------------------------------------------------------------------------- HTML


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def _timestamp() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def render(page: Page) -> bytes:
    """The HTML of *page*, with fresh noise (timestamp, CSRF token, cache-buster)."""
    csrf, buster = secrets.token_hex(16), secrets.token_hex(4)
    head = [f"<meta charset=\"utf-8\"><title>{_esc(page.title)}</title>"]
    if page.canonical is not None:
        head.append(f'<link rel="canonical" href="{_esc(page.canonical)}">')
    head.append(f'<script src="/app.js?v={buster}"></script>')
    links = "".join(f'<li><a href="{_esc(link.href)}">{_esc(link.text)}</a></li>'
                    for link in page.links)
    paras = "".join(f"<p>{_esc(p)}</p>" for p in page.paragraphs)
    form = (f'<form method="post" action="/subscribe"><input type="hidden" name="csrf_token" '
            f'value="{csrf}"><button>Subscribe</button></form>')
    footer = f"Generated at <time>{_timestamp()}</time>"
    if page.amp:  # other markup, the same visible text
        out = ("<!doctype html><html amp lang=\"en\"><head>" + "".join(head)
               + "<style amp-custom>article{margin:0 auto;max-width:40em}</style></head>"
               f"<body><div class=\"amp-site\">{_esc(page.site)}</div><article>"
               f"<h1 class=\"amp-title\">{_esc(page.title)}</h1>{paras}"
               f"<nav class=\"amp-links\"><ul>{links}</ul></nav></article>{form}"
               f"<div class=\"amp-footer\">{footer}</div></body></html>\n")
    else:
        out = ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n" + "\n".join(head)
               + f"\n</head>\n<body>\n<header>{_esc(page.site)}</header>\n<main>\n"
               f"<h1>{_esc(page.title)}</h1>\n{paras}\n<ul>{links}</ul>\n</main>\n{form}\n"
               f"<footer>{footer}</footer>\n</body>\n</html>\n")
    return out.encode("utf-8")


class _TextOf(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style", "title"):
            self._skip += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style", "title") and self._skip:
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)


def visible_text(body: bytes | str) -> str:
    """The text a reader sees, whitespace collapsed, timestamps replaced by ``<time>``.

    Script and style content, attributes (CSRF token, cache-buster, link targets
    with their session ids) and markup are not text; so every alias of a resource
    (the AMP variant too) has the same visible text, and two resources never do.
    """
    parser = _TextOf()
    parser.feed(body.decode("utf-8") if isinstance(body, bytes) else body)
    parser.close()
    text = " ".join(" ".join(parser.parts).split())
    return _TIMESTAMP.sub("<time>", text)


# --------------------------------------------------------------------------- the server


@dataclass(frozen=True)
class Hit:
    """One request the site answered."""

    url: str
    """The URL as requested (absolute form; ``Host`` header + path for origin form)."""
    resource: str | None
    """The resource served (None for a 3xx or a 404)."""
    status: int
    robots: bool = False
    at: float = field(default_factory=time.monotonic, compare=False)


class _Handler(ProxyHandler):
    server_version = "MessySite/1.0"
    server: LocalServer[MessySite]

    def do_GET(self) -> None:  # noqa: N802
        owner = self.server.owner
        url = self.request_url()
        result = answer(owner.mode, url)
        headers: list[tuple[str, str]] = []
        if isinstance(result, Page):
            status, body, ctype = 200, render(result), "text/html; charset=utf-8"
            resource: str | None = result.resource
            if result.link_canonical is not None:
                headers.append(("Link", f'<{result.link_canonical}>; rel="canonical"'))
        elif isinstance(result, _Text):
            status, body, ctype = 200, result.body.encode(), f"{result.ctype}; charset=utf-8"
            resource = result.resource
        elif isinstance(result, Redirect):
            status, body, ctype = result.status, b"", "text/html; charset=utf-8"
            headers.append(("Location", result.location))
            resource = None
        else:
            status, body, ctype = 404, b"<!DOCTYPE html><title>Not found</title>\n", \
                "text/html; charset=utf-8"
            resource = None
        split = _split(url)
        robots = split is not None and split[1] == "/robots.txt"
        owner._log.record(Hit(url, resource, status, robots))
        self.respond(status, body, ctype, headers)


class MessySite(LocalSite):
    """The messy site on ``127.0.0.1``, a forward proxy in a daemon thread; a context manager.

    ::

        with MessySite("messy") as site:
            run_crawl(settings, site.start_urls, site.proxy_url)
            assert not site.missed()
            print(site.summary())

    Ground truth: :meth:`reachable` is the set of resource ids reachable from
    :attr:`start_urls` (the model's own link graph, not a crawl).  Counting:
    :meth:`hits` counts the ``200`` answers per resource id; :meth:`total_hits`
    counts every request except robots.txt (``200``, ``3xx`` and ``404`` alike: each
    costs a fetch); :meth:`ratio` is ``total_hits() / len(reachable())``, the
    "hits / distinct resources" figure of issue 23.
    """

    handler = _Handler

    def __init__(self, mode: str = "messy") -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
        super().__init__()
        self.mode = mode
        self.thread_name = f"iri-messy-site-{mode}"
        self._log: Log[Hit] = Log()
        self._model: dict[str, str | None] | None = None

    # ---------------------------------------------------------------- model

    @property
    def start_urls(self) -> list[str]:
        """Where a crawl starts (one home page per host family)."""
        return list(_START[self.mode])

    @property
    def hosts(self) -> frozenset[str]:
        """The hosts this site serves (any other host: ``404``)."""
        return _HOSTS[self.mode]

    def answer(self, url: str) -> Page | Redirect | None:
        """The model's answer for *url* (a :class:`Page`, a :class:`Redirect`, or None
        for a ``404`` or a non-HTML file); no request is made, nothing is recorded."""
        result = answer(self.mode, url, lambda: _MODEL_SID)
        return result if isinstance(result, (Page, Redirect)) else None

    def resource_of(self, url: str) -> str | None:
        """The resource id *url* is answered with (None: a redirect or a ``404``)."""
        result = answer(self.mode, url, lambda: _MODEL_SID)
        return result.resource if isinstance(result, (Page, _Text)) else None

    def reachable_urls(self) -> dict[str, str | None]:
        """Every URL reachable from the start URLs by links and redirects (with the
        model's fixed session id where the shop puts a random one), mapped to its
        resource id (None for a redirect or a ``404``).  Computed once, bounded."""
        if self._model is None:
            seen: dict[str, str | None] = {}
            todo = deque(self.start_urls)
            while todo:
                url = todo.popleft()
                if url in seen:
                    continue
                if len(seen) >= _MAX_MODEL_URLS:
                    raise RuntimeError(f"the messy site model has over {_MAX_MODEL_URLS} URLs")
                result = self.answer(url)
                seen[url] = result.resource if isinstance(result, Page) else None
                targets: Iterable[str] = ()
                if isinstance(result, Page):
                    targets = (urljoin(url, link.href) for link in result.links)
                elif isinstance(result, Redirect):
                    targets = (urljoin(url, result.location),)
                todo.extend(urldefrag(t)[0] for t in targets)
            self._model = seen
        return dict(self._model)

    def reachable(self) -> frozenset[str]:
        """The resource ids reachable from :attr:`start_urls` (the ground truth)."""
        return frozenset(r for r in self.reachable_urls().values() if r is not None)

    def aliases(self) -> dict[str, set[str]]:
        """Per reachable resource id, the reachable URLs that serve it."""
        out: dict[str, set[str]] = {}
        for url, resource in self.reachable_urls().items():
            if resource is not None:
                out.setdefault(resource, set()).add(url)
        return out

    # ---------------------------------------------------------------- hits

    def log(self) -> list[Hit]:
        """Every request answered since the start (or :meth:`reset`), in order."""
        return self._log.entries()

    def reset(self) -> None:
        """Forget every hit (the model stays)."""
        self._log.reset()

    def hits(self) -> Counter[str]:
        """``200`` answers per resource id (robots.txt excluded)."""
        return Counter(h.resource for h in self.log() if h.resource is not None and not h.robots)

    def total_hits(self) -> int:
        """Every request but robots.txt: ``200``, ``3xx`` and ``404`` each cost a fetch."""
        return sum(1 for h in self.log() if not h.robots)

    def robots_hits(self) -> Counter[str]:
        """robots.txt requests per URL (counted apart from :meth:`total_hits`)."""
        return Counter(h.url for h in self.log() if h.robots)

    def status_counts(self) -> Counter[int]:
        """Answers per HTTP status (robots.txt excluded)."""
        return Counter(h.status for h in self.log() if not h.robots)

    def urls_hit(self) -> Counter[str]:
        """Requests per URL as requested (robots.txt excluded)."""
        return Counter(h.url for h in self.log() if not h.robots)

    def missed(self, reachable: Iterable[str] | None = None) -> set[str]:
        """Resources of *reachable* (default :meth:`reachable`) never served."""
        wanted = self.reachable() if reachable is None else frozenset(reachable)
        return set(wanted - set(self.hits()))

    def unreachable_hits(self) -> Counter[str]:
        """Served resources that are not reachable by links (e.g. a canonical
        target no page links to, ``/app.js``)."""
        wanted = self.reachable()
        return Counter({r: n for r, n in self.hits().items() if r not in wanted})

    def ratio(self) -> float:
        """``total_hits() / len(reachable())``: fetches per distinct resource."""
        return self.total_hits() / len(self.reachable())

    def summary(self) -> str:
        """One line: mode, hits, distinct, ratio, missed, statuses."""
        statuses = ", ".join(f"{s}: {n}" for s, n in sorted(self.status_counts().items()))
        return (f"{self.mode}: {self.total_hits()} hits / {len(self.reachable())} distinct "
                f"= {self.ratio():.2f}x; missed {len(self.missed())}; "
                f"robots.txt {sum(self.robots_hits().values())}; statuses {{{statuses}}}")

    # ---------------------------------------------------------------- serving

    def get(self, url: str, timeout: float = 60) -> tuple[int, dict[str, str], bytes]:
        """GET *url* through the proxy (recorded like any request): status, headers, body."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request("GET", url)
            resp = conn.getresponse()
            return resp.status, dict(resp.getheaders()), resp.read()
        finally:
            conn.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Serve the messy site until interrupted; print its proxy URL and start URLs first."""
    parser = argparse.ArgumentParser(description="Serve the messy site of issue 23.")
    parser.add_argument("--mode", choices=MODES, default="messy")
    args = parser.parse_args(argv)
    with MessySite(args.mode) as site, contextlib.suppress(KeyboardInterrupt):
        print(site.proxy_url, *site.start_urls, flush=True)
        threading.Event().wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
