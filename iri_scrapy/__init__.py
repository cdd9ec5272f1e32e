"""iri_scrapy: RFC 3987 IRI canonicalization and deduplication for crawl URLs.

The core (this package's top-level functions) imports no Scrapy.  The Scrapy
parts (``Addon``, ``IRIRequestFingerprinter``, ``IRIDupeFilter``, the
middlewares, ``RedisIRIDupeFilter``) and ``ProtocolRules`` (the optional learned
protocol level, ``iri_scrapy/protocol/``) are loaded on first use.
"""

from __future__ import annotations

from typing import Any

from iri_scrapy.core.errors import (
    IRIEncodingError,
    IRIError,
    IRIHostError,
    IRIScrapyError,
    IRISyntaxError,
)
from iri_scrapy.core.explain import Explanation, explain
from iri_scrapy.core.ladder import (
    CANONICALIZATION_VERSION,
    Level,
    Rung,
    equivalent,
    normalize,
    retrieval_key,
    surt,
)
from iri_scrapy.core.mapping import iri_to_uri, uri_to_iri
from iri_scrapy.core.parsing import IRIReference, parse, validate
from iri_scrapy.core.resolve import resolve
from iri_scrapy.version import __version__

__all__ = [
    "parse",
    "validate",
    "IRIReference",
    "IRIScrapyError",
    "IRIError",
    "IRISyntaxError",
    "IRIHostError",
    "IRIEncodingError",
    "iri_to_uri",
    "uri_to_iri",
    "resolve",
    "Level",
    "Rung",
    "normalize",
    "retrieval_key",
    "equivalent",
    "explain",
    "Explanation",
    "surt",
    "CANONICALIZATION_VERSION",
    "__version__",
    # the learned protocol level (the optional iri_scrapy/protocol/), imported lazily:
    "ProtocolRules",
    # the Scrapy plugin, imported lazily:
    "Addon",
    "IRIRequestFingerprinter",
    "IRIDupeFilter",
    "IRINormalizationMiddleware",
    "IRISpiderMiddleware",
    "IRIOffsiteMiddleware",
    "IRIProtocolMiddleware",
    "IRILinkExtractor",
    "IRICrawlSpider",
    "RedisIRIDupeFilter",
    "RedisIRIScheduler",
]

_LAZY = {
    "ProtocolRules": "iri_scrapy.protocol.rules",
    "Addon": "iri_scrapy.addon",
    "IRIRequestFingerprinter": "iri_scrapy.plugin.fingerprinter",
    "IRIDupeFilter": "iri_scrapy.plugin.dupefilter",
    "IRINormalizationMiddleware": "iri_scrapy.plugin.middleware",
    "IRISpiderMiddleware": "iri_scrapy.plugin.middleware",
    "IRIOffsiteMiddleware": "iri_scrapy.plugin.offsite",
    "IRIProtocolMiddleware": "iri_scrapy.protocol.middleware",
    "IRILinkExtractor": "iri_scrapy.plugin.linkextractor",
    "IRICrawlSpider": "iri_scrapy.plugin.linkextractor",
    "RedisIRIDupeFilter": "iri_scrapy.frontier.redis_dupefilter",
    "RedisIRIScheduler": "iri_scrapy.frontier.redis_scheduler",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'iri_scrapy' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
