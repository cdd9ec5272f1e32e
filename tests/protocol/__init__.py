"""Tests of the learned protocol level (``iri_scrapy/protocol/``, RFC 3987 section 5.3.4)."""

from __future__ import annotations

from iri_scrapy.core.ladder import Level
from iri_scrapy.plugin.config import IRIConfig
from iri_scrapy.plugin.dupefilter import IRIDupeFilter
from iri_scrapy.plugin.fingerprinter import IRIRequestFingerprinter
from iri_scrapy.protocol.learned import Learned
from iri_scrapy.protocol.rules import ProtocolRules


def protocol_filter(rules: ProtocolRules) -> IRIDupeFilter:
    """A bare :class:`IRIDupeFilter` at level PROTOCOL over *rules*, with the
    :class:`Learned` of them on its stamper (as the add-on builds them)."""
    config = IRIConfig(level=Level.PROTOCOL)
    fingerprinter = IRIRequestFingerprinter(config=config, rules=rules)
    learned = Learned(None, rules, fingerprinter.stamper)
    return IRIDupeFilter(fingerprinter=fingerprinter, config=config, rules=rules,
                         learned=learned)
