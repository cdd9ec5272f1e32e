"""``explain``: which rung of the ladder made two IRIs equal (RFC 3987 section 5.3)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from iri_scrapy.core.errors import describe_char
from iri_scrapy.core.ladder import Level, NormalizeOptions, RulesHook, Rung, climb, simple_text
from iri_scrapy.core.parsing import IRIReference, check_str, parse


class ExplainedRules(RulesHook, Protocol):
    """Protocol rules that can also say why (:meth:`why`): what ``explain`` lists."""

    def why(self, uri: str, /) -> list[str]:
        """The rules ``apply`` uses on *uri*, one line each, in order."""
        ...


_COMPONENTS = ("scheme", "userinfo", "host", "port", "path", "query", "fragment")


@dataclass(frozen=True, slots=True)
class Step:
    """Both IRIs after one rung of the ladder."""

    rung: Rung
    a: str
    b: str

    @property
    def equal(self) -> bool:
        return self.a == self.b


@dataclass(frozen=True, slots=True)
class Difference:
    """Where two canonical IRIs still differ: component and first differing character."""

    component: str
    index: int
    char_a: str | None
    char_b: str | None

    def __str__(self) -> str:
        def show(c: str | None) -> str:
            return "end of component" if c is None else f"{describe_char(c)} {c!r}"

        return (
            f"{self.component} differs at index {self.index}: "
            f"{show(self.char_a)} vs {show(self.char_b)}"
        )


@dataclass(frozen=True, slots=True)
class Explanation:
    """The rung-by-rung account of comparing two IRIs.

    ``equivalent`` is the verdict at ``level``; ``rung`` the first rung after which
    the two were equal (``Rung.SIMPLE`` if identical as given, ``None`` if they
    never became equal); ``difference`` says where they still differ.
    """

    a: str
    b: str
    level: Level
    steps: tuple[Step, ...]
    rung: Rung | None
    difference: Difference | None
    fragments_dropped: bool = False
    #: At level protocol: each learned rule that moved *a* or *b*, with its evidence.
    rules_used: tuple[str, ...] = ()

    @property
    def equivalent(self) -> bool:
        return self.rung is not None

    def __bool__(self) -> bool:
        return self.equivalent

    def __str__(self) -> str:
        if self.rung is not None:
            head = f"equivalent at {self.rung.section} {self.rung.title}"
            if self.rung is Rung.PROTOCOL and self.rules_used:
                head += f" by {'; '.join(self.rules_used)}"
        else:
            head = f"different at level {self.level.name.lower()}: {self.difference}"
        lines = [head]
        if self.fragments_dropped:
            lines.append("  (fragments excluded: retrieval comparison, RFC 3987 section 5.1)")
        for step in self.steps:
            mark = "equal " if step.equal else "differ"
            label = f"{step.rung.section} {step.rung.title}"
            if step.equal:
                lines.append(f"  {label:<42} {mark}  {step.a}")
            else:
                lines.append(f"  {label:<42} {mark}  {step.a}  |  {step.b}")
        return "\n".join(lines)


def _difference(x: IRIReference, y: IRIReference) -> Difference | None:
    for name in _COMPONENTS:
        u, v = getattr(x, name), getattr(y, name)
        if u == v:
            continue
        if u is None or v is None:
            return Difference(name, 0, None if u is None else (u[:1] or None),
                              None if v is None else (v[:1] or None))
        pairs = enumerate(zip(u, v, strict=False))
        i = next((k for k, (p, q) in pairs if p != q), min(len(u), len(v)))
        return Difference(name, i, u[i] if i < len(u) else None, v[i] if i < len(v) else None)
    return None


def explain(
    a: str,
    b: str,
    level: Level | int | str = Level.SCHEME,
    *,
    keep_fragment: bool = True,
    nfc: bool = False,
    rules: ExplainedRules | None = None,
) -> Explanation:
    """Climb the comparison ladder (RFC 3987 section 5.3) with *a* and *b*.

    Starts with simple string comparison (5.3.1) and applies the rungs of
    *level* in order, recording both IRIs after each, and reports the first
    rung after which they are equal, or the component and character where they
    still differ.  ``str()`` of the result reads well.
    """
    check_str(a, "explain")
    check_str(b, "explain")
    options = NormalizeOptions(Level.coerce(level), "uri", keep_fragment, nfc, rules)
    # Fragments are excluded from the climb (section 5.1): say so if there were any.
    dropped = not keep_fragment and any(parse(t).fragment is not None for t in (a, b))
    steps: list[Step] = []
    # The two climbs side by side; 5.3.1 compares what equivalent(level="simple")
    # compares: the texts after preprocessing (and less their fragments if asked).
    for (rung, ra), (_, rb) in zip(climb(a, options), climb(b, options), strict=True):
        if rung is Rung.SIMPLE:
            steps.append(Step(rung, simple_text(ra), simple_text(rb)))
        else:
            steps.append(Step(rung, ra.unsplit(), rb.unsplit()))
    # The verdict is the last step's (that of equivalent()); the rung named is the
    # first after which the two stay equal.
    first = None
    for step in reversed(steps):
        if not step.equal:
            break
        first = step.rung
    diff = None if steps[-1].equal else _difference(ra, rb)
    used: list[str] = []
    if rules is not None and len(steps) > 1 and steps[-1].rung is Rung.PROTOCOL:
        for uri in (steps[-2].a, steps[-2].b):  # the level-scheme URIs the rules moved
            used += [line for line in rules.why(uri) if line not in used]
    return Explanation(a, b, options.level, tuple(steps), first, diff, dropped, tuple(used))
