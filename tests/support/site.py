"""A declarative, multi-host "alias web" used by tests and by the sample project.

The demo web (:data:`DEMO_SITE`) has one ASCII host and several IDN hosts in
different scripts.  Every resource is identified by a :class:`ResourceKey`
``(host A-label, path, query-or-None)`` where *path* and *query* are written in
the server's normal form (see :func:`tests.support.server.normalize_component`):
unreserved and non-ASCII characters appear literally, every other escape stays
as an uppercase ``%HH`` (so ``/a%2Fb`` is one segment, different from ``/a/b``).

Pages link to each other the way the real web does: IRI and %-encoded spellings
of the same path, mixed-case scheme and host, lowercase ``%hh``, ``%7e``/``~``,
dot segments, an explicit ``:80``, punycode vs Unicode hosts, fragments, relative
links and a trailing-slash redirect.  Near-misses that are genuinely different
resources are included too (``/a%2Fb`` vs ``/a/b``, ``/Page`` vs ``/page``,
``/search?`` vs ``/search``, query order, ``%26`` vs ``&``, NFC vs NFD).

Resources with a :attr:`Resource.trap` are the ones a naive crawler is known to
get wrong (for example stock Scrapy never fetches ``/search?`` because
``w3lib.url.safe_url_string`` drops a bare ``?``).
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple
from urllib.parse import quote

import idna

__all__ = [
    "DEMO_SITE",
    "Host",
    "Link",
    "Resource",
    "ResourceKey",
    "Site",
    "absolute_href",
    "distinct_resource_count",
    "remove_dot_segments",
    "to_alabel",
]


class ResourceKey(NamedTuple):
    """Identity of one resource: host A-label, normalized path, query (``None`` = no ``?``)."""

    host: str
    path: str
    query: str | None


def to_alabel(host: str) -> str:
    """Return the lowercase A-label (punycode) form of *host* using IDNA 2008 + UTS 46."""
    return idna.encode(host, uts46=True).decode("ascii")


# Characters left alone when turning a normalized path/query into a URI.
_URI_SAFE = "/%:@!$&'()*+,;=~?"


@dataclass(frozen=True)
class Host:
    """A host of the demo web as humans write it (U-labels) plus its language."""

    name: str
    lang: str
    dir: str = "ltr"

    @property
    def alabel(self) -> str:
        """The ASCII (punycode) host name."""
        return to_alabel(self.name)


@dataclass(frozen=True)
class Link:
    """An ``<a href>`` on a page; *to* names the resource the link must resolve to."""

    href: str
    to: str
    text: str = ""


@dataclass(frozen=True)
class Resource:
    """A page (200) or, when *redirect_to* (or a raw *location*) is set, a 301 redirect."""

    name: str
    host: Host
    path: str
    query: str | None = None
    title: str = ""
    text: str = ""
    links: tuple[Link, ...] = ()
    redirect_to: str | None = None
    trap: str | None = None
    #: A raw ``Location`` for a 301 that names no resource (a malformed one, say).
    location: str | None = None
    #: An HTML body served as is instead of the rendered page (malformed markup).
    html: str | None = None

    @property
    def key(self) -> ResourceKey:
        """The resource's identity as the server resolves it."""
        return ResourceKey(self.host.alabel, self.path, self.query)

    @property
    def is_redirect(self) -> bool:
        """True for a 301 redirect resource."""
        return self.redirect_to is not None or self.location is not None

    @property
    def iri(self) -> str:
        """The resource's IRI (Unicode host and path)."""
        q = "" if self.query is None else "?" + self.query
        return f"http://{self.host.name}{self.path}{q}"

    @property
    def url(self) -> str:
        """The resource's URI (A-label host, UTF-8 %-encoded path and query)."""
        q = "" if self.query is None else "?" + quote(self.query, safe=_URI_SAFE)
        return f"http://{self.host.alabel}{quote(self.path, safe=_URI_SAFE)}{q}"


