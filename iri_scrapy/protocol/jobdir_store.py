"""The protocol rung's state in ``JOBDIR``: learned rules and the requests they skipped.

At ``IRI_LEVEL = "protocol"`` the crash-safe frontier keeps, beside its store:

* ``iri_protocol_rules.json``: :meth:`ProtocolRules.to_data` (RFC 3987 section
  5.3.4 rules and their evidence), rewritten atomically (temporary file,
  ``os.replace``) every few seconds while it changes, before a skip when last
  written over a second ago, and at close; read back as
  data (:meth:`ProtocolRules.from_data` checks every field; a damaged file is
  set aside and learning starts afresh, which loses no page);
* ``iri_protocol_skipped.jsonl``: one line per request a learned rule skipped
  (:class:`iri_scrapy.protocol.learned.Learned`), written before the dupefilter
  drops it: the key it had, the key it was merged into, and the request as a
  :mod:`iri_scrapy.frontier.codec` record (data, never a bare pickle; the record and the resume
  are :mod:`.store`'s, shared with the Redis fleet's store).

On resume every kept request is looked at against the rules read back: one whose
merge no longer holds (its rule was revoked, or the rules file was lost) is
scheduled again, so a crash between a revocation and its re-queue loses nothing.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from iri_scrapy.frontier.codec import RequestCodec
from iri_scrapy.protocol.document import RulesDataError
from iri_scrapy.protocol.learned import write_rules
from iri_scrapy.protocol.store import (
    SKIPPED_ERRORS,
    Kept,
    read_skipped_record,
    resume,
    rules_text,
    skipped_record,
)

if TYPE_CHECKING:
    from scrapy import Request

    from iri_scrapy.protocol.learned import Learned


logger = logging.getLogger(__name__)

RULES_FILE = "iri_protocol_rules.json"
SKIPPED_FILE = "iri_protocol_skipped.jsonl"
#: Seconds between two writes of the rules file while they change.
SAVE_EVERY = 5.0
#: A skip rewrites the rules file first if it was last written this many seconds
#: ago (a crawl killed then resumes with the rules that justify what it skipped).
SAVE_AFTER_SKIP = 1.0


class ProtocolStore:
    """The two files above for one crawl (see the module doc)."""

    def __init__(self, jobdir: str | os.PathLike[str], codec: RequestCodec,
                 learned: Learned, seen: Callable[[Request], bool] | None = None) -> None:
        """*seen*: the dupefilter's ``request in df`` (see :func:`resume`)."""
        self.rules_path = Path(jobdir, RULES_FILE)
        self.skipped_path = Path(jobdir, SKIPPED_FILE)
        self.codec = codec
        self.learned = learned
        self.seen = seen
        self._file: TextIO | None = None
        self._saved = ""
        self._saved_at = 0.0
        self._loop: Any = None

    def open(self) -> list[Request]:
        """Read both files; the kept requests whose merge no longer holds (to schedule)."""
        learned = self.learned
        if self.rules_path.exists():
            try:
                data = json.loads(self.rules_path.read_text(encoding="utf-8"))
                learned.rules.load(data)
            except (OSError, ValueError, RulesDataError) as exc:
                aside = self.rules_path.with_name(self.rules_path.name + ".damaged")
                with contextlib.suppress(OSError):
                    os.replace(self.rules_path, aside)
                logger.warning("IRI protocol: %(path)s cannot be read (%(exc)s); set aside as "
                               "%(aside)s, learning starts afresh (the requests its rules "
                               "skipped are scheduled again)",
                               {"path": self.rules_path, "exc": exc, "aside": aside})
        again = [request for _, request in resume(learned, self._read_skipped(), self.seen)]
        self._rewrite_skipped()
        learned.sink = self._append
        if again:
            logger.info("IRI protocol: %(n)d request(s) skipped by rules that no longer hold "
                        "are scheduled again", {"n": len(again)})
        if "twisted.internet.reactor" in sys.modules:
            from twisted.internet.task import LoopingCall

            self._loop = LoopingCall(self.save)
            self._loop.start(SAVE_EVERY, now=False)
        return again

    def _read_skipped(self) -> dict[str, Kept]:
        out: dict[str, Kept] = {}
        if not self.skipped_path.exists():
            return out
        refused = 0
        with self.skipped_path.open("r", encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    base, kept = read_skipped_record(self.codec, line)
                except SKIPPED_ERRORS:
                    refused += 1  # a torn last line after kill -9, or not ours
                    continue
                out[base] = kept
        if refused:
            logger.warning("IRI protocol: %(n)d line(s) of %(path)s could not be read back "
                           "and were ignored", {"n": refused, "path": self.skipped_path})
        return out

    def _rewrite_skipped(self) -> None:
        """The file again with only the requests still kept (it does not grow forever)."""
        tmp = self.skipped_path.with_name(self.skipped_path.name + ".tmp")
        with tmp.open("w", encoding="utf-8") as f:
            for base, (via, merged, request) in self.learned.skipped.items():
                f.write(self._line(base, via, merged, request))
        os.replace(tmp, self.skipped_path)
        self._file = self.skipped_path.open("a", encoding="utf-8")

    def _line(self, base: str, via: str, merged: str, request: Request) -> str:
        return skipped_record(self.codec, base, via, merged, request) + "\n"

    def _append(self, base: str, via: str, merged: str, request: Request) -> None:
        if self._file is None:
            return
        try:
            line = self._line(base, via, merged, request)
        except Exception:  # not storable as data: kept in memory only (a crash loses it)
            logger.warning("IRI protocol: a skipped request cannot be stored as data: %s",
                           request, exc_info=True)
            return
        if time.monotonic() - self._saved_at >= SAVE_AFTER_SKIP:
            # the rules that justify it first, so that a resume finds them; an error
            # is said at close, where the file is written again
            with contextlib.suppress(OSError):
                self.save()
        self._file.write(line)
        self._file.flush()  # in the OS before the dupefilter drops the request

    def save(self) -> None:
        """Rewrite the rules file if the rules changed since the last write."""
        self._saved_at = time.monotonic()
        text = rules_text(self.learned.rules.to_data())
        if text != self._saved:
            write_rules(self.rules_path, json.loads(text))
            self._saved = text

    def close(self) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self._loop = None
        self.learned.sink = None
        try:
            self.save()
        except OSError as exc:
            logger.error("IRI protocol: %s cannot be written (%s): the next run learns afresh",
                         self.rules_path, exc)
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None
