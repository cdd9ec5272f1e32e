"""The plugin's settings and request meta keys, each defined once.

:data:`SETTINGS` is the one table of every ``IRI_*`` setting the package reads
(plugin, frontier and add-on alike): its default, its type and one line of
meaning.  Read a setting with :func:`setting` (``setting(settings, "IRI_NFC")``),
never with a default of your own: the default is the table's.  A test greps the
package for ``"IRI_`` literals and checks that each one is in the table, and
``docs/settings.md`` lists the table.  The ``META_*`` constants are the request
meta keys the plugin and the frontier read or write, all of them here.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from typing import TYPE_CHECKING, Any

from iri_scrapy.core.ladder import Level
from iri_scrapy.core.query import rewrite_query

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings


#: Request meta key: skip canonicalization for this request.
META_DONT_NORMALIZE = "dont_normalize_iri"
#: Request meta key set when a request is rewritten to its fetch form: the URL as written.
META_ORIGINAL = "iri_original"
#: Scrapy's own meta key (2.17+): ``Request()`` keeps the URL as given.
META_VERBATIM = "verbatim_url"
#: Request meta key: this request is the spelling a server redirected to for the
#: resource of its source (the value is that resource's canonical URI, no fragment).
META_SERVER_SPELLING = "iri_server_spelling"
#: Request meta key: this URL has no canonical form (already counted and logged).
META_UNNORMALIZABLE = "iri_unnormalizable"
#: Request meta key of the placeholder ``response.follow()`` returns for a link it
#: cannot use: ``{"href": ..., "page": ..., "reason": ..., "error": ...}``.
META_SKIPPED = "iri_skipped_link"
#: Request meta key: a redirect observation waiting for its target to meet the dupefilter.
META_PENDING = "iri_pending_redirect"
#: Request meta key: fetched to check the learned rules that would have merged it.
META_SAMPLE = "iri_protocol_sample"
#: Request meta key (level protocol): the seen-set record (hex) this request added
#: when it passed the dupefilter; a redirect copies it, so the dupefilter can tell
#: a redirect to the key its source added from one to a key another request added.
META_KEYED = "iri_keyed"
#: Request meta key (level protocol): held back (deferred, or kept) while a rule was
#: being learned and given back to be fetched past the dupefilter: never deferred again,
#: and still checked at the download (unlike the spider's own ``dont_filter``).
META_DEFERRED = "iri_protocol_deferred"
#: Request meta key (level protocol): a calibration fetch (a site's page fetched again to
#: learn what changes by chance there), the section it calibrates.
META_CALIBRATE = "iri_protocol_calibrate"


@dataclass(frozen=True, slots=True)
class Setting:
    """One ``IRI_*`` setting: its default, how it is read, what it means."""

    default: Any
    kind: str  # "str", "bool", "int", "float", "list", "dict", "raw" (validated by its reader)
    doc: str


#: Every ``IRI_*`` setting of the package.
SETTINGS: dict[str, Setting] = {
    # keys (plugin/config.py, the fingerprinter, the middlewares)
    "IRI_LEVEL": Setting("scheme", "str",
                         "ladder level of RFC 3987 section 5.3: simple, syntax, scheme, protocol"),
    "IRI_KEEP_FRAGMENTS": Setting(False, "bool",
                                  "keep fragments in the dedup key (RFC 3987 5.1 says drop)"),
    "IRI_NFC": Setting(False, "bool", "character normalization to NFC (5.3.2.2), opt-in"),
    "IRI_SORT_QUERY": Setting(False, "bool",
                              "heuristic, not RFC: sort query parameters in the key"),
    "IRI_DROP_QUERY_PARAMS": Setting([], "list",
                                     "heuristic, not RFC: query parameter names (utm_*) dropped"),
    "IRI_PROTOCOL_MIN_EVIDENCE": Setting(
        2, "int", "independent confirmations before a learned host rule is used (level protocol)"),
    "IRI_PROTOCOL_SAMPLE_EVERY": Setting(
        10, "int", "K: a learned rule's merges number K*2**j, from 2**(c-1)*K on (c: its "
        "confirmations), are fetched to check it"),
    "IRI_PROTOCOL_RULES_FILE": Setting(
        None, "raw", "JSON file the learned rules are loaded from at start and saved to at close"),
    "IRI_REQUEST_FINGERPRINTER_BASE_CLASS": Setting(
        None, "raw", "another fingerprinter hashed together with ours (docs/compose.md)"),
    # requests
    "IRI_DEDUPE_START_REQUESTS": Setting(
        True, "bool", "start requests go through the dupefilter (still exempt from offsite)"),
    "IRI_IDNA2008_REQUESTS": Setting(
        True, "bool", "Request() URLs with IDNA 2008 (UTS 46) hosts in the add-on's crawler"),
    "IRI_MEDIA_PIPELINES": Setting(
        True, "bool", "the add-on's media pipelines store files under the retrieval key"),
    "IRI_CRAWL_CONTEXT": Setting(
        None, "raw", "set by the add-on: the crawl's shared state (plugin/context.py), not yours"),
    # JOBDIR
    "IRI_JOBDIR_ALLOW_RESET": Setting(
        False, "bool", "start afresh when JOBDIR was written under other options"),
    "IRI_REPORT_FILE": Setting(
        None, "raw", "write the crawl's report page (HTML) to this file at close"),
    "IRI_FRONTIER": Setting(True, "bool", "the crash-safe frontier scheduler with JOBDIR"),
    "IRI_FRONTIER_FSYNC": Setting(
        250, "raw", "frontier store: milliseconds between fsyncs, or 'always'"),
    "IRI_FRONTIER_MAX_INFLIGHT": Setting(
        None, "raw", "frontier: requests out at once (default CONCURRENT_REQUESTS; 0: no cap)"),
    "IRI_FRONTIER_WRITE_RETRY": Setting(
        30.0, "float", "frontier: seconds a failing store write is retried before closing"),
    "IRI_FRONTIER_SECRET": Setting(
        None, "raw", "HMAC key for requests stored as signed pickles (or the environment)"),
    # Redis
    "IRI_REDIS_URL": Setting(None, "raw", "Redis URL of the shared seen-set (else REDIS_URL)"),
    "IRI_REDIS_KEY": Setting(None, "raw", "key template of the seen-set in Redis"),
    "IRI_REDIS_PARAMS": Setting({}, "dict", "extra redis-py client arguments"),
    "IRI_REDIS_EXPECTED_URLS": Setting(None, "raw", "sizes the seen-set's buckets"),
    "IRI_REDIS_LOCAL_CACHE": Setting(
        1_000_000, "int", "fingerprints known seen kept in memory per worker"),
    "IRI_REDIS_CLUSTER": Setting(False, "bool", "Redis Cluster client"),
    "IRI_REDIS_RETRY_SECONDS": Setting(
        60.0, "float", "seconds an unreachable Redis is retried before the crawl closes"),
    "IRI_REDIS_SOCKET_TIMEOUT": Setting(5.0, "float", "Redis socket timeout in seconds"),
    "IRI_REDIS_SCHEDULER": Setting(True, "bool", "the fleet's Redis scheduler with IRI_REDIS_URL"),
    "IRI_REDIS_SCHEDULER_KEY": Setting(None, "raw", "key template of the fleet's queue"),
    "IRI_REDIS_LEASE_SECONDS": Setting(30.0, "raw", "seconds a worker holds a request"),
    "IRI_REDIS_IDLE_TIMEOUT": Setting(300.0, "raw", "seconds an idle fleet waits before closing"),
    "IRI_REDIS_FLUSH_ON_START": Setting(False, "bool", "empty the fleet's queue at start"),
}

_READERS = {
    "bool": "getbool", "int": "getint", "float": "getfloat", "list": "getlist",
    "dict": "getdict", "str": "get", "raw": "get",
}


def setting(settings: BaseSettings, name: str) -> Any:
    """The value of ``IRI_*`` setting *name* in *settings*, its default from :data:`SETTINGS`.

    ``KeyError`` for a name not in the table (a new setting is added there first).
    """
    spec = SETTINGS[name]
    reader = getattr(settings, _READERS[spec.kind])
    default = spec.default
    if isinstance(default, (list, dict)):
        default = type(default)(default)  # a copy: the table's stays as it is
    return reader(name, default)


def is_subclass_path(value: Any, ours: str) -> bool:
    """True if *value* (a setting's value: an import path or a class) is the class at
    path *ours* or a subclass of it (the one copy of "is this setting our class")."""
    try:
        theirs, mine = load_object(value), load_object(ours)
    except (ImportError, AttributeError, NameError, ValueError, TypeError):
        return False
    return isinstance(theirs, type) and isinstance(mine, type) and issubclass(theirs, mine)


@dataclass(frozen=True, slots=True)
class IRIConfig:
    """The ``IRI_*`` settings of one crawler."""

    level: Level = Level.SCHEME
    keep_fragments: bool = False
    nfc: bool = False
    sort_query: bool = False
    drop_query_params: tuple[str, ...] = ()
    protocol_min_evidence: int = 2
    protocol_sample_every: int = 10
    protocol_rules_file: str | None = None

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> IRIConfig:
        """Read the settings; a ValueError names the setting that cannot be used."""
        drop: Any = setting(settings, "IRI_DROP_QUERY_PARAMS")
        try:
            level = Level.coerce(setting(settings, "IRI_LEVEL"))
        except ValueError as exc:
            raise ValueError(f"IRI_LEVEL: {exc}") from None
        evidence = _at_least_one(settings, "IRI_PROTOCOL_MIN_EVIDENCE", "min_evidence")
        sample_every = _at_least_one(settings, "IRI_PROTOCOL_SAMPLE_EVERY", "sample_every")
        rules_file = setting(settings, "IRI_PROTOCOL_RULES_FILE")
        if rules_file is not None:  # read by the protocol level (ProtocolLevel.check)
            rules_file = str(rules_file)
        return cls(
            level=level,
            keep_fragments=setting(settings, "IRI_KEEP_FRAGMENTS"),
            nfc=setting(settings, "IRI_NFC"),
            sort_query=setting(settings, "IRI_SORT_QUERY"),
            drop_query_params=tuple(str(p) for p in drop),
            protocol_min_evidence=evidence,
            protocol_sample_every=sample_every,
            protocol_rules_file=rules_file,
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
        """Apply the opt-in query heuristics to a canonical URI (not RFC 3987):
        :func:`iri_scrapy.core.query.rewrite_query`, as the CLI and Spark do."""
        return rewrite_query(uri, self.drop_query_params, self.sort_query)


def _at_least_one(settings: BaseSettings, name: str, what: str) -> int:
    """The integer setting *name*, at least 1 (*what*: the protocol rules' argument)."""
    try:
        value = setting(settings, name)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}: {exc}") from None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name}: {what} must be an integer >= 1, got {value!r}")
    return value


def class_of(value: Any) -> type | None:
    """The class a component setting names (a class or an import path), else None:
    unset, not importable, or not a class (the add-on's and the Redis checks read it)."""
    if value is None:
        return None
    try:
        cls = load_object(value)
    except (ImportError, AttributeError, NameError, ValueError, TypeError):
        return None
    return cls if isinstance(cls, type) else None


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
