"""The protocol rung's state in ``JOBDIR``: learned rules, and what they hold back.

At ``IRI_LEVEL = "protocol"`` the crash-safe frontier keeps:

* ``iri_protocol_rules.json``: :meth:`ProtocolRules.to_data` (RFC 3987 section
  5.3.4 rules and their evidence), rewritten atomically (temporary file,
  ``os.replace``) every few seconds while it changes, before a hold when last
  written over a second ago, and at close; read back as data
  (:meth:`ProtocolRules.from_data` checks every field; a damaged file is set
  aside and learning starts afresh: every request its rules held back is
  given back, which loses no page);
* in the frontier's own SQLite store (``iri_frontier.sqlite3``, table
  ``protocol``, :meth:`~iri_scrapy.frontier.sqlite_store.FrontierStore.protocol_set`),
  written in the transaction of the decision, as the pending rows are: each
  request a learned rule holds back (``held``: :mod:`.store`'s record, with the
  key it was merged into and the key's holder), which alias holds a key
  (``holder``) and the digest of each 2xx page (``page``: what a sample is
  compared with).  No fact that decides whether a page is fetched lives only
  in memory.

On resume the pages' digests are replayed into the rules read back, the
holders restored, and every held request looked at: one whose merge no longer
holds (its rule was revoked, or the rules file was lost or is older than the
hold) is scheduled again, its ``held`` record deleted in the transaction that
stores its pending row, so a kill at any moment, the resume's start-up
included, loses nothing.  At the close, what no page stands for is fetched
(:meth:`~iri_scrapy.protocol.learned.Learned.unstood`).
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
from typing import TYPE_CHECKING, Any

from iri_scrapy.frontier.codec import RequestCodec
from iri_scrapy.protocol.document import RulesDataError
from iri_scrapy.protocol.fingerprint import Fingerprint
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

    from iri_scrapy.frontier.sqlite_store import FrontierStore
    from iri_scrapy.protocol.learned import Learned


logger = logging.getLogger(__name__)

RULES_FILE = "iri_protocol_rules.json"
#: The ``protocol`` table's kinds (see the module doc).
HELD, HOLDER, PAGE = "held", "holder", "page"
#: Seconds between two writes of the rules file while they change.
SAVE_EVERY = 5.0
#: A hold rewrites the rules file first if it was last written this many seconds
#: ago (a resume then mostly finds the rules that justify what was held back).
SAVE_AFTER_SKIP = 1.0


class ProtocolStore:
    """The rules file and the ``protocol`` table for one crawl (see the module doc);
    :attr:`Learned.sink` while open."""

    def __init__(self, jobdir: str | os.PathLike[str], codec: RequestCodec,
                 learned: Learned, store: Callable[[], FrontierStore | None],
                 seen: Callable[[Request], bool] | None = None) -> None:
        """*store*: the frontier's SQLite store (None once closed); *seen*: the
        dupefilter's ``request in df`` (see :func:`resume`)."""
        self.rules_path = Path(jobdir, RULES_FILE)
        self.codec = codec
        self.learned = learned
        self.store = store
        self.seen = seen
        self._saved = ""
        self._saved_at = 0.0
        self._loop: Any = None

    def open(self) -> list[Request]:
        """Read the rules and the held state; the held requests whose merge no
        longer holds (to schedule: their records go in the same transaction)."""
        learned = self.learned
        damaged = not self._load_rules()
        store = self.store()
        assert store is not None
        if not damaged:
            self._replay(store)
        holders = {key: value.decode("utf-8") for key, value in store.protocol_rows(HOLDER)}
        kept = self._read_held(store)
        learned.sink = self  # what resume gives back is released in this transaction
        # (with the rules file damaged, before the pages replay: nothing merges any
        # more, so everything its rules held back is given back, and fetched: past
        # the dupefilter, which the rules the replay learns again would merge it by)
        seen = None if damaged else self.seen
        again = [request for _, request in resume(learned, kept, seen, holders)]
        if damaged:
            learned.sink = None
            self._replay(store)
            learned.sink = self
        if again:
            logger.info("IRI protocol: %(n)d request(s) held back by rules that no longer "
                        "hold are scheduled again", {"n": len(again)})
        if "twisted.internet.reactor" in sys.modules:
            from twisted.internet.task import LoopingCall

            self._loop = LoopingCall(self.save)
            self._loop.start(SAVE_EVERY, now=False)
        return again

    def _replay(self, store: FrontierStore) -> None:
        """The pages' digests into the rules (what samples compare with)."""
        for uri, record in store.protocol_rows(PAGE):
            try:
                page = Fingerprint.from_record(record)
            except ValueError:
                continue  # a page no sample can be compared with: only merges lost
            self.learned.observe_content(uri, page, replayed=True)

    def _load_rules(self) -> bool:
        """Read the rules file; False if it was damaged (set aside, said)."""
        if not self.rules_path.exists():
            return True
        try:
            data = json.loads(self.rules_path.read_text(encoding="utf-8"))
            self.learned.rules.load(data)
        except (OSError, ValueError, RulesDataError) as exc:
            aside = self.rules_path.with_name(self.rules_path.name + ".damaged")
            with contextlib.suppress(OSError):
                os.replace(self.rules_path, aside)
            logger.warning("IRI protocol: %(path)s cannot be read (%(exc)s); set aside as "
                           "%(aside)s, learning starts afresh (the requests its rules "
                           "held back are scheduled again)",
                           {"path": self.rules_path, "exc": exc, "aside": aside})
            return False
        return True

    def _read_held(self, store: FrontierStore) -> dict[str, Kept]:
        out: dict[str, Kept] = {}
        refused = 0
        for _, value in store.protocol_rows(HELD):
            try:
                base, kept, _ = read_skipped_record(self.codec, value)
            except SKIPPED_ERRORS:
                refused += 1  # not ours (another secret...): cannot be given back
                continue
            out[base] = kept
        if refused:
            logger.error("IRI protocol: %(n)d request(s) held back in %(path)s cannot be "
                         "read back; they are not fetched by this crawl (run it again "
                         "with the frontier secret it was started with)",
                         {"n": refused, "path": store.path})
        return out

    # --- Learned.sink ---------------------------------------------------------------

    def hold(self, base: str, via: str, merged: str, holder: str, request: Request) -> None:
        store = self.store()
        if store is None:
            return
        try:
            record = skipped_record(self.codec, base, via, merged, request, holder=holder)
        except Exception:  # not storable as data: kept in memory only (a crash loses it)
            logger.warning("IRI protocol: a held request cannot be stored as data: %s",
                           request, exc_info=True)
            return
        if time.monotonic() - self._saved_at >= SAVE_AFTER_SKIP:
            # the rules that justify it first; an error is said at close, where the
            # file is written again (a resume with older rules gives it back)
            with contextlib.suppress(OSError):
                self.save()
        store.protocol_set(HELD, base, record.encode("utf-8"))

    def release(self, base: str) -> None:
        store = self.store()
        if store is not None:
            store.protocol_delete(HELD, base)

    def holder(self, key: str, base: str | None) -> None:
        store = self.store()
        if store is None:
            return
        if base is None:
            store.protocol_delete(HOLDER, key)
        else:
            store.protocol_set(HOLDER, key, base.encode("utf-8"))

    def page(self, uri: str, digest: bytes) -> None:
        store = self.store()
        if store is not None:
            store.protocol_set(PAGE, uri, digest)

    # --- the rules file ---------------------------------------------------------------

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
        if self.learned.sink is self:
            self.learned.sink = None
        try:
            self.save()
        except OSError as exc:
            logger.error("IRI protocol: %s cannot be written (%s): the next run learns afresh",
                         self.rules_path, exc)
