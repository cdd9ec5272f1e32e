"""Every use of a Scrapy API that is not public, in one place, each checked at import.

The rest of the package uses only the public APIs of Scrapy, w3lib, Twisted,
scrapy-redis and idna (``tests/plugin/test_compat.py`` enforces it).  Where Scrapy
offers no public seam for something the plugin must do, the seam is here, and
this module checks at import time that the installed Scrapy still has it in the
expected shape: if not, importing ``iri_scrapy``'s Scrapy plugin fails at once
with an :class:`ImportError` naming the seam, the installed Scrapy version and
the supported range, instead of misbehaving in the middle of a crawl.

Seams:

``CrawlSpider._build_request(rule_index, link)``
    ``CrawlSpider`` builds each rule request with ``Request(url=link.url, ...)``,
    and ``Request()`` passes the URL through ``w3lib.url.safe_url_string``, which
    drops a bare ``?`` (another resource for RFC 3987 section 5.3.3).  No
    public hook sees the :class:`~scrapy.link.Link` and the request together
    (``Rule(process_request=...)`` gets the request only, its URL already
    altered), so :class:`LinkRequestCrawlSpider` overrides this method and
    hands both to its public hook :meth:`~LinkRequestCrawlSpider.rule_request`.

``scrapy.http.request.safe_url_string`` and ``w3lib.html.safe_url_string``
    ``Request()`` (``Request._set_url``) runs every URL through the module-level
    name ``safe_url_string`` of ``scrapy.http.request``, and w3lib's
    ``get_base_url``/``get_meta_refresh`` (``<base href>``, meta refresh) through
    the one of ``w3lib.html``: both are ``w3lib.url.safe_url_string``, whose
    IDNA 2003 host conversion maps ``straße.test`` to ``strasse.test``, another
    domain, and which drops a bare ``?``.  Every way a URL enters Scrapy
    (``start_urls``, ``Request()`` anywhere, media pipelines, ``SitemapSpider``,
    meta refresh, ``scrapy shell``/``fetch``) passes through them, and no
    public hook runs before.  :func:`install_idna2008` (called by the add-on
    unless ``IRI_IDNA2008_REQUESTS = False``) rebinds both names to
    :func:`idna2008_safe_url_string`; :func:`uninstall_idna2008` undoes it.
    The check below makes sure that both names are still w3lib's function and
    that ``Request._set_url``, ``get_base_url`` and w3lib's meta refresh
    parser still look them up by that name.

``scrapy.commands.fetch.Command.run``
    ``scrapy fetch URL`` builds its ``Request(URL)`` before the crawler exists,
    so before the add-on can install the ``safe_url_string`` seam above.
    :class:`IRIFetchCommand` (registered as the ``fetch`` command through the
    ``scrapy.commands`` entry point) installs it first when the settings enable
    the add-on, and is Scrapy's command otherwise.  Checked: ``run(args, opts)``
    and its call of ``Request``.  (``scrapy shell`` builds its request after the
    crawler's add-ons ran and needs nothing.)

It also checks the public features the plugin cannot work without, which
set the floor of the supported range:

``meta["verbatim_url"]`` (Scrapy 2.17+)
    ``Request()`` keeps such a URL as given.  Without it a canonical URI that
    ``safe_url_string`` would alter (a bare ``?``) cannot be requested as is.
    (Scrapy 2.14+ also calls downloader middlewares without a ``spider``
    argument, as the plugin's are written, and has
    ``ExecutionEngine.close_spider_async``, which the Redis filter uses.)

Every adapter module that meets Scrapy imports this one first, so these checks run
as soon as any part of the plugin is loaded (the core and the CLI import no Scrapy).
"""

from __future__ import annotations

import contextlib
import inspect
import re
import threading
from importlib import import_module
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import scrapy
import scrapy.http.request as _scrapy_request_module
import w3lib.html as _w3lib_html
import w3lib.url as _w3lib_url
from scrapy import Request
from scrapy.spiders import CrawlSpider

from iri_scrapy.core.errors import IRIError
from iri_scrapy.core.hosts import host_to_ascii

if TYPE_CHECKING:
    from scrapy.link import Link

__all__ = [
    "SUPPORTED_SCRAPY", "LinkRequestCrawlSpider", "unsupported", "idna2008_safe_url_string",
    "install_idna2008", "uninstall_idna2008", "idna2008_installed", "FetchCommand",
    "w3lib_keeps",
]

#: The Scrapy releases supported: CI runs the tests on 2.17.0 and on the newest release.
SUPPORTED_SCRAPY = "Scrapy 2.17 or later (tested on 2.17.0 and the newest)"


