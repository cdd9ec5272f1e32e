"""Links the plugin cannot use: skipped, counted, logged once, never costing the others.

A page may hold hrefs that no request can be built for: an unclosed ``[``
(``http://[::1``), an address that is not IPv6 (``http://[:::1]/``), a port
out of range (``http://example.test:99999/``).  ``Request()`` raises
``ValueError`` on them, and an exception raised while a spider callback (or
``CrawlSpider``'s rule loop) iterates over a page's links loses every link
after it.  Every link path of the plugin asks :func:`request_refusal` first and
skips such a link with :func:`report_skipped`:

* ``IRILinkExtractor.extract_links`` leaves it out (so ``CrawlSpider`` rules
  and ``IRICrawlSpider`` never meet it);
* ``response.follow()`` returns a request marked ``meta["iri_skipped_link"]``
  that the plugin drops before the scheduler (so ``yield response.follow(href)``
  in a loop goes on with the next link), and ``follow_all()`` leaves it out;
* a redirect (``Location``) or ``<meta http-equiv="refresh">`` to such a URL is
  not followed (``IRIProtocolMiddleware`` sets ``meta["dont_redirect"]`` for that
  response): a 3xx then goes on as Scrapy handles any unfollowed redirect, and
  a page with such a refresh reaches the spider with its links.

A link is skipped only when neither its canonical form nor the spelling stock
Scrapy would build can be requested: what stock Scrapy fetches, the plugin
fetches.  Each skip counts ``iri/unnormalizable``,
``iri/unnormalizable/<reason>`` and ``iri/links/skipped``, and is logged once,
with the page it came from (the first of each reason as a WARNING, the others
at DEBUG level).  The reason names the component at fault (:data:`REASONS`).

Before any of that, an href is read as a browser reads it
(:func:`iri_scrapy.core.hrefs.preprocess_href`, the URL Standard's basic URL
parser, https://url.spec.whatwg.org/#concept-basic-url-parser): leading and
trailing C0 controls and spaces trimmed, ASCII tab and newline removed, ``\\``
read as ``/`` before the query for a special scheme (http(s), ws(s), ftp,
file), so that ``..\\index.html`` and ``/pa<LF>th.html`` fetch the page a
browser fetches and ``http://h\\@evil.test/`` contacts ``h``, as a browser
does.  ``response.urljoin``/``follow``/``follow_all``
(:class:`~iri_scrapy.plugin.middleware.IRIFollowMixin`) and :func:`base_url`
(``<base href>``) do it; ``IRILinkExtractor`` and the redirect middleware call
the same function.
"""

from __future__ import annotations

import contextlib
import logging
import re
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

from scrapy import Request
from scrapy.http import HtmlResponse, TextResponse
from w3lib.url import safe_url_string

from iri_scrapy.core.errors import IRIError
from iri_scrapy.core.hosts import WireHostError
from iri_scrapy.core.hrefs import needs_preprocessing, preprocess_href, url_scheme
from iri_scrapy.core.ladder import retrieval_key
from iri_scrapy.core.shorten import shorten
from iri_scrapy.plugin import compat  # noqa: F401 - checks the installed Scrapy first
from iri_scrapy.plugin.compat import get_base_url, get_meta_refresh  # IDNA 2008 hosts

if TYPE_CHECKING:
    from scrapy.http import Response
    from scrapy.statscollectors import StatsCollector


logger = logging.getLogger(__name__)

#: Stats keys.
STAT_UNNORMALIZABLE = "iri/unnormalizable"
STAT_SKIPPED = "iri/links/skipped"
#: The ``<reason>`` of ``iri/unnormalizable/<reason>``: the URL component at fault
#: (``request`` when ``Request()`` refuses a URL for another reason).
REASONS = ("scheme", "userinfo", "host", "port", "path", "query", "fragment", "request")

# A URL Request() surely accepts: http(s), a plain host name, a port below 10000.
_PLAIN = re.compile(r"https?://[A-Za-z0-9.-]+(?::[0-9]{0,4})?(?:[/?#][\x21-\x7e]*)?\Z")


def error_reason(exc: IRIError) -> str:
    """The reason for an :class:`~iri_scrapy.IRIError`: the component it names."""
    component = getattr(exc, "component", "")
    return component if component in REASONS else "request"


def request_refusal(url: str) -> tuple[str, str] | None:
    """None if a request can be made for *url*; else ``(reason, Scrapy's message)``.

    As the plugin makes it: ``Request(url)``, and with ``meta["verbatim_url"]``
    when ``Request()`` would alter *url* (a bare ``?``, ``http:``).  A URL of a DNS
    scheme whose host or port cannot be on the wire (``http://exa mple.test/``,
    ``http://a..b.test/``: :class:`~iri_scrapy.core.hosts.WireHostError`) has no
    canonical spelling, and its stock one fails at download (Twisted's "Invalid
    URI") or in DNS: it is refused too.
    """
    if _PLAIN.match(url) and "//." not in url and ".." not in url.split("/", 3)[2]:
        return None
    wire = _wire_refusal(url)
    if wire is not None:
        return wire
    try:
        if Request(url).url != url:
            Request(url, meta={"verbatim_url": True})
    except ValueError as exc:
        return refusal_reason(url), _refusal_message(url, exc)
    except TypeError as exc:  # not a str Scrapy takes
        return "request", shorten(str(exc))
    return None


