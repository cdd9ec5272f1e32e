"""A crawl's report: the duplicates the dupefilter dropped, in bounded memory, as data.

The add-on's dupefilter hands every duplicate it drops to a :class:`CrawlReport`
(:mod:`iri_scrapy.plugin.report_extension` ties it to the crawler): counted under
the rung that decided it (``iri/dupefilter/decided_by/<rung>``: a rung of RFC
3987 section 5.3, ``fragment`` for section 5.1, ``heuristics`` for the opt-in
query rules); the fetches stock Scrapy's fingerprint would have made and we did
not are counted once per distinct stock fingerprint (the first duplicate that
carries it), not once per dropped request.  It is written into ``JOBDIR`` as
``iri_report.json`` (a temporary file, then ``os.replace``: a reader sees the old
file or the new one, never half) while the crawl runs and at close; a resumed
job reads it back and goes on counting, so that the file covers every run of the
job (``runs``).  ``iri-scrapy report JOBDIR`` renders it as the page of ``dedupe
--report`` (:mod:`iri_scrapy.store.report_page`).

Memory is bounded whatever the crawl's size: counters per rung, at most
:data:`~iri_scrapy.store.dedupe.MAX_HOSTS` host counters (the smallest dropped
when full: lower bounds past that, as the page says) and up to
:data:`~iri_scrapy.store.dedupe.MAX_CLUSTERS` alias clusters (at most
:data:`CLUSTERS_PER_RUNG` opened by one rung, so that the sample shows more than
the commonest rung) of up to :data:`~iri_scrapy.store.dedupe.MAX_CLUSTER_SPELLINGS`
spellings each.

Reading the file back treats it as data: :meth:`CrawlReport.from_dict` checks
every field's type and bound and refuses anything else with one line
(:class:`ReportError`); nothing in it is evaluated or unpickled.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iri_scrapy.core.errors import IRIScrapyError
from iri_scrapy.core.ladder import Level
from iri_scrapy.store.dedupe import (
    MAX_CLUSTER_SPELLINGS,
    MAX_CLUSTERS,
    MAX_HOSTS,
    MAX_SAMPLED_LENGTH,
    RUNG_KEYS,
    _host_of,
)

#: The report's file name in ``JOBDIR``.
FILENAME = "iri_report.json"
FORMAT = "iri-scrapy crawl report"
FORMAT_VERSION = 2
#: What the dupefilter's ``decided_by`` names besides the ladder's rungs: only the
#: fragment differed (RFC 3987 section 5.1), an opt-in query heuristic (not RFC).
DECIDED_KEYS: tuple[str, ...] = (*RUNG_KEYS, "heuristics")
#: Alias clusters one deciding rung may open (of :data:`MAX_CLUSTERS`).
CLUSTERS_PER_RUNG = 6
#: At level protocol: requests learned rules kept from being fetched just before
#: download (they had passed the dupefilter before the rule was known).
PROTOCOL_SKIPPED = ("iri/protocol/skipped_at_download", "iri/protocol/alias-first")
#: Scrapy stats copied into the report (the cards of the page).
CRAWL_STATS = ("scheduler/enqueued", "downloader/request_count", "downloader/response_count",
               "item_scraped_count", *PROTOCOL_SKIPPED)
#: Hosts written to the file (the page shows the first 15): all that are counted, so
#: that a resumed job goes on with every counter.
HOSTS_WRITTEN = MAX_HOSTS

# Bounds of a file read back (generous: a later version may sample more).
_MAX_FILE_BYTES = 8 * 2**20
_MAX_TEXT = 4 * MAX_SAMPLED_LENGTH
_MAX_LIST = max(1000, HOSTS_WRITTEN)
_NAME = re.compile(r"[a-z][a-z0-9_]{0,31}\Z")
_STAT = re.compile(r"[A-Za-z0-9_/.:-]{1,80}\Z")
_ID = re.compile(r"[0-9a-z]{1,40}\Z")


class ReportError(IRIScrapyError, ValueError):
    """A report file that cannot be used: one line saying where and why."""


@dataclass(slots=True)
class Alias:
    """A later spelling of a sampled resource and what decided it a duplicate."""

    spelling: str
    decided_by: str
    stock_alias: bool  #: stock Scrapy's fingerprint would have fetched it as another page


@dataclass(slots=True)
class Cluster:
    """A resource met under several spellings: its key, the first spelling, the others."""

    key: str
    first: str
    first_known: bool  #: False: *first* is the key (the first spelling was not kept)
    aliases: list[Alias] = field(default_factory=list)


@dataclass(slots=True)
class CrawlReport:
    """What one crawl's dupefilter dropped (see the module docstring)."""

    level: str = "scheme"
    keep_fragment: bool = False
    nfc: bool = False
    spider: str = ""
    finish_reason: str = ""
    started: str = ""  #: ISO 8601, UTC
    finished: str = ""
    elapsed_seconds: float = 0.0
    requests: int = 0
    #: the runs of the job this report covers (a ``JOBDIR`` crawl resumed: one more)
    runs: int = 1
    #: records of the job's stock fingerprints file these counts stand for (see
    #: :class:`~iri_scrapy.store.report_state.StockSeen`)
    stock_records: int = 0
    decided_by: dict[str, int] = field(default_factory=dict)
    #: per deciding rung, the fetches stock Scrapy's fingerprint would have made
    #: (one per distinct stock fingerprint, under the rung of its first duplicate)
    stock_by: dict[str, int] = field(default_factory=dict)
    crawl_stats: dict[str, int] = field(default_factory=dict)
    #: host (A-label) -> [aliases, of them stock Scrapy would have fetched]
    hosts: dict[str, list[int]] = field(default_factory=dict)
    hosts_pruned: bool = False
    clusters: dict[str, Cluster] = field(default_factory=dict)

    # --- collecting (the dupefilter, once per duplicate) --------------------------

    @property
    def duplicates(self) -> int:
        return sum(self.decided_by.values())

    @property
    def stock_aliases(self) -> int:
        return sum(self.stock_by.values())

    def duplicate(self, token: str, key: str, written: str, first: str | None, rung: str,
                  stock_alias: bool, stock_new: bool | None = None) -> None:
        """One dropped duplicate: written *written*, of the resource whose fingerprint
        is *token* and key *key*, first spelled *first* (None: not kept), decided by
        *rung*; whether stock Scrapy's fingerprint tells it apart from the page we
        fetched (*stock_alias*), and whether that is a fetch not counted yet
        (*stock_new*: its stock fingerprint met for the first time; default
        *stock_alias*)."""
        if stock_new is None:
            stock_new = stock_alias
        decided = self.decided_by
        decided[rung] = decided.get(rung, 0) + 1
        if stock_new:
            self.stock_by[rung] = self.stock_by.get(rung, 0) + 1
        if rung == "simple":  # the same spelling again: a repeated link, not an alias
            return
        host = _host_of(key)
        counts = self.hosts.get(host)
        if counts is None:
            counts = self.hosts[host] = [0, 0]
            if len(self.hosts) > MAX_HOSTS:
                keep = sorted(self.hosts.items(), key=lambda kv: -kv[1][0])[: MAX_HOSTS // 2]
                self.hosts = dict(keep)
                self.hosts_pruned = True
        counts[0] += 1
        counts[1] += stock_new
        if len(written) > MAX_SAMPLED_LENGTH:
            return
        cluster = self.clusters.get(token)
        if cluster is None:
            shown = first or key
            if (len(self.clusters) >= MAX_CLUSTERS or written == shown
                    or len(shown) > MAX_SAMPLED_LENGTH or len(key) > MAX_SAMPLED_LENGTH):
                return
            opened = sum(1 for c in self.clusters.values() if c.aliases[0].decided_by == rung)
            if opened >= CLUSTERS_PER_RUNG:
                return
            cluster = self.clusters[token] = Cluster(key, shown, first is not None)
        elif (len(cluster.aliases) + 1 >= MAX_CLUSTER_SPELLINGS or written == cluster.first
              or any(a.spelling == written for a in cluster.aliases)):
            return
        cluster.aliases.append(Alias(written, rung, stock_alias))

    def top_hosts(self, n: int = 15) -> list[tuple[str, int, int]]:
        """``(host, aliases, stock aliases)`` of the *n* hosts with most aliases."""
        rows = sorted(self.hosts.items(), key=lambda kv: (-kv[1][0], kv[0]))[:n]
        return [(host, a, s) for host, (a, s) in rows]

    # --- the file -------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The JSON document (``iri_report.json``)."""
        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "spider": self.spider,
            "finish_reason": self.finish_reason,
            "started": self.started,
            "finished": self.finished,
            "elapsed_seconds": round(self.elapsed_seconds, 3),
            "options": {"level": self.level, "keep_fragment": self.keep_fragment,
                        "nfc": self.nfc},
            "runs": self.runs,
            "stock_records": self.stock_records,
            "totals": {"requests": self.requests, "duplicates": self.duplicates,
                       "stock_aliases": self.stock_aliases},
            "duplicates_by_rung": dict(self.decided_by),
            "stock_aliases_by_rung": dict(self.stock_by),
            "crawl_stats": dict(self.crawl_stats),
            "hosts": [{"host": h, "aliases": a, "stock_aliases": s}
                      for h, a, s in self.top_hosts(HOSTS_WRITTEN)],
            "hosts_pruned": self.hosts_pruned,
            "clusters": [
                {"id": token, "key": c.key, "first": c.first, "first_known": c.first_known,
                 "aliases": [{"spelling": a.spelling, "decided_by": a.decided_by,
                              "stock_alias": a.stock_alias} for a in c.aliases]}
                for token, c in self.clusters.items() if c.aliases],
        }

    def write(self, directory: str | os.PathLike[str]) -> Path:
        """Write ``<directory>/iri_report.json`` atomically; its path."""
        path = Path(directory, FILENAME)
        text = json.dumps(self.to_dict(), indent=1, ensure_ascii=True) + "\n"
        write_atomically(path, text)
        return path

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> CrawlReport:
        """The report in the JSON file at *path*; :class:`ReportError` (one line) if it
        cannot be read or is not a report this package wrote; ``OSError`` if unreadable."""
        with open(path, "rb") as f:
            raw = f.read(_MAX_FILE_BYTES + 1)
        if len(raw) > _MAX_FILE_BYTES:
            raise ReportError(f"larger than {_MAX_FILE_BYTES // 2**20} MiB: not a report")
        try:
            doc = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise ReportError(f"not UTF-8 (byte {exc.start})") from None
        except json.JSONDecodeError as exc:
            raise ReportError(f"not JSON: {exc.msg} at line {exc.lineno} column "
                              f"{exc.colno}") from None
        except RecursionError:
            raise ReportError("not JSON: nested too deeply") from None
        return cls.from_dict(doc)

    @classmethod
    def from_dict(cls, doc: Any) -> CrawlReport:
        """The report in *doc* (parsed JSON), every field checked (:class:`ReportError`)."""
        d = _Fields(doc, "the file")
        if d.raw.get("format") != FORMAT:
            raise ReportError(f"not an iri-scrapy crawl report (no \"format\": \"{FORMAT}\")")
        version = d.count("format_version")
        if version != FORMAT_VERSION:
            raise ReportError(f"format_version {version}: this iri-scrapy reads "
                              f"version {FORMAT_VERSION}")
        options = d.obj("options")
        level = options.string("level")
        try:
            Level.coerce(level)
        except ValueError as exc:
            raise ReportError(f"options.level: {exc}") from None
        totals = d.obj("totals")
        report = cls(
            level=level.lower(), keep_fragment=options.flag("keep_fragment"),
            nfc=options.flag("nfc"), spider=d.string("spider"),
            finish_reason=d.string("finish_reason"), started=d.string("started"),
            finished=d.string("finished"), elapsed_seconds=d.seconds("elapsed_seconds"),
            requests=totals.count("requests"), runs=d.count("runs"),
            stock_records=d.count("stock_records"),
            decided_by=d.counters("duplicates_by_rung", _NAME),
            stock_by=d.counters("stock_aliases_by_rung", _NAME),
            crawl_stats=d.counters("crawl_stats", _STAT),
            hosts_pruned=d.flag("hosts_pruned"),
        )
        if report.runs < 1:
            raise ReportError("runs: expected 1 or more, got 0")
        if totals.count("duplicates") != report.duplicates:
            raise ReportError(f"duplicates_by_rung sums to {report.duplicates:,}, "
                              f"totals.duplicates is {totals.count('duplicates'):,}")
        if totals.count("stock_aliases") != report.stock_aliases:
            raise ReportError(f"stock_aliases_by_rung sums to {report.stock_aliases:,}, "
                              f"totals.stock_aliases is {totals.count('stock_aliases'):,}")
        for rung, n in report.stock_by.items():
            if n > report.decided_by.get(rung, 0):
                raise ReportError(f"stock_aliases_by_rung.{rung}: {n:,} is more than the "
                                  f"{report.decided_by.get(rung, 0):,} duplicates of that rung")
        for i, h in enumerate(d.entries("hosts")):
            host = _Fields(h, f"hosts[{i}]")
            aliases, stock = host.count("aliases"), host.count("stock_aliases")
            if stock > aliases:
                raise ReportError(f"hosts[{i}].stock_aliases: more than its aliases")
            report.hosts[host.string("host")] = [aliases, stock]
        for i, c in enumerate(d.entries("clusters")):
            cl = _Fields(c, f"clusters[{i}]")
            token = cl.string("id")
            if _ID.match(token) is None or token in report.clusters:
                raise ReportError(f"clusters[{i}].id: not a fingerprint, or repeated")
            cluster = Cluster(cl.string("key"), cl.string("first"), cl.flag("first_known"))
            for j, a in enumerate(cl.entries("aliases")):
                al = _Fields(a, f"clusters[{i}].aliases[{j}]")
                rung = al.string("decided_by")
                if _NAME.match(rung) is None:
                    raise ReportError(f"clusters[{i}].aliases[{j}].decided_by: not a rung name")
                cluster.aliases.append(Alias(al.string("spelling"), rung, al.flag("stock_alias")))
            report.clusters[token] = cluster
        return report


