"""Reading a ``JOBDIR`` written by stock Scrapy, without running code from it.

Stock Scrapy's ``JOBDIR`` holds ``requests.seen`` (``RFPDupeFilter``: the request
fingerprints of Scrapy's default ``RequestFingerprinter``, hex lines up to Scrapy
2.18, length-prefixed bytes from 2.19) and
``requests.queue/`` (``SCHEDULER_DISK_QUEUE``: per priority, and per download
slot under ``DownloaderAwarePriorityQueue``, a queuelib ``LifoDiskQueue`` file or a
``FifoDiskQueue`` folder of chunks, whose records are
``pickle.dumps(request.to_dict(spider=spider), protocol=4)``).
:class:`~iri_scrapy.frontier.jobdir.IRIFrontierScheduler` adopts both when the
add-on is switched on for such a ``JOBDIR`` (``docs/frontier.md``).

A pickle from storage runs code when a plain :func:`pickle.loads` reads it, so
the records are read by :class:`DataOnlyUnpickler`, which refuses every global
(``find_class``) and persistent id: only the opcodes of plain data
(dict, list, tuple, set, str, bytes, int, float, bool, None) build anything,
which is all ``Request.to_dict`` output holds when ``meta`` and ``cb_kwargs``
are plain.  Anything else is refused (kind ``pickle``), counted and logged like a
planted record, never executed.  :class:`StockAdoption` is the taking over: the seen
fingerprints consulted on every run, the queue stored once.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import re
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy.utils.request import fingerprint as stock_fingerprint

from iri_scrapy.frontier.codec import VERSION as CODEC_VERSION
from iri_scrapy.frontier.codec import RefusedRecord, RequestCodec
from iri_scrapy.plugin import compat  # noqa: F401 - checks the installed Scrapy first
from iri_scrapy.store.fpstore import FILENAME as FP_FILENAME
from iri_scrapy.store.fpstore import FingerprintSet, fp64

if TYPE_CHECKING:
    from scrapy import Request

    from iri_scrapy.frontier.sqlite_store import FrontierStore

SEEN_FILENAME = "requests.seen"
QUEUE_DIRNAME = "requests.queue"

_SIZE = struct.Struct(">L")
_PRIO = re.compile(r"(-?\d+)(s?)\Z")


class DataOnlyUnpickler(pickle.Unpickler):
    """An unpickler that builds plain data only: every global is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refused global {module}.{name}: data only")

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("refused persistent id: data only")


def load_data(data: bytes) -> Any:
    """Unpickle *data* with :class:`DataOnlyUnpickler` (raises on anything not plain)."""
    return DataOnlyUnpickler(io.BytesIO(data)).load()


def read_seen(jobdir: str | os.PathLike[str]) -> Iterator[bytes]:
    """The fingerprints of ``<jobdir>/requests.seen``.

    Two formats: Scrapy up to 2.18 writes one fingerprint a line in hex (40 digits);
    2.19 writes each as a 2-byte big-endian length and the bytes (a record cut short
    by an unclean shutdown ends the file, as Scrapy reads it).  A hex line that is
    not 40 hex digits is skipped.
    """
    data = Path(jobdir, SEEN_FILENAME).read_bytes()
    if data[:1] == b"\0":  # a length prefix: no fingerprint is 256 bytes or more
        pos = 0
        while pos + 2 <= len(data):
            size = int.from_bytes(data[pos:pos + 2], "big")
            pos += 2
            fingerprint = data[pos:pos + size]
            if len(fingerprint) < size:
                return
            yield fingerprint
            pos += size
        return
    for line in data.splitlines():
        text = line.strip()
        if len(text) == 40:
            try:
                yield bytes.fromhex(text.decode("ascii"))
            except (ValueError, UnicodeDecodeError):
                continue


@dataclass
class StockRecord:
    """One record of a stock disk queue: where it was and its bytes."""

    where: str
    priority: int
    start: bool
    data: bytes


def _lifo_records(path: Path) -> list[bytes]:
    """A queuelib ``LifoDiskQueue`` file: a 4-byte count, then ``data, size`` records;
    read back to front (the pop order), returned in push order."""
    raw = path.read_bytes()
    out: list[bytes] = []
    pos = len(raw)
    while pos > _SIZE.size:
        (size,) = _SIZE.unpack_from(raw, pos - _SIZE.size)
        start = pos - _SIZE.size - size
        if start < _SIZE.size:
            raise ValueError(f"{path}: a record runs past the start of the file")
        out.append(raw[start:pos - _SIZE.size])
        pos = start
    out.reverse()
    return out


