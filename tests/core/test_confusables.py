"""Whole-script confusables (UTS 39 section 4): the table and the ``homograph`` finding.

The table of :mod:`iri_scrapy.core.confusables` is derived again here from the
lines of Unicode's ``confusables.txt`` kept in
``tests/data/unicode_confusables_latin.jsonl`` (see tests/data/README.md).
"""

from __future__ import annotations

import pytest

from iri_scrapy.core.bidi import check, script_of
from iri_scrapy.core.confusables import LATIN_LOOKALIKES, ascii_reading
from tests.support.make_confusables import derive
from tests.support.vectors import load


def test_table_is_what_the_kept_lines_of_confusables_txt_give() -> None:
    records = load("unicode_confusables_latin")
    assert len(records) == 154
    assert all("Version: 17.0.0" in r["source"] for r in records)
    _, table = derive([(r["line"], r["text"]) for r in records])
    assert table == LATIN_LOOKALIKES
    for r in records:
        if r["char"] in LATIN_LOOKALIKES:
            assert LATIN_LOOKALIKES[r["char"]] == r["reads_as"]
            assert script_of(r["char"]) == r["script"] != "Latin"
    # the classic ones
    assert [LATIN_LOOKALIKES[c] for c in "аеорсухіјӏѕԁһ"] == list("aeopcyxijlsdh")
    assert [LATIN_LOOKALIKES[c] for c in "αορνιυ"] == list("aopviu")
    assert [LATIN_LOOKALIKES[c] for c in "օոսհ"] == list("onuh")


@pytest.mark.parametrize(("label", "reading"), [
    ("аррӏе", "apple"), ("раураӏ", "paypal"), ("АРРӀЕ", "apple"), ("ѕсоре", "scope"),
    ("ехрес-24", "expec-24"), ("αρρ", "app"), ("օօ", "oo"),
    ("пример", None), ("россия", None), ("apple", None), ("123", None), ("а́", None),
])
def test_ascii_reading(label: str, reading: str | None) -> None:
    assert ascii_reading(label) == reading


def _kinds(url: str) -> list[str]:
    return [f.kind for f in check(url)]


@pytest.mark.parametrize("url", [
    "http://xn--80ak6aa92e.com/",  # аррӏе, the classic
    "http://аррӏе.com/",
    "https://раураӏ.com/login",
    "http://www.ѕсоре.net/",
    "http://ΑΡΡ.com/",  # Greek capitals, compared lower-cased
    "http://αρρ.example/",
    "http://օօ.com/",  # Armenian
    "http://аррӏе.xn--p1ai.com/",  # a Cyrillic label that is not the TLD
])
def test_whole_script_lookalikes_are_flagged(url: str) -> None:
    findings = [f for f in check(url) if f.kind == "homograph"]
    assert len(findings) == 1, check(url)
    assert findings[0].component == "host"
    assert "whole-script homograph (UTS 39 section 4" in findings[0].message


@pytest.mark.parametrize("url", [
    "http://пример.испытание/",  # genuine Cyrillic words: п, и, м read as nothing
    "http://россия.com/",
    "http://почта.com/",
    "http://apple.com/",
    "http://xn--strae-oqa.example/",
    "http://παράδειγμα.δοκιμή/",
    "http://例子.测试/",
    "http://аррӏе.ru/",  # a ccTLD of the script (as Chromium)
    "http://аррӏе.рф/",  # a TLD written in the script
    "http://αρρ.gr/",
])
def test_genuine_labels_and_script_tlds_are_not_flagged(url: str) -> None:
    assert "homograph" not in _kinds(url), check(url)


def test_mixed_script_stays_its_own_finding() -> None:
    assert _kinds("http://аpple.com/") == ["mixed-script"]
