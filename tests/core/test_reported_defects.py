"""Defects reported adversarially, each a vector table keyed by the section it follows.

Every table that involves :func:`iri_scrapy.normalize` runs through each of its code
paths (the ``path`` fixture and ``via``: climb, fused, fast), checks idempotence on
that path, and the Hypothesis properties state the rule each fix follows.

3. Errors name the character and its index in the caller's input, whatever the
   rungs did to the component before (case, escapes, percent-encoding).
"""

from __future__ import annotations

from typing import Any

import pytest

import iri_scrapy as iri
from iri_scrapy import Level
from tests.support.paths import via

ERROR = "error"


def cases(rows: list[tuple[Any, ...]]) -> list[Any]:
    return [pytest.param(*row[1:], id=row[0]) for row in rows]


def run(path: str, text: str, level: Level | str = Level.SCHEME, **kwargs: Any) -> str:
    """``normalize`` by *path*, or ``"error"``; idempotent on that path."""
    try:
        out = via(path, text, level, **kwargs)
    except iri.IRIError:
        return ERROR
    assert via(path, out, level, **kwargs) == out, ("not idempotent", text, out)
    return out


def norm(text: str, level: Level | str = Level.SCHEME, **kwargs: Any) -> str:
    try:
        return iri.normalize(text, level, **kwargs)
    except iri.IRIError:
        return ERROR


# --- 3. Errors point into the caller's input ---------------------------------------------

ERRORS = [
    # (id, input, component, the bad character, functions that raise)
    ("3986-3.2.3-port-arabic-indic-digit", "http://EXAMPLE.com:8\u0668/", "port", "\u0668",
     "normalize explain"),
    ("3986-3.2.3-port-fullwidth-digits", "HTTP://H.COM:\uff18\uff10/", "port", "\uff18",
     "normalize explain"),
    ("3986-3.2.3-port-escape-then-digit", "http://h:8%30\u0668/", "port", "%",
     "normalize explain"),
    ("3986-3.2.3-port-letter", "http://ABC.COM:1x/", "port", "x", "normalize explain"),
    ("3987-3.1-uppercase-host-joiner", "http://A.B.C\u200db/", "host", "\u200d",
     "normalize explain iri_to_uri"),
    ("3987-3.1-escapes-before-nbsp", "HTTP://ABC.%41%42\u00a0x.com/", "host", "\u00a0",
     "normalize explain"),
    ("3987-3.1-uppercase-mapped-delimiter", "http://AB\uff03.com/", "host", "\uff03",
     "normalize explain iri_to_uri"),
    ("3987-3.1-escape-before-bidi-label", "http://EX%41MPLE.\u05d0a.com/", "host", "\u05d0",
     "normalize explain"),
    ("3986-3.2.2-delimiter-after-escape", "http://A%41[b:80/", "host", "[",
     "normalize explain"),
    ("3987-3.1-path-surrogate-after-escape", "http://h/%7e\ud800", "path", "\ud800",
     "normalize explain iri_to_uri"),
    ("3987-3.1-query-surrogate-after-escape", "http://h/?%7e\ud800", "query", "\ud800",
     "normalize explain iri_to_uri"),
    ("3987-3.1-fragment-surrogate-after-escape", "http://h/#%7e\ud800", "fragment", "\ud800",
     "normalize iri_to_uri"),
    ("3987-3.1-userinfo-surrogate-after-escape", "http://%7e\ud800@h/", "userinfo", "\ud800",
     "normalize explain iri_to_uri"),
    ("3987-3.1-other-scheme-host-surrogate", "foo://A%7e\ud800/", "host", "\ud800",
     "normalize explain iri_to_uri"),
    ("3987-3.1-leading-space-uppercase-host", "  HTTP://A\u200dB.COM/", "host", "\u200d",
     "normalize explain iri_to_uri"),
    # NFC composes A + U+0301 before the joiner: the joiner as written.
    ("3987-5.3.2.2-composed-before-joiner", "http://A\u0301\u200d.com/", "host", "\u200d",
     "normalize explain iri_to_uri"),
    ("3987-3.1-escaped-composed-before-joiner", "http://A%CC%81%E2%80%8D.COM/", "host", "%E2",
     "normalize explain"),
]


def _check_error(err: iri.IRIError, text: str, component: str, bad: str) -> None:
    """*bad* is the character, or the character and what follows it in *text*, where
    the first occurrence of the character alone is another one."""
    index, bad = text.index(bad), bad[0]
    assert (err.component, err.index, err.char) == (component, index, bad), str(err)
    assert err.text == text
    assert f"U+{ord(bad):04X} at index {index}" in str(err)
    assert str(err).startswith(component + ": ")


@pytest.mark.parametrize(("text", "component", "bad", "raisers"), cases(ERRORS))
def test_error_points_into_the_input(
    path: str, text: str, component: str, bad: str, raisers: str
) -> None:
    for form in ("uri", "iri"):
        for keep in (True, False):
            for nfc in (False, True):
                if component == "fragment" and not keep:
                    continue
                with pytest.raises(iri.IRIError) as info:
                    via(path, text, form=form, keep_fragment=keep, nfc=nfc)
                _check_error(info.value, text, component, bad)
    if "explain" in raisers:
        with pytest.raises(iri.IRIError) as info:
            iri.explain(text, "http://h/")
        _check_error(info.value, text, component, bad)
    if "iri_to_uri" in raisers:
        with pytest.raises(iri.IRIError) as info:
            iri.iri_to_uri(text)
        _check_error(info.value, text, component, bad)
