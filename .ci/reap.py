#!/usr/bin/env python3
"""Run one command and leave nothing of it running: .ci/run runs every pytest through it.

    python3 .ci/reap.py [--timeout SECONDS] [--grace SECONDS] [--label NAME] -- COMMAND [ARG...]

Tests start processes that outlive them when a run is cut short: redis-server with
start_new_session=True (tests/support/redis_support.py), `scrapy` and python subprocesses of
the crawl tests, Spark's JVM.  A new session escapes a process-group kill, so this helper
makes itself a child subreaper (Linux prctl PR_SET_CHILD_SUBREAPER): every orphan of the
command's tree, setsid or not, is re-parented to it and stays findable through the parent
pids of /proc/*/stat.

- SIGINT, SIGTERM and SIGHUP are forwarded to COMMAND; COMMAND then has --grace seconds to
  finish (pytest's fixtures stop their servers on Ctrl-C) before the tree is killed.
- --timeout: COMMAND gets SIGINT (pytest then prints where it was stuck and its summary), then
  --grace seconds, then the tree is killed; the exit status is 124, as timeout(1)'s.
- On every exit, normal or not, each descendant still alive gets SIGTERM, and SIGKILL if it is
  still there --grace seconds later; all are waited for before this helper exits.  Processes
  left behind by a COMMAND that exited by itself are listed on stderr.
- If the parent dies (even by SIGKILL) the helper gets SIGTERM (PR_SET_PDEATHSIG) and cleans up.
- Exit status: COMMAND's (128+N if a signal N killed it), 124 on --timeout; if the helper was
  itself sent SIGINT/SIGTERM/SIGHUP it dies by that signal once the tree is gone, so that a
  shell sees a killed job.

Only a SIGKILL of this helper itself leaves the tree behind (nothing can catch it).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
USAGE = "usage: reap.py [--timeout SECONDS] [--grace SECONDS] [--label NAME] -- COMMAND [ARG...]"

received: list[int] = []  # signals sent to this helper, in order
child_pid = 0
child_done = False


def note(label: str, msg: str) -> None:
    print(f"reap.py[{label}]: {msg}", file=sys.stderr, flush=True)


def prctl(option: int, arg: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg), ctypes.c_ulong(0),
                  ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl({option}): {os.strerror(err)}")


def on_signal(signum: int, _frame: object) -> None:
    received.append(signum)
    if child_pid and not child_done:
        send(child_pid, signum)


def send(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)


def process_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, state letter) of every process (thread-group leaders) in /proc."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                data = f.read()
        except OSError:  # gone meanwhile
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses
        fields = data[data.rindex(b")") + 2:].split()
        table[int(name)] = (int(fields[1]), fields[0].decode())
    return table


def descendants(root: int) -> dict[int, str]:
    """pid -> state of every process below *root* (orphans re-parent to root, a subreaper)."""
    table = process_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _state) in table.items():
        children.setdefault(ppid, []).append(pid)
    found: dict[int, str] = {}
    todo = list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        if pid in found or pid == root:
            continue
        found[pid] = table[pid][1]
        todo.extend(children.get(pid, ()))
    return found


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return "?"
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()[:160] or "?"


def reap_children() -> int | None:
    """Wait for every exited child (orphans included); the command's wait status if it was one."""
    global child_done
    status = None
    while True:
        try:
            pid, st = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return status
        if pid == 0:
            return status
        if pid == child_pid:
            child_done = True
            status = st


def wait_child(seconds: float) -> int | None:
    """Reap children for up to *seconds*; the command's wait status once it has exited."""
    deadline = time.monotonic() + seconds
    while True:
        status = reap_children()
        if status is not None or child_done or time.monotonic() >= deadline:
            return status
        time.sleep(0.05)


def kill_tree(label: str, grace: float, report: bool) -> int | None:
    """SIGTERM every descendant, SIGKILL what is left after *grace* seconds, reap them all.

    Returns the command's wait status if it was reaped here."""
    me = os.getpid()
    status = None
    termed: set[int] = set()
    listed = False
    kill_at = time.monotonic() + grace
    give_up = kill_at + 10
    while True:
        st = reap_children()
        if st is not None:
            status = st
        procs = descendants(me)
        if not procs:
            return status
        live = [pid for pid, state in procs.items() if state != "Z"]
        if report and not listed and live:
            listed = True
            note(label, f"killing {len(live)} process(es) left behind:")
            for pid in sorted(live):
                print(f"    {pid} {cmdline(pid)}", file=sys.stderr, flush=True)
        now = time.monotonic()
        for pid in live:
            if now >= kill_at:
                send(pid, signal.SIGKILL)
            elif pid not in termed:
                termed.add(pid)
                send(pid, signal.SIGTERM)
                send(pid, signal.SIGCONT)  # a stopped process must run to die by TERM
        if now >= give_up:
            note(label, "still alive after SIGKILL: "
                 + ", ".join(f"{pid} {cmdline(pid)}" for pid in live))
            return status
        time.sleep(0.05)


def main(argv: list[str]) -> int:
    global child_pid
    timeout = 0.0
    grace = 5.0
    label = ""
    i = 0
    while i < len(argv) and argv[i] != "--":
        opt = argv[i]
        if opt in ("--timeout", "--grace", "--label") and i + 1 < len(argv):
            value = argv[i + 1]
            if opt == "--label":
                label = value
            else:
                try:
                    number = float(value)
                except ValueError:
                    print(f"reap.py: {opt} wants a number of seconds\n{USAGE}", file=sys.stderr)
                    return 2
                if opt == "--timeout":
                    timeout = number
                else:
                    grace = number
            i += 2
        else:
            print(USAGE, file=sys.stderr)
            return 2
    command = argv[i + 1:]
    if not command:
        print(USAGE, file=sys.stderr)
        return 2
    label = label or os.path.basename(command[0])

    parent = os.getppid()
    for signum in FORWARDED:
        signal.signal(signum, on_signal)
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # the parent died before PDEATHSIG was armed
        received.append(signal.SIGTERM)

    timed_out = False
    status = None
    if not received:
        try:
            # The command starts with default signal dispositions and an empty mask (a shell's
            # background job would otherwise inherit SIGINT and SIGQUIT ignored).
            child_pid = os.posix_spawnp(
                command[0], command, os.environ,
                setsigdef=(*FORWARDED, signal.SIGQUIT, signal.SIGPIPE, signal.SIGXFSZ),
                setsigmask=(),
            )
        except OSError as exc:
            note(label, f"cannot run {command[0]}: {exc}")
            return 127
        deadline = time.monotonic() + timeout if timeout > 0 else None
        while True:
            status = reap_children()
            if child_done:
                break
            if received:  # already forwarded by on_signal: give the command its grace period
                status = wait_child(grace)
                break
            if deadline is not None and time.monotonic() >= deadline:
                timed_out = True
                note(label, f"timed out after {timeout:g}s; SIGINT to {child_pid}, "
                     f"{grace:g}s grace, then every process of the tree is killed")
                for pid, state in sorted(descendants(os.getpid()).items()):
                    if state != "Z":
                        print(f"    {pid} {cmdline(pid)}", file=sys.stderr, flush=True)
                send(child_pid, signal.SIGINT)
                status = wait_child(grace)
                break
            time.sleep(0.1)

    # Normal exit: leftovers are reported (a test leaked a process). Otherwise kill quietly.
    st = kill_tree(label, grace, report=child_done and not received and not timed_out)
    if status is None:
        status = st

    if received:
        first = received[0]
        for forwarded in FORWARDED:
            signal.signal(forwarded, signal.SIG_DFL)
        sys.stdout.flush()
        sys.stderr.flush()
        os.kill(os.getpid(), first)  # die by it, so that the parent sees a killed job
        return 128 + first
    if timed_out:
        return 124
    if status is None:
        return 1
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
