"""The fleet's shared evidence in Redis: the pages' digests and the keys' holders.

At ``IRI_LEVEL = "protocol"`` the JOBDIR store keeps, beside each held request,
the two facts that decide whether a held request still stands for a page
(:mod:`.jobdir_store`, kinds ``page`` and ``holder``).  A fleet keeps them
beside its queue, under the same base (docs/redis-fleet.md, *Keys*):

* ``<base>:pages`` (LIST): the fleet's one log of content evidence, appended
  in the call that learns it: one entry per 2xx page a worker served, ``worker
  NL page NL uri NL digest`` (the digest as the evidence module made it, opaque
  bytes), and one per calibration (two fetches of one spelling,
  :mod:`.calibration`), ``worker NL same NL uri NL`` the two digests (the
  first one's length first, 8 bytes).  Every append returns the entries other
  workers appended since this worker last read (:data:`PAGE_SCRIPT`), which it
  observes as its own (:func:`replay`: RFC 3987 section 5.3.4 evidence, a
  nomination, a confirmation, a counterexample; what changes by chance on a
  site), so the workers of one crawl compare every page with every other by
  one measure, and calibrate each site once, instead of each learning apart; a
  worker that opens (a resume, a second worker) replays the whole log first.
  A write of ``<base>:rules`` appends an entry ``worker NL rules NL NL``: the
  others look at the fleet's rules as soon as they see it, not on their tick.
* ``<base>:holders`` (HASH): a key the seen-set holds -> the key before the
  rules of the request that added it, when a rule had moved that request
  (:meth:`~.learned.Learned.admitted`); restored at open.

Both are data only: URIs, digests and keys, never code; an entry that is not
one of these is skipped.  One entry per page (about the length of its URI plus
the digest) is what the JOBDIR table keeps too.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from iri_scrapy.protocol.fingerprint import Fingerprint

if TYPE_CHECKING:
    from iri_scrapy.protocol.calibration import Calibration
    from iri_scrapy.protocol.learned import Learned

#: Log entries read per call (a worker joining a long crawl reads the log in steps).
READ_STEP = 1000
#: The kinds of log entries: a page served, a calibration (two fetches of one
#: spelling), a write of the fleet's rules (``<base>:rules``: look at it now).
PAGE, SAME, RULES = b"page", b"same", b"rules"

# KEYS: pages; ARGV: offset, step, the entries to append (none to only read)
# -> {length of the log, the entries from offset on (at most step)}
PAGE_SCRIPT = """
for i = 3, #ARGV do redis.call('RPUSH', KEYS[1], ARGV[i]) end
local n = redis.call('LLEN', KEYS[1])
local from = tonumber(ARGV[1])
if from >= n then return {n, {}} end
return {n, redis.call('LRANGE', KEYS[1], from, from + tonumber(ARGV[2]) - 1)}
"""

#: An entry read from the log: (kind, uri, payload).
Entry = tuple[bytes, str, bytes]


def page_entry(worker: str, uri: str, digest: bytes, kind: bytes = PAGE) -> bytes:
    """One entry of ``<base>:pages``."""
    return b"\n".join((worker.encode("utf-8"), kind, uri.encode("utf-8"), digest))


def rules_entry(worker: str) -> bytes:
    """The entry that tells the other workers *worker* wrote the fleet's rules."""
    return page_entry(worker, "", b"", RULES)


def same_entry(worker: str, uri: str, first: bytes, second: bytes) -> bytes:
    """The entry of a calibration of *uri*: its two fetches' digests."""
    return page_entry(worker, uri, struct.pack("<Q", len(first)) + first + second, SAME)


def read_entry(value: bytes) -> tuple[str, bytes, str, bytes] | None:
    """``(worker, kind, uri, payload)`` of an entry, or None if it is not one (skipped)."""
    parts = value.split(b"\n", 3) if isinstance(value, bytes) else []
    if len(parts) != 4 or parts[1] not in (PAGE, SAME, RULES):
        return None
    try:
        return parts[0].decode("utf-8"), parts[1], parts[2].decode("utf-8"), parts[3]
    except UnicodeDecodeError:
        return None


