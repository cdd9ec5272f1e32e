"""Route the demo crawl to the local demo-web server (not part of the plugin)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy import Request
from scrapy.exceptions import NotConfigured

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from typing_extensions import Self


class DemoWebProxyMiddleware:
    """Send every request through the demo-web server (``DEMO_WEB_PROXY``).

    The server is a forward proxy that answers for all hosts of the demo web, so
    the spider keeps its real URLs (``http://пример.испытание/...``) and no DNS or
    network is involved.  Scrapy's ``HttpProxyMiddleware`` does the proxying;
    this only sets ``request.meta["proxy"]``.  Set ``DEMO_WEB_PROXY`` to an
    empty string to turn it off.
    """

    def __init__(self, proxy_url: str) -> None:
        self.proxy_url = proxy_url

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        """Read ``DEMO_WEB_PROXY`` from the settings."""
        proxy = crawler.settings.get("DEMO_WEB_PROXY")
        if not proxy:
            raise NotConfigured("DEMO_WEB_PROXY is empty")
        return cls(str(proxy))

    def process_request(self, request: Request) -> None:
        """Route *request* through the demo-web proxy."""
        request.meta.setdefault("proxy", self.proxy_url)
