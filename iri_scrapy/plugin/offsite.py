"""Offsite filtering that understands IDN and case: ``allowed_domains`` meet canonical hosts.

Scrapy 2.19's :class:`scrapy.downloadermiddlewares.offsite.OffsiteMiddleware`
builds its regular expression from ``allowed_domains`` exactly as written and
matches it against ``urlparse(request.url).hostname``, which is lowercase and,
for a Unicode host, an A-label.  So ``allowed_domains = ["bücher.example"]`` or
``["Example.TEST"]`` filters out every request of the crawl.  (The spider
middleware of the same name was removed in Scrapy 2.13+; there is no second
class to replace.)

:class:`IRIOffsiteMiddleware` canonicalizes each allowed domain with the IRI
core (UTS 46 A-labels, ASCII lowercase, trailing dot dropped) and compares it
with the request's canonical host.  Everything else -- ``allow_offsite``,
``dont_filter``, the ``offsite/*`` stats, the log message -- is Scrapy's.
The add-on puts it at priority 50 in place of the stock one.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from scrapy.downloadermiddlewares.offsite import OffsiteMiddleware

from iri_scrapy.core.errors import IRIError
from iri_scrapy.core.hosts import host_to_ascii
from iri_scrapy.plugin import compat  # noqa: F401 - checks the installed Scrapy first
from iri_scrapy.plugin.context import CrawlContext
from iri_scrapy.plugin.stamp import Stamper

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from typing_extensions import Self


logger = logging.getLogger(__name__)


def canonical_domain(domain: str) -> str:
    """*domain* as a canonical host: A-labels, ASCII lowercase, no trailing dot.

    Raises :class:`~iri_scrapy.IRIError` if the domain fails UTS 46 ToASCII.
    """
    return host_to_ascii(domain.strip().rstrip(".")).rstrip(".")


#: host (as ``urlparse`` reads it) -> its canonical form; a crawl meets few hosts
_HOSTS: dict[str, str] = {}
_HOSTS_MAX = 4096


def _request_host(request: Request, stamper: Stamper | None) -> str:
    """The canonical host of *request* ('' when it has none or no canonical form).

    The canonical form of each host is computed once (a table of at most
    :data:`_HOSTS_MAX` hosts, emptied when full).  A request in the fetch form
    its stamp recorded has its host read off the URI without ``urlsplit``.
    """
    url = request.url
    stamp = stamper.stamp_of(request) if stamper is not None else None
    if stamp is not None and stamp.wire == url and url.startswith(("http://", "https://")):
        # in fetch form (RFC 3987 5.3.3): the host is canonical already, and sits
        # between "//" and the first "/", "?" or "#", after any userinfo
        authority = url[url.index("//") + 2:]
        for end in "/?#":
            authority = authority.split(end, 1)[0]
        host = authority.rpartition("@")[2]
        if host.startswith("["):  # as urlsplit().hostname gives it: no brackets
            host = host[1:host.find("]")]
        elif ":" in host:
            host = host.rpartition(":")[0]
    else:
        host = urlsplit(url).hostname or ""
    if not host:
        return ""
    canonical = _HOSTS.get(host)
    if canonical is None:
        try:
            canonical = canonical_domain(host)
        except IRIError:
            canonical = host
        if len(_HOSTS) >= _HOSTS_MAX:
            _HOSTS.clear()
        _HOSTS[host] = canonical
    return canonical


class IRIOffsiteMiddleware(OffsiteMiddleware):
    """Scrapy's downloader ``OffsiteMiddleware``, with IDN- and case-aware domains."""

    # the regex of the allowed_domains last seen (rebuilt if the spider changes them)
    _iri_domains: list[str] | None = None
    _iri_regex: re.Pattern[str] | None = None
    # the crawl's stamper: a request in the fetch form its stamp recorded is read fast
    _iri_stamper: Stamper | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        """Scrapy's, with the stamper of the crawl's context."""
        mw = super().from_crawler(crawler)
        mw._iri_stamper = Stamper.of(CrawlContext.of(crawler))
        return mw

    def should_follow(self, request: Request, spider: Spider) -> bool:
        """True if the request's canonical host is an allowed domain or a subdomain of one."""
        return bool(self.get_host_regex(spider).search(
            _request_host(request, self._iri_stamper)))

    def get_host_regex(self, spider: Spider) -> re.Pattern[str]:
        """The allowed-domains regex, built from canonical (A-label, lowercase) domains.

        A domain that fails UTS 46 ToASCII is logged and left out (it can match
        no canonical host); if none is left, nothing is allowed.  Built once per
        value of ``allowed_domains`` (so each bad entry is logged once).
        """
        domains = list(getattr(spider, "allowed_domains", None) or [])
        if self._iri_regex is None or domains != self._iri_domains:
            self._iri_domains = domains
            self._iri_regex = _host_regex(domains)
        return self._iri_regex


def _host_regex(allowed_domains: list[str]) -> re.Pattern[str]:
    if not allowed_domains:
        return re.compile("")  # allow all, as Scrapy does
    domains = []
    for domain in allowed_domains:
        if domain is None:
            continue
        try:
            domains.append(re.escape(canonical_domain(str(domain))))
        except IRIError as exc:
            logger.warning(
                "allowed_domains entry %(domain)r is not a valid host (%(error)s); ignored",
                {"domain": domain, "error": exc},
            )
    if not domains:
        return re.compile(r"(?!)")
    return re.compile(rf"^(.*\.)?({'|'.join(domains)})$")
