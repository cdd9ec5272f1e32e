"""The plugin's settings, read once per crawler, and crawler-scoped shared state.

| setting | default | meaning |
|---|---|---|
| ``IRI_LEVEL`` | ``"scheme"`` | ladder level: simple, syntax, scheme, protocol |
| ``IRI_KEEP_FRAGMENTS`` | ``False`` | keep fragments in the dedup key (RFC 3987 5.1 says drop) |
| ``IRI_NFC`` | ``False`` | character normalization to NFC (5.3.2.2), opt-in |
| ``IRI_SORT_QUERY`` | ``False`` | heuristic, not RFC: sort query parameters in the key |
| ``IRI_DROP_QUERY_PARAMS`` | ``[]`` | heuristic, not RFC: names (``utm_*``) dropped |
| ``IRI_PROTOCOL_MIN_EVIDENCE`` | ``2`` | redirects needed before a host-wide trailing-slash rule |
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from importlib import import_module
from typing import TYPE_CHECKING, Any

from iri_scrapy.core.ladder import Level
from iri_scrapy.core.protocol import ProtocolRules

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings

__all__ = [
    "IRIConfig", "rules_for", "META_DONT_NORMALIZE", "META_ORIGINAL", "META_RENORMALIZED",
    "META_VERBATIM", "META_SERVER_SPELLING",
]

#: Request meta key: skip canonicalization for this request.
META_DONT_NORMALIZE = "dont_normalize_iri"
#: Request meta key set by the middleware: the URL as the spider wrote it.
META_ORIGINAL = "iri_original"
#: Request meta key set on a request the normalization middleware re-issued, so
#: that the dupefilter does not drop it as a duplicate of itself.
META_RENORMALIZED = "iri_renormalized"
#: Scrapy's own meta key (2.17+): ``Request()`` keeps the URL as given.
META_VERBATIM = "verbatim_url"
#: Request meta key: this request is the spelling a server redirected to for the
#: resource of its source (the value is that resource's canonical URI, no fragment).
META_SERVER_SPELLING = "iri_server_spelling"


@dataclass(frozen=True, slots=True)
class IRIConfig:
    """The ``IRI_*`` settings of one crawler."""

    level: Level = Level.SCHEME
    keep_fragments: bool = False
    nfc: bool = False
    sort_query: bool = False
    drop_query_params: tuple[str, ...] = ()
    protocol_min_evidence: int = 2

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> IRIConfig:
        drop: Any = settings.getlist("IRI_DROP_QUERY_PARAMS", [])
        return cls(
            level=Level.coerce(settings.get("IRI_LEVEL", "scheme")),
            keep_fragments=settings.getbool("IRI_KEEP_FRAGMENTS", False),
            nfc=settings.getbool("IRI_NFC", False),
            sort_query=settings.getbool("IRI_SORT_QUERY", False),
            drop_query_params=tuple(str(p) for p in drop),
            protocol_min_evidence=settings.getint("IRI_PROTOCOL_MIN_EVIDENCE", 2),
        )

    @property
    def heuristics(self) -> bool:
        """True if an opt-in, non-RFC query heuristic is on."""
        return self.sort_query or bool(self.drop_query_params)

    def options_tag(self) -> str:
        """A short text naming every option that changes keys (recorded in stored keys)."""
        return (
            f"level={self.level.name.lower()};frag={int(self.keep_fragments)};nfc={int(self.nfc)};"
            f"sortq={int(self.sort_query)};drop={','.join(self.drop_query_params)}"
        )

    def apply_heuristics(self, uri: str) -> str:
        """Apply the opt-in query heuristics to a canonical URI (not RFC 3987)."""
        if not self.heuristics:
            return uri
        head, hash_, fragment = uri.partition("#")
        base, q, query = head.partition("?")
        if not q:
            return uri
        params = query.split("&")
        if self.drop_query_params:
            pattern = re.compile(
                "|".join(fnmatch.translate(p) for p in self.drop_query_params)
            )
            params = [p for p in params if not pattern.fullmatch(p.split("=", 1)[0])]
        if self.sort_query:
            params.sort()
        new_query = "&".join(params)
        out = base + ("?" + new_query if params else "")
        return out + hash_ + fragment


_RULES_ATTR = "_iri_scrapy_protocol_rules"


def rules_for(crawler: Crawler, config: IRIConfig) -> ProtocolRules | None:
    """The crawler's shared :class:`ProtocolRules` at level PROTOCOL, else ``None``.

    One instance per crawler, shared by the fingerprinter (which applies it) and
    the middleware that learns from redirects.
    """
    if config.level < Level.PROTOCOL:
        return None
    rules = getattr(crawler, _RULES_ATTR, None)
    if rules is None:
        rules = ProtocolRules(min_evidence=config.protocol_min_evidence)
        setattr(crawler, _RULES_ATTR, rules)
    return rules


def load_object(path: Any) -> Any:
    """The object at import path *path* (``"pkg.module.Name"``); a non-string callable as is.

    As Scrapy resolves component settings: ``TypeError`` for another non-string,
    ``ValueError`` for a path without a dot, ``ImportError`` if the module cannot
    be imported, ``NameError`` if it has no such name.
    """
    if not isinstance(path, str):
        if callable(path):
            return path
        raise TypeError(f"expected an import path or an object, got {type(path)}")
    module, dot, name = path.rpartition(".")
    if not dot:
        raise ValueError(f"{path!r} is not a full import path")
    try:
        return getattr(import_module(module), name)
    except AttributeError:
        raise NameError(f"module {module!r} has no object named {name!r}") from None
