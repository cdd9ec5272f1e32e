"""Feed items written exactly once across ``kill -9``: a request is answered with its items.

With ``JOBDIR`` the frontier deletes a pending row once its request is answered;
if the request's items were then still in the feed exporter's buffer, a kill
lost them for good (the page is not fetched again).  Here a local feed file is
staged: the add-on names :class:`FrontierFeedStorage` for ``file`` URIs, whose
file object (:class:`StagedFile`) keeps each item's bytes, tagged with the
request that yielded it (the frontier spider middleware marks them, see
:meth:`FeedGate.mark`).  At each frontier commit :class:`FeedGate` writes to the
real file the prefix of items whose requests are no longer out, ``fsync``\\ s it
and records each file's byte offset and item count in the store in the same
transaction that deletes those requests' pending rows: a request's row goes only
once every item of it is durable in every feed.  On resume each file is cut
back to its recorded offset and continued (:func:`~iri_scrapy.plugin.compat.feed_continuation`:
no second CSV header, the JSON array continued), a batch feed at its newest
batch (:func:`~iri_scrapy.plugin.compat.continue_batches`).  Feeds that cannot
take part (another storage, post-processing, XML) are named in one WARNING.
Design: docs/jobdir.md, "Feeds".
"""

from __future__ import annotations

import io
import logging
import os
from collections import Counter, deque
from collections.abc import Callable, Iterable
from pathlib import Path, PureWindowsPath
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from scrapy import signals
from scrapy.extensions.feedexport import FileFeedStorage

from iri_scrapy.frontier.middlewares import FrontierSpiderMiddleware
from iri_scrapy.frontier.stored_queue import META_FRONTIER_ID
from iri_scrapy.plugin import compat
from iri_scrapy.plugin.config import load_object
from iri_scrapy.plugin.context import CrawlContext

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings

    from iri_scrapy.frontier.sqlite_store import FrontierStore

logger = logging.getLogger(__name__)

#: The import path the add-on sets in ``FEED_STORAGES`` for ``file`` and ``""``.
STORAGE_PATH = "iri_scrapy.frontier.feeds.FrontierFeedStorage"

#: Formats whose files can be cut back and continued (see compat.feed_continuation).
FORMATS = frozenset({"jsonlines", "jl", "json", "csv", "xml", "pickle", "marshal"})

#: finish_reason: a staged feed file could not be written.
REASON_FEED_WRITE_FAILED = "iri_feed_write_failed"


def why_not_staged(options: dict[str, Any]) -> str | None:
    """Why a local feed with *options* cannot be staged, or None when it can."""
    if options.get("format") not in FORMATS:
        return f"format {options.get('format')!r}"
    if options.get("postprocessing"):
        return "postprocessing"
    return None


class StagedFile(io.BufferedIOBase):
    """The file a feed exporter writes to: each item's bytes wait, tagged with its
    request, until :meth:`FeedGate.flush` writes them (see the module)."""

    def __init__(self, path: str, real: Any, offset: int, items: int,
                 first: list[Callable[[bytes], bytes]] | None, batch: tuple[str, int]) -> None:
        super().__init__()
        self.path = path
        #: (URI template, batch id) of a batch feed's file, else ("", 0).
        self.batch = batch
        #: The exporter finished this file (a batch full): closed once all is written.
        self.closing = False
        self.real = real
        #: Bytes of the real file that are committed (recorded in the store).
        self.offset = offset
        #: Items committed to the real file (over every run of the job).
        self.items = items
        #: How the new exporter's first writes change to continue the file, in order.
        self._first = list(first or ())
        #: The first writes were changed (continuing the file) and no item followed yet:
        #: how many of them lead ``_loose``.
        self._continued_only = 0
        self._loose: list[bytes] = []
        #: (request key or None, bytes of one item), in the order written.
        self.chunks: deque[tuple[Any, bytes]] = deque()

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        raw = bytes(data)
        if self._first:
            self._loose.append(self._first.pop(0)(raw))
            self._continued_only += 1
        else:
            self._loose.append(raw)
        return len(raw)

    def flush(self) -> None:  # writes happen at the frontier's commits
        pass

    def mark(self, owner: Any) -> bool:
        """The bytes written since the last mark are one item of *owner*; True if any."""
        if not self._loose:
            return False
        self._continued_only = 0
        self.chunks.append((owner, b"".join(self._loose)))
        self._loose.clear()
        return True

    def take(self, blocked: Callable[[Any], bool]) -> tuple[bytes, list[Any]]:
        """The leading chunks whose owner is not *blocked*: their bytes and owners."""
        parts: list[bytes] = []
        owners: list[Any] = []
        chunks = self.chunks
        while chunks and not blocked(chunks[0][0]):
            owner, data = chunks.popleft()
            parts.append(data)
            owners.append(owner)
        return b"".join(parts), owners

    def tail(self) -> bytes:
        """The bytes written after the last item (the exporter's closing bytes); a
        continuation written without an item after it is left out (a JSON array
        continued with nothing is closed as it was)."""
        if self._continued_only:
            del self._loose[:self._continued_only]
        data = b"".join(self._loose)
        self._loose.clear()
        return data