def unsupported(what: str) -> ImportError:
    """The error for a seam the installed Scrapy lacks (or has in another shape)."""
    return ImportError(
        f"iri_scrapy needs {what}, which Scrapy {scrapy.__version__} does not have; "
        f"supported: {SUPPORTED_SCRAPY}"
    )


def _parameters(func: Any) -> list[str] | None:
    try:
        return list(inspect.signature(func).parameters)
    except (TypeError, ValueError):
        return None


# --------------------------------------------------------- meta["verbatim_url"]

VERBATIM_URL = 'the request meta key "verbatim_url" (Request() keeping the URL as given)'
if Request("http://example.test/?", meta={"verbatim_url": True}).url != "http://example.test/?":
    raise unsupported(VERBATIM_URL)


# --------------------------------------------------- CrawlSpider._build_request

BUILD_REQUEST = "scrapy.spiders.CrawlSpider._build_request(rule_index, link)"
if _parameters(getattr(CrawlSpider, "_build_request", None)) != ["self", "rule_index", "link"]:
    raise unsupported(BUILD_REQUEST)


class LinkRequestCrawlSpider(CrawlSpider):
    """``CrawlSpider`` with a hook on each rule request and the link it was built for."""

    def rule_request(self, request: Request, link: Link) -> Request:
        """The request to send for *link* (*request* is the one ``CrawlSpider`` built).

        Override to adjust it; ``Rule(process_request=...)`` still runs afterwards.
        """
        return request

    def _build_request(self, rule_index: int, link: Link) -> Request:
        return self.rule_request(super()._build_request(rule_index, link), link)


# ------------------------------------------- safe_url_string in Request() and w3lib.html

SAFE_URL_STRING = (
    "Request._set_url, w3lib.html.get_base_url and w3lib.html.get_meta_refresh calling "
    "the module-level name safe_url_string (w3lib.url.safe_url_string)"
)
_W3LIB_SAFE_URL_STRING = _w3lib_url.safe_url_string


def _calls_by_name(func: Any, name: str) -> bool:
    """True if the code of *func* (or of a function nested in its module) loads global *name*."""
    code = getattr(func, "__code__", None)
    return code is not None and name in code.co_names


def _meta_refresh_parsers() -> list[Any]:
    """The w3lib.html functions that turn a meta refresh URL into a URL."""
    return [f for f in vars(_w3lib_html).values()
            if inspect.isfunction(f) and f.__module__ == _w3lib_html.__name__
            and _calls_by_name(f, "safe_url_string") and f is not _w3lib_html.get_base_url]


if not (
    getattr(_scrapy_request_module, "safe_url_string", None) is _W3LIB_SAFE_URL_STRING
    and getattr(_w3lib_html, "safe_url_string", None) is _W3LIB_SAFE_URL_STRING
    and _calls_by_name(getattr(Request, "_set_url", None), "safe_url_string")
    and _calls_by_name(_w3lib_html.get_base_url, "safe_url_string")
    and _meta_refresh_parsers()
    and list(inspect.signature(_W3LIB_SAFE_URL_STRING).parameters)
    == ["url", "encoding", "path_encoding", "quote_path"]
):
    raise unsupported(SAFE_URL_STRING)

_C0_SPACE = "".join(map(chr, range(0x21)))  # what w3lib strips around a URL (C0 and space)


def _empty_query(url: str) -> bool:
    """True if *url* has a ``?`` with nothing after it but an optional fragment."""
    head = url.split("#", 1)[0].rstrip(_C0_SPACE)
    return head.endswith("?") and head.count("?") == 1


def _uts46_host(url: str) -> str:
    """*url* with a non-ASCII host written as its UTS 46 non-transitional A-label.

    Raises :class:`~iri_scrapy.IRIError` (no such A-label) or ``ValueError``.
    """
    netloc = urlsplit(url.strip(_C0_SPACE)).netloc
    if netloc.isascii():
        return url
    start = url.find(netloc)
    userinfo, at, hostport = netloc.rpartition("@")
    host, colon, port = hostport.rpartition(":")
    if not colon or not port.isdigit() or host.endswith("]"):
        host, colon, port = hostport, "", ""
    if host.startswith("["):
        return url
    ascii_netloc = f"{userinfo}{at}{host_to_ascii(host)}{colon}{port}"
    return url[:start] + ascii_netloc + url[start + len(netloc):]