@dataclass(frozen=True)
class Site:
    """A whole demo web: hosts, resources and start URLs."""

    hosts: tuple[Host, ...]
    resources: tuple[Resource, ...]
    start_urls: tuple[str, ...]
    _by_name: dict[str, Resource] = field(init=False, repr=False, compare=False)
    _by_key: dict[ResourceKey, Resource] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_name: dict[str, Resource] = {}
        by_key: dict[ResourceKey, Resource] = {}
        for res in self.resources:
            if res.name in by_name:
                raise ValueError(f"duplicate resource name {res.name!r}")
            if res.key in by_key:
                raise ValueError(f"resources {by_key[res.key].name} and {res.name} share a key")
            by_name[res.name] = res
            by_key[res.key] = res
        object.__setattr__(self, "_by_name", by_name)
        object.__setattr__(self, "_by_key", by_key)

    def __iter__(self) -> Iterator[Resource]:
        return iter(self.resources)

    def get(self, name: str) -> Resource:
        """Return the resource called *name* (KeyError if unknown)."""
        return self._by_name[name]

    def lookup(self, key: ResourceKey) -> Resource | None:
        """Return the resource with identity *key*, or None (a 404)."""
        return self._by_key.get(key)

    @property
    def host_alabels(self) -> frozenset[str]:
        """A-labels of every host the site serves."""
        return frozenset(h.alabel for h in self.hosts)

    @property
    def keys(self) -> frozenset[ResourceKey]:
        """Every distinct resource (pages and redirects)."""
        return frozenset(self._by_key)

    @property
    def page_keys(self) -> frozenset[ResourceKey]:
        """Resources that answer 200 with an HTML page."""
        return frozenset(r.key for r in self.resources if not r.is_redirect)

    @property
    def redirect_keys(self) -> frozenset[ResourceKey]:
        """Resources that answer 301."""
        return frozenset(r.key for r in self.resources if r.is_redirect)

    def trap_keys(self, *words: str) -> frozenset[ResourceKey]:
        """Resources with a trap note; if *words* are given, only traps mentioning one of them."""
        return frozenset(
            r.key
            for r in self.resources
            if r.trap is not None and (not words or any(w in r.trap for w in words))
        )

    def aliases(self, name: str) -> tuple[str, ...]:
        """Every absolute spelling (fragment removed) the site uses for resource *name*.

        Includes the resource's own URI and IRI; relative hrefs are resolved with
        RFC 3986 against the linking page's IRI, absolute ones are
        kept exactly as written (see :func:`absolute_href`).
        """
        res = self.get(name)
        seen: dict[str, None] = {res.url: None, res.iri: None}
        for src in self.resources:
            for link in src.links:
                if link.to == name:
                    seen[absolute_href(src.iri, link.href)] = None
        return tuple(seen)

    def links(self) -> Iterator[tuple[Resource, Link]]:
        """Every (source page, link) pair."""
        for src in self.resources:
            for link in src.links:
                yield src, link

    def render(self, res: Resource) -> bytes:
        """The UTF-8 HTML body served for page *res*."""
        if res.html is not None:
            return res.html.encode("utf-8", errors="surrogatepass")
        return render_page(res).encode("utf-8")

    def reachable(self) -> frozenset[str]:
        """Names of the resources reachable from the start URLs by following links."""
        starts = set(self.start_urls)
        start = {r.name for r in self.resources if r.url in starts or r.iri in starts}
        todo = list(start)
        seen = set(start)
        for _ in range(len(self.resources) + 1):  # bounded breadth-first walk
            if not todo:
                break
            nxt: list[str] = []
            for name in todo:
                res = self.get(name)
                targets = [lk.to for lk in res.links]
                if res.redirect_to:
                    targets.append(res.redirect_to)
                for t in targets:
                    if t not in seen:
                        seen.add(t)
                        nxt.append(t)
            todo = nxt
        return frozenset(seen)


