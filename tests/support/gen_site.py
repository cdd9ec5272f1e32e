"""Generated messy sites with the ground truth in the server (issue 30): held-out evidence.

:class:`GenSite` (*seed*, *noise*) serves one made-up site per seed from a
forward proxy on ``127.0.0.1`` (:mod:`tests.support.localsite`, the hit records of
:mod:`tests.support.messy_site`) and knows which URL is which resource.  The seed
draws the sizes, the words and which alias families appear; *noise* names the kinds
of per-response noise drawn into every page (:data:`NOISE`, a catalogue of functions
of a per-response random source), each at a place of the template the seed chooses.

Families of aliases: a blog (``blog.sN.test``) and its ``www.`` mirror whose links
carry a random ``sid`` per response (canonical ``<link>`` to the bare host), posts
linked with ``?utm_source``, ``?replytocom``, ``/index.php/...``, without their
slash (``301``), the home page under ``/``, ``/home`` and ``/index.html``; a shop
(``shop.sN.test``) with ``Clean-param: sid&ref`` in robots.txt, item links
carrying ``sid`` and ``ref``, a ``Link: rel=canonical`` header, listings linked
with their parameters in another order, an empty ``q=`` and the default sort spelled
out; a calendar trap (``cal.sN.test``, ``next/`` without end, one resource).
Pages that must never merge (``cat.sN.test``): a gallery whose pages differ only in
the ``href`` and ``data-src`` of their items, a listing whose item names are only in
``title=``, a table whose sorts show the same rows in another order, and pages
that differ only in a 16-character part number, an order number, a UUID, a time or
a date (one parameter each: a rule dropping it would lose them).

Tuning and held-out: :data:`TUNING_SEEDS` and :data:`TUNING_NOISE` were used while
the measure was written; :data:`HELDOUT_SEEDS` and :data:`HELDOUT_NOISE` were not
(the benchmark's figures count on them).  Nothing here imports the IRI core.
"""

from __future__ import annotations

import html
import random
import re
import uuid
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urldefrag, urljoin, urlsplit

from tests.support.localsite import LocalServer, LocalSite, Log, ProxyHandler
from tests.support.messy_site import Hit

__all__ = ["HELDOUT_NOISE", "HELDOUT_SEEDS", "NOISE", "TUNING_NOISE", "TUNING_SEEDS", "GenSite"]

R = random.Random
_WORDS = ("river", "stone", "maple", "copper", "lantern", "orbit", "meadow", "harbor", "velvet",
          "signal", "cedar", "amber", "falcon", "prism", "thistle", "quartz", "willow", "beacon",
          "saffron", "tundra", "ember", "glacier")
_TRAP_CAP = 25
_MAX_MODEL_URLS = 20_000


def _hex(rng: R, n: int) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


def _alnum(rng: R, n: int) -> str:
    return "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ0123456789") for _ in range(n))


# --------------------------------------------------------------------------- the noise catalogue
# Each kind: (rng of this response, the site's words) -> an HTML fragment.

def _views(rng: R, w: list[str]) -> str:
    return f'<span class="views">Viewed {rng.randint(10, 99999)} times</span>'


def _render_time(rng: R, w: list[str]) -> str:
    return f"<p>Page rendered in {rng.uniform(0.001, 2):.3f} seconds</p>"


def _quote(rng: R, w: list[str]) -> str:
    words = [rng.choice(w) for _ in range(rng.randint(4, 9))]
    return f'<div class="quote"><p>{" ".join(words).capitalize()}.</p></div>'


def _related(rng: R, w: list[str]) -> str:
    picks = rng.sample(range(1, 12), rng.randint(2, 5))
    items = "".join(f'<li><a href="/post/{k}/">{w[k % len(w)].title()} notes {k}</a></li>'
                    for k in picks)
    return f'<aside class="related"><h3>You may also like</h3><ul>{items}</ul></aside>'


def _ad(rng: R, w: list[str]) -> str:
    k = rng.randint(1, 40)
    return (f'<div class="ad"><img src="/ads/banner{k}.png" alt="Buy {rng.choice(w)} '
            f'{rng.choice(w)} now"><small>Advertisement {k}</small></div>')


def _relative_age(rng: R, w: list[str]) -> str:
    return f'<p class="meta">Updated {rng.randint(2, 59)} minutes ago</p>'


