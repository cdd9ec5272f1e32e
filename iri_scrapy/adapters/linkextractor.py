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
  hosts, level SCHEME of the section 5.3 ladder, fragment kept);
* ``unique`` keys links with that same canonical form (fragment kept, as
  Scrapy's does): spellings of the same IRI merge, and only those;
* ``allow_domains``/``deny_domains`` are compared as canonical hosts;
* ``canonicalize=True`` writes the retrieval key (fragment dropped, RFC 3987
  section 5.1) instead of w3lib's query-sorting form.

An ``href`` with no canonical form (a host that fails UTS 46, say) is handled
the stock way, so nothing Scrapy would extract is dropped.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Any

from scrapy import Request
from scrapy.link import Link
from scrapy.linkextractors.lxmlhtml import LxmlLinkExtractor, LxmlParserLinkExtractor
from scrapy.spiders import CrawlSpider
from scrapy.utils.misc import arg_to_iter

from ..errors import IRIError
from ..ladder import Level, normalize
from ..resolve import resolve
from .config import META_ORIGINAL, META_VERBATIM
from .middleware import fetch_form
from .offsite import canonical_domain

if TYPE_CHECKING:
    from scrapy.selector import Selector

__all__ = ["IRILinkExtractor", "IRICrawlSpider", "link_request"]

logger = logging.getLogger(__name__)

_HTML5_WHITESPACE = " \t\n\r\x0c"


def _link_key(link: Link) -> str:
    """Links that are spellings of one IRI (fragment kept) share this key."""
    try:
        return normalize(link.url, Level.SCHEME, keep_fragment=True)
    except IRIError:
        return link.url


class _IRIParserLinkExtractor(LxmlParserLinkExtractor):
    """The parser part: ``href`` to absolute fetch-form URI with the IRI core."""

    def _extract_links(
        self,
        selector: Selector,
        response_url: str,
        response_encoding: str,
        base_url: str,
    ) -> list[Link]:
        links: list[Link] = []
        stock: list[Any] = []
        for el, attr, attr_val in self._iter_links(selector.root):
            value = attr_val.strip(_HTML5_WHITESPACE) if self.strip else attr_val
            try:
                joined = resolve(base_url, value)
            except IRIError:
                stock.append((el, attr, attr_val))
                continue
            url = self.process_attr(joined)
            if url is None:
                continue
            try:
                # resolve again: process_value may return a relative reference
                uri = fetch_form(resolve(response_url, url))
            except (IRIError, TypeError):
                stock.append((el, attr, attr_val))
                continue
            links.append(Link(uri, _text(el), nofollow=_nofollow(el)))
        if stock:
            links += self._stock_links(stock, selector, response_url, response_encoding, base_url)
        return self._deduplicate_if_needed(links)

    def _stock_links(
        self, items: list[Any], selector: Selector, response_url: str,
        response_encoding: str, base_url: str,
    ) -> list[Link]:
        """Scrapy's own handling for the links the IRI core has no canonical form for."""
        only = {id(el) for el, _, _ in items}
        original = self._iter_links

        def iter_links(document: Any) -> Any:
            return ((el, a, v) for el, a, v in original(document) if id(el) in only)

        self._iter_links = iter_links  # type: ignore[method-assign]
        try:
            return super()._extract_links(selector, response_url, response_encoding, base_url)
        finally:
            del self._iter_links


def _text(el: Any) -> str:
    from scrapy.linkextractors.lxmlhtml import _collect_string_content

    return _collect_string_content(el) or ""


def _nofollow(el: Any) -> bool:
    from scrapy.utils.misc import rel_has_nofollow

    return rel_has_nofollow(el.get("rel"))


class IRILinkExtractor(LxmlLinkExtractor):
    """``scrapy.linkextractors.LinkExtractor`` resolving links with the IRI core.

    Same constructor and options; see the module docstring for what differs.
    Use it in the rules of an :class:`IRICrawlSpider` (or a ``CrawlSpider``):
``Rule(IRILinkExtractor(), callback=...)``.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        parser = self.link_extractor
        iri_parser = _IRIParserLinkExtractor.__new__(_IRIParserLinkExtractor)
        iri_parser.__dict__.update(parser.__dict__)
        iri_parser.link_key = _link_key
        self.link_extractor = iri_parser
        self.allow_domains = {_domain(d) for d in arg_to_iter(self.allow_domains)}
        self.deny_domains = {_domain(d) for d in arg_to_iter(self.deny_domains)}

    def _process_links(self, links: list[Link]) -> list[Link]:
        links = [x for x in links if self._link_allowed(x)]
        if self.canonicalize:
            for link in links:
                with contextlib.suppress(IRIError):  # no canonical form: as extracted
                    link.url = normalize(link.url, Level.SCHEME, keep_fragment=False)
        return self.link_extractor._process_links(links)


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


class IRICrawlSpider(CrawlSpider):
    """``CrawlSpider`` whose rule requests keep the extracted URI as it is.

    Use with :class:`IRILinkExtractor` in ``rules``; see :func:`link_request`.
    """

    def _build_request(self, rule_index: int, link: Link) -> Request:
        request = super()._build_request(rule_index, link)
        if request.url == link.url:
            return request
        return link_request(
            link, callback=request.callback, errback=request.errback, meta=request.meta
        )