_URI_RE = re.compile(r"^(?:([^:/?#]+):)?(?://([^/?#]*))?([^?#]*)(?:(\?)([^#]*))?(?:#(.*))?$")


def remove_dot_segments(path: str) -> str:
    """RFC 3986 section 5.2.4, written out step by step."""
    inp = path
    out: list[str] = []
    while inp:  # every branch shortens inp, so the loop is bounded by len(path)
        if inp.startswith("../"):
            inp = inp[3:]
        elif inp.startswith("./"):
            inp = inp[2:]
        elif inp.startswith("/./"):
            inp = "/" + inp[3:]
        elif inp == "/.":
            inp = "/"
        elif inp.startswith("/../"):
            inp = "/" + inp[4:]
            if out:
                out.pop()
        elif inp == "/..":
            inp = "/"
            if out:
                out.pop()
        elif inp in (".", ".."):
            inp = ""
        else:
            start = 1 if inp.startswith("/") else 0
            cut = inp.find("/", start)
            cut = len(inp) if cut < 0 else cut
            out.append(inp[:cut])
            inp = inp[cut:]
    return "".join(out)


def absolute_href(base: str, href: str) -> str:
    """Resolve *href* against *base* (RFC 3986 section 5.2.2, strict), fragment dropped.

    An href with a scheme is returned exactly as written (minus its fragment), so
    alias spellings such as ``HTTP://WWW.Example.TEST/x/./y`` survive.  Unlike
    :func:`urllib.parse.urljoin` this keeps an empty query (``/search?``).
    """
    m = _URI_RE.match(href)
    b = _URI_RE.match(base)
    assert m is not None and b is not None  # the regex matches every string
    scheme, auth, path, qmark, query, _frag = m.groups()
    if scheme is not None:
        return href.split("#", 1)[0]
    b_scheme, b_auth, b_path, b_qmark, b_query, _ = b.groups()
    if auth is not None:
        t_auth, t_path, t_q = auth, remove_dot_segments(path), (qmark, query)
    else:
        t_auth = b_auth
        if path == "":
            t_path = b_path
            t_q = (qmark, query) if qmark else (b_qmark, b_query)
        else:
            if path.startswith("/"):
                merged = path
            elif b_auth is not None and b_path == "":
                merged = "/" + path
            else:
                merged = b_path[: b_path.rfind("/") + 1] + path
            t_path = remove_dot_segments(merged)
            t_q = (qmark, query)
    out = f"{b_scheme}:" if b_scheme else ""
    if t_auth is not None:
        out += "//" + t_auth
    out += t_path
    if t_q[0]:
        out += "?" + (t_q[1] or "")
    return out


def render_page(res: Resource) -> str:
    """Render a small, valid HTML page for *res* in its host's language."""
    h = res.host
    esc = html.escape
    items = "\n".join(
        f'    <li><a href="{esc(lk.href, quote=True)}">{esc(lk.text or lk.href)}</a></li>'
        for lk in res.links
    )
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="{h.lang}" dir="{h.dir}">\n'
        '<head><meta charset="utf-8">'
        f"<title>{esc(res.title)}</title></head>\n"
        "<body>\n"
        f'  <h1 id="top">{esc(res.title)}</h1>\n'
        f"  <p>{esc(res.text)}</p>\n"
        f"  <ul>\n{items}\n  </ul>\n"
        f'  <h2 id="section-2">§2</h2>\n'
        "</body>\n</html>\n"
    )


def distinct_resource_count(site: Site | None = None) -> int:
    """Number of distinct resources (pages + redirects) of *site* (default: the demo web)."""
    return len((site or DEMO_SITE).keys)


# --------------------------------------------------------------------------- demo web

EN = Host("www.example.test", "en")
RU = Host("пример.испытание", "ru")
ZH = Host("例子.测试", "zh")
EL = Host("παράδειγμα.δοκιμή", "el")
AR = Host("مثال.إختبار", "ar", "rtl")
DE = Host("bücher.example", "de")
SS = Host("straße.example", "de")  # IDNA 2008 keeps ß; IDNA 2003 maps it to "ss"

