"""Regenerate tests/data/surt_package_outputs.jsonl: what the ``surt`` package (PyPI,
internetarchive/surt, AGPL-3.0; run here, never copied) writes for our canonical URIs.

    pip install surt==0.3.1 && python -m tests.make_surt_outputs

Inputs: every http(s) input of the conformance files in tests/data and seeded lines
of tests/support/generated_urls.py, brought to their canonical URI by ``iri_scrapy.normalize``
(level scheme, no fragment).  The package runs with its Internet Archive
canonicalizer reduced to the "host massage" (dropping ``www``, ``www2``...), so what
is compared is the reordering itself, with each of its options.  Records where the
package parses otherwise carry a ``deviation`` (see README, "SURT keys").
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from iri_scrapy import IRIError, normalize, parse
from tests.support.generated_urls import lines
from tests.support.vectors import vector_inputs

DATA = Path(__file__).resolve().parents[1] / "data"
OUT = DATA / "surt_package_outputs.jsonl.gz"  # over 200 KB: gzip, as the README says
#: The package's options, in the order of the record fields.
OPTIONS: list[tuple[str, dict[str, Any]]] = [
    ("surt", {}), ("trailing_comma", {"trailing_comma": True}),
    ("with_scheme", {"with_scheme": True}), ("no_reverse_ipaddr", {"reverse_ipaddr": False}),
]


def inputs() -> list[str]:
    out = vector_inputs(skip=OUT.name)
    return out + lines("crawl", 400) + lines("bait", 400) + lines("iris", 200)


def deviation(uri: str) -> str | None:
    """Why the package's reading of *uri* differs from RFC 3986's, or None."""
    ref = parse(uri)
    assert ref.host is not None
    if ref.host.startswith("["):
        return "ipv6"  # the package drops the brackets and splits IPv4-in-IPv6 at dots
    if ref.host == "":
        return "empty-host"  # the package takes the first path segment as the host
    if ref.userinfo is not None:
        return "userinfo"  # the package drops it, even with auth_strip_user=False
    if ref.port == "0":
        return "port-0"  # the package drops port 0 (a falsy port)
    return None


def main() -> None:
    import surt as package
    from surt import IAURLCanonicalizer

    off = {k: False for k in (
        "host_lowercase", "auth_strip_user", "auth_strip_pass", "port_strip_default",
        "path_strip_empty", "path_lowercase", "path_strip_session_id",
        "path_strip_trailing_slash_unless_empty", "query_lowercase", "query_strip_session_id",
        "query_strip_empty", "query_alpha_reorder", "hash_strip")}

    def massage_only(hurl: Any, **_: Any) -> Any:
        return IAURLCanonicalizer.canonicalize(hurl, host_massage=True, **off)

    seen: set[str] = set()
    with gzip.open(OUT, "wt", encoding="utf-8") as f:
        for value in inputs():
            try:
                uri = normalize(value, "scheme", keep_fragment=False)
                uri.encode("utf-8")
            except (IRIError, UnicodeEncodeError):
                continue
            if uri in seen or not uri.startswith(("http://", "https://")):
                continue
            seen.add(uri)
            record: dict[str, Any] = {"uri": uri, "deviation": deviation(uri)}
            try:
                for name, options in OPTIONS:
                    record[name] = package.surt(uri, canonicalizer=massage_only, **options)
            except ValueError as exc:  # e.g. a port over 65535
                record = {"uri": uri, "deviation": f"package raises: {exc}"}
            record["source"] = "surt 0.3.1 (PyPI), run by tests/make_surt_outputs.py"
            f.write(json.dumps(record, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
