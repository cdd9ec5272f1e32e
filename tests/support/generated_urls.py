"""Seeded random URL and IRI lines, in place of the benchmark corpora.

The benchmarks read ../shared/corpus (real crawl URLs, phishing URLs, IRIs); the
tests must not need it, so they use lines generated here from a fixed seed.
Each kind imitates the shapes of one corpus and adds the near-misses a
canonicalizer must notice (a default port, a ``%7e``, a ``/./``, an upper-case
host, a stray ``%``, a bad A-label):

``crawl``   https and ``file://`` URLs, mostly already canonical (like urls_real.txt)
``bait``    http(s) URLs with IDN and punycode hosts, %-encoded UTF-8, mixed case,
            junk characters and some unparseable lines (like urls_userbait.txt)
``iris``    IRIs in many scripts: non-ASCII host, path, query and fragment
            (like iris_dev.txt)
"""

from __future__ import annotations

import random
from collections.abc import Callable
from urllib.parse import quote

KINDS = ("crawl", "bait", "iris")

_WORDS = [
    "index", "home", "about", "news", "login", "account", "secure", "update", "docs", "api",
    "v2", "search", "wiki", "users", "images", "static", "Main_Page", "Home.aspx", "LTW.cfm",
    "default.asp", "index.html", "page.php", "README.md", "test-tty-stdout-end.out", "a_b",
    "deps", "v8", "test", "mjsunit", "compiler", "regress-4470-1.js", "node_modules", "@scope",
]
_TLDS = ["com", "org", "net", "de", "ru", "co.uk", "com.co", "io", "ph", "se", "jp", "example"]
_LABELS = ["www", "mail", "login", "secure", "staging", "dev", "cdn", "en", "vps-2303d288", "my"]
_SCRIPTS = [
    "résumé", "bücher", "straße", "café", "Polynésie", "México", "Canadá",  # Latin
    "амхарська", "Канада", "новости", "пример",  # Cyrillic
    "ニュース", "アルジェリア", "例子", "测试", "納豆",  # CJK
    "อาราวัก", "ไทย",  # Thai
    "التشيكية", "مثال",  # Arabic
    "Ελλάδα", "βόλος",  # Greek
    "한국어", "हिन्दी", "ქართული", "עברית",
    "\U00010300\U00010301\U00010302",  # Old Italic, outside the BMP
]
_IDN_TLDS = ["рф", "бел", "中国", "ไทย", "香港", "com", "de", "org"]


def _host(rnd: random.Random) -> str:
    labels = [rnd.choice(_LABELS)] if rnd.random() < 0.5 else []
    labels.append(rnd.choice(_WORDS).lower().replace("_", "-").replace(".", "-").strip("-@") or "a")
    return ".".join([*labels, rnd.choice(_TLDS)])


def _path(rnd: random.Random, words: list[str]) -> str:
    return "/" + "/".join(rnd.choice(words) for _ in range(rnd.randint(0, 5)))


def _query(rnd: random.Random) -> str:
    pairs = []
    for _ in range(rnd.randint(1, 4)):
        key = rnd.choice(["q", "id", "term", "client_id", "redirect_uri", "TYPE", "lang", "x"])
        value = rnd.choice([
            str(rnd.randint(0, 10**9)), "openid", "code%20id_token", "https:%2F%2Fh.example%2F",
            "%2bSM%2f", "", "a+b", "%E2%82%AC",
        ])
        pairs.append(f"{key}={value}")
    return "?" + "&".join(pairs)