def _refusal_message(url: str, exc: ValueError) -> str:
    """Scrapy's message, shortened; for a URL with a scheme but no ``//`` (``mailto:``,
    ``tel:``, ``javascript:``) Scrapy says "Missing scheme": say what is meant."""
    text = str(exc)
    scheme = url_scheme(url)
    if text.startswith("Missing scheme") and scheme:
        return (f"a {scheme}: URL, which Scrapy does not request (no '//' after the "
                "scheme)")
    return shorten(text)


def _wire_refusal(url: str) -> tuple[str, str] | None:
    """``(reason, message)`` if *url* is of a DNS scheme and its host or port cannot
    be on the wire (:class:`~iri_scrapy.core.hosts.WireHostError`), else None."""
    try:
        retrieval_key(url)
    except WireHostError as exc:
        return error_reason(exc), str(exc)
    except IRIError:
        pass  # no canonical form for another reason: passed through as stock spells it
    return None


def refusal_reason(url: str) -> str:
    try:
        parts = urlsplit(url)
    except ValueError:
        return "host"  # an unclosed "[": "Invalid IPv6 URL"
    try:
        parts.port  # noqa: B018 - raises on a port out of range or not a number
    except ValueError:
        return "port"
    if not parts.scheme or "://" not in url:
        return "scheme"  # Scrapy: "Missing scheme in request url"
    return "host" if parts.netloc else "request"


def count_unnormalizable(stats: StatsCollector | None, reason: str) -> None:
    """Count one URL with no canonical form: ``iri/unnormalizable`` and its reason."""
    if stats is not None:
        stats.inc_value(STAT_UNNORMALIZABLE)
        stats.inc_value(f"{STAT_UNNORMALIZABLE}/{reason}")


def report_skipped(
    stats: StatsCollector | None, page: str, href: str, reason: str, error: str,
    warned: set[str] | None = None,
) -> None:
    """Count and log a link of *page* that is skipped (see the module docstring).

    *warned*: the reasons already logged as a WARNING in this crawl (the crawl
    context's :attr:`~iri_scrapy.plugin.context.CrawlContext.warned`): the first
    of each reason is a WARNING, later ones DEBUG; without it every one is a WARNING.
    """
    count_unnormalizable(stats, reason)
    if stats is not None:
        stats.inc_value(STAT_SKIPPED)
    first = warned is None or reason not in warned
    if warned is not None:
        warned.add(reason)
    shown = shorten(href)
    logger.log(
        logging.WARNING if first else logging.DEBUG,
        "IRI: skipped a link of %(page)s that no request can be made for: %(href)r "
        "(%(reason)s: %(error)s); the page's other links are kept%(more)s",
        {
            "page": page, "href": shown, "reason": reason, "error": error,
            "more": (
                f" (further {reason} ones are logged at DEBUG level; see the "
                f"{STAT_UNNORMALIZABLE}/{reason} and {STAT_SKIPPED} stats)" if first else ""
            ),
        },
    )


def wire_unsendable(request: Request) -> str | None:
    """Why *request*'s URL cannot go on the wire (a DNS host or port that level
    ``scheme`` refuses, see :func:`request_refusal`), or None (also when the
    caller asked for stock behaviour with ``meta["dont_normalize_iri"]``)."""
    url = request.url
    if request.meta.get("dont_normalize_iri") or (
        _PLAIN.match(url) and "//." not in url and ".." not in url.split("/", 3)[2]
    ):
        return None
    wire = _wire_refusal(url)
    return None if wire is None else wire[1]


class ResponseState:
    """What the plugin keeps for one IRI-aware response, in it.

    The IRI-aware subclass of a response class has one slot more,
    ``_iri_state``, which holds this (:func:`response_state`); the normalization
    middleware builds the response as that subclass with Scrapy's public
    ``response.replace(cls=...)``.  A response of another class gets a state
    for the call only.
    """

    __slots__ = ("as_written", "base", "canon", "joined", "last", "stock", "tried")

    def __init__(self) -> None:
        #: the crawler's Canonicalizer (set by the downloader middleware)
        self.canon: Any = None
        #: the base URL (``<base href>`` joined with the response URL), once computed
        self.base: str | None = None
        #: resolve the stock way (set while ``follow()`` retries a link)
        self.stock = False
        #: the href as written, not as a browser reads it (a ``dont_normalize_iri`` follow)
        self.as_written = False
        #: the href ``urljoin()`` was last asked to resolve, and what it resolved it to
        self.tried: str | None = None
        self.joined: str | None = None
        #: (resolved IRI, its fetch form) of the last ``urljoin()`` by the IRI core
        self.last: tuple[str, str] | None = None


