"""The stock fingerprints a crawl report has counted, kept beside it in ``JOBDIR``.

The report counts a fetch stock Scrapy's fingerprint would have made once per
distinct stock fingerprint (:mod:`iri_scrapy.store.crawl_report`).  Across the
runs of a resumed job that takes the set of those already counted:
:class:`StockSeen` keeps it in a :class:`~iri_scrapy.store.fpstore.FingerprintSet`
and, with ``JOBDIR``, in ``<JOBDIR>/iri_report_stock.bin`` (a magic header,
then 8-byte records appended; data only).  Each time the report is written the
new records are appended and synced first, and the report says how many records
it stands for (``stock_records``); a resumed run keeps that many and cuts the
file there, so that after a ``kill -9`` the set and the counts agree again.
"""

from __future__ import annotations

import os
from pathlib import Path

from iri_scrapy.store.fpstore import RECORD_SIZE, FingerprintSet

#: The file's name in ``JOBDIR``.
FILENAME = "iri_report_stock.bin"
MAGIC = b"IRIRSTK1"


class StockSeen:
    """Stock fingerprints counted by a report (see the module docstring)."""

    def __init__(self, directory: str | os.PathLike[str] | None, keep: int = 0) -> None:
        self.seen = FingerprintSet()
        self.path = Path(directory, FILENAME) if directory is not None else None
        self._new = bytearray()
        #: records on disk (those the report read back, then those written since)
        self.records = 0
        if self.path is None:
            return
        data = b""
        if keep and self.path.exists():
            with self.path.open("rb") as f:
                data = f.read(len(MAGIC) + keep * RECORD_SIZE)
        body = data[len(MAGIC):] if data.startswith(MAGIC) else b""
        body = body[: len(body) - len(body) % RECORD_SIZE]
        self.seen.update(int.from_bytes(body[i:i + RECORD_SIZE], "big")
                         for i in range(0, len(body), RECORD_SIZE))
        self.records = len(body) // RECORD_SIZE
        # what the report does not stand for (counted after its last write) goes
        with self.path.open("wb" if not body else "r+b") as f:
            if not body:
                f.write(MAGIC)
            else:
                f.truncate(len(MAGIC) + len(body))

    def add(self, record: bytes) -> bool:
        """Add an 8-byte *record*; True if it had not been counted."""
        if not self.seen.add(int.from_bytes(record, "big")):
            return False
        if self.path is not None:
            self._new += record
        return True

    def flush(self) -> int:
        """Append and sync the records added since the last flush; the records on disk."""
        if self.path is not None and self._new:
            with self.path.open("ab") as f:
                f.write(self._new)
                f.flush()
                os.fsync(f.fileno())
            self.records += len(self._new) // RECORD_SIZE
            self._new.clear()
        return self.records

    def __len__(self) -> int:
        return len(self.seen)