def drained(calibration: Calibration) -> list[tuple[str, bytes, bytes]]:
    """The calibrations made here since last asked (emptied), as log data."""
    out = [(uri, a.to_record(), b.to_record()) for uri, a, b in calibration.pairs]
    calibration.pairs.clear()
    return out


def replay(learned: Learned, entries: list[Entry]) -> bool:
    """Observe *entries* (other workers' evidence, or an earlier run's) as this
    process's own: pages served elsewhere (``replayed``: not served here) and
    calibrations (what changes by chance on their site; the counterexamples that
    explains are withdrawn).  True if another worker wrote the fleet's rules
    meanwhile (an entry of kind ``rules``)."""
    calibrated = rules = False
    for kind, uri, payload in entries:
        if kind == RULES:
            rules = True
            continue
        try:
            if kind == PAGE:
                page = Fingerprint.from_record(payload)
            else:
                (n,) = struct.unpack_from("<Q", payload)
                first = Fingerprint.from_record(payload[8:8 + n])
                second = Fingerprint.from_record(payload[8 + n:])
        except (ValueError, struct.error):
            continue  # a page no sample can be compared with: only merges lost
        if kind == PAGE:
            learned.observe_content(uri, page, replayed=True)
        else:
            learned.rules.calibration.take(uri, first, second)
            calibrated = True
    if calibrated and learned.rules.reconsider():
        learned.publish()
    return rules


class FleetEvidence:
    """The two keys above for one worker.  *call* runs a function of the Redis
    client through the scheduler's retry policy (:class:`RedisProtocolStore`'s)."""

    def __init__(self, *, pages_key: str, holders_key: str, worker: str,
                 call: Callable[[Callable[[Any], Any]], Any]) -> None:
        self.pages_key = pages_key
        self.holders_key = holders_key
        self.worker = worker
        self._call = call
        self._script: Any = None
        #: How many entries of the log this worker has read.
        self.offset = 0

    def _run(self, entries: list[bytes]) -> list[Entry]:
        """Append *entries*; the other workers' entries since last read."""
        if self._script is None:
            self._script = self._call(lambda c: c.register_script(PAGE_SCRIPT))
        out: list[Entry] = []
        for _ in range(1_000_000):  # bounded by the log's length
            args = [self.offset, READ_STEP, *entries]

            def run(c: Any, args: list[Any] = args) -> Any:
                return self._script(keys=[self.pages_key], args=args, client=c)

            n, values = self._call(run)
            entries = []  # appended once
            for value in values:
                row = read_entry(value)
                if row is not None and row[0] != self.worker:
                    out.append(row[1:])
            self.offset += len(values)
            if self.offset >= int(n) or not values:
                break
        return out

    def page(self, uri: str, digest: bytes,
             calibrations: Sequence[tuple[str, bytes, bytes]] = ()) -> list[Entry]:
        """A page this worker served (after the *calibrations* it made, each a URI
        and its two fetches' digests), appended; the others' entries since last read."""
        return self._run([*(same_entry(self.worker, *c) for c in calibrations),
                          page_entry(self.worker, uri, digest)])

    def poll(self, calibrations: Sequence[tuple[str, bytes, bytes]] = ()) -> list[Entry]:
        """The entries the other workers appended since last read (every one at
        first), after appending the *calibrations* this worker made."""
        return self._run([same_entry(self.worker, *c) for c in calibrations])

    def holder(self, key: str, base: str | None) -> None:
        """*key*'s holder is *base* (None: its own spelling, forgotten)."""
        if base is None:
            self._call(lambda c: c.hdel(self.holders_key, key))
        else:
            self._call(lambda c: c.hset(self.holders_key, key, base))

    def holders(self) -> dict[str, str]:
        """Every key's holder, as stored."""
        def scan(c: Any) -> list[tuple[Any, Any]]:
            return list(c.hscan_iter(self.holders_key, count=1000))

        return {_text(k): _text(v) for k, v in self._call(scan)}


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
