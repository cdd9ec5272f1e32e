"""The fleet's shared evidence in Redis: the pages' digests and the keys' holders.

At ``IRI_LEVEL = "protocol"`` the JOBDIR store keeps, beside each held request,
the two facts that decide whether a held request still stands for a page
(:mod:`.jobdir_store`, kinds ``page`` and ``holder``).  A fleet keeps them
beside its queue, under the same base (docs/redis-fleet.md, *Keys*):

* ``<base>:pages`` (LIST): one entry per 2xx page a worker served, ``worker
  NL uri NL digest`` (the digest as the evidence module made it, opaque bytes),
  appended in the call that learns it.  It is the fleet's one log of content
  evidence: every append returns the entries other workers appended since this
  worker last read (:data:`PAGE_SCRIPT`), which it observes as its own pages
  (RFC 3987 section 5.3.4 evidence: a nomination, a confirmation, a
  counterexample), so the workers of one crawl compare every page with every
  other instead of each learning apart; a worker that opens (a resume, a
  second worker) replays the whole log first.
* ``<base>:holders`` (HASH): a key the seen-set holds -> the key before the
  rules of the request that added it, when a rule had moved that request
  (:meth:`~.learned.Learned.admitted`); restored at open.

Both are data only: URIs, digests and keys, never code; an entry that is not
three fields is skipped.  One entry per page (about the length of its URI plus
the digest) is what the JOBDIR table keeps too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: Log entries read per call (a worker joining a long crawl reads the log in steps).
READ_STEP = 1000

# KEYS: pages; ARGV: offset, entry ('' to only read), step
# -> {length of the log, the entries from offset on (at most step)}
PAGE_SCRIPT = """
if ARGV[2] ~= '' then redis.call('RPUSH', KEYS[1], ARGV[2]) end
local n = redis.call('LLEN', KEYS[1])
local from = tonumber(ARGV[1])
if from >= n then return {n, {}} end
return {n, redis.call('LRANGE', KEYS[1], from, from + tonumber(ARGV[3]) - 1)}
"""

#: A page read from the log: (uri, digest).
Page = tuple[str, bytes]


def page_entry(worker: str, uri: str, digest: bytes) -> bytes:
    """One entry of ``<base>:pages``."""
    return b"\n".join((worker.encode("utf-8"), uri.encode("utf-8"), digest))


def read_entry(value: bytes) -> tuple[str, str, bytes] | None:
    """``(worker, uri, digest)`` of an entry, or None if it is not one (skipped)."""
    parts = value.split(b"\n", 2) if isinstance(value, bytes) else []
    if len(parts) != 3:
        return None
    try:
        return parts[0].decode("utf-8"), parts[1].decode("utf-8"), parts[2]
    except UnicodeDecodeError:
        return None


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

    def _run(self, entry: bytes) -> list[Page]:
        """Append *entry* (if not empty); the other workers' pages since last read."""
        if self._script is None:
            self._script = self._call(lambda c: c.register_script(PAGE_SCRIPT))
        out: list[Page] = []
        for _ in range(1_000_000):  # bounded by the log's length
            args = [self.offset, entry, READ_STEP]

            def run(c: Any, args: list[Any] = args) -> Any:
                return self._script(keys=[self.pages_key], args=args, client=c)

            n, values = self._call(run)
            entry = b""  # appended once
            for value in values:
                row = read_entry(value)
                if row is not None and row[0] != self.worker:
                    out.append((row[1], row[2]))
            self.offset += len(values)
            if self.offset >= int(n) or not values:
                break
        return out

    def page(self, uri: str, digest: bytes) -> list[Page]:
        """A page this worker served, appended; the others' pages since last read."""
        return self._run(page_entry(self.worker, uri, digest))

    def poll(self) -> list[Page]:
        """The pages the other workers appended since last read (every page at first)."""
        return self._run(b"")

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