# Changes that keep a URL valid but (mostly) no longer canonical, or plainly broken.
_MUTATIONS: list[Callable[[str, random.Random], str]] = [
    lambda u, r: u.replace("://", "://" + r.choice(["WWW.", "Mail.", "X."]), 1),
    lambda u, r: u.upper() if r.random() < 0.2 else u[:5].upper() + u[5:],
    lambda u, r: u.replace("/", ":80/", 3).replace(":80/", "/", 2) if u.startswith("http:") else u + "#",
    lambda u, r: u.replace("/", ":443/", 3).replace(":443/", "/", 2),
    lambda u, r: u + r.choice(["/./x", "/a/../b", "/..", "/.", "/%2e/", "/%2E%2E/y"]),
    lambda u, r: u + r.choice(["/%7euser", "/%41bc", "/%c3%a9", "/%2f", "/%25", "/100%", "/%zz", "/%"]),
    lambda u, r: u + r.choice(["?", "#", "?#", "#frag", "?a=1#b", "#%7E"]),
    lambda u, r: u + r.choice([" x", "\\x", "<>", '"', "{}", "|", "^", "`", "[x]", "\t"]),
    lambda u, r: u.replace("://", "://user:pw@", 1),
    lambda u, r: r.choice(["http://[FE80::ABCD]/", "http://127.0.0.1:8080/x", "http://[::1]:80/"]),
    lambda u, r: r.choice(["http://a:b:c/", "http://h.com:8x/", "http://exa mple.com/", "http:", "//h/x"]),
    lambda u, r: '"' + u,
    lambda u, r: u.replace("://", "://xn--zz-invalid.", 1),
    lambda u, r: u + "/" + "".join(chr(r.randint(0x80, 0xFF)) for _ in range(r.randint(1, 4))),
    lambda u, r: u + "/r\udce9sum\udce9",  # a Latin-1 byte read with errors="surrogateescape"
]


def _crawl(rnd: random.Random) -> str:
    if rnd.random() < 0.45:
        return "file://" + _path(rnd, _WORDS)[1:] + "/" + rnd.choice(_WORDS)
    url = f"https://{_host(rnd)}{_path(rnd, _WORDS)}"
    if rnd.random() < 0.2:
        url += _query(rnd)
    if rnd.random() < 0.1:
        url += "/" + quote(rnd.choice(["New Pages", "secure Login.htm", "Smith & Wesson"]), safe="")
    return url


def _bait(rnd: random.Random) -> str:
    roll = rnd.random()
    if roll < 0.2:
        host = ".".join([rnd.choice(_LABELS), rnd.choice(_SCRIPTS).lower(), rnd.choice(_IDN_TLDS)])
    elif roll < 0.35:
        label = rnd.choice(["bücher", "sécurité-outlook", "mühringen", "twïtter", "例子"])
        host = label.encode("punycode").decode("ascii")
        host = f"{rnd.choice(_LABELS)}.xn--{host}.{rnd.choice(_TLDS)}"
    else:
        host = _host(rnd)
    url = f"{rnd.choice(['http', 'https'])}://{host}{_path(rnd, _WORDS)}"
    if rnd.random() < 0.3:
        url += "/" + quote(rnd.choice(_SCRIPTS), safe="")
    if rnd.random() < 0.3:
        url += _query(rnd)
    if rnd.random() < 0.5:
        url = rnd.choice(_MUTATIONS)(url, rnd)
    return url


def _iri(rnd: random.Random) -> str:
    word = rnd.choice(_SCRIPTS)
    roll = rnd.random()
    if roll < 0.4:
        lang = rnd.choice(["fr", "es", "uk", "ru", "vi", "th", "ar", "ja", "zh", "el", "ko"])
        if rnd.random() < 0.5:
            url = f"https://{lang}.wikipedia.org/wiki/{word.replace(' ', '_')}"
        else:
            url = f"https://{lang}.wikipedia.org/w/index.php?search={word}&title=Special:Search"
    elif roll < 0.7:
        url = f"http://{rnd.choice(_SCRIPTS).lower()}.{rnd.choice(_IDN_TLDS)}/{word}/{rnd.randint(1990, 2030)}"
    else:
        url = f"https://www.example.org/{rnd.choice(['pl', 'de', 'tr'])}/{word}/#{rnd.choice(_SCRIPTS)}"
    if rnd.random() < 0.15:
        url = rnd.choice(_MUTATIONS)(url, rnd)
    return url


_MAKERS = {"crawl": _crawl, "bait": _bait, "iris": _iri}


def lines(kind: str, n: int = 3000, seed: int = 3987) -> list[str]:
    """*n* lines of the given kind (see the module docstring); the same for a given seed."""
    rnd = random.Random(f"{kind}-{seed}")
    make = _MAKERS[kind]
    return [make(rnd) for _ in range(n)]