_IDNA2003_TRAP = "idna2008: IDNA 2003 (Python's 'idna' codec, used by w3lib) maps ß to ss"
_NFD = "cafe\u0301"  # "café" with a combining acute accent (NFD)
assert _NFD != "café"


def L(href: str, to: str, text: str = "") -> Link:  # noqa: N802 - tiny constructor alias
    """Shorthand for :class:`Link`."""
    return Link(href, to, text)


def _pages() -> Iterable[Resource]:
    home = L("http://www.example.test/", "en-home", "Example home")
    yield Resource(
        "en-home", EN, "/", None, "Example Test Web — Home",
        "A small web of aliases: many spellings, few resources.",
        (
            L("#top", "en-home", "Top of this page"),
            L("/docs", "en-docs-redirect", "Docs (no slash, redirects)"),
            L("docs/", "en-docs", "Docs"),
            L("HTTP://WWW.Example.TEST/docs/", "en-docs", "Docs (shouting)"),
            L("http://www.example.test:80/docs/#top", "en-docs", "Docs (port 80)"),
            L("/~user/", "en-user", "~user"),
            L("/%7euser/", "en-user", "%7euser"),
            L("/%7Euser/", "en-user", "%7Euser"),
            L("http://www.example.test/a/./b/../b", "en-ab", "a/b with dots"),
            L("/a/b", "en-ab", "a/b"),
            L("/a%2Fb", "en-a2fb", "a%2Fb"),
            L("/page", "en-page", "page"),
            L("/Page", "en-Page", "Page"),
            L("/search", "en-search", "search"),
            L("/search?", "en-search-empty", "search?"),
            L("/list?a=1&b=2", "en-list-ab", "a=1&b=2"),
            L("/list?b=2&a=1", "en-list-ba", "b=2&a=1"),
            L("/q?x=%26", "en-q-escaped", "x=%26"),
            L("/q?x=&", "en-q-amp", "x=&"),
            L("http://пример.испытание/", "ru-home", "Пример"),
            L("http://xn--e1afmkfd.xn--80akhbyknj4f/", "ru-home", "Пример (punycode)"),
            L("http://例子.测试/", "zh-home", "例子"),
            L("http://παράδειγμα.δοκιμή/", "el-home", "Παράδειγμα"),
            L("http://مثال.إختبار/", "ar-home", "مثال"),
            L("http://bücher.example/", "de-home", "Bücher"),
            L("http://straße.example/", "ss-home", "Straße"),
        ),
    )
    yield Resource("en-docs-redirect", EN, "/docs", redirect_to="en-docs")
    yield Resource(
        "en-docs", EN, "/docs/", None, "Documentation", "The docs index.",
        (
            L("./guide/intro", "en-intro", "Introduction"),
            L("guide/extra/../intro", "en-intro", "Introduction (dots)"),
            L("/docs/./guide/intro#section-2", "en-intro", "Introduction §2"),
            L("/docs", "en-docs-redirect", "This page without the slash"),
            L("../", "en-home", "Up"),
        ),
    )
    yield Resource(
        "en-intro", EN, "/docs/guide/intro", None, "Introduction", "Start here.",
        (
            L("../", "en-docs", "Docs"),
            L("../../", "en-home", "Home"),
            L("http://www.example.test/docs/guide/%69ntro", "en-intro", "%69ntro"),
        ),
    )
    yield Resource(
        "en-user", EN, "/~user/", None, "A user's home page", "Tilde, escaped or not.",
        (L("./", "en-user", "Here"), L("../", "en-home", "Up")),
    )
    yield Resource("en-ab", EN, "/a/b", None, "Two segments: a / b", "Path /a/b.", (home,))
    yield Resource(
        "en-a2fb", EN, "/a%2Fb", None, "One segment: a%2Fb", "The slash is data here.", (home,)
    )
    yield Resource("en-page", EN, "/page", None, "page (lowercase)", "Paths are case-sensitive.",
                   (home,))
    yield Resource("en-Page", EN, "/Page", None, "Page (capitalised)", "A different page.",
                   (home,))
    yield Resource("en-search", EN, "/search", None, "Search (no query)", "No '?' at all.",
                   (home,))
    yield Resource(
        "en-search-empty", EN, "/search", "", "Search (empty query)", "A bare '?'.", (home,),
        trap="empty-query: w3lib safe_url_string (Scrapy Request) drops a bare '?'",
    )
    yield Resource("en-list-ab", EN, "/list", "a=1&b=2", "List a=1&b=2", "Query order 1.",
                   (home,))
    yield Resource(
        "en-list-ba", EN, "/list", "b=2&a=1", "List b=2&a=1", "Query order 2.", (home,),
        trap="query-order: w3lib canonicalize_url sorts query arguments",
    )
    yield Resource("en-q-escaped", EN, "/q", "x=%26", "Query x = '&'", "x is an ampersand.",
                   (home,))
    yield Resource("en-q-amp", EN, "/q", "x=&", "Query x = ''", "x is empty, then '&'.",
                   (home,))

    ru_home = L("/", "ru-home", "Главная")
    yield Resource(
        "ru-home", RU, "/", None, "Пример — главная", "Добро пожаловать на испытательный сайт.",
        (
            L("/статья", "ru-article", "Статья"),
            L("/%D1%81%D1%82%D0%B0%D1%82%D1%8C%D1%8F", "ru-article", "Статья (URI)"),
            L("/%d1%81%d1%82%d0%b0%d1%82%d1%8c%d1%8f#section-2", "ru-article", "Статья §2"),
            L("./новости/", "ru-news", "Новости"),
            L("HTTP://ПРИМЕР.ИСПЫТАНИЕ/новости/", "ru-news", "НОВОСТИ"),
            L("/поиск?q=тест", "ru-search", "Поиск"),
            L("/поиск?q=%D1%82%D0%B5%D1%81%D1%82", "ru-search", "Поиск (URI)"),
            home,
        ),
    )
    yield Resource(
        "ru-article", RU, "/статья", None, "Статья", "Текст статьи о канонических адресах.",
        (
            L("#section-2", "ru-article", "Раздел 2"),
            L("новости/", "ru-news", "Новости"),
            L("http://xn--e1afmkfd.xn--80akhbyknj4f:80/статья", "ru-article", "Эта статья"),
            ru_home,
        ),
    )
    yield Resource(
        "ru-news", RU, "/новости/", None, "Новости", "Последние новости.",
        (
            L("../статья", "ru-article", "Статья"),
            L("2024/../", "ru-news", "Архив"),
            L("../", "ru-home", "Наверх"),
        ),
    )
    yield Resource("ru-search", RU, "/поиск", "q=тест", "Поиск: тест", "Результаты поиска.",
                   (ru_home,))

    yield Resource(
        "zh-home", ZH, "/", None, "例子 — 首页", "欢迎来到测试网站。",
        (
            L("/文章/一", "zh-1", "文章一"),
            L("/%E6%96%87%E7%AB%A0/%E4%B8%80", "zh-1", "文章一 (URI)"),
            L("http://xn--fsqu00a.xn--0zwm56d/文章/一", "zh-1", "文章一 (punycode)"),
            L("文章/二", "zh-2", "文章二"),
            L("/%e6%96%87%e7%ab%a0/%e4%ba%8c", "zh-2", "文章二 (小写)"),
            home,
        ),
    )
    yield Resource(
        "zh-1", ZH, "/文章/一", None, "文章一", "第一篇文章。",
        (L("二", "zh-2", "下一篇"), L("./一#top", "zh-1", "本页"), L("../", "zh-home", "首页")),
    )
    yield Resource(
        "zh-2", ZH, "/文章/二", None, "文章二", "第二篇文章。",
        (L("一", "zh-1", "上一篇"), L("/", "zh-home", "首页")),
    )

    yield Resource(
        "el-home", EL, "/", None, "Παράδειγμα — Αρχική", "Καλώς ήρθατε στον δοκιμαστικό ιστότοπο.",
        (
            L("/σελίδα", "el-page", "Σελίδα"),
            L("/%CF%83%CE%B5%CE%BB%CE%AF%CE%B4%CE%B1#top", "el-page", "Σελίδα (URI)"),
            L("http://ΠΑΡΆΔΕΙΓΜΑ.ΔΟΚΙΜΉ/σελίδα", "el-page", "ΣΕΛΙΔΑ"),
            L("/Σελίδα", "el-Page", "Σελίδα (κεφαλαίο)"),
            home,
        ),
    )
    yield Resource("el-page", EL, "/σελίδα", None, "Σελίδα", "Μια σελίδα.",
                   (L("./", "el-home", "Αρχική"),))
    yield Resource("el-Page", EL, "/Σελίδα", None, "Σελίδα (κεφαλαίο Σ)", "Άλλη σελίδα.",
                   (L("./", "el-home", "Αρχική"),))

    yield Resource(
        "ar-home", AR, "/", None, "مثال — الصفحة الرئيسية", "مرحبا بكم في موقع الاختبار.",
        (
            L("/صفحة", "ar-page", "صفحة"),
            L("/%D8%B5%D9%81%D8%AD%D8%A9", "ar-page", "صفحة (URI)"),
            L("http://xn--mgbh0fb.xn--kgbechtv/صفحة", "ar-page", "صفحة (punycode)"),
            home,
        ),
    )
    yield Resource("ar-page", AR, "/صفحة", None, "صفحة", "نص الصفحة.",
                   (L("./", "ar-home", "الرئيسية"),))

    de_home = L("/", "de-home", "Startseite")
    yield Resource(
        "de-home", DE, "/", None, "Bücher — Startseite", "Willkommen im Buchladen.",
        (
            L("/über-uns", "de-about", "Über uns"),
            L("/%C3%BCber-uns", "de-about", "Über uns (URI)"),
            L("http://bücher.example:80/über-uns", "de-about", "Über uns (:80)"),
            L("http://xn--bcher-kva.example/%c3%bcber-uns", "de-about", "Über uns (punycode)"),
            L("/café", "de-cafe-nfc", "Café (NFC)"),
            L("/caf%C3%A9", "de-cafe-nfc", "Café (NFC, URI)"),
            L("/" + _NFD, "de-cafe-nfd", "Café (NFD)"),
            L("/cafe%CC%81", "de-cafe-nfd", "Café (NFD, URI)"),
            L("http://straße.example/karte", "ss-map", "Stadtkarte"),
            home,
        ),
    )
    yield Resource("de-about", DE, "/über-uns", None, "Über uns", "Wir lieben Bücher.",
                   (de_home,))
    yield Resource("de-cafe-nfc", DE, "/café", None, "Café (NFC)", "Kaffee und Kuchen.",
                   (de_home,))
    yield Resource(
        "de-cafe-nfd", DE, "/" + _NFD, None, "Café (NFD)", "Ein anderes Café.", (de_home,),
        trap="nfc: an NFC-normalizing canonicalizer merges this with /café (NFC)",
    )

    yield Resource(
        "ss-home", SS, "/", None, "Straße — Startseite", "Eine Straße mit ß.",
        (L("karte", "ss-map", "Karte"), L("/", "ss-home", "Startseite")),
        trap=_IDNA2003_TRAP,
    )
    yield Resource("ss-map", SS, "/karte", None, "Stadtkarte", "Die Karte der Straße.",
                   (L("./", "ss-home", "Startseite"),), trap=_IDNA2003_TRAP)


DEMO_SITE = Site(
    hosts=(EN, RU, ZH, EL, AR, DE, SS),
    resources=tuple(_pages()),
    start_urls=("http://www.example.test/",),
)
"""The demo alias web; start crawling at :attr:`Site.start_urls`."""
