"""Settings of the ``demo`` project.

The plugin is one line: ``ADDONS = {"iri_scrapy.Addon": 0}``.  Everything else
here is ordinary Scrapy configuration for a small local crawl, plus
:class:`demo.middlewares.DemoWebProxyMiddleware`, which exists only because the
demo web's hosts (``пример.испытание``, ``例子.测试``, ...) are not on the
Internet: every request goes to the local demo-web server, used as an HTTP proxy.
"""

BOT_NAME = "demo"

SPIDER_MODULES = ["demo.spiders"]
NEWSPIDER_MODULE = "demo.spiders"

# ---- iri_scrapy: canonical-URI fetching and IRI deduplication ----
ADDONS = {"iri_scrapy.Addon": 0}

# ---- the demo web (see demo/middlewares.py) ----
# Start it with `python -m tests.support.server --port 8080`; override with
# `scrapy crawl demo -s DEMO_WEB_PROXY=http://127.0.0.1:PORT`.
DEMO_WEB_PROXY = "http://127.0.0.1:8080"
DOWNLOADER_MIDDLEWARES = {"demo.middlewares.DemoWebProxyMiddleware": 40}
# Write the final crawl stats as JSON to this path when set (the runner sets it).
DEMO_STATS_FILE = ""
EXTENSIONS = {"demo.extensions.StatsToJson": 500}

# ---- a fast, polite-enough local crawl ----
ROBOTSTXT_OBEY = False  # the demo web has no robots.txt; keep the server's hit count clean
CONCURRENT_REQUESTS = 8
CONCURRENT_REQUESTS_PER_DOMAIN = 8
DOWNLOAD_DELAY = 0
DOWNLOAD_TIMEOUT = 10
RETRY_ENABLED = False
TELNETCONSOLE_ENABLED = False
CLOSESPIDER_TIMEOUT = 120  # a bound, never reached by the demo crawl
LOG_LEVEL = "INFO"
FEED_EXPORT_ENCODING = "utf-8"  # readable IRIs in the JSON Lines output
