"""Every ```python block of README.md and docs/*.md runs, so a wrong example fails CI.

A block written as a ``>>>`` session is checked as a doctest (its output compared,
``...`` matching the rest of a line or of the output); any other block is executed
in a fresh namespace (most end in ``assert``s). A block that cannot run here (it
needs a crawl, a server or a Spark DataFrame) is preceded by ``<!-- no-run: reason -->``:
few, each with its reason (checked below).
"""

from __future__ import annotations

import doctest
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})python[ \t]*$")
NO_RUN = re.compile(r"^\s*<!--\s*no-run:\s*(?P<reason>.*?)\s*-->\s*$")
#: At most this many blocks may opt out; raise it only with a reason in each.
MAX_NO_RUN = 4


@dataclass(frozen=True)
class Example:
    path: Path
    line: int  # 1-based line of the opening fence
    code: str
    no_run: str | None  # the reason, when marked

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def examples() -> list[Example]:
    found = []
    for path in FILES:
        lines = path.read_text(encoding="utf-8").split("\n")
        i = 0
        while i < len(lines):
            m = FENCE.match(lines[i])
            if not m:
                i += 1
                continue
            close = re.compile(rf"^[ \t]*{re.escape(m['fence'])}[ \t]*$")
            j = i + 1
            while j < len(lines) and not close.match(lines[j]):
                j += 1
            assert j < len(lines), f"{path.name}:{i + 1}: unclosed ```python block"
            prev = next((line for line in reversed(lines[:i]) if line.strip()), "")
            marked = NO_RUN.match(prev)
            code = textwrap.dedent("\n".join(lines[i + 1:j]))
            found.append(Example(path, i + 1, code, marked["reason"] if marked else None))
            i = j + 1
    return found


EXAMPLES = examples()
RUNNABLE = [e for e in EXAMPLES if e.no_run is None]


def test_the_documentation_has_examples_and_few_opt_outs() -> None:
    assert len(RUNNABLE) >= 8, [e.id for e in RUNNABLE]
    skipped = [e for e in EXAMPLES if e.no_run is not None]
    assert len(skipped) <= MAX_NO_RUN, [e.id for e in skipped]
    for e in skipped:
        assert len(e.no_run or "") >= 15, f"{e.id}: a no-run mark needs its reason"


def test_the_collector_finds_indented_blocks_and_marks(tmp_path: Path) -> None:
    """The extraction itself: indented fences (in a list), marks, doctest detection."""
    page = tmp_path / "page.md"
    page.write_text("* item:\n  ```python\n  x = 1\n  ```\n\n<!-- no-run: needs a live server -->\n"
                    "```python\nraise SystemExit\n```\n", encoding="utf-8")
    global FILES
    saved, FILES = FILES, [page]
    try:
        found = examples()
    finally:
        FILES = saved
    assert [(e.line, e.code, e.no_run) for e in found] == [
        (2, "x = 1", None), (7, "raise SystemExit", "needs a live server")]


@pytest.mark.parametrize("example", RUNNABLE, ids=[e.id for e in RUNNABLE])
def test_example_runs(example: Example) -> None:
    if re.search(r"^>>> ", example.code, re.M):
        parser = doctest.DocTestParser()
        test = parser.get_doctest(example.code, {}, example.id, str(example.path), example.line)
        runner = doctest.DocTestRunner(
            optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        out: list[str] = []
        runner.run(test, out=out.append)
        assert runner.failures == 0, "".join(out)
        assert runner.tries > 0
    else:
        namespace = {"__name__": "docs_example"}
        exec(compile(example.code, example.id, "exec"), namespace)  # noqa: S102


def test_every_page_is_in_the_index_toctree() -> None:
    """A page left out of docs/index.md fails the Sphinx build in CI (-W); say so here first."""
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    entries = set()
    for block in re.findall(r"```\{toctree\}\n(.*?)```", index, re.S):
        entries |= {line.strip() for line in block.splitlines()
                    if line.strip() and not line.startswith(":")}
    pages = {p.stem for p in (ROOT / "docs").glob("*.md")} - {"index"}
    assert pages - entries == set(), "add these pages to a toctree of docs/index.md"
    assert entries - pages == set(), "toctree entries of docs/index.md with no page"