def _request_id(rng: R, w: list[str]) -> str:
    return f"<p>Request id: {_alnum(rng, rng.choice((6, 9, 12, 20, 33, 48)))}</p>"


def _csrf(rng: R, w: list[str]) -> str:
    token = _hex(rng, 32)
    return (f'<meta name="csrf-token" content="{token}"><form method="post" action="/vote">'
            f'<input type="hidden" name="authenticity_token" value="{token}">'
            f"<button>Vote</button></form>")


def _nonce(rng: R, w: list[str]) -> str:
    n = _alnum(rng, 22)
    return (f'<link rel="stylesheet" href="/site.css?v={_hex(rng, 8)}" nonce="{n}">'
            f'<script nonce="{n}">window.__n="{n}"</script>')


def _shuffled_tags(rng: R, w: list[str]) -> str:
    tags = list(w[:6])
    rng.shuffle(tags)
    return "<ul class=\"cloud\">" + "".join(f"<li>{t}</li>" for t in tags) + "</ul>"


def _server_clock(rng: R, w: list[str]) -> str:
    return (f"<footer>Server time {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:"
            f"{rng.randint(0, 59):02d} on 2026-11-{rng.randint(1, 28):02d}</footer>")


# held out
def _ticker(rng: R, w: list[str]) -> str:
    return (f'<div class="ticker">{w[1].upper()} {rng.uniform(10, 500):.2f} '
            f"({rng.uniform(-5, 5):+.2f}%)</div>")


def _users_online(rng: R, w: list[str]) -> str:
    return f"<p>{rng.randint(2, 900)} readers online now</p>"


def _greeting(rng: R, w: list[str]) -> str:
    return f"<div class=\"hello\">{rng.choice(('Hello', 'Welcome back', 'Good to see you', 'Hi there'))}, reader!</div>"


def _ab_variant(rng: R, w: list[str]) -> str:
    return f'<div class="{rng.choice(("variant-a", "variant-b"))}"><p>Join our newsletter</p></div>'


def _random_ids(rng: R, w: list[str]) -> str:
    return (f'<div id="w{_hex(rng, 10)}" data-widget="{_hex(rng, 12)}" '
            f'data-track="{rng.randint(1, 10**9)}"><span>Share this page</span></div>')


def _busted_logo(rng: R, w: list[str]) -> str:
    return f'<img class="logo" src="/logo.png?t={rng.randint(1_700_000_000, 1_800_000_000)}" alt="Logo">'


def _ad_rotation(rng: R, w: list[str]) -> str:
    return f'<aside class="promo"><p>{rng.choice(w).title()} sale: {rng.randint(5, 70)}% off {rng.choice(w)}</p></aside>'


NOISE: dict[str, Callable[[R, list[str]], str]] = {
    "views": _views, "render_time": _render_time, "quote": _quote, "related": _related,
    "ad": _ad, "relative_age": _relative_age, "request_id": _request_id, "csrf": _csrf,
    "nonce": _nonce, "shuffled_tags": _shuffled_tags, "server_clock": _server_clock,
    "ticker": _ticker, "users_online": _users_online, "greeting": _greeting,
    "ab_variant": _ab_variant, "random_ids": _random_ids, "busted_logo": _busted_logo,
    "ad_rotation": _ad_rotation,
}
HELDOUT_NOISE = ("ticker", "users_online", "greeting", "ab_variant", "random_ids",
                 "busted_logo", "ad_rotation")
TUNING_NOISE = tuple(k for k in NOISE if k not in HELDOUT_NOISE)
TUNING_SEEDS = (1, 2, 3)
HELDOUT_SEEDS = (101, 102, 103, 104, 105)
_PLACES = ("header", "main-top", "main-bottom", "aside", "footer")


# --------------------------------------------------------------------------- the model

@dataclass(frozen=True)
class Page:
    resource: str
    title: str
    body: str  # the page's own HTML (its links in it, may hold "{sid}" for a random sid)
    links: tuple[str, ...]  # every href of the body (for the reachability walk)
    canonical: str | None = None
    link_canonical: str | None = None


@dataclass(frozen=True)
class Redirect:
    location: str


@dataclass(frozen=True)
class Text:
    resource: str
    body: str


def _a(href: str, text: str, extra: str = "") -> str:
    return f'<a href="{html.escape(href)}"{extra}>{html.escape(text)}</a>'


def _params(query: str) -> dict[str, str] | None:
    pairs = parse_qsl(query, keep_blank_values=True)
    out = dict(pairs)
    return out if len(out) == len(pairs) else None


