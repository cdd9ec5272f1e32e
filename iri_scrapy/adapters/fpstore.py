"""The fingerprint table and its ``JOBDIR`` file, for the adapters.

They live in the core, :mod:`iri_scrapy.fpstore` (no Scrapy there: ``dedupe``
uses the table too, and the core does not import the adapters); this module
re-exports them so that ``iri_scrapy.adapters.fpstore`` keeps working.
"""

from __future__ import annotations

from ..fpstore import (
    FILENAME,
    FLUSH_RECORDS,
    FLUSH_SECONDS,
    FORMAT_VERSION,
    MAGIC,
    MAX_LOAD,
    RECORD_SIZE,
    FingerprintFile,
    FingerprintFileError,
    FingerprintFileMismatch,
    FingerprintSet,
    fp64,
)

__all__ = [
    "FingerprintSet",
    "FingerprintFile",
    "FingerprintFileError",
    "FingerprintFileMismatch",
    "fp64",
    "FILENAME",
    "MAGIC",
    "FORMAT_VERSION",
    "RECORD_SIZE",
    "MAX_LOAD",
    "FLUSH_RECORDS",
    "FLUSH_SECONDS",
]
