"""The ``JOBDIR`` lock: one crawl per ``JOBDIR`` (two would fetch the same pages).

An exclusive ``flock`` on ``<JOBDIR>/iri_frontier.lock`` that the process holds
while it crawls; the kernel releases it when the process dies, even by ``kill -9``,
so a killed crawl never leaves a stale lock behind.  Design: docs/jobdir.md.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import TYPE_CHECKING

from iri_scrapy.frontier.errors import FrontierError
from iri_scrapy.store.frontier_file import (
    LOCK_FILENAME,
)

if TYPE_CHECKING:
    pass



class JobdirLocked(FrontierError):
    """Another crawl holds the ``JOBDIR``'s lock."""


def lock_jobdir(jobdir: str | os.PathLike[str]) -> int:
    """Take the exclusive lock of *jobdir* (``flock`` on its lock file, non-blocking).

    Returns the file descriptor that holds it: closing it (or the process dying,
    even by ``kill -9``) releases the lock.  Raises :class:`JobdirLocked` if
    another process holds it.
    """
    path = Path(jobdir, LOCK_FILENAME)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        try:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        except OSError:  # pragma: no cover
            holder = ""
        os.close(fd)
        who = f" (pid {holder})" if holder.isdigit() else ""
        raise JobdirLocked(
            f"JOBDIR {jobdir} is in use by another crawl{who}: refusing to start a second "
            "crawl on it (both would fetch the same pages); wait for that crawl to end or "
            "stop it, or use another JOBDIR"
        ) from exc
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd
