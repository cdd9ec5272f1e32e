"""The staged feed files of the JOBDIR frontier, in process (iri_scrapy.frontier.feeds).

The real crawls killed with SIGKILL are in ``test_jobdir_feeds.py``; here the rules:
a prefix is written only up to the first item of a request still out, an answered
request's row waits for its items, a resumed file is cut back and continued.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

from scrapy.exporters import CsvItemExporter, JsonItemExporter

from iri_scrapy.frontier.feeds import FeedGate, finish
from iri_scrapy.frontier.sqlite_store import FrontierStore


class _Frontier:
    def __init__(self, tmp_path: Path) -> None:
        self.store = FrontierStore(tmp_path / "store.sqlite3")
        self.out: set[Any] = set()
        self.released: list[Any] = []
        self.woken = 0
        self.gate = FeedGate(lambda: self.store, blocked=self.out.__contains__,
                             release=self.released.extend, wake=self._wake,
                             commit=self.commit, stop=lambda reason: None)

    def _wake(self) -> None:
        self.woken += 1

    def commit(self) -> None:
        self.gate.flush()
        self.store.commit()


def test_prefix_waits_for_the_first_request_still_out(tmp_path: Path) -> None:
    f = _Frontier(tmp_path)
    path = str(tmp_path / "items.jsonl")
    staged = f.gate.open_feed(path, {"format": "jsonlines"})
    f.out.update({1, 2})
    staged.write(b'{"a": 1}\n')
    f.gate.mark(1)
    staged.write(b'{"b": 2}\n')
    f.gate.mark(2)
    f.out.discard(2)
    assert f.gate.settle([2]) == []  # its item is not written: its row waits
    assert f.woken
    f.commit()
    assert Path(path).read_bytes() == b""  # request 1 is still out: nothing after it
    assert f.released == []
    f.out.discard(1)
    assert f.gate.settle([1]) == []
    f.commit()
    assert Path(path).read_bytes() == b'{"a": 1}\n{"b": 2}\n'
    assert sorted(f.released) == [1, 2]
    assert f.store.feed(path) == (18, 2)
    assert f.gate.settle([3]) == [3]  # no item: released at once


def test_resume_cuts_back_and_continues_json(tmp_path: Path) -> None:
    path = str(tmp_path / "items.json")
    f = _Frontier(tmp_path)
    staged = f.gate.open_feed(path, {"format": "json"})
    exporter = JsonItemExporter(cast(Any, staged))
    exporter.start_exporting()
    exporter.export_item({"n": 1})
    f.gate.mark(None)
    f.commit()
    f.out.add(7)
    exporter.export_item({"n": 2})  # in flight at the "kill"
    f.gate.mark(7)
    f.commit()
    staged.real.write(b',{"n": 2}')  # written after the last commit: cut back on resume
    staged.real.close()
    f.store.close(clean=False)

    again = _Frontier(tmp_path)
    staged = again.gate.open_feed(path, {"format": "json"})
    assert Path(path).read_bytes() == b'[{"n": 1}'
    exporter = JsonItemExporter(cast(Any, staged))
    exporter.start_exporting()
    exporter.export_item({"n": 2})
    again.gate.mark(None)
    exporter.finish_exporting()
    again.gate.close_feed(staged)  # as a full batch: closed once all is written
    again.commit()
    assert json.loads(Path(path).read_text()) == [{"n": 1}, {"n": 2}]
    assert again.store.feed(path) == (len(b'[{"n": 1},{"n": 2}'), 2)  # "]" is not committed


def test_resume_continues_csv_without_a_second_header(tmp_path: Path) -> None:
    path = str(tmp_path / "items.csv")
    for run in (1, 2):
        f = _Frontier(tmp_path)
        staged = f.gate.open_feed(path, {"format": "csv"})
        exporter = CsvItemExporter(cast(Any, staged))
        exporter.start_exporting()
        exporter.export_item({"n": run})
        f.gate.mark(None)
        exporter.finish_exporting()
        f.gate.close_feed(staged)
        f.commit()
        f.store.close()
    assert Path(path).read_bytes() == b"n\r\n1\r\n2\r\n"


def test_closing_bytes_follow_the_committed_part_items_held_are_left_out(
        tmp_path: Path) -> None:
    f = _Frontier(tmp_path)
    path = str(tmp_path / "items.jsonl")
    Path(path).write_bytes(b"old\n")  # appended to (overwrite False): kept
    staged = f.gate.open_feed(path, {"format": "jsonlines"})
    f.out.add(5)
    staged.write(b"held\n")
    f.gate.mark(5)
    staged.write(b"tail")
    finish(staged)
    assert Path(path).read_bytes() == b"old\ntail"
    assert f.store.feed(path) == (4, 0)


def test_json_continued_without_items_stays_one_array(tmp_path: Path) -> None:
    """FEED_STORE_EMPTY: a resumed run that scrapes nothing opens and closes the feed."""
    path = str(tmp_path / "items.json")
    for run, items in ((1, [{"n": 1}]), (2, []), (3, [{"n": 3}])):
        f = _Frontier(tmp_path)
        staged = f.gate.open_feed(path, {"format": "json"})
        exporter = JsonItemExporter(cast(Any, staged), indent=1)
        exporter.start_exporting()
        for item in items:
            exporter.export_item(item)
            f.gate.mark(None)
        exporter.finish_exporting()
        f.gate.close_feed(staged)
        f.commit()
        f.store.close()
        assert json.loads(Path(path).read_text()) == [{"n": 1}] + ([{"n": 3}] if run == 3 else [])


def test_full_batch_is_closed_once_its_items_are_written(tmp_path: Path) -> None:
    f = _Frontier(tmp_path)
    first = str(tmp_path / "items-1.json")
    staged = f.gate.open_feed(first, {"format": "json"}, ("items-%(batch_id)d.json", 1))
    exporter = JsonItemExporter(cast(Any, staged))
    exporter.start_exporting()
    f.out.add(4)
    exporter.export_item({"n": 1})
    f.gate.mark(4)
    exporter.finish_exporting()
    f.gate.close_feed(staged)  # the batch is full while request 4 is still out
    f.commit()
    assert Path(first).read_bytes() == b"" and staged in f.gate.files
    f.out.discard(4)
    f.commit()
    assert json.loads(Path(first).read_text()) == [{"n": 1}]
    assert staged not in f.gate.files and staged.real.closed
    assert f.store.last_batch("items-%(batch_id)d.json") == (1, 1)


def test_salvage_keeps_the_feed_offsets(tmp_path: Path) -> None:
    from iri_scrapy.store.frontier_file import FILENAME, salvage

    jobdir = tmp_path / "job"
    jobdir.mkdir()
    store = FrontierStore(jobdir / FILENAME)
    store.set_feed("/x/items-2.jsonl", 120, 3, "/x/items-%(batch_id)d.jsonl", 2)
    store.close()
    salvage(jobdir, tmp_path / "out")
    again = FrontierStore(tmp_path / "out" / FILENAME)
    assert again.feed("/x/items-2.jsonl") == (120, 3)
    assert again.last_batch("/x/items-%(batch_id)d.jsonl") == (2, 3)
    again.close()


def test_a_feed_that_cannot_be_written_stops_the_crawl_loudly(tmp_path: Path,
                                                              caplog: Any) -> None:
    from iri_scrapy.frontier.feeds import REASON_FEED_WRITE_FAILED

    f = _Frontier(tmp_path)
    stops: list[str] = []
    f.gate._stop = stops.append
    path = str(tmp_path / "items.jsonl")
    staged = f.gate.open_feed(path, {"format": "jsonlines"})
    staged.real.close()

    class _Full:
        def write(self, data: bytes) -> int:
            raise OSError(28, "No space left on device")

    staged.real = _Full()  # every write fails from now on
    f.out.add(1)
    staged.write(b'{"a": 1}\n')
    f.gate.mark(1)
    f.out.discard(1)
    assert f.gate.settle([1]) == []
    f.commit()
    assert stops == [REASON_FEED_WRITE_FAILED]
    assert f.released == []  # its row stays pending: fetched again by the next run
    assert f.store.feed(path) == (0, 0)
    assert sum(r.levelname == "ERROR" for r in caplog.records) == 1
