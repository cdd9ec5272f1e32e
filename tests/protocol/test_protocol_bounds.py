"""Bounds are said, and a rules document is checked whole at load.

A host that reaches :data:`~iri_scrapy.protocol.transforms.MAX_PAGES_PER_SCOPE`
pages can no longer have its pages compared: the level stops there (a WARNING,
the stat ``iri/protocol/stopped/pages``), no rule applies on that host any
more, and what its rules held back is given back; never a rule left in force
unchecked.  A rules document with a rule of no host, a URI off its rule's host,
or strings or counts past the document's sizes is refused in one line
(:class:`~iri_scrapy.protocol.document.RulesDataError`).
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from scrapy import Request

from iri_scrapy.protocol import document
from iri_scrapy.protocol import rules as rules_module
from iri_scrapy.protocol.document import RulesDataError
from iri_scrapy.protocol.rules import ProtocolRules
from tests.protocol import protocol_filter

B = "http://blog.test"


def D(n: int) -> bytes:  # noqa: N802 - a digest stand-in
    return n.to_bytes(16, "big")


def test_the_pages_bound_stops_the_level_for_the_host_and_gives_back(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(rules_module, "MAX_PAGES_PER_SCOPE", 10)
    rules = ProtocolRules()
    for n in (1, 2):
        rules.observe_content(f"{B}/p/{n}/", D(n))
        rules.observe_content(f"{B}/p/{n}/?replytocom=9{n}", D(n))
    assert rules.apply(f"{B}/p/5/?replytocom=1") == f"{B}/p/5/"
    df = protocol_filter(rules)
    learned = df.learned
    assert learned is not None
    assert not df.request_seen(Request(f"{B}/p/5/"))
    held = Request(f"{B}/p/5/?replytocom=1")
    assert df.request_seen(held) and list(learned.skipped) == [held.url]
    with caplog.at_level(logging.WARNING, logger="iri_scrapy.protocol.learned"):
        for n in range(10, 20):
            learned.observe_content(f"{B}/x/{n}", D(n))
    assert rules.stopped == {B: "pages"}
    assert rules.events["stopped/pages"] == 1
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    assert "stops for this host" in caplog.records[0].getMessage()
    # no rule applies there any more, and what its rules held back comes back
    assert rules.apply(f"{B}/p/5/?replytocom=1") == f"{B}/p/5/?replytocom=1"
    assert [r.url for r in learned.changed()] == [held.url]
    assert not learned.skipped


def _doc(**rule: Any) -> dict[str, Any]:
    entry = {"rule": [B, "drop-param", "sid"], "origin": "content", "confirmed": [],
             "bad": 0, "contrary": 0, "skips": 0, **rule}
    return {"v": 1, "min_evidence": 2, "exact": [], "away": [], "rules": [entry]}


@pytest.mark.parametrize("data", [
    _doc(rule=["not a host", "drop-param", "sid"]),
    _doc(rule=[B + "/path", "drop-param", "sid"]),
    _doc(rule=[B, "drop-param", "s" * (document.MAX_STRING + 1)]),
    {"v": 1, "min_evidence": 2, "away": [], "rules": [],
     "exact": [["http://other.test/a", f"{B}/a/", B, "add-slash", ""]]},
    {"v": 1, "min_evidence": 2, "away": [], "rules": [],
     "exact": [[f"{B}/a", f"{B}/a/", B, "no-such-kind", ""]]},
])
def test_a_rules_document_is_checked_whole(data: dict[str, Any]) -> None:
    with pytest.raises(RulesDataError) as info:
        ProtocolRules.from_data(data)
    assert "\n" not in str(info.value)


def test_a_document_past_its_size_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(document, "MAX_ENTRIES", 2)
    rows = [[f"{B}/{n}", f"{B}/{n}/", B, "add-slash", ""] for n in range(3)]
    with pytest.raises(RulesDataError, match="more rules"):
        ProtocolRules.from_data({"v": 1, "min_evidence": 2, "away": [], "rules": [],
                                 "exact": rows})
    assert ProtocolRules.from_data(_doc()).to_data()["rules"]
