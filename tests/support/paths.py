"""Every code path of :func:`iri_scrapy.normalize`, forced one at a time.

``normalize`` tries the fast path (``fast_path``: the native one of
:mod:`iri_scrapy.core.native` when it is built, else the regular expression of
``reference_fast_path``; a non-ASCII text first mapped to its URI by the native IRI
path, ``iri_path``, where it is built), then the fused
one-pass pipeline (``fused_path``), then the climb of the rungs (``climb_path``).
The shortcuts must give exactly what the climb gives, so every example table runs
through each path (as yarl runs its quoting tests through both its C and Python
quoters): ``via("climb", ...)`` is the rungs alone, ``via("fused", ...)`` the fused
path where it applies and the climb where it declines, ``via("fast", ...)`` the
whole chain with the pure-Python fast path, and ``via("native", ...)`` the public
``normalize`` itself when the native module is built (its C entry answers the fast
path's calls and hands the rest to ``normalize_reference``).  The ``path`` fixture (tests/conftest.py) parametrizes a test over
:data:`PATHS`.
"""

from __future__ import annotations

from collections.abc import Callable

from iri_scrapy import IRIError, Level, normalize
from iri_scrapy.core.ladder import (
    NormalizeOptions,
    RulesHook,
    climb_path,
    fused_path,
    reference_fast_path,
    render_uri,
    with_context,
)
from iri_scrapy.core.native import MODULE as NATIVE

PATHS = ("climb", "fused", "fast", "native") if NATIVE is not None else ("climb", "fused", "fast")


def _fast(path: str) -> Callable[[str, bool], str | None]:
    if path == "native":
        assert NATIVE is not None
        return _native_fast
    return reference_fast_path


def _native_fast(text: str, keep_fragment: bool) -> str | None:
    """The native fast path, an IRI first mapped to its URI by the native IRI path."""
    assert NATIVE is not None
    uri = text if text.isascii() else NATIVE.iri_to_uri(text)
    return None if uri is None else NATIVE.fast_path(uri, keep_fragment)  # type: ignore[no-any-return]


def via(
    path: str,
    text: str,
    level: Level | int | str = Level.SCHEME,
    *,
    form: str = "uri",
    keep_fragment: bool = True,
    nfc: bool = False,
    rules: RulesHook | None = None,
) -> str:
    """``normalize(text, level, ...)`` computed by *path* (one of :data:`PATHS`)."""
    if path == "native":
        return normalize(text, level, form=form, keep_fragment=keep_fragment, nfc=nfc,
                         rules=rules)
    options = NormalizeOptions(Level.coerce(level), form, keep_fragment, nfc, rules)
    lvl = options.level
    if path == "fast" and form == "uri" and lvl >= Level.SCHEME and not nfc:
        fast = reference_fast_path(text, keep_fragment)
        if fast is not None:
            return rules.apply(fast) if rules is not None and lvl is Level.PROTOCOL else fast
    if path in ("fast", "fused") and lvl >= Level.SYNTAX and not nfc:
        try:
            uri = fused_path(text, lvl, keep_fragment)
            if uri is not None:
                if rules is not None and lvl is Level.PROTOCOL:
                    uri = rules.apply(uri)
                return render_uri(uri, lvl, form)
        except IRIError as exc:
            raise with_context(exc, text) from None
    assert path in PATHS, path
    return climb_path(text, options)


def took(path: str, text: str, level: Level = Level.SCHEME, keep_fragment: bool = True) -> bool:
    """True if *path* itself (not a later one) answers for *text* in URI form."""
    if path in ("fast", "native"):
        return level >= Level.SCHEME and _fast(path)(text, keep_fragment) is not None
    if path == "fused":
        try:
            return level >= Level.SYNTAX and fused_path(text, level, keep_fragment) is not None
        except IRIError:
            return True
    return True
