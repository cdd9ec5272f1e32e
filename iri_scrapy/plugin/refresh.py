"""Meta refresh URLs read as a browser reads them: the URL Standard's preprocessing first.

:class:`IRIMetaRefreshMiddleware` takes the place of Scrapy's
``MetaRefreshMiddleware`` (downloader middleware priority 580; the add-on puts
it there unless ``DOWNLOADER_MIDDLEWARES`` lists either).  It *is* Scrapy's
middleware (``METAREFRESH_ENABLED``, ``METAREFRESH_MAXDELAY``,
``METAREFRESH_IGNORE_TAGS``, ``dont_redirect``, the redirect meta keys, Referer
handling), but for the URL it reads from ``<meta http-equiv="refresh">``.

A browser parses that URL relative to the document's base URL with the URL
Standard's basic URL parser (HTML, "shared declarative refresh steps":
https://html.spec.whatwg.org/#shared-declarative-refresh-steps), whose first
steps trim C0 controls and spaces, remove tab and newline, and for a special
scheme read ``\\`` as ``/`` (:mod:`iri_scrapy.core.hrefs`).  w3lib's
``get_meta_refresh`` percent-encodes the URL as written before joining it, so
``url=..\\x.html`` is requested as ``..%5Cx.html`` (a 404 where a browser goes
to ``../x.html``) and ``url=\\\\other.test\\p.html`` as a path of this host.
Here the URL as written goes through
:func:`~iri_scrapy.core.hrefs.preprocess_href` (with the base URL's scheme),
then through what w3lib does (``safe_url_string`` in the page's encoding, IDNA
2008 hosts as :class:`~iri_scrapy.plugin.idna_requests.IDNA2008ResponseMiddleware`
gives them, ``urljoin``), against the base URL the add-on's ``response.urljoin``
uses (a ``<base href>`` with backslashes read as a browser reads it:
:func:`iri_scrapy.plugin.links.base_url`).

Only a page whose first 4096 characters (what Scrapy reads) hold a backslash,
as itself or as a numeric character reference, is read again: without one,
w3lib already does what preprocessing does (its ``safe_url_string`` trims and
removes tab and newline) and Scrapy's reading stands, at no extra cost.  A URL
read this way that ``Request()`` refuses, or whose authority is empty (``\\\\``,
``\\\\\\x``: no host, where ``urljoin`` would keep the base's), is left to
Scrapy's reading too, as is the refresh of a request with
``meta["dont_normalize_iri"]`` (stock behaviour, as its ``follow()``).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from scrapy.downloadermiddlewares.redirect import MetaRefreshMiddleware
from scrapy.http import HtmlResponse

from iri_scrapy.core.hrefs import SPECIAL_SCHEMES, preprocess_href, url_scheme
from iri_scrapy.plugin import compat  # checks the installed Scrapy first
from iri_scrapy.plugin.config import META_DONT_NORMALIZE
from iri_scrapy.plugin.config import setting as iri_setting
from iri_scrapy.plugin.links import base_url, request_refusal

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy import Request
    from scrapy.http import Response
    from scrapy.settings import BaseSettings

__all__ = ["IRIMetaRefreshMiddleware"]


def _reader(special_base: bool, safe: Callable[..., str]) -> Callable[..., compat.MetaRefresh]:
    """w3lib's ``get_meta_refresh`` with the URL preprocessed before *safe* (w3lib's
    ``safe_url_string`` or the IDNA 2008 one); *special_base*: the base URL's scheme
    is special (a relative URL's ``\\`` is a ``/``)."""
    base_scheme = "http" if special_base else None

    def browser_safe(url: str, *args: Any, **kwargs: Any) -> str:
        href = preprocess_href(url, base_scheme)
        if special_base and href[:2] == "//" and href[2:3] in ("", "/", "?", "#"):
            # no host: the URL Standard fails (or, for "///x", skips the slashes),
            # where urljoin keeps the base's host: left to Scrapy's reading
            raise ValueError(f"no host in the meta refresh URL {url!r}")
        return safe(href, *args, **kwargs)

    return compat.meta_refresh_reader(browser_safe)


#: (base URL special, IDNA 2008 hosts): the reader
_READERS = {
    (special, idna2008): _reader(special, safe)
    for special in (True, False)
    for idna2008, safe in ((True, compat.idna2008_safe_url_string),
                           (False, compat.w3lib_safe_url_string))
}


#: A backslash written as a character reference (``&#92;``, ``&#x5c;``, ``&bsol;``).
_BACKSLASH_REFERENCE = re.compile(r"&(?:#0*92|#[xX]0*5[cC]|bsol)(?![0-9])")


def _has_backslash(text: str) -> bool:
    """True if *text* has a meta refresh and may hold a ``\\`` once its character
    references are replaced (cheap tests first: most pages have neither)."""
    if "refresh" not in text.lower():
        return False
    return "\\" in text or _BACKSLASH_REFERENCE.search(text) is not None


def browser_meta_refresh(
    response: HtmlResponse, ignore_tags: list[str] | tuple[str, ...], idna2008: bool,
) -> compat.MetaRefresh:
    """``(interval, URL)`` of *response*'s meta refresh as a browser reads it, else
    ``(None, None)``; *idna2008*: non-ASCII hosts get their UTS 46 A-label (as the
    add-on's ``IDNA2008ResponseMiddleware`` primes it).  Raises ``ValueError`` as
    w3lib's ``get_meta_refresh`` does."""
    text = response.text[0:4096]
    base = base_url(response)
    reader = _READERS[url_scheme(base) in SPECIAL_SCHEMES, idna2008 and not text.isascii()]
    return reader(text, base, response.encoding, ignore_tags=ignore_tags)


class IRIMetaRefreshMiddleware(MetaRefreshMiddleware):
    """Downloader middleware: Scrapy's ``MetaRefreshMiddleware``, its URL read as a browser
    reads it (see the module docstring)."""

    def __init__(self, settings: BaseSettings) -> None:
        super().__init__(settings)
        self.ignore_tags: list[str] = settings.getlist("METAREFRESH_IGNORE_TAGS")
        self.idna2008 = bool(iri_setting(settings, "IRI_IDNA2008_REQUESTS"))

    def process_response(
        self, request: Request, response: Response, spider: Any = None
    ) -> Request | Response:
        """Scrapy's, after setting the URL it reads for a page that has a backslash."""
        if (
            isinstance(response, HtmlResponse)
            and not request.meta.get("dont_redirect")
            and request.method != "HEAD"
            and not request.meta.get(META_DONT_NORMALIZE)
            and _has_backslash(response.text[0:4096])
        ):
            try:
                refresh = browser_meta_refresh(response, self.ignore_tags, self.idna2008)
            except ValueError:
                refresh = None  # left to Scrapy's reading (which raises as it does)
            if refresh is not None and refresh[1] is not None and (
                request_refusal(refresh[1]) is None
            ):
                compat.set_meta_refresh(response, refresh)
        if spider is None:
            return super().process_response(request, response)
        return super().process_response(request, response, spider)
