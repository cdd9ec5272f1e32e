"""Crawl the demo web twice -- stock Scrapy, then with iri_scrapy -- and compare.

Run from the repository root::

    python -m sample_project            # or: python sample_project/run_demo.py

The demo web (:data:`tests.support.site.DEMO_SITE`) is served on 127.0.0.1 by
:func:`tests.support.server.serve_site` for the length of the command; its hit
log is the referee (it resolves every request on its own, without the IRI core).
Each crawl is ``scrapy crawl demo`` of this project in a subprocess (a fresh
Twisted reactor each time); the stock run only adds ``-s ADDONS={}``.

Import :func:`run_demo` to get the numbers as a :class:`DemoReport`.
Exit status: 0 if the plugin fetched every resource exactly once, 1 if it did not
(the problems are printed), 2 if a crawl could not run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.server import Hit, serve_site
from tests.support.site import DEMO_SITE, Resource, ResourceKey, Site

__all__ = [
    "OUTPUT_DIR",
    "PROJECT_DIR",
    "CrawlRun",
    "DemoError",
    "DemoReport",
    "crawl_once",
    "main",
    "run_demo",
]

PROJECT_DIR = Path(__file__).resolve().parent
REPO_ROOT = PROJECT_DIR.parent
OUTPUT_DIR = PROJECT_DIR / "output"
DEFAULT_TIMEOUT = 90.0

#: name -> (column heading, extra ``-s`` settings for ``scrapy crawl demo``)
VARIANTS: dict[str, tuple[str, dict[str, str]]] = {
    "stock": ("stock Scrapy", {"ADDONS": "{}"}),
    "iri": ("iri_scrapy", {}),
}
#: The dupefilter's decided_by stats, in ladder order (RFC 3987 5.3.1-5.3.4, then 5.1).
RUNG_ORDER = ("simple", "case", "character", "percent", "path", "scheme", "protocol",
              "fragment", "heuristics")
RUNG_PREFIX = "iri/dupefilter/decided_by/"
NA = "-"


class DemoError(RuntimeError):
    """A crawl could not run or left no result."""


@dataclass
class CrawlRun:
    """One ``scrapy crawl demo`` and what the server saw of it."""

    name: str
    label: str
    site: Site
    stats: dict[str, Any]
    items: list[dict[str, Any]]
    hits: list[Hit]
    items_path: Path
    log_path: Path
    returncode: int

    @property
    def requests_sent(self) -> int:
        """Requests Scrapy's downloader sent (``downloader/request_count``)."""
        return int(self.stats.get("downloader/request_count", 0))

    @property
    def server_hits(self) -> int:
        """Requests the demo-web server answered."""
        return len(self.hits)

    @property
    def counts(self) -> Counter[ResourceKey]:
        """How often each resolved key was requested (404 keys included)."""
        return Counter(h.key for h in self.hits if h.key is not None)

    @property
    def fetched(self) -> frozenset[ResourceKey]:
        """Resources of the site that were fetched (answered 200 or 301)."""
        return frozenset(h.key for h in self.hits
                         if h.key is not None and h.status in (200, 301)) & self.site.keys

    @property
    def distinct_fetched(self) -> int:
        """How many distinct resources of the site were fetched."""
        return len(self.fetched)

    @property
    def duplicates(self) -> dict[ResourceKey, int]:
        """Keys requested more than once, with their counts."""
        return {k: n for k, n in self.counts.items() if n > 1}

    @property
    def duplicate_fetches(self) -> int:
        """Requests beyond the first for the same resource."""
        return sum(n - 1 for n in self.duplicates.values())

    @property
    def missed(self) -> list[Resource]:
        """Resources of the site never fetched, in site order."""
        fetched = self.fetched
        return [r for r in self.site if r.key not in fetched]

    @property
    def not_found(self) -> list[Hit]:
        """Requests answered 404 (a URL that names no resource of the site)."""
        return [h for h in self.hits if h.status == 404]

    @property
    def dupefilter_filtered(self) -> int:
        """Requests the dupefilter dropped (``dupefilter/filtered``)."""
        return int(self.stats.get("dupefilter/filtered", 0))

    @property
    def items_scraped(self) -> int:
        """``item_scraped_count``."""
        return int(self.stats.get("item_scraped_count", 0))

    @property
    def rungs(self) -> dict[str, int] | None:
        """The plugin's ``iri/dupefilter/decided_by/*`` stats, in ladder order (None without it)."""
        found = {k[len(RUNG_PREFIX):]: int(v) for k, v in self.stats.items()
                 if k.startswith(RUNG_PREFIX)}
        if not found and not any(k.startswith("iri/") for k in self.stats):
            return None
        known = [r for r in RUNG_ORDER if r in found]
        return {r: found[r] for r in [*known, *sorted(set(found) - set(known))]}

    @property
    def finish_reason(self) -> str | None:
        """Scrapy's ``finish_reason``."""
        value = self.stats.get("finish_reason")
        return None if value is None else str(value)

    @property
    def errors_logged(self) -> int:
        """``log_count/ERROR``."""
        return int(self.stats.get("log_count/ERROR", 0))


