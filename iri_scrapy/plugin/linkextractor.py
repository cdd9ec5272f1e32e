"""``IRILinkExtractor``: Scrapy's ``LinkExtractor`` with link resolution by the IRI core.

Scrapy's ``LinkExtractor`` (used by ``CrawlSpider`` rules) joins each ``href``
with ``urllib.parse.urljoin`` and passes it through ``w3lib.url.safe_url_string``,
which encodes hosts with IDNA 2003: a link to ``http://straße.example/`` becomes
``http://strasse.example/``, another domain, and the page is lost before any
middleware sees the request.  With ``canonicalize=True`` it rewrites links with
``canonicalize_url``, which sorts query arguments (``?b=2&a=1`` and
``?a=1&b=2`` are two resources for RFC 3987).  And its ``allow_domains`` and
``deny_domains`` compare the domain as written: an IDN or uppercase domain
matches nothing.

This subclass keeps every option of ``LinkExtractor`` and changes only that:

* links are resolved with RFC 3986 section 5.2 on the IRI (RFC 3987 section
  6.5) and written in their fetch form (RFC 3987 section 3.1, UTS 46 A-label
  hosts, level SCHEME of the section 5.3 ladder, fragment kept), the query of
  an http(s) link in the page's charset (section 3.1 note, as browsers send it);
* ``unique`` keys links with that same canonical form (fragment kept, as
  Scrapy's does): spellings of the same IRI merge, and only those;
* ``allow_domains``/``deny_domains`` are compared as canonical hosts;
* ``canonicalize=True`` writes the retrieval key (fragment dropped, RFC 3987
  section 5.1) instead of w3lib's query-sorting form.

Each ``href`` is first read as a browser reads it (the URL Standard's
preprocessing, :func:`iri_scrapy.core.hrefs.preprocess_href`: C0 controls and
spaces trimmed, tab and newline removed, ``\\`` as ``/`` before the query for
http(s)), whatever ``strip`` says: ``..\\index.html`` is ``../index.html`` and
``http://h\\@evil.test/`` is a link to host ``h``, as in a browser.

An ``href`` with no canonical form (a host that fails UTS 46, say), or whose
canonical form ``Request()`` refuses, is handled the stock way, so nothing
Scrapy would extract is dropped.  An ``href`` no request can be made for either
way (``http://[::1``, ``http://example.test:99999/``) is left out, counted and
logged once with its page (:mod:`iri_scrapy.plugin.links`); the page's other
links are kept.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlparse

from lxml import etree
from parsel import css2xpath
from scrapy import Request
from scrapy.link import Link
from scrapy.linkextractors import IGNORED_EXTENSIONS
from scrapy.linkextractors.lxmlhtml import LxmlLinkExtractor
from w3lib.url import safe_url_string

from iri_scrapy.core.errors import IRIError
from iri_scrapy.core.hrefs import needs_preprocessing
from iri_scrapy.core.ladder import Level, fast_path, normalize
from iri_scrapy.core.resolve import resolve
from iri_scrapy.plugin.compat import LinkRequestCrawlSpider
from iri_scrapy.plugin.config import META_ORIGINAL, META_VERBATIM
from iri_scrapy.plugin.links import (
    base_url,
    browser_href,
    error_reason,
    report_skipped,
    request_refusal,
    response_state,
)
from iri_scrapy.plugin.middleware import fetch_form
from iri_scrapy.plugin.offsite import canonical_domain

if TYPE_CHECKING:
    from scrapy.http import TextResponse
    from scrapy.statscollectors import StatsCollector


logger = logging.getLogger(__name__)

_HTML5_WHITESPACE = " \t\n\r\x0c"
_XHTML_NAMESPACE = "http://www.w3.org/1999/xhtml"
_SCHEMES = {"http", "https", "file", "ftp"}  # the schemes Scrapy's extractor keeps
_string_value = etree.XPath("string()")  # an element's text content (XPath string())


def _link_key(link: Link) -> str:
    """Links that are spellings of one IRI (fragment kept) share this key."""
    try:
        return normalize(link.url, Level.SCHEME, keep_fragment=True)
    except IRIError:
        return link.url


def _as_iter(value: Any) -> Iterable[Any]:
    """An option as Scrapy reads it: None is nothing, a string (or dict) one value."""
    if value is None:
        return ()
    if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__iter__"):
        return [value]
    return value  # type: ignore[no-any-return]


def _regexes(value: Any) -> list[re.Pattern[str]]:
    return [x if isinstance(x, re.Pattern) else re.compile(x) for x in _as_iter(value)]


def _name_matcher(allowed: Any, denied: Any) -> Callable[[Any], bool]:
    """A tag or attribute name filter: listed (or ``"*"``) and not denied."""
    allow, deny = set(_as_iter(allowed)), set(_as_iter(denied))

    def matches(name: Any) -> bool:
        return name not in deny and ("*" in allow or name in allow)

    return matches


def _local_tag(tag: Any) -> Any:
    """An XHTML element's tag without its namespace (as lxml.html names HTML ones)."""
    if isinstance(tag, str) and tag[:1] == "{" and tag[1 : len(_XHTML_NAMESPACE) + 1] == (
        _XHTML_NAMESPACE
    ):
        return tag.split("}")[-1]
    return tag


