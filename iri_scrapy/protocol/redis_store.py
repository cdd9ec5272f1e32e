"""The protocol rung's state in Redis, for a fleet: learned rules, what they hold back.

At ``IRI_LEVEL = "protocol"`` :class:`~iri_scrapy.RedisIRIScheduler` keeps, beside
the crawl's queue (same ``<base>``: the canonicalization version is in it):

* ``<base>:rules`` (STRING): JSON ``{"format", "canonicalization_version",
  "rules"}``, ``rules`` being :meth:`ProtocolRules.to_data` (RFC 3987 section
  5.3.4).  Read back as data only (:meth:`ProtocolRules.from_data` checks every
  field; a damaged value is copied to ``<base>:rules:damaged``, one WARNING, and
  learning starts afresh: that loses no page).  Every worker writes what it
  learned every second while it changes, before a skip when it last wrote
  more than a second ago (a resume finds the rules that justify what was
  skipped), and at close, merged with what is
  there (:func:`~.store.merge_rules_data`: counterexamples win) by a
  compare-and-set script, so concurrent workers lose none of each other's
  evidence.  A worker that opens loads it: a second worker of the fleet, or a
  recrawl on the same keys, starts with what was learned.  A running worker
  adopts it (:meth:`ProtocolRules.adopt`) whenever the value it read or wrote
  on that tick differs from the one it last adopted (no extra Redis call): the
  other workers' new rules are used within a tick, and a rule in force here
  that the fleet's evidence stops gives back what it skipped here.
* ``<base>:skipped`` (HASH): the key a request had before the rules -> its
  record (:mod:`.store`: a :mod:`iri_scrapy.frontier.codec` record, never a pickle),
  written before the dupefilter drops the request; plus a marker field.  At
  open, every record whose merge no longer holds under the rules loaded is
  claimed: deleted and its request queued in one script (the back-end's
  ``claim_held``; ``dont_filter`` when a kept request may have its own key in
  the seen-set); a record this worker gave back (its own revocation, a
  deferred request decided) is deleted once the request is queued; when the
  fleet's document shows a rule revoked by another worker, the records it no
  longer merges are claimed.  A record that cannot be read back is a refused
  record (the crawl closes ``iri_frontier_refused_records``, exit status 1).
* ``<base>:holders`` and ``<base>:pages``: the keys' holders, and the pages'
  digests and the sites' calibrations (:mod:`.redis_evidence`), the other facts
  a held request's fate depends on; replayed at open, and shared with the
  fleet at once (a site calibrated by one worker is not calibrated again).

Both keys exist from the first worker's open on; either one vanishing while the
crawl runs (a Redis restarted empty, an eviction) closes the crawl as the
scheduler's other losses do (``iri_frontier_lost``), never silently.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from iri_scrapy.core.ladder import CANONICALIZATION_VERSION
from iri_scrapy.frontier.codec import RefusedRecord
from iri_scrapy.frontier.redis_client import IRIRedisError
from iri_scrapy.frontier.redis_queue import MARKER, ProtocolStateLost
from iri_scrapy.plugin.config import META_SAMPLE
from iri_scrapy.protocol.document import RulesDataError
from iri_scrapy.protocol.redis_evidence import (
    Entry,
    FleetEvidence,
    drained,
    replay,
    rules_entry,
)
from iri_scrapy.protocol.rules import ProtocolRules
from iri_scrapy.protocol.store import (
    SKIPPED_ERRORS,
    Kept,
    given_back,
    merge_rules_data,
    read_skipped_record,
    resume,
    skipped_record,
)

if TYPE_CHECKING:
    from scrapy import Request

    from iri_scrapy.frontier.codec import RequestCodec
    from iri_scrapy.protocol.learned import Learned


logger = logging.getLogger(__name__)

_T = TypeVar("_T")

#: The version of ``<base>:rules``'s wrapper document.
FORMAT = 1
#: Seconds between two looks at (and writes of) the fleet's rules, at the least:
#: the sooner a worker adopts the others' rules, the fewer keys the workers give
#: one resource (a resource fetched twice), and the fewer requests given back.
SAVE_EVERY = 1.0
#: The share of a worker's time the looks may take at most: one that took *d*
#: seconds (a large document merged and adopted) is followed by the next after
#: ``d / SYNC_SHARE`` seconds at the soonest.
SYNC_SHARE = 0.1
#: A skip writes the rules first if they were last written this many seconds ago
#: (a worker killed then resumes with the rules that justify what it skipped).
SAVE_AFTER_SKIP = 1.0
#: Compare-and-set tries per save before waiting for the next one (workers racing).
MAX_TRIES = 10

# KEYS: rules, skipped, pages; ARGV: SHA-1 of the value this worker last saw ('' for
# none), the new value ('' to only look), the marker field, '1' if both keys must
# exist, the pages log's entry that tells the other workers of a write.
# -> {-1: rules gone, -2: marker gone, 0: changed meanwhile (then the value),
#     1: written, 2: unchanged}
SAVE_SCRIPT = """
local cur = redis.call('GET', KEYS[1])
if ARGV[4] == '1' then
  if not cur then return {-1, ''} end
  if redis.call('HEXISTS', KEYS[2], ARGV[3]) == 0 then return {-2, ''} end