def _fmt(value: int | None) -> str:
    return NA if value is None else str(value)


def shown(iri: str) -> str:
    """*iri* for the report: an IRI that is not in NFC (``café`` spelled ``e`` + U+0301)
    would look exactly like its NFC twin, so its combining marks are written as
    escapes and a note is added: ``http://bücher.example/cafe\\u0301 (decomposed, not
    NFC)``."""
    if unicodedata.is_normalized("NFC", iri):
        return iri
    marks = "".join(f"\\u{ord(c):04x}" if unicodedata.combining(c) else c for c in iri)
    return f"{marks} (decomposed, not NFC)"


@dataclass
class DemoReport:
    """Both crawls of the demo web, side by side."""

    stock: CrawlRun
    iri: CrawlRun
    site: Site = DEMO_SITE

    def rows(self) -> list[tuple[str, str, str]]:
        """The table's rows: (label, stock value, iri_scrapy value); ``-`` = not applicable."""
        n = len(self.site.keys)
        s, i = self.stock, self.iri
        rows: list[tuple[str, str, str]] = []
        for label, get in (
            ("requests sent (Scrapy downloader)", lambda r: r.requests_sent),
            ("pages fetched (server hits)", lambda r: r.server_hits),
            (f"distinct resources fetched (of {n})", lambda r: r.distinct_fetched),
            ("duplicate fetches", lambda r: r.duplicate_fetches),
            ("duplicate requests dropped (dupefilter)", lambda r: r.dupefilter_filtered),
            ("resources missed", lambda r: len(r.missed)),
            ("404 Not Found", lambda r: len(r.not_found)),
            ("items scraped", lambda r: r.items_scraped),
        ):
            rows.append((label, str(get(s)), str(get(i))))
        s_rungs, i_rungs = s.rungs, i.rungs
        names = [*(i_rungs or {})] + [k for k in (s_rungs or {}) if k not in (i_rungs or {})]
        for rung in names:
            rows.append((f"  duplicates by rung: {rung}",
                         _fmt(None if s_rungs is None else s_rungs.get(rung, 0)),
                         _fmt(None if i_rungs is None else i_rungs.get(rung, 0))))
        rows.append(("  duplicates by rung: total",
                     _fmt(None if s_rungs is None else sum(s_rungs.values())),
                     _fmt(None if i_rungs is None else sum(i_rungs.values()))))
        return rows

    def problems(self) -> list[str]:
        """What went wrong; empty when the plugin fetched every resource exactly once."""
        out: list[str] = []
        for run in (self.stock, self.iri):
            if run.returncode != 0 or run.finish_reason != "finished":
                out.append(f"{run.label}: crawl ended with exit code {run.returncode}, "
                           f"finish_reason {run.finish_reason!r} (log: {run.log_path})")
        run = self.iri
        for key, count in sorted(run.duplicates.items()):
            out.append(f"{run.label} fetched {self._name(key)} {count} times")
        out.extend(f"{run.label} never fetched {shown(r.iri)} ({r.name})" for r in run.missed)
        out.extend(f"{run.label} got a 404 for {h.target}" for h in run.not_found)
        if run.items_scraped != len(self.site.page_keys):
            out.append(f"{run.label} scraped {run.items_scraped} items, "
                       f"expected {len(self.site.page_keys)} (one per page)")
        if run.errors_logged:
            out.append(f"{run.label} logged {run.errors_logged} error(s) (log: {run.log_path})")
        rungs = run.rungs or {}
        if run.dupefilter_filtered and sum(rungs.values()) != run.dupefilter_filtered:
            out.append(f"{run.label}: per-rung counts sum to {sum(rungs.values())}, not "
                       f"the {run.dupefilter_filtered} duplicates dropped")
        for r in (self.stock, self.iri):
            if len(r.items) != r.items_scraped:
                out.append(f"{r.label}: {r.items_path} has {len(r.items)} lines, "
                           f"stats say {r.items_scraped} items")
        return out

    @property
    def ok(self) -> bool:
        """True when there are no :meth:`problems`."""
        return not self.problems()

    def verdict(self) -> str:
        """The one-line verdict."""
        problems = self.problems()
        if problems:
            return f"Verdict: FAILED -- {problems[0]}" + (
                f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else "")
        s, n = self.stock, len(self.site.keys)
        return (f"Verdict: OK -- iri_scrapy fetched each of the {n} resources exactly once; "
                f"stock Scrapy sent {s.requests_sent} requests, {s.duplicate_fetches} of them "
                f"duplicates, and missed {len(s.missed)}.")

    def table(self) -> str:
        """The side-by-side table, a title line on top."""
        heads = ("", self.stock.label, self.iri.label)
        rows = self.rows()
        w0 = max(len(r[0]) for r in [heads, *rows])
        w1 = max(len(r[1]) for r in [heads, *rows])
        w2 = max(len(r[2]) for r in [heads, *rows])
        title = (f"iri_scrapy sample project: the demo web ({len(self.site.hosts)} hosts, "
                 f"{len(self.site.keys)} resources) crawled twice")
        rule = "-" * (w0 + w1 + w2 + 6)
        lines = [title, "=" * len(title),
                 f"{heads[0]:<{w0}}   {heads[1]:>{w1}}   {heads[2]:>{w2}}", rule]
        lines += [f"{a:<{w0}}   {b:>{w1}}   {c:>{w2}}" for a, b, c in rows]
        lines.append(rule)
        return "\n".join(lines)

    def details(self) -> str:
        """What each crawl missed, its 404s, and where the items are."""
        lines: list[str] = []
        if self.iri.rungs is not None:
            lines += ["Rungs (iri/dupefilter/decided_by/*): for each duplicate dropped, the "
                      "rung of RFC 3987 5.3", "at which its spelling and the first one became "
                      "equal; 'simple' = the very same string.", ""]
        for run in (self.stock, self.iri):
            if run.duplicates:
                lines.append(f"Fetched more than once by {run.label}:")
                dups = sorted(run.duplicates.items(), key=lambda kv: (-kv[1], kv[0]))
                lines += _wrap([f"{self._name(k)} x{n}" for k, n in dups])
            if run.missed:
                lines.append(f"Missed by {run.label}:")
                width = max(len(shown(r.iri)) for r in run.missed)
                for r in run.missed:
                    why = r.trap.split(": ", 1)[1] if r.trap and ": " in r.trap else (r.trap or "")
                    lines.append(f"  {shown(r.iri):<{width}}  {why}".rstrip())
            if run.not_found:
                targets = ", ".join(dict.fromkeys(h.target for h in run.not_found))
                lines.append(f"404s of {run.label}: {targets}")
        for run in (self.stock, self.iri):
            path = _display_path(run.items_path)
            lines.append(f"Items ({run.label}): {path} ({len(run.items)} lines)")
        return "\n".join([*lines, "", *self.numbers()])

    def numbers(self) -> list[str]:
        """What the table's numbers add up to, in words."""
        site, s, i = self.site, self.stock, self.iri
        pages, redirects = len(site.page_keys), sorted(site.redirect_keys)
        moved = ", ".join(self._name(k) for k in redirects)
        lines = [
            f"The numbers: the demo web has {len(site.keys)} resources, {pages} HTML pages "
            f"(one item each) and {len(redirects)} redirect{'s' if len(redirects) != 1 else ''}"
            f" ({moved}: a 301, no item).",
            f"  {i.label}: {i.requests_sent} requests = {i.distinct_fetched} resources "
            f"once each; {i.items_scraped} items = one per page.",
        ]
        distinct_items = len({item.get("url") for item in s.items})
        lines.append(
            f"  {s.label}: {s.requests_sent} requests = {s.distinct_fetched} resources + "
            f"{s.duplicate_fetches} duplicate fetches + {len(s.not_found)} 404s; "
            f"{s.items_scraped} items = {distinct_items} distinct pages + "
            f"{s.items_scraped - distinct_items} scraped again.")
        return lines

    def _name(self, key: ResourceKey) -> str:
        res = self.site.lookup(key)
        return shown(res.iri) if res is not None else f"http://{key.host}{key.path}" + (
            "" if key.query is None else "?" + key.query)

    def render(self) -> str:
        """Table, details and verdict, as printed by :func:`main`."""
        parts = [self.table(), self.details()]
        problems = self.problems()
        if problems:
            parts.append("Problems:\n" + "\n".join(f"  - {p}" for p in problems))
        parts.append(self.verdict())
        return "\n\n".join(parts)


