"""Test infrastructure: a local multi-host "alias web" server and a Scrapy crawl harness.

Nothing here imports the ``iri_scrapy`` core: the server is an independent oracle.

* :mod:`iri_scrapy.testing.site` -- the declarative demo web (:data:`DEMO_SITE`);
* :mod:`iri_scrapy.testing.server` -- :func:`serve_site`, a loopback forward proxy serving it;
* :mod:`iri_scrapy.testing.crawl` -- :func:`run_crawl`, a Scrapy crawl in a subprocess;
* :mod:`iri_scrapy.testing.spider` -- :class:`AliasSpider`, the follow-every-link spider.
* :mod:`iri_scrapy.testing.wire` -- a legacy web: per-host charsets (queries decoded in
  them, 404 otherwise) and raw routes for servers that insist on a spelling.
"""

from iri_scrapy.testing.site import DEMO_SITE, ResourceKey, Site, distinct_resource_count

__all__ = ["DEMO_SITE", "ResourceKey", "Site", "distinct_resource_count"]