end
local sha = ''
if cur then sha = redis.sha1hex(cur) end
if sha ~= ARGV[1] then return {0, cur} end
if ARGV[2] == '' then return {2, ''} end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[3], '1')
redis.call('RPUSH', KEYS[3], ARGV[5])
return {1, ''}
"""

#: Runs a function of the Redis client, retried through an outage (the scheduler's).
Call = Callable[[Callable[[Any], _T]], _T]


def _sha(value: bytes) -> str:
    return hashlib.sha1(value).hexdigest()  # noqa: S324 - a change detector, as Redis's


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _in_force(doc: dict[str, Any] | None, min_evidence: int) -> frozenset[tuple[str, ...]]:
    """The rules *doc* puts in force: host rules per scope, and exact rules.  One
    that stops being in force may un-merge skipped requests."""
    if doc is None:
        return frozenset()
    check = ProtocolRules.from_data(doc, min_evidence=min_evidence)
    scopes = {entry["rule"][0] for entry in doc["rules"]} | {row[2] for row in doc["exact"]}
    out: set[tuple[str, ...]] = {("exact", row[0], row[1]) for row in doc["exact"]}
    for scope in scopes:
        out.update(("host", scope, kind, param) for kind, param in check.host_rules(scope + "/"))
    return frozenset(out)


def fleet_document(value: bytes) -> dict[str, Any]:
    """The rules document in ``<base>:rules``'s *value*, checked as data (never run,
    never unpickled); one of the errors :meth:`RedisProtocolStore._read_fleet`
    catches if it is not one (json's errors and a UTF-8 decoding error are
    ValueErrors)."""
    wrapper = json.loads(value)
    if not isinstance(wrapper, dict) or wrapper.get("format") != FORMAT:
        raise ValueError(f"not format {FORMAT}")
    version = wrapper.get("canonicalization_version")
    if version != CANONICALIZATION_VERSION:
        raise ValueError(f"canonicalization version {version!r}, this crawler's "
                         f"is {CANONICALIZATION_VERSION}")
    doc: dict[str, Any] = wrapper["rules"]
    ProtocolRules.from_data(doc)  # (a dict, or RulesDataError)
    return doc


def _unmerged(codec: RequestCodec, check: ProtocolRules,
              records: list[tuple[bytes, bytes]]) -> list[tuple[str, Request]]:
    """The held requests of *records* that the rules *check* no longer merge: (the
    field, the request).  One that cannot be read is left (read at the next open,
    and set aside then)."""
    out = []
    for field, value in records:
        try:
            row = json.loads(value)
            via, merged = str(row["via"]), str(row["merged"])
            if check.apply(via) == check.apply(merged):
                continue
            _, (_, _, request), _ = read_skipped_record(codec, value)
        except SKIPPED_ERRORS:  # (json.loads raises a ValueError)
            continue
        out.append((_text(field), request))
    return out


def _learning(learned: Learned) -> int:
    """A number that moves when *learned*'s rules change as the fleet must hear at
    once: a rule nominated, in force, revoked; a counterexample, one withdrawn."""
    events = learned.rules.events
    return learned.rules.revision + sum(n for event, n in events.items() if event.endswith(
        ("/nominated", "/learned", "/revoked", "counterexamples", "/withdrawn")))


def _held_records(call: Call[Any], skipped_key: str) -> list[tuple[bytes, bytes]]:
    """The (field, record) pairs of *skipped_key*, its marker left out."""
    def scan(c: Any) -> list[tuple[bytes, bytes]]:
        return list(c.hscan_iter(skipped_key, count=1000))

    marker = MARKER.encode()
    return [(field, value) for field, value in call(scan) if field != marker]


def read_held(codec: RequestCodec, call: Call[Any], skipped_key: str, refused_key: str,
              refused: Callable[[RefusedRecord, str], None]) -> tuple[dict[str, Kept],
                                                                      dict[str, str]]:
    """The held requests of *skipped_key* and the holders their records name.  A
    record that cannot be read back is *refused* (one ERROR per kind; the crawl
    closes ``iri_frontier_refused_records``, exit status 1) and moved to
    *refused_key*, never executed."""
    out: dict[str, Kept] = {}
    holders: dict[str, str] = {}
    aside: dict[bytes, bytes] = {}
    for field, value in _held_records(call, skipped_key):
        try:
            base, kept, holder = read_skipped_record(codec, value)
        except SKIPPED_ERRORS as exc:
            aside[field] = value
            why = exc if isinstance(exc, RefusedRecord) else RefusedRecord(
                "shape", f"not a held request's record ({exc!r})")
            refused(why, f"protocol-skipped:{_text(field)} of {skipped_key}")
            continue
        out[base] = kept
        if holder:
            holders[kept[1]] = holder
    if aside:
        call(lambda c: c.hset(refused_key, mapping={
            b"protocol-skipped:" + f: v for f, v in aside.items()}))
        call(lambda c: c.hdel(skipped_key, *aside))
    return out, holders


class RedisProtocolStore:
    """The two keys above for one worker (see the module doc).

    *call* runs a function of the Redis client through the scheduler's retry
    policy (an :class:`IRIRedisError` once it gave up: the spider is closing
    then); *lost* is the scheduler's "frontier lost" (one ERROR, the crawl
    closed); *schedule* hands a request to the engine while the crawl runs.
    """

    def __init__(self, *, rules_key: str, skipped_key: str, refused_key: str,
                 pages_key: str, holders_key: str, worker: str,
                 codec: RequestCodec, learned: Learned, call: Call[Any],
                 lost: Callable[[str], None], schedule: Callable[[Request], None],
                 claim: Callable[[str, Request], bool],
                 refused: Callable[[RefusedRecord, str], None],
                 seen: Callable[[Request], bool] | None = None,
                 filtered: Callable[[Request], bool] | None = None,
                 drop_meta: tuple[str, ...] = ()) -> None:
        self.rules_key = rules_key
        self.skipped_key = skipped_key
        self.refused_key = refused_key
        self.codec = codec
        self.learned = learned
        self._call = call
        self._lost = lost
        self._schedule = schedule
        self._claim_one = claim
        self._refused = refused
        #: The pages' digests and the keys' holders (:mod:`.redis_evidence`).
        self.evidence = FleetEvidence(pages_key=pages_key, holders_key=holders_key,
                                      worker=worker, call=call)
        #: The dupefilter's ``request in df`` (see :func:`resume`).
        self.seen = seen
        #: The dupefilter's ``request_seen`` (records the key; True: a duplicate).
        self._filtered = filtered
        self.drop_meta = drop_meta
        #: The fleet's document as last read or written (validated), its text and SHA-1.
        self.remote: dict[str, Any] | None = None
        self._remote_text = ""
        self._remote_sha = ""
        #: Keys before the rules of the records in Redis this worker knows are kept.
        self._written: set[str] = set()
        #: The keys' holders named by the records read at open (see :func:`resume`).
        self._holders: dict[str, str] = {}
        #: What the fleet's document put in force when last looked at.
        self._in_force: frozenset[tuple[str, ...]] = frozenset()
        self._looked_at = ""  # the text of that document
        self._taken = ""  # the text of the fleet's document last adopted into the rules
        self._closing = False
        self._script: Any = None
        self._saved_at = 0.0
        self._next_sync = 0.0
        self._loop: Any = None
        self._pending: Any = None  # the sync soon (:meth:`_soon`)
        self._learnt = 0  # what this worker had learned at its last sync (_learning)
        self.failed = False
        #: Records claimed and scheduled again (at open, and from the fleet's revocations).
        self.requeued = 0

    # --- open ----------------------------------------------------------------------

    def open(self) -> list[Request]:
        """Load the fleet's rules and skipped requests; the requests whose merge no
        longer holds (claimed: to schedule).  :class:`ProtocolStateLost` if the
        rules are there without the skipped requests' marker."""
        value, marker = self._call(lambda c: (c.get(self.rules_key),
                                              c.hexists(self.skipped_key, MARKER)))
        if value is not None and not marker:
            raise ProtocolStateLost(
                f"{self.rules_key} is in Redis but not the marker of {self.skipped_key}: "
                "Redis lost or evicted the requests the learned rules skipped")
        learned = self.learned
        if value is not None:
            self._read_fleet(value)
        damaged = value is not None and self.remote is None
        if self.remote is not None:
            learned.rules.load(merge_rules_data(learned.rules.to_data(), self.remote))
        if not damaged:
            self._replay(self.evidence.poll())  # what samples compare with
        kept, self._holders = read_held(self.codec, self._call, self.skipped_key,
                                        self.refused_key, self._refused)
        self._holders.update(self.evidence.holders())
        # (with the rules damaged, before the pages replay: nothing merges any more,
        # so everything they skipped is given back, past the dupefilter, as JOBDIR does)
        given = resume(learned, kept, None if damaged else self.seen, self._holders)
        again = self._claim(given)
        if damaged:
            self._replay(self.evidence.poll())
        self._written = {base for base in kept if base in learned.skipped}
        self._in_force = _in_force(self.remote, learned.rules.min_evidence)
        self._looked_at = self._taken = self._remote_text
        self._save(must_exist=False)
        learned.sink = self
        if again:
            logger.info("IRI protocol: %(n)d request(s) skipped by rules that no longer hold "
                        "are scheduled again", {"n": again})
        if kept or self.remote is not None:
            logger.info("IRI protocol: %(rules)d learned rule(s) and %(kept)d skipped "
                        "request(s) read from %(key)s", {
                            "rules": len(learned.rules.to_data()["rules"]),
                            "kept": len(kept), "key": self.rules_key})
        self.requeued += again
        from twisted.internet.task import LoopingCall

        self._loop = LoopingCall(self._tick)
        self._loop.start(SAVE_EVERY, now=False)
        return []  # given back in Redis's queue already (:meth:`_claim`)

    def _replay(self, entries: list[Entry]) -> None:
        """Other workers' (or an earlier run's) pages and calibrations observed as
        this worker's own: the fleet's content evidence (:mod:`.redis_evidence`);
        a sync soon if another worker wrote the rules, or this one learned."""
        if replay(self.learned, entries) or _learning(self.learned) != self._learnt:
            self._soon()

    def _read_fleet(self, value: bytes) -> None:
        """The fleet's document from *value*; a damaged one is set aside (WARNING)."""
        self._remote_sha = _sha(value)
        self._remote_text = ""
        try:
            doc = fleet_document(value)
        except (RulesDataError, ValueError, TypeError, KeyError, AttributeError) as exc:
            aside = self.rules_key + ":damaged"
            with contextlib.suppress(IRIRedisError):  # the scheduler gave up (logged)
                self._call(lambda c: c.set(aside, value))
            logger.warning("IRI protocol: %(key)s cannot be read (%(exc)s); copied to "
                           "%(aside)s, learning starts afresh (the requests its rules skipped "
                           "are scheduled again)",
                           {"key": self.rules_key, "exc": exc, "aside": aside})
            self.remote = None
            return
        self.remote = doc
        self._remote_text = _text(value)

    def _claim(self, given: list[tuple[str, Request]]) -> int:
        """Give back *given* (held records: their field, the request to queue): each
        record deleted and its request queued in one script (the back-end's
        ``claim_held``), so a kill between the two loses nothing; how many this
        worker claimed (another worker that claimed one queued it)."""
        n = 0
        for base, request in given:
            if not request.dont_filter and self._filtered is not None and self._filtered(
                    request):
                # as the dupefilter decides for any request: kept again by the rules
                # (its record stays), or a duplicate of the request admitted under its
                # key, which the seen-set holds (a kill before the HDEL gives it back
                # again); anything else is queued, never dropped
                if base in self.learned.skipped:
                    continue
                if self.seen is not None and self.seen(request):
                    self._hdel([base])
                    continue
            n += self._claim_one(base, request)
        return n

    def _hdel(self, fields: list[Any]) -> int:
        """``HDEL`` of *fields* from the skipped requests: how many were there."""
        return int(self._call(lambda c: c.hdel(self.skipped_key, *fields)))

    def _run_save(self, args: list[Any]) -> tuple[Any, Any]:
        keys = [self.rules_key, self.skipped_key, self.evidence.pages_key]
        reply = self._call(lambda c: self._script(keys=keys, args=args, client=c))
        return reply[0], reply[1]

    # --- while the crawl runs ------------------------------------------------------

    def hold(self, base: str, via: str, merged: str, holder: str, request: Request) -> None:
        """:attr:`Learned.sink`: store a skipped request before the dupefilter drops it."""
        if self.failed:
            return
        try:
            value = skipped_record(self.codec, base, via, merged, request, holder=holder,
                                   drop_meta=self.drop_meta)
        except Exception:  # not storable as data: kept in memory only (a crash loses it)
            logger.warning("IRI protocol: a skipped request cannot be stored as data: %s",
                           request, exc_info=True)
            return
        try:
            if time.monotonic() - self._saved_at >= SAVE_AFTER_SKIP:
                self._save(must_exist=True)  # the rules that justify it, first
            self._call(lambda c: c.hset(self.skipped_key, base, value))
        except IRIRedisError:  # the scheduler gave up (logged): the spider is closing
            self.failed = True
            return
        self._written.add(base)

    def release(self, base: str) -> None:
        """:attr:`Learned.sink`: a record given back is deleted at the next :meth:`sync`."""

    def holder(self, key: str, base: str | None) -> None:
        """:attr:`Learned.sink`: a key's holder, in ``<base>:holders``."""
        if self.failed:
            return
        try:
            self.evidence.holder(key, base)
        except IRIRedisError:  # the scheduler gave up (logged): the spider is closing
            self.failed = True

    def page(self, uri: str, digest: bytes) -> None:
        """:attr:`Learned.sink`: a 2xx page's fingerprint record appended to ``<base>:pages``; the
        pages the other workers appended since are observed here at once."""
        if self.failed:
            return
        try:
            others = self.evidence.page(uri, digest, drained(self.learned.rules.calibration))
        except IRIRedisError:  # the scheduler gave up (logged): the spider is closing
            self.failed = True
            return
        self._replay(others)

    def _tick(self) -> None:
        """:meth:`sync` every :data:`SAVE_EVERY` seconds, and soon after the rules
        changed here or in the fleet (:meth:`_soon`), or less often when it costs
        more than :data:`SYNC_SHARE` of the time."""
        self._pending = None
        start = time.monotonic()
        if start < self._next_sync or self._loop is None:
            return
        self._learnt = _learning(self.learned)
        self.sync()
        self._next_sync = start + (time.monotonic() - start) / SYNC_SHARE

    def _soon(self) -> None:
        """:meth:`_tick` on the reactor's next turn (not inside the evidence being
        observed now), once."""
        if self._pending is None and self._loop is not None:
            from twisted.internet import reactor

            clock: Any = reactor  # (the installed reactor: IReactorTime)
            self._pending = clock.callLater(0, self._tick)

    def sync(self) -> None:
        """Delete the records this worker scheduled again; merge and write the rules
        if they changed (here or in the fleet); re-queue what the fleet's
        revocations un-merge; adopt the fleet's new rules (:meth:`_take_in`) and
        observe the pages other workers served since; notice the keys gone."""
        if self.failed:
            return
        try:
            learned = self.learned  # kept: skipped, or deferred at download
            gone = [base for base in self._written
                    if base not in learned.skipped and base not in learned.deferred]
            for i in range(0, len(gone), 1000):
                chunk = gone[i:i + 1000]
                self._hdel(chunk)
            self._written.difference_update(gone)
            if self._save(must_exist=True):
                self._fleet_revocations()
                if not self._closing:
                    self._take_in()
                    self._replay(self.evidence.poll(drained(self.learned.rules.calibration)))
                    self._requeue()  # what the fleet's pages refuted
        except IRIRedisError:  # the scheduler gave up (logged): the spider is closing
            self.failed = True
        except Exception:  # a bug: loud, and no more writes (what is in Redis stays)
            self.failed = True
            logger.error("IRI protocol: keeping the learned rules in %s failed; they are no "
                         "longer written", self.rules_key, exc_info=True)

    def _save(self, *, must_exist: bool) -> bool:
        """Compare-and-set the merged document; False if the keys are gone (lost)."""
        self._saved_at = time.monotonic()
        local = self.learned.rules.to_data()
        if self._script is None:
            self._script = self._call(lambda c: c.register_script(SAVE_SCRIPT))
        for _ in range(MAX_TRIES):
            merged = merge_rules_data(local, self.remote if self.remote is not None else local)
            text = json.dumps({"format": FORMAT, "canonicalization_version":
                               CANONICALIZATION_VERSION, "rules": merged},
                              ensure_ascii=False, sort_keys=True)
            new = "" if text == self._remote_text else text
            args = [self._remote_sha, new, MARKER, "1" if must_exist else "0",
                    rules_entry(self.evidence.worker)]
            code, value = self._run_save(args)
            code = int(code)
            if code == -1 or code == -2:
                self.failed = True
                self._lost(f"{self.rules_key} is gone" if code == -1 else
                           f"{self.skipped_key} (the requests learned rules skipped) is gone")
                return False
            if code == 1:
                if self._remote_text == self._taken:  # merged with a document adopted
                    self._taken = text  # already: nothing new from the fleet in it
                self.remote, self._remote_text = merged, text
                self._remote_sha = _sha(text.encode("utf-8"))
                return True
            if code == 2:
                return True
            self._read_fleet(value)  # another worker wrote: merge with theirs, try again
        logger.info("IRI protocol: %s changed %d times while being merged; trying again in "
                    "%.0f s", self.rules_key, MAX_TRIES, SAVE_EVERY)
        return True

    def _fleet_revocations(self) -> None:
        """Rules the fleet's document has evidence against that were not looked at:
        claim every record they no longer merge and schedule it again."""
        if self._remote_text == self._looked_at:
            return
        self._looked_at = self._remote_text
        min_evidence = self.learned.rules.min_evidence
        now = _in_force(self.remote, min_evidence)
        stopped, self._in_force = self._in_force - now, now
        if not stopped or self.remote is None:
            return
        check = ProtocolRules.from_data(self.remote, min_evidence=min_evidence)
        n = 0
        for base, request in _unmerged(self.codec, check,
                                       _held_records(self._call, self.skipped_key)):
            # given back past this worker's dupefilter: it may still hold the rule
            if not self._claim_one(base, given_back(request)):
                continue  # another worker claimed it
            self._written.discard(base)
            self.learned.skipped.pop(base, None)
            n += 1
        if n:
            self.requeued += n
            self.learned.rules.events["requeued"] += n
            self.learned.publish()
            logger.info("IRI protocol: a rule was revoked in the fleet; %(n)d request(s) "
                        "it had skipped are scheduled again", {"n": n})

    def _requeue(self) -> None:
        """What :meth:`Learned.changed` gives back after evidence from the fleet's
        pages (the middleware does this after a page of this worker's)."""
        again = self.learned.changed()
        for request in again:
            request.meta.pop(META_SAMPLE, None)
            self._schedule(request)
        if again:
            self.requeued += len(again)
            self.learned.rules.events["requeued"] += len(again)
            logger.info("IRI protocol: a rule was refuted by a page of another worker; "
                        "%(n)d request(s) it had skipped here are scheduled again",
                        {"n": len(again)})
            self.learned.publish()

    def _take_in(self) -> None:
        """The fleet's document, when it changed since last adopted, folded into the
        live rules (:meth:`ProtocolRules.adopt`: other workers' new rules used
        here at once, this worker's digests and counts kept); if a rule in force
        here stopped, the requests this worker kept that it no longer merges are
        claimed (``HDEL``, one pipeline) and scheduled again, as
        :meth:`Learned.requeue` does after a local revocation."""
        if self.remote is None or self._remote_text == self._taken:
            return  # (a document this worker wrote from one it had adopted: see _save)
        self._taken = self._remote_text
        learned = self.learned
        moved = learned.rules.adopt(self.remote)  # read by from_data again: data only
        if not moved:
            learned.publish()  # <source>/adopted
            return
        # (a request whose very spelling was served here is not given back: its
        # record, if stored, is deleted at the next sync)
        given = learned.changed_items()
        stored = [(base, request) for base, request in given if base in self._written]
        unstored = [request for base, request in given if base not in self._written]
        # a stored record another worker claimed first is scheduled there, not here
        self._written.difference_update(base for base, _ in given)  # (a request kept
        # again is written again)
        n = self._claim([(base, given_back(request, past_filter=False))
                         for base, request in stored]) + len(unstored)
        for request in unstored:
            self._schedule(given_back(request, past_filter=False))
        if n:
            self.requeued += n
            learned.rules.events["requeued"] += n
            logger.info("IRI protocol: a rule was revoked by the fleet's evidence; %(n)d "
                        "request(s) it had skipped here are scheduled again", {"n": n})
        learned.publish()

    # --- close -----------------------------------------------------------------------

    def stop(self) -> None:
        """No more writes (the loop stopped, the skips no longer stored)."""
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        if self._pending is not None and self._pending.active():
            self._pending.cancel()
        self._loop = self._pending = None
        if self.learned.sink is self:
            self.learned.sink = None

    def close(self) -> None:
        """Stop; the last write (unless the state was found lost), adopting nothing
        (what the fleet revoked is given back at the next open)."""
        self.stop()
        self._closing = True
        if self.failed:
            return
        try:
            self.sync()
        except Exception as exc:  # noqa: BLE001 - the crawl is over; say so
            logger.error("IRI protocol: the learned rules cannot be written to %s (%s)",
                         self.rules_key, exc)