def write_atomically(path: str | os.PathLike[str], text: str) -> None:
    """Write *text* (UTF-8) to *path* through a temporary file in the same directory and
    ``os.replace``: a reader finds the old file or the new one, never a part."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class _Fields:
    """Typed access to one JSON object of a report file; errors name the field."""

    def __init__(self, raw: Any, where: str) -> None:
        if not isinstance(raw, dict):
            raise ReportError(f"{where}: expected an object, got {_kind(raw)}")
        self.raw: Mapping[str, Any] = raw
        self.where = "" if where == "the file" else where + "."

    def _get(self, name: str) -> Any:
        if name not in self.raw:
            raise ReportError(f"{self.where}{name}: missing")
        return self.raw[name]

    def _bad(self, name: str, want: str, value: Any) -> ReportError:
        return ReportError(f"{self.where}{name}: expected {want}, got {_kind(value)}")

    def count(self, name: str) -> int:
        value = self._get(name)
        if type(value) is not int or value < 0:
            raise self._bad(name, "a count (an integer, 0 or more)", value)
        return value

    def seconds(self, name: str) -> float:
        value = self._get(name)
        if type(value) not in (int, float) or not 0 <= value < 1e12:
            raise self._bad(name, "a number of seconds", value)
        return float(value)

    def flag(self, name: str) -> bool:
        value = self._get(name)
        if type(value) is not bool:
            raise self._bad(name, "true or false", value)
        return value

    def string(self, name: str) -> str:
        value = self._get(name)
        if not isinstance(value, str):
            raise self._bad(name, "a string", value)
        if len(value) > _MAX_TEXT:
            raise ReportError(f"{self.where}{name}: longer than {_MAX_TEXT:,} characters")
        return value

    def obj(self, name: str) -> _Fields:
        return _Fields(self._get(name), self.where + name)

    def entries(self, name: str) -> list[Any]:
        value = self._get(name)
        if not isinstance(value, list):
            raise self._bad(name, "a list", value)
        if len(value) > _MAX_LIST:
            raise ReportError(f"{self.where}{name}: more than {_MAX_LIST:,} entries")
        return value

    def counters(self, name: str, names: re.Pattern[str]) -> dict[str, int]:
        sub = self.obj(name)
        if len(sub.raw) > 64:
            raise ReportError(f"{self.where}{name}: more than 64 entries")
        out = {}
        for key in sub.raw:
            if names.match(key) is None:
                raise ReportError(f"{self.where}{name}: {json.dumps(key)[:40]} is not a name")
            out[key] = sub.count(key)
        return out


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true or false"
    return {dict: "an object", list: "a list", str: "a string", int: "an integer",
            float: "a number"}.get(type(value), type(value).__name__)