def finish(staged: StagedFile) -> None:
    """Write the closing bytes of *staged* after its committed part and close it; the
    items still held (requests not answered: fetched again next run) are left out."""
    tail = staged.tail()
    if staged.chunks:
        logger.info("Feed %s: %d items of requests not answered are left out (their "
                    "pages are fetched again by the next run)", staged.path, len(staged.chunks))
        staged.chunks.clear()
    try:
        staged.real.write(tail)
        staged.real.flush()
        os.fsync(staged.real.fileno())
    finally:
        staged.real.close()


class FeedGate:
    """The staged feed files of one crawl and the answers waiting for them (module docstring).

    *store* gives the open frontier store; *blocked* tells whether a request key is
    still out (its items may not be written yet); *release* deletes the pending rows
    of keys whose items are all written; *wake* asks for a commit; *stop* closes the
    crawl with a reason.
    """

    def __init__(self, store: Callable[[], FrontierStore | None], *,
                 blocked: Callable[[Any], bool], release: Callable[[list[Any]], None],
                 wake: Callable[[], None], commit: Callable[[], None],
                 stop: Callable[[str], None]) -> None:
        self._store = store
        self._blocked = blocked
        self._release = release
        self._wake = wake
        self._commit = commit
        self._stop = stop
        self.files: list[StagedFile] = []
        #: request key -> its item chunks not yet written (all feeds).
        self._unwritten: Counter[Any] = Counter()
        #: keys answered whose rows wait for their items to be written.
        self._waiting: set[Any] = set()
        self.failed = False
        #: Scrapy's feed exporter, when it has batch feeds (see :meth:`opened`).
        self._exporter: Any = None

    def opened(self, crawler: Crawler, spider: Spider) -> None:
        """After the feed exporter opened its slots: batch feeds continue at their
        newest recorded batch (compat.continue_batches)."""
        store = self._store()
        exporter = compat.feed_exporter(crawler)
        if store is None or exporter is None or not any(
                options.get("batch_item_count") for options in exporter.feeds.values()):
            return
        self._exporter = exporter
        compat.continue_batches(exporter, spider, store.last_batch,
                                lambda options: why_not_staged(options) is None)

    # --- staging ------------------------------------------------------------

    def open_feed(self, path: str, options: dict[str, Any],
                  batch: tuple[str, int] = ("", 0)) -> StagedFile:
        """Open (or continue) the feed file *path* (batch *batch*: URI template, id, of
        a batch feed): cut back to its committed offset."""
        store = self._store()
        assert store is not None
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        record = store.feed(path)
        size = target.stat().st_size if target.exists() else 0
        if record is None:
            offset = 0 if options.get("overwrite") else size
            items = 0
            with target.open("r+b" if target.exists() else "wb") as f:
                f.truncate(offset)
            store.set_feed(path, offset, items, *batch)
            self._commit()  # the start offset is on disk before any byte is written
        else:
            offset, items = record
            if size < offset:
                logger.warning(
                    "Feed %s is shorter (%d bytes) than what the frontier store recorded "
                    "(%d bytes; the file was cut or replaced): continuing at its end, items "
                    "of the missing part are lost", path, size, offset)
                offset = size
            elif size > offset:
                logger.info("Feed %s: dropping %d bytes written after the last commit of "
                            "the previous run (their pages are fetched again)",
                            path, size - offset)
            os.truncate(target, offset)
        real = target.open("ab")
        staged = StagedFile(path, real, offset, items,
                            compat.feed_continuation(options, continuing=items > 0), batch)
        self.files.append(staged)
        return staged

    def close_feed(self, staged: StagedFile) -> None:
        """The exporter finished *staged* while the crawl runs (a batch is full): it is
        closed, its closing bytes written, once its items are (see :meth:`flush`)."""
        staged.closing = True
        self._wake()

    def detach(self) -> None:
        """The frontier closes: the files of full batches are closed now (their items
        of requests not answered are left out: fetched again by the next run)."""
        for staged in [f for f in self.files if f.closing]:
            self.files.remove(staged)
            finish(staged)

    @staticmethod
    def key(request: Any) -> Any:
        """The ledger key of *request* (None: no request, or not handed out by the frontier)."""
        meta = getattr(request, "meta", None)
        return None if meta is None else meta.get(META_FRONTIER_ID)

    def mark(self, owner: Any) -> None:
        """An item of request key *owner* (None: no request) went through every feed:
        the bytes each file got since the last mark are that item's."""
        if self._exporter is not None:  # a batch may have started: tag its storage
            compat.tag_batches(self._exporter)
        for staged in self.files:
            if staged.mark(owner) and owner is not None:
                self._unwritten[owner] += 1

    # --- answers ------------------------------------------------------------

    def settle(self, keys: Iterable[Any]) -> list[Any]:
        """*keys* were answered: those whose items are all written, to release now;
        the others wait for :meth:`flush`."""
        now: list[Any] = []
        for key in keys:
            if self._unwritten.get(key):
                self._waiting.add(key)
            else:
                now.append(key)
        if self._waiting:
            self._wake()
        return now

    def flush(self) -> None:
        """Before a commit: write each file's committable prefix, ``fsync`` it, record
        its offset, and release the answered keys whose items are all written."""
        store = self._store()
        if store is None or self.failed:
            return
        for staged in self.files:
            data, owners = staged.take(self._blocked)
            if not owners:
                continue
            try:
                staged.real.write(data)
                staged.real.flush()
                os.fsync(staged.real.fileno())
            except OSError as exc:
                self._write_failed(staged, exc)
                return
            staged.offset += len(data)
            staged.items += len(owners)
            store.set_feed(staged.path, staged.offset, staged.items, *staged.batch)
            for owner in owners:
                if owner is not None:
                    self._unwritten[owner] -= 1
                    if not self._unwritten[owner]:
                        del self._unwritten[owner]
        for staged in [f for f in self.files if f.closing and not f.chunks]:
            self.files.remove(staged)
            finish(staged)
        ready = [key for key in self._waiting if not self._unwritten.get(key)]
        if ready:
            self._waiting.difference_update(ready)
            self._release(ready)

    def _write_failed(self, staged: StagedFile, exc: OSError) -> None:
        self.failed = True
        logger.error(
            "Feed %s could not be written (%s): closing the crawl with finish_reason %s; "
            "the pages whose items were not written stay pending in JOBDIR. Fix the error "
            "and run the same command again: their items are written then",
            staged.path, exc, REASON_FEED_WRITE_FAILED)
        self._stop(REASON_FEED_WRITE_FAILED)


