"""Test support, in one place, shipped in no wheel: the local web servers (the demo
alias web ``site``/``server``, the legacy-charset ``wire`` web, ``dirsite``,
``bigsite``), the Scrapy crawl harness (``crawl``, ``spider``), real Redis fixtures
(``redis_support``), vector loaders and generators (``vectors``, ``generated_urls``,
``peer_deviations``, ``props``, ``paths``).  The sample project uses the servers
from the repository.
"""