# An http(s) URL that w3lib's safe_url_string returns unchanged (its URL parser,
# IDNA and quoting all leave it alone; tests/plugin/test_compat.py checks it on random
# URLs of this shape): a host of lowercase LDH labels, not punycode, whose last
# label starts with a letter (so not read as IPv4), no port, userinfo or empty
# query/fragment; path, query and fragment of characters w3lib never quotes
# ("'" is quoted in an http query), escapes of two uppercase hex digits.
_KEPT = "\\-A-Za-z0-9_.~!$&()*+,;=:@/%"
_W3LIB_KEPT_RE = re.compile(
    "https?://(?:[a-z0-9-]{1,63}\\.)*[a-z][a-z0-9-]{0,62}"
    f"/[{_KEPT}']*"
    f"(?:\\?[{_KEPT}?]+)?"
    f"(?:#[{_KEPT}'?]+)?"
)
_BAD_ESCAPE_RE = re.compile("%(?![0-9A-F]{2})")
#: Encodings in which the ASCII characters of such a URL are their ASCII bytes.
_ASCII_ENCODINGS = frozenset({"utf8", "utf-8", "UTF-8", "ascii", "latin-1", "latin1", "cp1252",
                              "windows-1252", "iso-8859-1", "cp1251", "windows-1251"})


def w3lib_keeps(url: str) -> bool:
    """True if w3lib's ``safe_url_string`` surely returns *url* unchanged (see above).

    Conservative (False for many URLs w3lib keeps as well) and cheap: a regular
    expression, no URL parser; :func:`idna2008_safe_url_string` returns such a URL
    as it is.
    """
    return (
        _W3LIB_KEPT_RE.fullmatch(url) is not None
        and "/." not in url  # dot segments (WHATWG removes them)
        and "xn--" not in url  # punycode labels (WHATWG validates them)
        and ("%" not in url or (
            "%2E" not in url  # an escaped dot segment
            and _BAD_ESCAPE_RE.search(url) is None
        ))
    )


def idna2008_safe_url_string(
    url: str | bytes, encoding: str = "utf8", path_encoding: str = "utf8",
    quote_path: bool = True,
) -> str:
    """``w3lib.url.safe_url_string`` with IDNA 2008 hosts and a bare ``?`` kept.

    A non-ASCII host is converted with UTS 46 non-transitional processing
    (:func:`iri_scrapy.core.hosts.host_to_ascii`: ``straße.test`` is
    ``xn--strae-oqa.test``, not IDNA 2003's ``strasse.test``) before w3lib
    sees the URL; a host UTS 46 refuses is left to w3lib, as before.  An empty
    query (``/search?``, another resource than ``/search``, RFC 3987 5.3.3)
    is kept.  Everything else is w3lib's function, unchanged.
    """
    if (url.__class__ is str and encoding in _ASCII_ENCODINGS
            and path_encoding in _ASCII_ENCODINGS and w3lib_keeps(url)):
        return url  # what w3lib's function returns for it, without its URL parser
    if isinstance(url, str) and not url.isascii():
        with contextlib.suppress(IRIError, ValueError):  # no A-label: w3lib's, as before
            url = _uts46_host(url)
    out = _W3LIB_SAFE_URL_STRING(url, encoding, path_encoding, quote_path)
    if isinstance(url, str) and "?" in url and "?" not in out and _empty_query(url):
        head, hash_, fragment = out.partition("#")
        out = f"{head}?{hash_}{fragment}"
    return out


_installed = 0
_install_lock = threading.Lock()


def install_idna2008() -> None:
    """Rebind ``safe_url_string`` in ``scrapy.http.request`` and ``w3lib.html`` to ours.

    Counted: each call needs one :func:`uninstall_idna2008` (the add-on pairs
    them per crawler: installed when the crawler applies its settings,
    removed when its engine stops).  Process-wide while installed.
    """
    global _installed
    with _install_lock:
        _installed += 1
        _scrapy_request_module.safe_url_string = idna2008_safe_url_string  # type: ignore[assignment]
        _w3lib_html.safe_url_string = idna2008_safe_url_string  # type: ignore[assignment]


def uninstall_idna2008() -> None:
    """Undo one :func:`install_idna2008`; w3lib's function is back after the last."""
    global _installed
    with _install_lock:
        _installed = max(0, _installed - 1)
        if not _installed:
            _scrapy_request_module.safe_url_string = _W3LIB_SAFE_URL_STRING
            _w3lib_html.safe_url_string = _W3LIB_SAFE_URL_STRING


def idna2008_installed() -> bool:
    """True while :func:`install_idna2008` is in force."""
    return _scrapy_request_module.safe_url_string is idna2008_safe_url_string


# ------------------------------------------- scrapy fetch: its Request() before the crawler

FETCH_COMMAND = (
    "scrapy.commands.fetch.Command.run(args, opts) building its Request() before the crawler"
)
#: Scrapy's ``fetch`` command, subclassed by :class:`iri_scrapy.commands.FetchCommand`.
FetchCommand: Any = getattr(import_module("scrapy.commands.fetch"), "Command", None)
if _parameters(getattr(FetchCommand, "run", None)) != ["self", "args", "opts"] or not (
    _calls_by_name(FetchCommand.run, "Request")
):
    raise unsupported(FETCH_COMMAND)