class FrontierFeedStorage(FileFeedStorage):
    """``FEED_STORAGES`` for local files: staged by the crawl's :class:`FeedGate` when the
    ``JOBDIR`` frontier runs, else Scrapy's :class:`FileFeedStorage` unchanged."""

    def __init__(self, uri: str, *, feed_options: dict[str, Any] | None = None) -> None:
        super().__init__(uri, feed_options=feed_options)
        self.feed_options = dict(feed_options or {})
        self.crawler: Crawler | None = None
        #: (URI template, batch id) of a batch feed's file (see compat.continue_batches).
        self.batch: tuple[str, int] = ("", 0)

    @classmethod
    def from_crawler(cls, crawler: Crawler, uri: str, *,
                     feed_options: dict[str, Any] | None = None) -> FrontierFeedStorage:
        storage = cls(uri, feed_options=feed_options)
        storage.crawler = crawler
        return storage

    def _gate(self) -> FeedGate | None:
        frontier = CrawlContext.of(self.crawler).frontier if self.crawler else None
        gate = getattr(frontier, "feeds", None)
        return gate if isinstance(gate, FeedGate) else None

    def open(self, spider: Spider) -> Any:
        gate = self._gate()
        if gate is None or why_not_staged(self.feed_options) is not None:
            return super().open(spider)
        return gate.open_feed(os.path.abspath(self.path), self.feed_options, self.batch)

    def store(self, file: Any) -> Any:
        if isinstance(file, StagedFile):
            gate = self._gate()
            if gate is not None:
                gate.close_feed(file)
            else:  # the scheduler closed first: only the closing bytes remain to write
                finish(file)
            return None
        return super().store(file)


