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

``Request._set_url`` and ``w3lib.html``'s ``safe_url_string``
    ``Request()`` (``Request._set_url``) runs every URL through the module-level
    name ``safe_url_string`` of ``scrapy.http.request``, and w3lib's
    ``get_base_url``/``get_meta_refresh`` (``<base href>``, meta refresh) through
    the one of ``w3lib.html``: both are ``w3lib.url.safe_url_string``, whose
    IDNA 2003 host conversion maps ``straße.test`` to ``strasse.test``, another
    domain, and which drops a bare ``?``.  No public hook runs before.  Nothing
    here changes what they return, for any crawler: :func:`install_idna2008`
    (the add-on, while its crawler runs; ``IRIFetchCommand``) wraps
    ``Request._set_url`` so that it also *records* the spelling of a URL whose
    IDNA 2008 form may differ (non-ASCII authority, empty query), and
    :func:`apply_idna2008`, called by the add-on's components for the requests
    of their crawler only (:mod:`iri_scrapy.plugin.idna_requests`), sets the URL
    with a clone of ``_set_url`` whose ``safe_url_string`` is
    :func:`idna2008_safe_url_string`.  :data:`get_base_url` and
    :data:`get_meta_refresh` are w3lib's, cloned the same way, for the plugin's
    own link code; :func:`prime_response_caches` fills Scrapy's per-response
    caches of them (``scrapy.utils.response._baseurl_cache``/``_metaref_cache``,
    checked below) so that ``MetaRefreshMiddleware`` and ``response.urljoin`` of
    the add-on's crawler read IDNA 2008 hosts.  (Until 0.1 the add-on rebound the
    two names process-wide: every crawler of the process got IDNA 2008 hosts
    while an add-on crawler ran.)  Upstream: w3lib encodes hosts with Python's
    IDNA 2003 codec (the call scrapy/w3lib#171 is about); no w3lib issue asks for
    UTS 46 non-transitional hosts yet, and its fix would retire all of this.
    The recording wrapper is process-wide (the one part that is: it records, it
    changes no URL) because ``Request()`` has no per-crawler hook on the URL it
    is given; ``meta["verbatim_url"]`` (scrapy/scrapy#833, #7473) keeps a URL as
    given only when the code that builds the request sets it, which a spider's
    own ``Request(url)`` does not.  It is installed by the add-on's extension
    (:class:`iri_scrapy.addon.AddonExtension`) while its crawler runs.  The
    check below makes sure that both names are still w3lib's function and that
    ``Request._set_url``, ``get_base_url`` and w3lib's meta refresh parser still
    look them up by that name.  :func:`meta_refresh_reader` clones w3lib's meta
    refresh parser the same way with a ``safe_url_string`` of the caller's, which
    gets the refresh URL as the tag holds it, before w3lib percent-encodes it
    (``..\\x.html`` would be ``..%5Cx.html`` already), and
    :func:`set_meta_refresh` sets what ``MetaRefreshMiddleware`` then reads (the
    cache below): :mod:`iri_scrapy.plugin.refresh` reads the URL as a browser
    does; :func:`set_base_url` gives Scrapy's readers of the base URL (forms,
    selectors, ``LinkExtractor``) a ``<base href>`` with backslashes as a browser
    reads it (:class:`~iri_scrapy.IRINormalizationMiddleware`).  Upstream: Scrapy
    joins links the RFC 3986 way, not as browsers do (scrapy/scrapy#1304;
    backslashes: scrapy/scrapy#3854; both open); w3lib reads ``\\`` as ``/`` in an
    absolute URL since scrapy/w3lib#285, but ``get_meta_refresh`` encodes the
    relative URL before joining it (no w3lib issue asks for that yet) and
    ``get_base_url`` likewise: a fix of both retires these three functions.

``scrapy.commands.fetch.Command.run``
    ``scrapy fetch URL`` builds its ``Request(URL)`` before the crawler exists,
    so before the add-on can install the ``safe_url_string`` seam above.
    :class:`IRIFetchCommand` (registered as the ``fetch`` command through the
    ``scrapy.commands`` entry point) installs it first when the settings enable
    the add-on, and is Scrapy's command otherwise.  Checked: ``run(args, opts)``
    and its call of ``Request``.  (``scrapy shell`` builds its request after the
    crawler's add-ons ran and needs nothing.)

``Downloader.get_slot_key(request)``, ``Downloader.slots[slot].active``
    ``DownloaderAwarePriorityQueue`` (Scrapy's default ``SCHEDULER_PRIORITY_QUEUE``)
    orders requests by download slot and by each slot's active downloads, through
    its ``DownloaderInterface``, which reads these two; the ``JOBDIR`` frontier
    orders its stored requests the same way (:mod:`iri_scrapy.frontier.lanes`),
    so it reads the same two (:func:`download_slot_key`, :func:`active_downloads`).
    How the queue breaks ties changed (scrapy/scrapy#7293, fixed by #7351: round
    robin after the slot chosen last, else the first slot name):
    :data:`SLOT_ROUND_ROBIN` says which rule the installed Scrapy follows (it has
    ``DownloaderAwarePriorityQueue._next_slot``).  No upstream issue asks for a
    public per-slot activity API yet; one would retire these.

Feed files continued after a kill (the ``JOBDIR`` frontier's staged feeds)
    :mod:`iri_scrapy.frontier.feeds` tells which request each item's feed bytes
    belong to by hearing ``item_scraped`` after Scrapy's ``FeedExporter`` (which
    writes the item in its own receiver): :func:`runs_after_feed_exporter` reads
    the receivers' order (``scrapy.utils.signal``'s pydispatch helpers; Scrapy
    calls them in the order connected).  It continues a JSON or CSV file cut back
    to its last commit by changing the new exporter's first write
    (:func:`feed_continuation`: ``[`` becomes ``,``, the CSV header row is
    dropped), checked at import by recording what ``JsonItemExporter`` and
    ``CsvItemExporter`` write; :func:`feed_options` completes a ``FEEDS`` entry
    as ``FeedExporter`` does.  A batch feed continues at its newest recorded
    batch: :func:`continue_batches` replaces the batch 1 slots ``FeedExporter``
    opened (its ``_start_new_batch`` and ``_get_uri_params``, found among
    ``crawler.extensions.middlewares``), and :func:`tag_batches` tells each slot's
    storage its template and batch id (``FeedSlot.uri_template``, ``batch_id``).
    Upstream: Scrapy cannot append to a JSON or CSV feed nor resume a feed or
    its batch ids after a crash (scrapy/scrapy#5153, scrapy/scrapy#7978); a
    feed-storage hook that knows each item's response and batch would retire these.

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
import types
from collections.abc import Callable
from importlib import import_module
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit
from weakref import WeakKeyDictionary

import scrapy
import scrapy.http.request as _scrapy_request_module
import scrapy.utils.response as _response_utils
import w3lib.html as _w3lib_html
import w3lib.url as _w3lib_url
from scrapy import Request
from scrapy.spiders import CrawlSpider

from iri_scrapy.core.errors import IRIError
from iri_scrapy.core.hosts import host_to_ascii
from iri_scrapy.core.query import split_fragment, strip_fragment

if TYPE_CHECKING:
    from scrapy.link import Link


#: The Scrapy releases supported: CI runs the tests on 2.18.0 and on the newest release.
SUPPORTED_SCRAPY = "Scrapy 2.18 or later (tested on 2.18.0 and the newest)"


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
    head = strip_fragment(url).rstrip(_C0_SPACE)
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
        head, fragment = split_fragment(out)
        out = f"{head}?{fragment}"
    return out


def _clone(func: Any, names: dict[str, Any], namespace: dict[str, Any] | None = None) -> Any:
    """A copy of function *func* whose module globals *names* are replaced (in *namespace*,
    a copy of its module's globals, shared by the clones of one module)."""
    if namespace is None:
        namespace = dict(func.__globals__)
    namespace.update(names)
    clone = types.FunctionType(func.__code__, namespace, func.__name__,
                               func.__defaults__, func.__closure__)
    clone.__kwdefaults__ = func.__kwdefaults__
    clone.__qualname__ = func.__qualname__
    clone.__doc__ = func.__doc__
    clone.__module__ = __name__
    return clone


_OURS = {"safe_url_string": idna2008_safe_url_string}
#: ``Request._set_url`` with IDNA 2008 hosts: Scrapy's code, our ``safe_url_string``.
_STOCK_SET_URL = Request._set_url
_set_url_idna2008 = _clone(_STOCK_SET_URL, _OURS)
#: w3lib.html with IDNA 2008 hosts: its functions that call ``safe_url_string``
#: (``get_base_url``, the meta refresh parser) cloned into one namespace where that
#: name is ours, and ``get_meta_refresh`` calling the clones.  For the add-on's
#: components; w3lib's own functions are left alone.
_W3LIB_HTML_2008: dict[str, Any] = dict(vars(_w3lib_html))
for _f in [_w3lib_html.get_base_url, *_meta_refresh_parsers(), _w3lib_html.get_meta_refresh]:
    _W3LIB_HTML_2008[_f.__name__] = _clone(_f, _OURS, _W3LIB_HTML_2008)
get_base_url = _W3LIB_HTML_2008["get_base_url"]
get_meta_refresh = _W3LIB_HTML_2008["get_meta_refresh"]

# The spelling Request() was given, for the requests whose IDNA 2008 URL may differ
# from w3lib's (a non-ASCII authority, or an empty query): the add-on's components
# convert it, for their crawler only.  Weak keys: gone with the request.
_spellings: WeakKeyDictionary[Request, str] = WeakKeyDictionary()


def _authority_non_ascii(url: str) -> bool:
    head, sep, rest = url.partition("//")
    if not sep:
        return False
    for cut in "/?#":
        rest = rest.split(cut, 1)[0]
    return not rest.isascii()


def w3lib_safe_url_string(
    url: str | bytes, encoding: str = "utf8", path_encoding: str = "utf8",
    quote_path: bool = True,
) -> str:
    """``w3lib.url.safe_url_string``, exactly, only faster on a URL it keeps as is.

    A URL :func:`w3lib_keeps` is returned at once (what w3lib returns for it,
    without its URL parser); any other goes to w3lib's function.  Bound in
    ``scrapy.http.request`` while :func:`install_idna2008` is in force: the same
    output for every crawler, less CPU per ``Request()``.
    """
    if (url.__class__ is str and encoding in _ASCII_ENCODINGS
            and path_encoding in _ASCII_ENCODINGS and w3lib_keeps(url)):  # type: ignore[arg-type]
        return url  # type: ignore[return-value]
    return _W3LIB_SAFE_URL_STRING(url, encoding, path_encoding, quote_path)


def _recording_set_url(self: Request, url: str) -> None:
    """Scrapy's ``Request._set_url``, unchanged; it also remembers the spelling of a URL
    whose IDNA 2008 form may differ (see :func:`apply_idna2008`)."""
    _STOCK_SET_URL(self, url)
    if url.__class__ is str and (
        (not url.isascii() and _authority_non_ascii(url))
        or ((url[-1:] == "?" or "?#" in url) and _empty_query(url))
    ):
        _spellings[self] = url


_installed = 0
_install_lock = threading.Lock()


def install_idna2008() -> None:
    """Start remembering the spelling ``Request()`` was given (see :func:`apply_idna2008`).

    Every ``Request`` keeps the URL Scrapy gives it, in every crawler: this only
    records, for URLs with a non-ASCII authority or an empty query, the URL as
    written (and binds :func:`w3lib_safe_url_string`, w3lib's function with a
    fast path, as ``Request()``'s ``safe_url_string``).  Counted: each call needs
    one :func:`uninstall_idna2008` (the add-on pairs them per crawler: from its
    settings until its engine stops).
    """
    global _installed
    with _install_lock:
        _installed += 1
        Request._set_url = _recording_set_url  # type: ignore[method-assign]
        _scrapy_request_module.safe_url_string = w3lib_safe_url_string  # type: ignore[assignment]


def uninstall_idna2008() -> None:
    """Undo one :func:`install_idna2008`; Scrapy's ``_set_url`` is back after the last."""
    global _installed
    with _install_lock:
        _installed = max(0, _installed - 1)
        if not _installed:
            Request._set_url = _STOCK_SET_URL  # type: ignore[method-assign]
            _scrapy_request_module.safe_url_string = _W3LIB_SAFE_URL_STRING


def idna2008_installed() -> bool:
    """True while :func:`install_idna2008` is in force."""
    return Request._set_url is _recording_set_url  # type: ignore[comparison-overlap]


def pending_idna2008() -> bool:
    """True if some live request has a recorded spelling (a cheap test before
    :func:`apply_idna2008`)."""
    return bool(_spellings)


def apply_idna2008(request: Request) -> bool:
    """Give *request* the URL ``Request()`` makes of its spelling with IDNA 2008 hosts.

    For the add-on's crawler only (its middlewares and its ``request_scheduled``
    handler call it, before anything reads the URL): ``straße.test`` is
    ``xn--strae-oqa.test`` (UTS 46 non-transitional), not IDNA 2003's
    ``strasse.test``, and a bare ``?`` is kept.  The request is changed in place;
    True if its URL changed.  A request whose spelling was not recorded (made
    while nothing was installed, or already converted) is left alone.
    """
    if not _spellings:
        return False
    spelling = _spellings.pop(request, None)
    if spelling is None:
        return False
    before = request.url
    _set_url_idna2008(request, spelling)
    return request.url != before


def prime_response_caches(response: Any, ignore_tags: Any) -> None:
    """Fill Scrapy's per-response ``<base href>`` and meta refresh caches with IDNA 2008 hosts.

    ``scrapy.utils.response.get_base_url``/``get_meta_refresh`` (what
    ``MetaRefreshMiddleware``, ``response.urljoin`` and the link extractors use) keep
    their result per response; the add-on's response middleware computes it first
    with :data:`get_base_url`/:data:`get_meta_refresh` (*ignore_tags* as
    ``METAREFRESH_IGNORE_TAGS``) when the head has a non-ASCII character.
    """
    text = response.text[0:4096]
    if text.isascii():
        return
    base = get_base_url(text, response.url, response.encoding)
    _response_utils._baseurl_cache[response] = base
    _response_utils._metaref_cache[response] = get_meta_refresh(
        text, base, response.encoding, ignore_tags=ignore_tags)


RESPONSE_CACHES = (
    "scrapy.utils.response._baseurl_cache and _metaref_cache (per-response caches of "
    "get_base_url and get_meta_refresh)"
)
if not (
    isinstance(getattr(_response_utils, "_baseurl_cache", None), WeakKeyDictionary)
    and isinstance(getattr(_response_utils, "_metaref_cache", None), WeakKeyDictionary)
    and _calls_by_name(_response_utils.get_base_url, "_baseurl_cache")
    and _calls_by_name(_response_utils.get_meta_refresh, "_metaref_cache")
    and _parameters(_response_utils.get_meta_refresh) == ["response", "ignore_tags"]
):
    raise unsupported(RESPONSE_CACHES)


#: What w3lib's ``get_meta_refresh`` returns: ``(interval, URL)``, or ``(None, None)``.
MetaRefresh = tuple[None, None] | tuple[float, str]


def meta_refresh_reader(safe: Callable[..., str]) -> Callable[..., MetaRefresh]:
    """``w3lib.html.get_meta_refresh`` (same signature) whose refresh URL goes through
    *safe* in place of ``safe_url_string``.

    *safe* is called as w3lib calls ``safe_url_string``: with the URL as the tag's
    ``content`` holds it (entities replaced, surrounding spaces and quotes
    stripped) and the page's encoding; w3lib joins what it returns with the base
    URL.  Each call makes new clones: call it once, at import.
    """
    namespace = dict(vars(_w3lib_html))
    for func in [*_meta_refresh_parsers(), _w3lib_html.get_meta_refresh]:
        namespace[func.__name__] = _clone(func, {"safe_url_string": safe}, namespace)
    reader: Callable[..., MetaRefresh] = namespace["get_meta_refresh"]
    return reader


def set_base_url(response: Any, url: str) -> None:
    """Make *url* the base URL of *response* for Scrapy's readers
    (``scrapy.utils.response.get_base_url``'s per-response cache: ``Selector``, so
    ``FormRequest.from_response``, and ``LinkExtractor``)."""
    _response_utils._baseurl_cache[response] = url


def set_meta_refresh(response: Any, refresh: MetaRefresh) -> None:
    """Make *refresh* what ``MetaRefreshMiddleware`` reads for *response*
    (``scrapy.utils.response.get_meta_refresh``'s per-response cache)."""
    _response_utils._metaref_cache[response] = refresh


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


def running_engine(crawler: Any) -> Any:
    """The crawler's engine, or None before the crawl has one.

    Scrapy 2.19 raises ``RuntimeError`` from ``crawler.engine`` before the crawl
    starts, where 2.17 and 2.18 return None: one guard for both.
    """
    try:
        return crawler.engine
    except RuntimeError:
        return None


# ------------------------------------- download slots, as DownloaderAwarePriorityQueue reads them

DOWNLOAD_SLOTS = "Downloader.get_slot_key(request) and Downloader.slots[slot].active"
_downloader_module = import_module("scrapy.core.downloader")
_pqueues = import_module("scrapy.pqueues")
if _parameters(getattr(_downloader_module.Downloader, "get_slot_key", None)) != [
        "self", "request"] or "active" not in _downloader_module.Slot.__init__.__code__.co_names:
    raise unsupported(DOWNLOAD_SLOTS)
#: True if the installed ``DownloaderAwarePriorityQueue`` breaks ties between slots
#: round robin (scrapy/scrapy#7351), False if by the first slot name.
SLOT_ROUND_ROBIN: bool = callable(getattr(_pqueues.DownloaderAwarePriorityQueue, "_next_slot",
                                          None))


def download_slot_key(crawler: Any, request: Request) -> str:
    """The download slot of *request*, as ``DownloaderAwarePriorityQueue`` files it."""
    return str(crawler.engine.downloader.get_slot_key(request))


def active_downloads(crawler: Any, slot: str) -> int:
    """The downloads active in *slot*, as ``DownloaderAwarePriorityQueue`` counts them."""
    slots = crawler.engine.downloader.slots
    return len(slots[slot].active) if slot in slots else 0


# ------------------------------------- feed files continued after a kill (JOBDIR frontier)

FEED_CONTINUATION = (
    "JsonItemExporter.start_exporting writing b'[' alone, CsvItemExporter writing its "
    "header row in one write, FeedExporter.item_scraped writing the item"
)


def _exporter_writes(exporter_cls: Any, **kwargs: Any) -> list[bytes]:
    """The write() calls *exporter_cls* makes for two items."""
    import io

    class _Recorder(io.BufferedIOBase):
        def __init__(self) -> None:
            super().__init__()
            self.writes: list[bytes] = []

        def writable(self) -> bool:
            return True

        def write(self, data: Any) -> int:
            self.writes.append(bytes(data))
            return len(data)

    recorder = _Recorder()
    exporter = exporter_cls(recorder, **kwargs)
    exporter.start_exporting()
    exporter.export_item({"a": 1})
    exporter.export_item({"a": 2})
    exporter.finish_exporting()
    return recorder.writes


_exporters = import_module("scrapy.exporters")
if _exporter_writes(_exporters.JsonItemExporter)[:2] != [b"[", b'{"a": 1}'] or (
        _exporter_writes(_exporters.CsvItemExporter)[:2] != [b"a\r\n", b"1\r\n"]):
    raise unsupported(FEED_CONTINUATION)


def _start_writes(exporter_cls: Any, **kwargs: Any) -> int:
    """How many write() calls *exporter_cls*'s ``start_exporting`` makes (its preamble)."""
    import io

    class _Counter(io.BufferedIOBase):
        writes = 0

        def writable(self) -> bool:
            return True

        def write(self, data: Any) -> int:
            self.writes += 1
            return len(data)

    counter = _Counter()
    exporter_cls(counter, **kwargs).start_exporting()
    return counter.writes


def _drop(data: bytes) -> bytes:
    return b""


def feed_continuation(options: dict[str, Any], *, continuing: bool
                      ) -> list[Callable[[bytes], bytes]] | None:
    """How the first writes of a new exporter change when it continues a feed file that
    already holds items (scrapy#5153: Scrapy cannot append to a JSON, CSV or XML feed):
    a JSON array's ``[`` becomes the separator ``,`` (the exporter's first item has no
    comma), a CSV header row is dropped, an XML document's preamble (the declaration
    and the opening root element: what ``start_exporting`` writes with these options)
    is dropped.  None: written as is (JSON lines, pickle, marshal, or nothing
    committed yet)."""
    if not continuing:
        return None
    fmt = options.get("format")
    kwargs = options.get("item_export_kwargs") or {}
    if fmt == "json":
        return [lambda data: b"," if data == b"[" else data]
    if fmt == "csv" and kwargs.get("include_headers_line", True):
        return [_drop]
    if fmt == "xml":
        known = {k: v for k, v in kwargs.items() if k in ("item_element", "root_element",
                                                         "indent", "encoding")}
        return [_drop] * _start_writes(_exporters.XmlItemExporter, **known)
    return None


FEED_RECEIVERS = (
    "scrapy.utils.signal's getAllReceivers and liveReceivers (pydispatch: the receivers "
    "of a signal, in the order connected), scrapy.utils.conf."
    "feed_complete_default_values_from_settings(feed, settings[, uri])"
)
_signal_utils = import_module("scrapy.utils.signal")
_conf_utils = import_module("scrapy.utils.conf")
if not (callable(getattr(_signal_utils, "getAllReceivers", None))
        and callable(getattr(_signal_utils, "liveReceivers", None))
        and (_parameters(getattr(_conf_utils, "feed_complete_default_values_from_settings",
                                 None)) or [])[:2] == ["feed", "settings"]):
    raise unsupported(FEED_RECEIVERS)


def runs_after_feed_exporter(crawler: Any, signal: Any, owner: type) -> bool:
    """True if the receivers of *signal* bound to an *owner* instance are called after
    Scrapy's ``FeedExporter``'s (or no feed exporter listens): the frontier's feed
    staging tells each item's bytes by it (Scrapy calls a signal's receivers in the
    order they were connected)."""
    from scrapy.extensions.feedexport import FeedExporter

    receivers = list(_signal_utils.liveReceivers(
        _signal_utils.getAllReceivers(crawler.signals.sender, signal)))
    ours = [i for i, r in enumerate(receivers) if isinstance(getattr(r, "__self__", None), owner)]
    feeds = [i for i, r in enumerate(receivers)
             if isinstance(getattr(r, "__self__", None), FeedExporter)]
    return bool(ours) and (not feeds or max(feeds) < min(ours))


def feed_options(options: dict[str, Any], settings: Any, uri: str) -> dict[str, Any]:
    """A ``FEEDS`` entry's options completed from the settings, as ``FeedExporter`` does
    (Scrapy 2.19 also passes the URI, to infer the format from its extension)."""
    complete = _conf_utils.feed_complete_default_values_from_settings
    if "uri" in (_parameters(complete) or []):
        return dict(complete(dict(options), settings, uri))
    return dict(complete(dict(options), settings))


FEED_BATCHES = (
    "FeedExporter found among crawler.extensions.middlewares, its slots (FeedSlot.storage, "
    ".uri_template, .batch_id, .itemcount), feeds, _start_new_batch(batch_id, uri, "
    "feed_options, spider, uri_template) and _get_uri_params(spider, uri_params_function, slot)"
)
_feedexport = import_module("scrapy.extensions.feedexport")
if _parameters(getattr(_feedexport.FeedExporter, "_start_new_batch", None)) != [
        "self", "batch_id", "uri", "feed_options", "spider", "uri_template"] or _parameters(
        getattr(_feedexport.FeedExporter, "_get_uri_params", None)) != [
        "self", "spider", "uri_params_function", "slot"] or not {
        "storage", "batch_id", "uri_template"} <= set(
        _parameters(_feedexport.FeedSlot.__init__) or ()):
    raise unsupported(FEED_BATCHES)


#: ``apply_uri_params`` (Scrapy 2.19: ``%`` outside placeholders kept), else ``%``.
_apply_uri_params: Callable[[str, dict[str, Any]], str] = getattr(
    _feedexport, "apply_uri_params", lambda template, params: template % params)


def feed_exporter(crawler: Any) -> Any:
    """Scrapy's ``FeedExporter`` of *crawler*, or None (no ``FEEDS``)."""
    extensions = getattr(crawler, "extensions", None)
    for extension in getattr(extensions, "middlewares", ()):
        if isinstance(extension, _feedexport.FeedExporter):
            return extension
    return None


def tag_batches(exporter: Any) -> None:
    """Give each batch feed slot's storage its ``(URI template, batch id)`` (``batch``)."""
    for slot in exporter.slots:
        storage = slot.storage
        if getattr(storage, "batch", None) == ("", 0) and (
                exporter.feeds[slot.uri_template].get("batch_item_count")):
            storage.batch = (slot.uri_template, slot.batch_id)


def continue_batches(exporter: Any, spider: Any,
                     last: Callable[[str], tuple[int, int] | None],
                     staged: Callable[[dict[str, Any]], bool]) -> None:
    """After ``FeedExporter`` opened its batch 1 slots: each staged batch feed continues
    at its newest recorded batch (its item count continued; the next batch when full).
    Upstream: ``FeedExporter`` always starts at batch 1 (scrapy/scrapy#5153)."""
    for i, slot in enumerate(list(exporter.slots)):
        options = exporter.feeds[slot.uri_template]
        size = options.get("batch_item_count")
        record = last(slot.uri_template) if size and staged(options) else None
        if record is None:
            continue
        batch, items = record
        if items >= size:
            batch, items = batch + 1, 0
        if batch == slot.batch_id and not items:
            continue
        params = exporter._get_uri_params(spider, options["uri_params"],
                                          types.SimpleNamespace(batch_id=batch - 1))
        new = exporter._start_new_batch(
            batch_id=batch, uri=_apply_uri_params(slot.uri_template, params),
            feed_options=options, spider=spider, uri_template=slot.uri_template)
        new.itemcount = items
        exporter.slots[i] = new
    tag_batches(exporter)