def _unique(links: list[Link]) -> list[Link]:
    seen: set[str] = set()
    out = []
    for link in links:
        key = _link_key(link)
        if key not in seen:
            seen.add(key)
            out.append(link)
    return out


def _text(el: Any) -> str:
    return str(_string_value(el)) or ""


def _nofollow(el: Any) -> bool:
    rel = el.get("rel")
    return rel is not None and "nofollow" in rel.lower().replace(",", " ").split()


def _refusal(url: str) -> tuple[str, str] | None:
    """Why no request can be made for *url* (None: it can, or it is not a link we keep)."""
    if url.split(":", 1)[0].lower() not in _SCHEMES:
        return None  # javascript:, mailto:, data:... are filtered out later, as Scrapy does
    return request_refusal(url)


def _from_domains(netloc: str, domains: set[str]) -> bool:
    return bool(netloc) and any(netloc == d or netloc.endswith(f".{d}") for d in domains)


class IRILinkExtractor(LxmlLinkExtractor):
    """``scrapy.linkextractors.LinkExtractor`` resolving links with the IRI core.

    Same constructor and options (those of the installed Scrapy, which checks
    them); see the module docstring for what differs.  Use it in the rules of
    an :class:`IRICrawlSpider` (or a ``CrawlSpider``):
    ``Rule(IRILinkExtractor(), callback=...)``.

    It implements the public ``extract_links(response)`` itself, from the
    documented constructor options, over lxml and w3lib; ``tags``/``attrs``
    accept ``"*"`` and ``deny_tags``/``deny_attrs`` apply (Scrapy 2.17+ options).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # Scrapy validates the options
        bound = inspect.signature(LxmlLinkExtractor.__init__).bind(self, *args, **kwargs)
        bound.apply_defaults()
        opt = bound.arguments
        self._iri_tag = _name_matcher(opt["tags"], opt.get("deny_tags", ()))
        self._iri_attr = _name_matcher(opt["attrs"], opt.get("deny_attrs", ()))
        process = opt["process_value"]
        self._iri_process: Callable[[Any], Any] = process if callable(process) else _identity
        self._iri_unique = bool(opt["unique"])
        self._iri_strip = bool(opt["strip"])
        self._iri_canonicalize = bool(opt["canonicalize"])
        self._iri_allow = _regexes(opt["allow"])
        self._iri_deny = _regexes(opt["deny"])
        self._iri_restrict_text = _regexes(opt["restrict_text"])
        self._iri_restrict = tuple(_as_iter(opt["restrict_xpaths"])) + tuple(
            css2xpath(css) for css in _as_iter(opt["restrict_css"])
        )
        extensions = opt["deny_extensions"]
        if extensions is None:
            extensions = IGNORED_EXTENSIONS
        self._iri_deny_extensions = {"." + e for e in _as_iter(extensions)}
        # canonical hosts (also what the inherited matches() compares with)
        self.allow_domains = {_domain(d) for d in _as_iter(opt["allow_domains"])}
        self.deny_domains = {_domain(d) for d in _as_iter(opt["deny_domains"])}

    def extract_links(self, response: TextResponse) -> list[Link]:
        """The :class:`~scrapy.link.Link` objects of *response* that the options keep.

        Duplicates (spellings of one IRI, fragment kept) are dropped if ``unique``.
        """
        base = base_url(response)
        canon = response_state(response).canon  # set by IRINormalizationMiddleware
        stats = canon.stats if canon is not None else None
        warned = canon.warned if canon is not None else None
        if self._iri_restrict:
            docs = [sub for xpath in self._iri_restrict for sub in response.xpath(xpath)]
        else:
            docs = [response.selector]
        links: list[Link] = []
        for doc in docs:
            found = self._links(doc.root, response.url, response.encoding, base, stats,
                                warned)
            links.extend(self._process(found))
        return _unique(links) if self._iri_unique else links

    # --- the parser part: href to absolute fetch-form URI with the IRI core -----

    def _candidates(self, document: Any) -> Iterable[tuple[Any, str]]:
        for el in document.iter(etree.Element):
            if not self._iri_tag(_local_tag(el.tag)):
                continue
            attribs = el.attrib
            for name in attribs:
                if self._iri_attr(name):
                    yield el, attribs[name]

    def _links(
        self, document: Any, response_url: str, response_encoding: str, base: str,
        stats: StatsCollector | None = None, warned: set[str] | None = None,
    ) -> list[Link]:
        links: list[Link] = []
        stock: list[tuple[Any, str, str, tuple[str, str]]] = []
        for el, value in self._candidates(document):
            href = value.strip(_HTML5_WHITESPACE) if self._iri_strip else value
            if needs_preprocessing(href):  # as a browser reads it (module docstring)
                href = browser_href(href, base)
            try:
                joined = resolve(base, href)
            except IRIError as exc:
                stock.append((el, value, href, (error_reason(exc), str(exc))))
                continue
            url = self._iri_process(joined)
            if url is None:
                continue
            try:
                if isinstance(url, str) and url.isascii() and fast_path(url, True) is not None:
                    uri = url  # already its own resolution and fetch form: one native call
                else:  # resolve again: process_value may return a relative reference
                    uri = fetch_form(resolve(response_url, url), response_encoding)
            except IRIError as exc:
                stock.append((el, value, href, (error_reason(exc), str(exc))))
                continue
            except TypeError as exc:
                stock.append((el, value, href, ("request", str(exc))))
                continue
            refusal = _refusal(uri)
            if refusal is not None:
                stock.append((el, value, href, refusal))
                continue
            links.append(Link(uri, _text(el), nofollow=_nofollow(el)))
        for el, value, href, why in stock:
            # no canonical form, or none a request can be made for: Scrapy's spelling
            # (of the href as a browser reads it)
            link = self._stock_link(el, href, response_url, response_encoding, base)
            refusal = why if link is None else _refusal(link.url)
            if refusal is None:
                assert link is not None
                links.append(link)  # an unnormalizable URL is counted when requested
            else:
                report_skipped(stats, response_url, value, *refusal, warned)
        return _unique(links) if self._iri_unique else links

    def _stock_link(
        self, el: Any, value: str, response_url: str, response_encoding: str, base: str
    ) -> Link | None:
        """An href the IRI core has no usable form for, joined as Scrapy joins it."""
        try:
            if self._iri_strip:
                value = value.strip(_HTML5_WHITESPACE)
            value = urljoin(base, value)
        except ValueError:
            return None  # a bogus link
        url = self._iri_process(value)
        if url is None:
            return None
        try:
            url = safe_url_string(url, encoding=response_encoding)
            return Link(urljoin(response_url, url), _text(el), nofollow=_nofollow(el))
        except ValueError:
            return None

    # --- filters ---------------------------------------------------------------

    def _process(self, links: list[Link]) -> list[Link]:
        links = [x for x in links if self._allowed(x)]
        if self._iri_canonicalize:
            for link in links:
                with contextlib.suppress(IRIError):  # no canonical form: as extracted
                    link.url = normalize(link.url, Level.SCHEME, keep_fragment=False)
        return _unique(links) if self._iri_unique else links

    def _allowed(self, link: Link) -> bool:
        url = link.url
        if url.split("://", 1)[0] not in _SCHEMES:
            return False
        if self._iri_allow and not any(r.search(url) for r in self._iri_allow):
            return False
        if self._iri_deny and any(r.search(url) for r in self._iri_deny):
            return False
        try:
            parsed = urlparse(url)
        except ValueError:
            return False
        netloc = parsed.netloc.lower()
        if self.allow_domains and not _from_domains(netloc, self.allow_domains):
            return False
        if self.deny_domains and _from_domains(netloc, self.deny_domains):
            return False
        path = parsed.path.lower()
        if self._iri_deny_extensions and any(path.endswith(e) for e in self._iri_deny_extensions):
            return False
        return not self._iri_restrict_text or any(
            r.search(link.text) for r in self._iri_restrict_text
        )


def _identity(value: Any) -> Any:
    return value


def _domain(domain: str) -> str:
    try:
        return canonical_domain(domain)
    except IRIError:
        return domain.lower()


def link_request(link: Link | str, **kwargs: Any) -> Request:
    """``Request(url)`` for an extracted link, keeping the URI byte for byte.

    ``Request()`` passes every URL through ``w3lib.url.safe_url_string``, which
    drops an empty query (``/search?`` becomes ``/search``, another resource for
    RFC 3987 section 5.3.3); such a request is built with Scrapy's
    ``meta["verbatim_url"]`` (and ``meta["iri_original"]``, so that the plugin
    keys it normally).
    """
    url = link.url if isinstance(link, Link) else link
    request = Request(url, **kwargs)
    if request.url != url:
        meta = dict(request.meta)
        meta[META_VERBATIM] = True
        meta[META_ORIGINAL] = url
        request = request.replace(url=url, meta=meta)
    return request


class IRICrawlSpider(LinkRequestCrawlSpider):
    """``CrawlSpider`` whose rule requests keep the extracted URI as it is.

    Use with :class:`IRILinkExtractor` in ``rules``; see :func:`link_request`.
    """

    def rule_request(self, request: Request, link: Link) -> Request:
        """*request*, built by ``CrawlSpider`` for *link*, with *link*'s URI kept."""
        if request.url == link.url:
            return request
        return link_request(
            link, callback=request.callback, errback=request.errback, meta=request.meta
        )