@dataclass
class Model:
    """The pages of one seed's site (see the module doc); *sid* makes the session ids."""

    seed: int
    rng: R = field(init=False)

    def __post_init__(self) -> None:
        rng = self.rng = R(self.seed)
        s = self.seed
        self.blog, self.www = f"blog.s{s}.test", f"www.blog.s{s}.test"
        self.shop, self.cal, self.cat = f"shop.s{s}.test", f"cal.s{s}.test", f"cat.s{s}.test"
        self.words = rng.sample(_WORDS, len(_WORDS))
        self.posts = rng.randint(12, 24)
        self.items = rng.randint(18, 36)
        self.per_page = rng.choice((6, 8, 10))
        self.gallery_pages = rng.randint(3, 5)
        self.gallery_per = rng.choice((8, 12))
        self.parts = rng.randint(5, 9)
        self.part_ids = [_alnum(rng, 16) for _ in range(self.parts)]
        self.uuids = [str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(self.parts)]
        self.hosts = frozenset({self.blog, self.www, self.shop, self.cal, self.cat})

    @property
    def start_urls(self) -> list[str]:
        return [f"http://{h}/" for h in (self.blog, self.shop, self.cal, self.cat)]

    def answer(self, url: str, sid: str) -> Page | Redirect | Text | None:
        parts = urlsplit(url)
        host, path, query = parts.hostname or "", parts.path or "/", parts.query
        if host not in self.hosts:
            return None
        if path == "/robots.txt":
            extra = "Clean-param: sid&ref /item\n" if host == self.shop else ""
            return Text(f"{host}/robots.txt", f"User-agent: *\nAllow: /\n{extra}")
        params = _params(query)
        if params is None:
            return None
        if host in (self.blog, self.www):
            return self._blog(host, path, params, sid)
        if host == self.shop:
            return self._shop(path, params, sid)
        if host == self.cal:
            return self._cal(path, params)
        return self._cat(path, params)

    # ---- blog: www mirror with sids, tracking params, index.php, slash redirects, home paths
    def _blog(self, host: str, path: str, params: dict[str, str], sid: str) -> Page | Redirect | None:
        www = host == self.www
        suffix = f"?sid={sid}" if www else ""
        if path.startswith("/index.php/"):
            path = path[len("/index.php"):]
        if path in ("/", "/home", "/index.html"):
            if set(params) - {"sid", "utm_source"}:
                return None
            links = [f"/post/{n}/{suffix}" for n in range(1, self.posts + 1)]
            links += ["/home", "/index.html", f"http://{self.www}/", f"http://{self.shop}/"]
            body = "<ul>" + "".join(f"<li>{_a(h, f'Post {i + 1}')}</li>"
                                    for i, h in enumerate(links[:self.posts])) + "</ul>"
            body += "".join(f"<p>{_a(h, 'More')}</p>" for h in links[self.posts:])
            return Page(f"{self.blog}/", f"{self.words[0].title()} blog", body, tuple(links),
                        canonical=f"http://{self.blog}/")
        m = re.fullmatch(r"/post/([1-9]\d?)(/?)", path)
        if not m or int(m[1]) > self.posts:
            return None
        n = int(m[1])
        if not m[2]:
            return Redirect(f"http://{host}/post/{n}/")
        if set(params) - {"sid", "utm_source", "replytocom"}:
            return None
        links = [f"/{suffix}", f"/post/{n}/?utm_source=feed", f"/post/{n}/?replytocom={n * 10 + 1}",
                 f"/post/{n}/?replytocom={n * 10 + 2}", f"/index.php/post/{n}/"]
        if n < self.posts:
            links.append(f"/post/{n + 1}")
        if n % 4 == 0:
            links.append(f"http://{self.www}/post/{n}/")
        w = self.words
        body = (f"<h1>Post {n}: {w[n % len(w)]} and {w[(n * 3) % len(w)]}</h1>"
                f"<p>This post tells of {w[(n * 5) % len(w)]} {w[(n * 7) % len(w)]} "
                f"in {n * 3} short lines.</p><ul>"
                + "".join(f"<li>{_a(h, f'link {i}')}</li>" for i, h in enumerate(links)) + "</ul>")
        return Page(f"{self.blog}/post/{n}/", f"Post {n}", body, tuple(links),
                    canonical=f"http://{self.blog}/post/{n}/")

    # ---- shop: Clean-param, Link canonical, order/empty/default listing aliases
    def _shop(self, path: str, params: dict[str, str], sid: str) -> Page | None:
        pages = -(-self.items // self.per_page)
        if path == "/" and not params:
            links = [f"/list?page={p}" for p in range(1, pages + 1)]
            links += ["/list?page=1&sort=price", "/list?sort=price&page=1", "/list?page=1&q=",
                      "/list?page=1&sort=date"]
            body = "".join(f"<p>{_a(h, 'Catalogue')}</p>" for h in links)
            return Page(f"{self.shop}/", "Shop", body, tuple(links))
        if path == "/list":
            if set(params) - {"page", "sort", "q"} or params.get("q", "") != "":
                return None
            sort = params.get("sort", "date")
            if sort not in ("date", "price") or params.get("page") not in {
                    str(p) for p in range(1, pages + 1)}:
                return None
            page = int(params["page"])
            order = list(range(1, self.items + 1))
            if sort == "price":
                order.sort(key=lambda k: ((k * 37) % 101, k))
            chunk = order[(page - 1) * self.per_page: page * self.per_page]
            links = [f"/item?id={k}&sid={sid}&ref=l{page}" for k in chunk]
            body = f"<h1>Catalogue ({sort})</h1><ul>" + "".join(
                f"<li>{_a(h, f'Item {k}')}</li>" for k, h in zip(chunk, links, strict=True)
            ) + "</ul>"
            return Page(f"{self.shop}/list?page={page}&sort={sort}", "Catalogue", body,
                        tuple(links))
        if path == "/item" and set(params) <= {"id", "sid", "ref"} and params.get("id", "").isdigit():
            k = int(params["id"])
            if not 1 <= k <= self.items:
                return None
            w = self.words
            body = (f"<h1>Item {k}: {w[k % len(w)]} {w[(k * 11) % len(w)]}</h1>"
                    f"<p>Price {(k * 37) % 101 + 5} euros.</p>{_a('/', 'Shop')}")
            return Page(f"{self.shop}/item?id={k}", f"Item {k}", body, ("/",),
                        link_canonical=f"http://{self.shop}/item?id={k}")
        return None

    # ---- calendar trap
    def _cal(self, path: str, params: dict[str, str]) -> Page | None:
        if params:
            return None
        if path == "/":
            return Page(f"{self.cal}/", "Calendar", _a("/m/1/", "January"), ("/m/1/",))
        m = re.fullmatch(r"/m/(\d+)/((?:next/)*)", path)
        if not m or not 1 <= int(m[1]) <= 6 or len(m[2]) // 5 > _TRAP_CAP:
            return None
        month, reps = int(m[1]), len(m[2]) // 5
        if reps and month != 6:
            return None
        nxt = f"/m/{month + 1}/" if month < 6 else "next/"
        if reps:
            return Page(f"{self.cal}/m/6/next/", "No more events",
                        "<p>Nothing planned yet.</p>" + _a("next/", "Next"), ("next/",))
        return Page(f"{self.cal}/m/{month}/", f"Month {month}",
                    f"<p>Events of month {month}.</p>" + _a(nxt, "Next"), (nxt,))

    # ---- pages that must never merge
    def _cat(self, path: str, params: dict[str, str]) -> Page | None:
        if path == "/" and not params:
            links = [f"/gallery?page={p}" for p in range(1, self.gallery_pages + 1)]
            links += [f"/names?page={p}" for p in range(1, self.gallery_pages + 1)]
            links += [f"/part?pn={pn}" for pn in self.part_ids]
            links += [f"/order?no={40_000_000 + 7919 * i}" for i in range(self.parts)]
            links += [f"/object?id={u}" for u in self.uuids]
            links += [f"/slot?at={8 + i}:{15 * (i % 4):02d}" for i in range(self.parts)]
            links += [f"/day?d=2026-{1 + i % 12:02d}-{1 + (i * 5) % 28:02d}" for i in range(self.parts)]
            links += [f"/rank?t={t}{sort}" for t in range(1, 5)
                      for sort in ("", "&sort=id", "&sort=name", "&sort=size")]
            body = "<ul>" + "".join(f"<li>{_a(h, 'Open')}</li>" for h in links) + "</ul>"
            return Page(f"{self.cat}/", "Catalogue", body, tuple(links))
        if path in ("/gallery", "/names") and set(params) == {"page"}:
            p = params["page"]
            if p not in {str(i) for i in range(1, self.gallery_pages + 1)}:
                return None
            first = (int(p) - 1) * self.gallery_per
            ks = range(first + 1, first + self.gallery_per + 1)
            if path == "/gallery":
                items = "".join(f'<a href="/photo/{k}"><img data-src="/img/{k}.jpg" alt=""></a>'
                                for k in ks)
                links = [f"/photo/{k}" for k in ks]
            else:
                items = "".join(f'<li><a href="/person/{k}" title="{self.words[k % 22]} {k}">'
                                "<i class=\"icon\"></i></a></li>" for k in ks)
                links = [f"/person/{k}" for k in ks]
            return Page(f"{self.cat}{path}?page={p}", path[1:].title(),
                        f"<h1>{path[1:].title()}</h1><div class=\"grid\">{items}</div>", tuple(links))
        if path == "/rank" and set(params) - {"sort"} == {"t"} and params["t"] in "1234":
            # tables sorted three ways: the same rows in another order are another
            # page (and ?sort=id, the default spelled out, the same)
            sort, t = params.get("sort", "id"), int(params["t"])
            w = self.words
            keys: dict[str, Callable[[int], tuple[str | int, ...]]] = {
                "id": lambda k: (k,), "name": lambda k: (w[k % 22], k),
                "size": lambda k: ((k * 7) % 13, k)}
            if sort not in keys or len(params["t"]) != 1:
                return None
            ranked = sorted(range(t, t + self.gallery_per), key=keys[sort])
            rows = "".join(f'<tr><td><a href="/person/{k}">{w[k % 22]}</a></td><td>{k}</td></tr>'
                           for k in ranked)
            return Page(f"{self.cat}/rank?t={t}&sort={sort}", "Ranking",
                        f"<h1>Ranking {t}</h1><table>{rows}</table>",
                        tuple(f"/person/{k}" for k in ranked))
        m = re.fullmatch(r"/(photo|person)/(\d+)", path)
        if m and not params and 1 <= int(m[2]) <= self.gallery_pages * self.gallery_per:
            return Page(f"{self.cat}{path}", m[1].title(),
                        f"<h1>{m[1].title()} {m[2]}</h1><p>One {m[1]} of the catalogue.</p>", ())
        for name, key, label in (("/part", "pn", "Part number"), ("/order", "no", "Order"),
                                 ("/object", "id", "Object"), ("/slot", "at", "Time slot"),
                                 ("/day", "d", "Day")):
            if path == name and set(params) == {key}:
                value = params[key]
                return Page(f"{self.cat}{path}?{key}={value}", label,
                            f"<h1>{label}</h1><p>{label}: {html.escape(value)}</p>"
                            f"<p>{_a('/', 'Catalogue')}</p>", ("/",))
        return None


# --------------------------------------------------------------------------- rendering

class Renderer:
    """The site's template: where each noise kind goes (drawn from the seed)."""

    def __init__(self, model: Model, noise: tuple[str, ...]) -> None:
        rng = R(model.seed * 7919 + 1)
        self.model = model
        self.places = {kind: rng.choice(_PLACES) for kind in noise}

    def render(self, page: Page, rng: R, sid: str) -> bytes:
        w = self.model.words
        at: dict[str, list[str]] = {p: [] for p in _PLACES}
        for kind, place in self.places.items():
            at[place].append(NOISE[kind](rng, w))
        head = f"<meta charset=\"utf-8\"><title>{html.escape(page.title)}</title>"
        if page.canonical:
            head += f'<link rel="canonical" href="{html.escape(page.canonical)}">'
        body = page.body.replace("{sid}", sid)
        out = (f"<!DOCTYPE html><html><head>{head}</head><body>"
               f"<header class=\"top\"><b>{w[0].title()} {w[1]}</b>{''.join(at['header'])}</header>"
               f"<main>{''.join(at['main-top'])}{body}{''.join(at['main-bottom'])}</main>"
               f"<aside class=\"side\">{''.join(at['aside'])}</aside>"
               f"<div class=\"bottom\">{''.join(at['footer'])}<p>Made by {w[2]}</p></div>"
               "</body></html>\n")
        return out.encode()


# --------------------------------------------------------------------------- the server

class _Handler(ProxyHandler):
    server: LocalServer[GenSite]

    def do_GET(self) -> None:  # noqa: N802
        owner = self.server.owner
        url = self.request_url()
        rng = R()  # this response's noise
        sid = rng.choice(owner.sids)  # a session id: one of a few per site, as real ones
        result = owner.model.answer(url, sid)
        headers: list[tuple[str, str]] = []
        resource = None
        if isinstance(result, Page):
            status, body, resource = 200, owner.renderer.render(result, rng, sid), result.resource
            if result.link_canonical:
                headers.append(("Link", f'<{result.link_canonical}>; rel="canonical"'))
            ctype = "text/html; charset=utf-8"
        elif isinstance(result, Text):
            status, body, resource, ctype = 200, result.body.encode(), result.resource, "text/plain"
        elif isinstance(result, Redirect):
            status, body, ctype = 301, b"", "text/html"
            headers.append(("Location", result.location))
        else:
            status, body, ctype = 404, b"<!DOCTYPE html><title>Not found</title>\n", "text/html"
        owner._log.record(Hit(url, resource, status, urlsplit(url).path == "/robots.txt"))
        self.respond(status, body, ctype, headers)


class GenSite(LocalSite):
    """One seed's site on ``127.0.0.1`` (a forward proxy); a context manager.

    :meth:`reachable` is the ground truth (the model's link graph walked with a
    fixed session id); :meth:`hits`, :meth:`missed`, :meth:`ratio` count the
    requests answered (robots.txt apart), as :class:`~tests.support.messy_site.MessySite`.
    """

    handler = _Handler

    def __init__(self, seed: int, noise: tuple[str, ...] | None = None) -> None:
        super().__init__()
        self.model = Model(seed)
        if noise is None:
            pool = HELDOUT_NOISE if seed not in TUNING_SEEDS else TUNING_NOISE
            rng = R(seed * 31 + 7)
            noise = tuple(rng.sample(pool, 4 if seed not in TUNING_SEEDS else 6)) + tuple(
                rng.sample(TUNING_NOISE, 2) if seed not in TUNING_SEEDS else ())
        self.noise = tuple(dict.fromkeys(noise))
        self.renderer = Renderer(self.model, self.noise)
        self.sids = tuple(_hex(R(seed * 13 + i), 16) for i in range(3))
        self.thread_name = f"iri-gen-site-{seed}"
        self._log: Log[Hit] = Log()
        self._reach: dict[str, str | None] | None = None

    @property
    def start_urls(self) -> list[str]:
        return self.model.start_urls

    def log(self) -> list[Hit]:
        return self._log.entries()

    def reachable_urls(self) -> dict[str, str | None]:
        if self._reach is None:
            seen: dict[str, str | None] = {}
            todo = deque(self.start_urls)
            while todo:
                url = todo.popleft()
                if url in seen:
                    continue
                if len(seen) >= _MAX_MODEL_URLS:
                    raise RuntimeError("the generated site has too many URLs")
                result = self.model.answer(url, "0" * 16)
                seen[url] = result.resource if isinstance(result, Page) else None
                if isinstance(result, Page):
                    todo.extend(urldefrag(urljoin(url, h.replace("{sid}", "0" * 16)))[0]
                                for h in result.links)
                elif isinstance(result, Redirect):
                    todo.append(urljoin(url, result.location))
            self._reach = seen
        return dict(self._reach)

    def reachable(self) -> frozenset[str]:
        return frozenset(r for r in self.reachable_urls().values() if r is not None)

    def hits(self) -> Counter[str]:
        return Counter(h.resource for h in self.log() if h.resource is not None and not h.robots)

    def total_hits(self) -> int:
        return sum(1 for h in self.log() if not h.robots)

    def missed(self) -> set[str]:
        return set(self.reachable() - set(self.hits()))

    def ratio(self) -> float:
        return self.total_hits() / len(self.reachable())

    def family_missed(self) -> dict[str, int]:
        """Missed resources per family of pages that must never merge (and the rest)."""
        out: Counter[str] = Counter()
        for resource in self.missed():
            m = re.search(r"/(photo|person|part|order|object|slot|day|gallery|names|rank)\b",
                          resource)
            out[m[1] if m else "other"] += 1
        return dict(out)

    def summary(self) -> str:
        return (f"seed {self.model.seed} noise {','.join(self.noise)}: {self.total_hits()} hits / "
                f"{len(self.reachable())} resources = {self.ratio():.2f}; "
                f"missed {len(self.missed())} {self.family_missed() or ''}")
