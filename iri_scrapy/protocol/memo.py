"""What the learned rules answer, kept until they learn something (RFC 3987 section 5.3.4).

At level PROTOCOL every request asks the rules for its key several times
(the fingerprinter, the learner's duplicate check, the dupefilter's log), and
pages repeat their links: :meth:`~.rulebook.RuleBook.trace` keeps its answers
in a bounded dict (:data:`MAX_KEPT` URIs), so that the rules are applied once
per request.  An answer is only true for the rules it was computed from, so the
memo is emptied whenever the rules may change, and never used while they do:
:func:`learns` wraps every method a subclass of the rule book defines (the
learner, :class:`~.rules.ProtocolRules`, whose methods are what changes the
rules; the rule book's own methods only read them), so that a method added
there later is covered without anyone thinking of it.  Any reader of the rule
set may keep something here under a key no URI can be (:data:`IN_FORCE`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import FunctionType
from typing import Any, TypeVar

#: At most this many answers are kept (the memo is emptied when it is full).
MAX_KEPT = 8192

#: The memo's key of "some host rule is in force" (a bool), beside the URIs.
IN_FORCE = object()

_F = TypeVar("_F", bound=Callable[..., Any])


def _learning(method: _F) -> _F:
    """*method*, run with the memo off and emptied when it returns (or raises)."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        depth = self._learning
        self._learning = depth + 1
        self._memo.clear()
        try:
            return method(self, *args, **kwargs)
        finally:
            self._learning = depth  # (restored, not decremented: load() replaces vars)
            self._memo.clear()

    return wrapper  # type: ignore[return-value]


def learns(cls: type) -> None:
    """Wrap every plain method *cls* defines (dunder methods aside) with :func:`_learning`."""
    for name, value in list(vars(cls).items()):
        if isinstance(value, FunctionType) and not name.startswith("__"):
            setattr(cls, name, _learning(value))