def _fifo_records(path: Path) -> list[bytes]:
    """A queuelib ``FifoDiskQueue`` folder (``info.json``, chunks ``q00000``...): its
    records from the tail to the head (the pop order, also the push order)."""
    info = json.loads(Path(path, "info.json").read_text())
    chunksize = max(1, int(info["chunksize"]))
    tnum, tcnt, toffset = (int(x) for x in info["tail"])
    hnum, hpos = (int(x) for x in info["head"])
    out: list[bytes] = []
    num, cnt, offset = tnum, tcnt, toffset
    while [num, cnt] < [hnum, hpos]:
        raw = Path(path, f"q{num:05d}").read_bytes()
        while [num, cnt] < [hnum, hpos] and cnt < chunksize:
            if offset + _SIZE.size > len(raw):
                raise ValueError(f"{path}: chunk {num} ends early")
            (size,) = _SIZE.unpack_from(raw, offset)
            out.append(raw[offset + _SIZE.size:offset + _SIZE.size + size])
            offset += _SIZE.size + size
            cnt += 1
        if cnt >= chunksize:
            num, cnt, offset = num + 1, 0, 0
    return out


def read_queue(jobdir: str | os.PathLike[str]) -> Iterator[StockRecord]:
    """Every record of ``<jobdir>/requests.queue``, each queue in push order.

    A queue is named by Scrapy's negated priority (``0``, ``-1``...), with ``s`` for
    a start-request queue, under an optional download-slot folder; a file is a
    ``LifoDiskQueue``, a folder with ``info.json`` a ``FifoDiskQueue``.  A queue
    that cannot be parsed raises :class:`ValueError`.
    """
    root = Path(jobdir, QUEUE_DIRNAME)
    if not root.is_dir():
        return
    for path in sorted(root.rglob("*")):
        match = _PRIO.match(path.name)
        if match is None:
            continue
        if path.is_file():
            records = _lifo_records(path)
        elif Path(path, "info.json").is_file():
            records = _fifo_records(path)
        else:
            continue
        priority, start = -int(match.group(1)), bool(match.group(2))
        where = str(path.relative_to(Path(jobdir)))
        for data in records:
            yield StockRecord(where, priority, start, data)


def legacy_state(jobdir: str) -> str | None:
    """The Scrapy-queue ``JOBDIR`` state file found in *jobdir*, if any.

    ``iri_fingerprints.bin`` (the add-on with ``IRI_FRONTIER = False``) is continued
    the way it was started; stock Scrapy's ``requests.queue`` and ``requests.seen``
    alone are adopted (see :class:`StockAdoption`)."""
    for name in (FP_FILENAME, QUEUE_DIRNAME, SEEN_FILENAME):
        if Path(jobdir, name).exists():
            return name
    return None


class StockAdoption:
    """A ``JOBDIR`` written by stock Scrapy, taken over by the frontier: its seen
    fingerprints are consulted on every run (a new request whose stock fingerprint
    is in ``requests.seen`` is a duplicate); its pending queue is read once, with
    a data-only unpickler, and stored like newly scheduled requests (in the
    transaction that marks it adopted)."""

    def __init__(self, jobdir: str) -> None:
        self.jobdir = jobdir
        #: Stock Scrapy's ``requests.seen`` (64-bit records), when the JOBDIR has one.
        self.seen: FingerprintSet | None = None
        self._adopting = False

    def load_seen(self) -> int | None:
        """Read ``requests.seen``, if there is one: its size, else None."""
        if not Path(self.jobdir, SEEN_FILENAME).is_file():
            return None
        seen = FingerprintSet()
        for fingerprint in read_seen(self.jobdir):
            seen.add(int.from_bytes(fp64(fingerprint), "big"))
        self.seen = seen
        return len(seen)

    def saw(self, request: Request) -> bool:
        """True if stock Scrapy saw *request* (fetched, or adopted): a duplicate."""
        if self.seen is None or self._adopting or request.dont_filter:
            return False
        return int.from_bytes(fp64(stock_fingerprint(request)), "big") in self.seen

    def adopt(
        self,
        store: FrontierStore,
        codec: RequestCodec,
        enqueue: Callable[[Request], bool],
        refused: Callable[[RefusedRecord, str, bytes | None], None],
    ) -> tuple[int, int] | None:
        """Store the stock queue through *enqueue*, once: (adopted, duplicates dropped),
        or None when there is no queue or it was adopted already.  A record that is
        not plain data goes to *refused*, never executed."""
        jobdir = self.jobdir
        if not Path(jobdir, QUEUE_DIRNAME).is_dir() or store._get("stock_queue") == "adopted":
            return None
        adopted = dropped = 0
        self._adopting = True
        try:
            for item in read_queue(jobdir):
                try:
                    d = load_data(item.data)
                    if type(d) is not dict:
                        raise RefusedRecord("shape", f"a {type(d).__name__}, not a dict")
                    request = codec._build({**d, "v": CODEC_VERSION}, plain=False)
                except RefusedRecord as exc:
                    refused(exc, item.where, item.data)
                    continue
                except Exception as exc:  # noqa: BLE001 - anything not plain data: refused
                    refused(RefusedRecord("pickle", f"not plain data ({exc})"), item.where,
                            item.data)
                    continue
                if enqueue(request):
                    adopted += 1
                else:
                    dropped += 1
        except (OSError, ValueError, KeyError, TypeError) as exc:
            refused(RefusedRecord("garbage", f"cannot be parsed ({exc})"), QUEUE_DIRNAME, None)
        finally:
            self._adopting = False
        store._set("stock_queue", "adopted")
        store.commit()
        return adopted, dropped
