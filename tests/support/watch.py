"""Bounds for the tests' waits that hold on a busy machine: a stall, not a slow run, fails.

A fixed wall-clock deadline ("the crawl is done within 60 s") fails when other
processes keep the cores busy, though nothing is wrong.  The waits of the crawl
tests are bounded by progress instead: they fail only when none of their
progress signals (server hits, log lines, the child's CPU time, ...) has changed
for a generous *stall* period, and, so that no loop can run for ever, after a
large absolute *ceiling*.

Like the rest of :mod:`tests.support`, nothing here imports the IRI core.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = [
    "CEILING",
    "STALL",
    "HeldAnswers",
    "Stalled",
    "Watch",
    "cpu_of",
    "hold_answers",
    "run_watched",
    "size_of",
    "wait_exit",
    "wait_until",
]

STALL = 120.0
"""Seconds without any progress after which a wait fails."""

CEILING = 900.0
"""Seconds after which a wait fails even if it is still progressing."""

_SAMPLE_EVERY = 0.1  # the progress signals are read at most this often
_CPU_QUANTUM = 0.5  # CPU seconds: an idle event loop does not advance by this in a stall


class Stalled(AssertionError):
    """A bounded wait gave up: no progress for the stall period, or the ceiling reached."""


def size_of(path: str | os.PathLike[str]) -> Callable[[], int]:
    """A progress signal: the size of the file at *path* (-1 while it does not exist)."""
    p = Path(path)

    def signal() -> int:
        try:
            return p.stat().st_size
        except OSError:
            return -1

    return signal


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of process *pid* and of its reaped children (Linux)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # after the command: state ppid ... utime(14) stime(15) cutime(16) cstime(17)
    ticks = sum(int(f) for f in fields[11:15])
    return ticks / os.sysconf("SC_CLK_TCK")


def cpu_of(pid: int, tree: bool = False) -> Callable[[], int | None]:
    """A progress signal: the CPU time of process *pid* (with *tree*, and of its
    living descendants), in steps of half a second, so that the timers of an idle
    event loop are not progress.
    """

    def signal() -> int | None:
        total = _cpu_seconds(pid)
        if total is None:
            return None
        if tree:
            total += sum(_cpu_seconds(child) or 0.0 for child in _descendants(pid))
        return int(total / _CPU_QUANTUM)

    return signal


def _descendants(root: int) -> list[int]:
    """The living descendants of *root* (from /proc; empty where /proc is missing)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                ppid = int(fh.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out: list[int] = []
    todo = list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, ()))
    return out


class Watch:
    """Tracks progress signals (callables whose value changes when something happens).

    :meth:`over` returns why the wait should give up (no signal changed for *stall*
    seconds, or *ceiling* seconds since the start), or None.
    """

    def __init__(self, *signals: Callable[[], object], stall: float = STALL,
                 ceiling: float = CEILING) -> None:
        self.signals = signals
        self.stall = stall
        self.ceiling = ceiling
        self.started = self.changed = self._sampled = time.monotonic()
        self.last = self.sample()

    def sample(self) -> tuple[object, ...]:
        """The current values of the signals."""
        return tuple(signal() for signal in self.signals)

    def over(self) -> str | None:
        now = time.monotonic()
        if now - self._sampled >= _SAMPLE_EVERY:
            self._sampled = now
            current = self.sample()
            if current != self.last:
                self.last = current
                self.changed = now
        if now - self.changed > self.stall:
            return f"no progress for {self.stall:.0f} s (signals {self.last})"
        if now - self.started > self.ceiling:
            return f"still going after {self.ceiling:.0f} s (ceiling)"
        return None


def wait_until(done: Callable[[], bool], *signals: Callable[[], object], what: str,
               stall: float = STALL, ceiling: float = CEILING, poll: float = 0.01,
               detail: Callable[[], str] | None = None) -> None:
    """Poll *done* every *poll* seconds until it is true.

    Raises :class:`Stalled` (naming *what*, with *detail()* appended) when none of
    *signals* has changed for *stall* seconds, or after *ceiling* seconds.
    """
    watch = Watch(*signals, stall=stall, ceiling=ceiling)
    while not done():
        reason = watch.over()
        if reason is not None:
            extra = detail() if detail is not None else ""
            raise Stalled(f"{what}: {reason}" + (f"\n{extra}" if extra else ""))
        time.sleep(poll)


def wait_exit(proc: subprocess.Popen[bytes] | subprocess.Popen[str],
              *signals: Callable[[], object], what: str, stall: float = STALL,
              ceiling: float = CEILING, detail: Callable[[], str] | None = None,
              tree: bool = False) -> int:
    """Wait until *proc* exits; its CPU time (with *tree*, its descendants' too) is a
    progress signal besides *signals*.

    On a stall the process is killed (and reaped) and :class:`Stalled` raised.
    Returns the exit code.
    """
    try:
        wait_until(lambda: proc.poll() is not None, cpu_of(proc.pid, tree), *signals, what=what,
                   stall=stall, ceiling=ceiling, poll=0.02, detail=detail)
    except Stalled:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        raise
    return proc.returncode


def run_watched(cmd: Sequence[str], *signals: Callable[[], object], what: str,
                stall: float = STALL, ceiling: float = CEILING, tree: bool = False,
                **popen: object) -> subprocess.CompletedProcess[str]:
    """``subprocess.run(cmd, capture_output=True, text=True, ...)`` bounded by progress:
    its output, its CPU time (with *tree*, its descendants' too) and *signals*.

    Output goes to temporary files (no pipe to fill); *popen* are further
    :class:`subprocess.Popen` arguments (``env``, ``cwd``, ``encoding``, ``errors``).
    """
    import tempfile

    encoding = str(popen.pop("encoding", "utf-8"))
    errors = str(popen.pop("errors", "strict"))
    popen.pop("capture_output", None)
    popen.pop("text", None)
    with tempfile.TemporaryDirectory(prefix="iri-watched-") as tmp:
        out_path, err_path = Path(tmp, "stdout"), Path(tmp, "stderr")
        with out_path.open("wb") as out, err_path.open("wb") as err:
            proc = subprocess.Popen(cmd, stdout=out, stderr=err, **popen)  # type: ignore[call-overload]  # noqa: S603
            wait_exit(proc, size_of(out_path), size_of(err_path), *signals, what=what,
                      stall=stall, ceiling=ceiling, tree=tree,
                      detail=lambda: err_path.read_bytes()[-3000:].decode(encoding, "replace"))
        stdout = out_path.read_bytes().decode(encoding, errors)
        stderr = err_path.read_bytes().decode(encoding, errors)
    return subprocess.CompletedProcess(list(cmd), proc.returncode, stdout, stderr)


class HeldAnswers:
    """See :func:`hold_answers`."""

    def __init__(self, hits: Any, after: int) -> None:
        self.after = after
        self._record = hits.record
        self._lock = threading.Lock()
        self._seen = len(hits.hits)
        self._release = threading.Event()
        self.held = 0
        """Requests whose answer is being held (until :meth:`release`)."""

    def record(self, hit: Any) -> None:
        self._record(hit)
        with self._lock:
            self._seen += 1
            if self._release.is_set() or self._seen < self.after:
                return
            self.held += 1
        self._release.wait(CEILING)  # bounded: a test that never releases does not hang

    def release(self) -> None:
        """Let every held answer go, and answer at once from now on."""
        self._release.set()


@contextmanager
def hold_answers(hits: Any, after: int) -> Iterator[HeldAnswers]:
    """Hold the test server's answers once it has seen *after* hits in all.

    *hits* is the server's :class:`~tests.support.server.HitLog` (it records a hit
    before answering): from the hit that makes the count *after*, every request is
    recorded and its answer held until :meth:`HeldAnswers.release` or the end of
    the block.  A crawler then cannot get past that point: what it has in flight
    stays in flight (``held`` counts those requests), so a kill or an outage caused
    meanwhile comes at that point however slow the machine.
    """
    gate = HeldAnswers(hits, after)
    hits.record = gate.record  # the server calls hits.record(...): the instance's own
    try:
        yield gate
    finally:
        del hits.record
        gate.release()