def unstaged_feeds(settings: BaseSettings) -> list[str]:
    """``FEEDS`` entries whose items the frontier cannot keep exactly once, with why."""
    storages = settings.getwithbase("FEED_STORAGES")
    out = []
    for uri, options in settings.getdict("FEEDS").items():
        uri = str(uri)
        scheme = "file" if PureWindowsPath(uri).drive else urlparse(uri).scheme
        name = storages.get(scheme) or storages.get("file")
        cls = load_object(name) if name else None
        if not (isinstance(cls, type) and issubclass(cls, FrontierFeedStorage)):
            out.append(f"{uri} ({scheme or 'file'} storage "
                       f"{getattr(cls, '__name__', name)})")
            continue
        why = why_not_staged(compat.feed_options(options, settings, uri))
        if why is not None:
            out.append(f"{uri} ({why})")
    return out


def staged_feeds(crawler: Crawler, spider: Spider, store: Callable[[], FrontierStore | None],
                 **hooks: Any) -> FeedGate | None:
    """The :class:`FeedGate` of a frontier scheduler opening (*hooks*: its keyword
    arguments), with one WARNING naming the feeds that cannot take part; None when
    the frontier spider middleware cannot tell each item's feed bytes (it must hear
    ``item_scraped`` after Scrapy's feed exporter, see compat.runs_after_feed_exporter)."""
    if not compat.runs_after_feed_exporter(crawler, signals.item_scraped,
                                           FrontierSpiderMiddleware):
        if crawler.settings.getdict("FEEDS"):
            logger.warning(
                "JOBDIR frontier: FrontierSpiderMiddleware does not hear item_scraped "
                "after Scrapy's feed exporter, so feeds are written by Scrapy as usual: "
                "after a kill, items of pages answered since the last write are missing",
                extra={"spider": spider})
        return None
    warn_unstaged(crawler.settings, spider)
    return FeedGate(store, **hooks)


def warn_unstaged(settings: BaseSettings, spider: Any) -> None:
    """One WARNING naming the feeds that cannot take part (see :func:`unstaged_feeds`)."""
    feeds = unstaged_feeds(settings)
    if feeds:
        logger.warning(
            "JOBDIR frontier: the feeds %s are written by Scrapy as usual, not staged "
            "with the frontier's commits: after a kill or crash, the items of the pages "
            "answered since their last write are missing and those of the pages in flight "
            "may be written twice (only local files in jsonlines, json, csv, pickle or "
            "marshal format without post-processing are kept exactly once)",
            ", ".join(feeds), extra={"spider": spider})
