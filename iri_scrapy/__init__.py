"""iri_scrapy: RFC 3987 IRI canonicalization and deduplication for crawl URLs.

The core (this package's top-level functions) imports no Scrapy.  The Scrapy
parts (``Addon``, ``IRIRequestFingerprinter``, ``IRIDupeFilter``, the
middlewares, ``RedisIRIDupeFilter``) are loaded on first use.
"""

from __future__ import annotations

from typing import Any

from .errors import IRIEncodingError, IRIError, IRIHostError, IRISyntaxError
from .explain import Explanation, explain
from .ladder import Level, Rung, equivalent, normalize, retrieval_key
from .mapping import iri_to_uri, uri_to_iri
from .parsing import IRIReference, parse, validate
from .protocol import ProtocolRules
from .resolve import resolve

__version__ = "0.1.0"

#: Version of the canonical form.  Stored keys (JOBDIR files, Redis keys) record
#: it, so that a change of the ladder never mixes keys silently.
#: 2: an escape at index 0 of a component is decoded like any other; escapes that
#: would make a scheme of a relative reference's first segment stay; a non-ASCII
#: mailto domain keeps its case (and uppercase hex).
CANONICALIZATION_VERSION = 2

__all__ = [
    "parse",
    "validate",
    "IRIReference",
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
    "ProtocolRules",
    "CANONICALIZATION_VERSION",
    # Scrapy adapters, imported lazily:
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
    "Addon": "iri_scrapy.adapters.addon",
    "IRIRequestFingerprinter": "iri_scrapy.adapters.fingerprinter",
    "IRIDupeFilter": "iri_scrapy.adapters.dupefilter",
    "IRINormalizationMiddleware": "iri_scrapy.adapters.middleware",
    "IRISpiderMiddleware": "iri_scrapy.adapters.middleware",
    "IRIOffsiteMiddleware": "iri_scrapy.adapters.offsite",
    "IRIProtocolMiddleware": "iri_scrapy.adapters.protocol_mw",
    "IRILinkExtractor": "iri_scrapy.adapters.linkextractor",
    "IRICrawlSpider": "iri_scrapy.adapters.linkextractor",
    "RedisIRIDupeFilter": "iri_scrapy.adapters.redis_dupefilter",
    "RedisIRIScheduler": "iri_scrapy.adapters.redis_scheduler",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'iri_scrapy' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
