"""The protocol rung's state as data, for both frontier stores (``JOBDIR`` and Redis).

At ``IRI_LEVEL = "protocol"`` the frontier keeps what RFC 3987 section 5.3.4
learning found (:class:`~iri_scrapy.protocol.rules.ProtocolRules`) and every
request a learned rule skipped (:class:`~iri_scrapy.protocol.learned.Learned`).
One definition of each, shared by :mod:`.jobdir_store` (files) and
:mod:`.redis_store` (a fleet's keys):

* a held request's record: JSON ``{"base", "via", "merged", "holder", "record"}``
  (*holder*: the alias that holds the key merged into, or ``""``), the request a
  :mod:`iri_scrapy.frontier.codec` record in base64 (data, never a bare pickle);
* :func:`resume`: the kept requests whose merge no longer holds under the rules
  read back, to schedule again (nothing a revoked rule skipped is lost), each
  :func:`given_back`: past the dupefilter if it holds the request's own key;
* :func:`merge_rules_data`: two rules documents of one crawl made one, for
  workers that learn at the same time (counterexamples win: see its doc).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from iri_scrapy.frontier.codec import RefusedRecord, RequestCodec
from iri_scrapy.plugin.config import META_SAMPLE
from iri_scrapy.protocol.rules import ProtocolRules

if TYPE_CHECKING:
    from scrapy import Request

    from iri_scrapy.protocol.learned import Learned


#: What one kept request is: (via, key merged into, the request) (see :class:`Learned`).
Kept = tuple[str, str, "Request"]
#: What :func:`read_skipped_record` raises on a record it cannot read back.
SKIPPED_ERRORS: tuple[type[BaseException], ...] = (ValueError, KeyError, TypeError,
                                                   RefusedRecord)


def skipped_record(codec: RequestCodec, base: str, via: str, merged: str,
                   request: Request, *, holder: str = "",
                   drop_meta: tuple[str, ...] = ()) -> str:
    """The record of one skipped request (one JSON line, without its newline);
    *drop_meta*: meta keys not stored (a store's own, e.g. a lease).

    Raises whatever :meth:`RequestCodec.encode` raises for a request that is not
    storable as data."""
    record = base64.b64encode(codec.encode(request, drop_meta=drop_meta)).decode("ascii")
    return json.dumps({"base": base, "via": via, "merged": merged, "holder": holder,
                       "record": record})


def read_skipped_record(codec: RequestCodec, text: str | bytes) -> tuple[str, Kept, str]:
    """``(base, (via, merged, request), holder)`` from :func:`skipped_record`'s
    output; one of :data:`SKIPPED_ERRORS` if it is not one (checked as data)."""
    row = json.loads(text)
    base, via, merged, record = row["base"], row["via"], row["merged"], row["record"]
    holder = row.get("holder", "")
    if not all(isinstance(v, str) for v in (base, via, merged, record, holder)):
        raise ValueError("not strings")
    request = codec.decode(base64.b64decode(record, validate=True))
    return base, (via, merged, request), holder


def given_back(request: Request, *, past_filter: bool = True) -> Request:
    """*request*, kept because a learned rule merged it, as it is scheduled again:
    no longer a sample, and with *past_filter* ``dont_filter`` and no longer a
    start request (a fleet worker that joins a crawl skips those).  A request
    kept after it passed the dupefilter (its alias served first, its fetch
    deferred) has its own key in the seen-set: filtered, it would be dropped as
    a duplicate of itself, and lost."""
    drop = ("is_start_request", META_SAMPLE) if past_filter else (META_SAMPLE,)
    meta = {k: v for k, v in request.meta.items() if k not in drop}
    return request.replace(dont_filter=request.dont_filter or past_filter, meta=meta)


def resume(learned: Learned, kept: dict[str, Kept],
           seen: Callable[[Request], bool] | None = None,
           holders: dict[str, str] | None = None) -> list[tuple[str, Request]]:
    """Add the requests *kept* by an earlier run (or another worker) to *learned*;
    return, removed from it, every kept request whose merge no longer holds under
    the rules loaded (its rule revoked, or the rules lost) with its key before the
    rules, :func:`given_back`: to schedule again.  *seen* (the dupefilter's
    ``request in df``, no side effect) tells the requests whose key the
    seen-set holds: only those pass it (``dont_filter``; all of them without
    *seen*), the others keep its checks, so an alias that redirects is not
    followed past a seen target.  *holders*: the keys' holders recorded then
    (:meth:`Learned.restore`), which decide whether a key still stands for what
    it holds back."""
    learned.restore(holders or {})
    for base, record in kept.items():
        learned.skipped.setdefault(base, record)
    before = dict(learned.skipped)
    learned.changed(force=True)
    return [(base, given_back(request, past_filter=seen is None or seen(request)))
            for base, (_, _, request) in before.items() if base not in learned.skipped]


def rules_text(data: dict[str, Any]) -> str:
    """A rules document as one canonical JSON text (compared to see a change)."""
    return json.dumps(data, ensure_ascii=False, sort_keys=True)


def merge_rules_data(local: dict[str, Any], remote: dict[str, Any]) -> dict[str, Any]:
    """One rules document (:meth:`ProtocolRules.to_data`) from two of one crawl.

    :meth:`ProtocolRules.merge_data` (the one definition, also behind
    :meth:`ProtocolRules.adopt`, with which a running worker takes in the
    fleet's document): host rules are merged so that no counterexample is lost
    (confirmations the union; content counterexamples, 2xx responses against a
    rule and sample counts the larger of the two, so a rule revoked by either
    worker stays revoked); exact rules and "redirected away from" the union.  The
    merge is commutative, associative and idempotent: workers that write in turn
    agree on one document instead of rewriting each other's.
    """
    return ProtocolRules.merge_data(local, remote)