def _wrap(entries: list[str], width: int = 100) -> list[str]:
    """Comma-separated *entries*, indented two spaces, never breaking inside one."""
    lines: list[str] = []
    line = ""
    for entry in entries:
        if line and len(line) + 2 + len(entry) > width:
            lines.append(line + ",")
            line = ""
        line = f"{line}, {entry}" if line else f"  {entry}"
    return [*lines, line] if line else lines


def _display_path(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _child_env() -> dict[str, str]:
    """The crawl's environment: this checkout first on the path, no stray Scrapy settings."""
    env = {k: v for k, v in os.environ.items() if k != "SCRAPY_SETTINGS_MODULE"}
    env["PYTHONIOENCODING"] = "utf-8"
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    return env


def _tail(path: Path, n: int = 3000) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")[-n:]
    except OSError:
        return "(no log)"


def crawl_once(name: str, proxy_url: str, output_dir: Path = OUTPUT_DIR,
               timeout: float = DEFAULT_TIMEOUT) -> tuple[int, dict[str, Any], list[dict[str, Any]],
                                                           Path, Path]:
    """Run ``scrapy crawl demo`` (variant *name*) through *proxy_url* in a subprocess.

    Returns (exit code, stats, items, items path, log path).  Raises
    :class:`DemoError` if the crawl times out or writes no stats.
    """
    label, extra = VARIANTS[name]
    output_dir.mkdir(parents=True, exist_ok=True)
    items_path = output_dir / f"items-{name}.jsonl"
    stats_path = output_dir / f"stats-{name}.json"
    log_path = output_dir / f"crawl-{name}.log"
    stats_path.unlink(missing_ok=True)
    settings = {
        "DEMO_WEB_PROXY": proxy_url,
        "DEMO_STATS_FILE": str(stats_path),
        "LOG_FILE": str(log_path),
        "LOG_FILE_APPEND": "False",
        **extra,
    }
    cmd = [sys.executable, "-m", "scrapy", "crawl", "demo", "-O", str(items_path)]
    for key, value in settings.items():
        cmd += ["-s", f"{key}={value}"]
    try:
        proc = subprocess.run(  # noqa: S603 - fixed argv
            cmd, cwd=PROJECT_DIR, env=_child_env(), stdin=subprocess.DEVNULL,
            capture_output=True, text=True, encoding="utf-8", errors="replace",
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        raise DemoError(f"{label} crawl ran longer than {timeout:g}s and was stopped; "
                        f"log tail:\n{_tail(log_path)}") from exc
    if not stats_path.exists():
        raise DemoError(f"{label} crawl exited {proc.returncode} without stats; "
                        f"stderr:\n{proc.stderr[-3000:]}\nlog tail:\n{_tail(log_path)}")
    stats = json.loads(stats_path.read_text(encoding="utf-8"))
    items: list[dict[str, Any]] = []
    if items_path.exists():
        with items_path.open(encoding="utf-8") as fh:
            items = [json.loads(line) for line in fh if line.strip()]
    return proc.returncode, stats, items, items_path, log_path


def run_demo(output_dir: Path = OUTPUT_DIR, timeout: float = DEFAULT_TIMEOUT) -> DemoReport:
    """Serve the demo web, crawl it with stock Scrapy and with iri_scrapy, return the numbers."""
    runs: dict[str, CrawlRun] = {}
    with serve_site(DEMO_SITE) as srv:
        for name, (label, _) in VARIANTS.items():
            srv.reset()
            code, stats, items, items_path, log_path = crawl_once(
                name, srv.proxy_url, output_dir, timeout)
            runs[name] = CrawlRun(name, label, DEMO_SITE, stats, items, srv.hits.hits,
                                  items_path, log_path, code)
    return DemoReport(stock=runs["stock"], iri=runs["iri"], site=DEMO_SITE)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: run both crawls, print the table; see the module docstring."""
    parser = argparse.ArgumentParser(
        prog="python -m sample_project",
        description="Crawl the local demo web with stock Scrapy and with iri_scrapy; compare.")
    parser.add_argument("--output-dir", type=Path, default=OUTPUT_DIR,
                        help="where items-*.jsonl, stats and logs go (default: %(default)s)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                        help="seconds allowed per crawl (default: %(default)s)")
    args = parser.parse_args(argv)
    with contextlib.suppress(AttributeError, ValueError):  # not a TextIOWrapper: leave it
        sys.stdout.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
    try:
        report = run_demo(args.output_dir.resolve(), args.timeout)
    except DemoError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(report.render())
    return 0 if report.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