def response_state(response: Any) -> ResponseState:
    """The :class:`ResponseState` of *response* (made on first use; kept in an
    IRI-aware response, for the call only in another)."""
    try:
        state: ResponseState = response._iri_state
    except AttributeError:
        state = ResponseState()
        with contextlib.suppress(AttributeError):  # no such slot: not an IRI-aware class
            response._iri_state = state
    return state


def browser_href(href: str, base: str) -> str:
    """*href* (found in a page whose base URL is *base*) as a browser reads it:
    :func:`~iri_scrapy.core.hrefs.preprocess_href` with *base*'s scheme."""
    if not needs_preprocessing(href):
        return href
    return preprocess_href(href, url_scheme(base))


# the first <base> element with an href attribute, and that attribute's value
# (HTML: https://html.spec.whatwg.org/#frozen-base-url); read only when the head
# holds a backslash, the one character w3lib's get_base_url reads otherwise
_BASE_TAG = re.compile(r"<base(?=[\s/>])([^>]*)>", re.IGNORECASE)
_HREF_ATTR = re.compile(
    r"""(?:^|[\s/])href\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'=<>`]+))""", re.IGNORECASE
)


def _raw_base_href(text: str) -> str | None:
    """The ``href`` of the first ``<base>`` that has one, as written; None if none."""
    for tag in _BASE_TAG.finditer(text):
        attr = _HREF_ATTR.search(tag.group(1))
        if attr is not None:
            return next(g for g in attr.groups() if g is not None)
    return None


def base_url(response: TextResponse) -> str:
    """The base URL of *response* (its ``<base href>`` joined with its URL, else its URL).

    What Scrapy's ``response.urljoin`` and link extractor use: w3lib's
    ``get_base_url`` over the first 4096 characters of the text, once per response
    (kept in its :class:`ResponseState`); but a ``<base href>`` a browser reads
    otherwise (``<base href="\\docs\\">``: a backslash, see the module docstring)
    is read as the browser reads it.
    """
    state = response_state(response)
    url = state.base
    if url is None:
        text = response.text[0:4096]
        url = get_base_url(text, response.url, response.encoding)
        if "\\" in text:
            raw = _raw_base_href(text)
            if raw is not None and "\\" in raw:
                href = preprocess_href(raw, url_scheme(response.url))
                url = urljoin(safe_url_string(response.url),
                              safe_url_string(href, encoding=response.encoding))
        state.base = url
    return url


def url_refused(state: ResponseState) -> bool:
    """After ``follow()`` raised: True if it was the link's URL that failed."""
    if state.tried is None:
        return False  # raised before any URL was resolved (a bad argument)
    joined = state.joined
    return joined is None or request_refusal(joined) is not None


_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})


def _redirect_target(request: Request, response: Response) -> tuple[str, str, str] | None:
    """``(href, the URL Scrapy would build, an error or "")`` for a redirect or meta
    refresh of *response* that Scrapy's redirect middlewares would follow; else None."""
    if response.status in _REDIRECT_STATUSES:
        raw = response.headers.get(b"Location")
        if not raw:
            return None
        href = raw.decode("utf-8", errors="replace")
        try:  # as RedirectMiddleware builds it
            location = safe_url_string(raw)
            if raw.startswith(b"//"):
                location = request.url.split(":", 1)[0] + "://" + location.lstrip("/")
            return href, urljoin(request.url, location), ""
        except ValueError as exc:
            return href, href, str(exc)
    if not isinstance(response, HtmlResponse) or b"refresh" not in response.body[:4096].lower():
        return None
    text = response.text[0:4096]
    try:  # as MetaRefreshMiddleware reads it (scrapy.utils.response.get_meta_refresh)
        url = get_meta_refresh(text, get_base_url(text, response.url, response.encoding),
                               response.encoding)[1]
    except ValueError as exc:
        match = re.search(r"url\s*=\s*['\"]?([^'\">\s]*)", text, re.IGNORECASE)
        href = match.group(1) if match else "<meta refresh>"
        return href, href, str(exc)
    return None if url is None else (url, url, "")


def skip_unusable_redirect(
    request: Request, response: Response, stats: StatsCollector | None,
    warned: set[str] | None = None,
) -> bool:
    """Keep Scrapy from following a redirect or meta refresh to an unusable URL.

    When Scrapy's ``RedirectMiddleware`` or ``MetaRefreshMiddleware`` would build
    a request for *response*'s ``Location`` (or refresh URL) and ``Request()``
    refuses it (they would raise, losing the response), sets
    ``meta["dont_redirect"]`` for *response*, reports the link (see the module
    docstring) and returns True.  The canonical spelling is not tried: the
    redirect middlewares build their request from the stock one.
    """
    meta = request.meta
    if meta.get("dont_redirect") or meta.get("handle_httpstatus_all"):
        return False
    found = _redirect_target(request, response)
    if found is None:
        return False
    href, url, error = found
    refusal = ("request", error) if error else request_refusal(url)
    if refusal is None:
        return False
    reason = refusal_reason(url) if refusal[0] == "request" else refusal[0]
    meta["dont_redirect"] = True
    report_skipped(stats, request.url, href, reason, refusal[1], warned)
    return True
