"""One table owns the settings: every ``IRI_*`` the package names is in
:data:`iri_scrapy.plugin.config.SETTINGS`, read through :func:`setting` with the
table's default (docs/settings.md lists them: tests/plugin/test_readme_lists.py);
the request meta keys are defined in plugin/config.py only."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from scrapy.settings import Settings

import iri_scrapy
from iri_scrapy.frontier import options, redis_backend, redis_client, redis_dupefilter
from iri_scrapy.plugin import config
from iri_scrapy.plugin.config import SETTINGS, setting

PACKAGE = Path(iri_scrapy.__file__).resolve().parent
SOURCES = {p: p.read_text(encoding="utf-8") for p in PACKAGE.rglob("*.py")}


def test_every_iri_setting_named_in_the_package_is_in_the_table() -> None:
    named = {
        m.group(1)
        for text in SOURCES.values()
        for m in re.finditer(r"""["'](IRI_[A-Z0-9_]*[A-Z0-9])""", text)
    }
    assert named, "no IRI_* literal found"
    assert named - set(SETTINGS) == set()


def test_no_read_repeats_a_default() -> None:
    """``settings.getbool("IRI_X", default)`` and friends: only through setting()."""
    reads = [
        f"{path.relative_to(PACKAGE)}: {m.group(0)}"
        for path, text in SOURCES.items()
        for m in re.finditer(r"""settings\.get(?:bool|int|float|list|dict)?\(\s*["']IRI_\w+["']\s*,""",
                             text)
    ]
    assert reads == []


def test_table_defaults_match_the_modules_constants() -> None:
    assert SETTINGS["IRI_FRONTIER_FSYNC"].default == options.DEFAULT_FSYNC_MS
    assert SETTINGS["IRI_FRONTIER_WRITE_RETRY"].default == options.DEFAULT_WRITE_RETRY
    assert SETTINGS["IRI_REDIS_RETRY_SECONDS"].default == redis_client.DEFAULT_RETRY_SECONDS
    assert SETTINGS["IRI_REDIS_SOCKET_TIMEOUT"].default == redis_client.DEFAULT_SOCKET_TIMEOUT
    assert SETTINGS["IRI_REDIS_LOCAL_CACHE"].default == redis_dupefilter.DEFAULT_LOCAL_CACHE
    assert SETTINGS["IRI_REDIS_LEASE_SECONDS"].default == redis_backend.DEFAULT_LEASE_SECONDS
    assert SETTINGS["IRI_REDIS_IDLE_TIMEOUT"].default == redis_backend.DEFAULT_IDLE_TIMEOUT


def test_setting_reads_with_the_tables_default_and_type() -> None:
    empty = Settings()
    for name, spec in SETTINGS.items():
        assert setting(empty, name) == spec.default, name
    given = Settings({"IRI_NFC": "true", "IRI_PROTOCOL_MIN_EVIDENCE": "3",
                      "IRI_DROP_QUERY_PARAMS": "utm_*,ref"})
    assert setting(given, "IRI_NFC") is True
    assert setting(given, "IRI_PROTOCOL_MIN_EVIDENCE") == 3
    assert setting(given, "IRI_DROP_QUERY_PARAMS") == ["utm_*", "ref"]
    setting(empty, "IRI_DROP_QUERY_PARAMS").append("x")  # a copy: the table is unchanged
    assert SETTINGS["IRI_DROP_QUERY_PARAMS"].default == []
    with pytest.raises(KeyError):
        setting(empty, "IRI_NOT_A_SETTING")


def test_request_meta_keys_are_defined_in_config_only() -> None:
    keys = {getattr(config, n) for n in dir(config) if n.startswith("META_")}
    assert len(keys) >= 9
    definitions = [
        f"{path.relative_to(PACKAGE)}: {m.group(0)}"
        for path, text in SOURCES.items() if path.name != "config.py"
        for m in re.finditer(r"""^META_\w+ = ["']\w+["']""", text, re.MULTILINE)
    ]
    # the frontier's own bookkeeping keys stay with their schedulers (dropped before
    # a request is stored, see codec.request_to_record's drop_meta)
    assert sorted(definitions) == [
        "frontier/redis_backend.py: META_LEASE = \"iri_redis_lease\"",
        "frontier/stored_queue.py: META_FRONTIER_ID = \"iri_frontier_id\"",
    ]
