"""Run a Scrapy crawl of the alias web in a subprocess and collect its results.

Scrapy's Twisted reactor cannot be restarted inside one process, so every crawl
runs as ``python -m tests.support.crawl CONFIG.json RESULT.json``.  The parent
(:func:`run_crawl`) writes the config, waits (bounded by progress, see
:mod:`tests.support.watch`), and reads the result.

All requests are routed through the alias-web proxy by :class:`ForceProxyMiddleware`,
which sets ``request.meta["proxy"]`` before Scrapy's ``HttpProxyMiddleware`` runs
(the proxy env vars are also set for the child, ``no_proxy`` is removed).

Set ``IRI_SCRAPY_DEPRECATIONS_AS_ERRORS=1`` in *env* to turn
``ScrapyDeprecationWarning`` into errors inside the child (a crawl that then fails to
start shows it in :attr:`CrawlResult.errors`, ``returncode == 1``, ``finish_reason is
None``; one raised inside a callback is logged, see ``stats["log_count/ERROR"]``).
Without the flag, deprecation warnings shown during the crawl are recorded in
:attr:`CrawlResult.warnings`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from tests.support.watch import CEILING, STALL, Stalled, size_of, wait_exit

__all__ = [
    "DEFAULT_SETTINGS",
    "DEPRECATIONS_ENV",
    "PROGRESS_STATS",
    "CrawlError",
    "CrawlResult",
    "CrawlTimeout",
    "ForceProxyMiddleware",
    "run_crawl",
]

DEPRECATIONS_ENV = "IRI_SCRAPY_DEPRECATIONS_AS_ERRORS"
PROXY_SETTING = "IRI_SCRAPY_TEST_PROXY"
_PROXY_MW = "tests.support.crawl.ForceProxyMiddleware"
_REPO_ROOT = Path(__file__).resolve().parents[2]

DEFAULT_SETTINGS: dict[str, Any] = {
    "ROBOTSTXT_OBEY": False,
    "LOG_LEVEL": "INFO",
    "TELNETCONSOLE_ENABLED": False,
    "CONCURRENT_REQUESTS": 8,
    "CONCURRENT_REQUESTS_PER_DOMAIN": 8,
    "DOWNLOAD_DELAY": 0,
    "AUTOTHROTTLE_ENABLED": False,
    # generous: with retries off, a download that times out on a busy machine is a
    # page lost; the crawl as a whole is bounded by run_crawl (progress, ceiling)
    "DOWNLOAD_TIMEOUT": 120,
    "RETRY_ENABLED": False,
    "CLOSESPIDER_TIMEOUT": 0,
    "HTTPCACHE_ENABLED": False,
}
"""Settings for a fast, deterministic local crawl; anything passed to run_crawl wins."""

#: Stats whose change shows that a crawl is moving (written by the child to a file).
PROGRESS_STATS = (
    "scheduler/enqueued", "scheduler/dequeued", "downloader/request_count",
    "downloader/response_count", "downloader/exception_count", "response_received_count",
    "item_scraped_count", "dupefilter/filtered", "log_count/INFO", "log_count/WARNING",
    "log_count/ERROR",
)


class CrawlError(RuntimeError):
    """The crawl subprocess failed without writing a result."""


class CrawlTimeout(CrawlError):
    """The crawl subprocess stalled (or ran past the ceiling) and was killed."""


@dataclass
class CrawlResult:
    """What one crawl produced."""

    stats: dict[str, Any]
    items: list[dict[str, Any]]
    finish_reason: str | None
    returncode: int
    stderr: str
    stdout: str = ""
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    cpu_seconds: float | None = None
    """CPU time of the crawl process from ``spider_opened`` to ``spider_closed``
    (start-up and imports excluded), or None if the spider never opened."""

    @property
    def ok(self) -> bool:
        """True if the crawl ran to a ``finished`` close without startup errors."""
        return self.returncode == 0 and not self.errors and self.finish_reason == "finished"

    @property
    def urls(self) -> list[str]:
        """The ``url`` of every scraped item, in order."""
        return [str(i.get("url")) for i in self.items]

    def status_counts(self) -> Counter[int]:
        """Responses per HTTP status, from ``downloader/response_status_count/*`` stats."""
        prefix = "downloader/response_status_count/"
        return Counter(
            {int(k[len(prefix):]): int(v) for k, v in self.stats.items() if k.startswith(prefix)}
        )


class ForceProxyMiddleware:
    """Downloader middleware: send every request through the alias-web proxy.

    Reads the proxy URL from the ``IRI_SCRAPY_TEST_PROXY`` setting and sets
    ``meta["proxy"]`` unless the request already has one; Scrapy's own
    ``HttpProxyMiddleware`` (priority 750) then does the proxying.
    """

    def __init__(self, proxy_url: str) -> None:
        self.proxy_url = proxy_url

    @classmethod
    def from_crawler(cls, crawler: Any) -> ForceProxyMiddleware:
        """Build from the crawler's settings (NotConfigured if no proxy is set)."""
        from scrapy.exceptions import NotConfigured

        proxy = crawler.settings.get(PROXY_SETTING)
        if not proxy:
            raise NotConfigured(f"{PROXY_SETTING} not set")
        return cls(str(proxy))

    def process_request(self, request: Any) -> None:
        """Route *request* through the proxy."""
        request.meta.setdefault("proxy", self.proxy_url)


def _import_path(obj: Any) -> str:
    return f"{obj.__module__}.{obj.__qualname__}"


def _jsonable(value: Any) -> Any:
    """Make settings JSON-able: classes and functions become their import paths."""
    if isinstance(value, (type, ModuleType)) or callable(value):
        return value.__name__ if isinstance(value, ModuleType) else _import_path(value)
    if isinstance(value, Mapping):
        return {(_jsonable(k) if not isinstance(k, str) else k): _jsonable(v)
                for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in value]
    return value


def _child_env(proxy_url: str, extra: Mapping[str, str] | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k.lower() not in {"no_proxy", "http_proxy", "https_proxy", "all_proxy"}
           and k != "SCRAPY_SETTINGS_MODULE"}
    env["http_proxy"] = env["HTTP_PROXY"] = proxy_url
    env["PYTHONIOENCODING"] = "utf-8"
    if extra:
        env.update(extra)
    # the repo root always comes first, so the child imports this checkout's iri_scrapy
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_REPO_ROOT), env.get("PYTHONPATH")) if p)
    return env


def run_crawl(
    settings: Mapping[str, Any],
    start_urls: Sequence[str],
    proxy_url: str,
    *,
    stall: float = STALL,
    ceiling: float = CEILING,
    timeout: float | None = None,
    jobdir: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    spider_kwargs: Mapping[str, Any] | None = None,
    spider: str | None = None,
    cpus: Sequence[int] | None = None,
    wrapper: Sequence[str] = (),
    started: Callable[[subprocess.Popen[bytes], Path], None] | None = None,
) -> CrawlResult:
    """Crawl *start_urls* with :class:`AliasSpider` in a subprocess, through *proxy_url*.

    *settings* override :data:`DEFAULT_SETTINGS`; classes may be given as objects or
    import paths (e.g. ``{"DUPEFILTER_CLASS": "pkg.mod.Cls"}``).  *jobdir* sets
    ``JOBDIR`` (run twice with the same *jobdir* to resume).  *env* adds environment
    variables for the child.  *spider* is the import path of another spider class
    (it gets ``start_urls`` and *spider_kwargs*; default :class:`AliasSpider`).
    *cpus* pins the child to those CPUs (``os.sched_setaffinity``, set by the
    child itself first thing).  *wrapper* is an argv the child command is run
    under (e.g. ``["valgrind", "--tool=callgrind", ...]``).
    *started*, if given, is called with the child process and the path of the file
    its stderr (the crawl's log) goes to, once it has started.

    The wait is bounded by progress, not by a wall-clock deadline (a busy machine
    makes a crawl slow, not wrong): :class:`CrawlTimeout` is raised (the child
    killed) when for *stall* seconds the crawl has written no log line, changed
    none of its :data:`PROGRESS_STATS` and used no CPU worth mentioning, or after
    *ceiling* seconds in all.  *timeout* (the older name) raises *stall* to at
    least that.  :class:`CrawlError` if no result was written.
    """
    if timeout is not None:
        stall = max(stall, timeout)
    merged: dict[str, Any] = dict(DEFAULT_SETTINGS)
    merged.update(_jsonable(dict(settings)))
    if jobdir is not None:
        merged["JOBDIR"] = os.fspath(jobdir)
    merged[PROXY_SETTING] = proxy_url
    mws = dict(merged.get("DOWNLOADER_MIDDLEWARES") or {})
    mws.setdefault(_PROXY_MW, 50)
    merged["DOWNLOADER_MIDDLEWARES"] = mws
    config = {
        "settings": merged,
        "start_urls": list(start_urls),
        "spider_kwargs": _jsonable(dict(spider_kwargs or {})),
        "spider": spider,
        "cpus": list(cpus) if cpus is not None else None,
    }
    with tempfile.TemporaryDirectory(prefix="iri-crawl-") as tmp:
        cfg_path = Path(tmp, "config.json")
        out_path = Path(tmp, "result.json")
        progress_path = Path(tmp, "progress")
        stdout_path, stderr_path = Path(tmp, "stdout"), Path(tmp, "stderr")
        config["progress"] = str(progress_path)
        cfg_path.write_text(json.dumps(config, ensure_ascii=False), encoding="utf-8")
        cmd = [*wrapper, sys.executable, "-m", "tests.support.crawl", str(cfg_path),
               str(out_path)]

        def stderr_tail() -> str:
            return stderr_path.read_bytes()[-3000:].decode("utf-8", "replace")

        with stdout_path.open("wb") as out, stderr_path.open("wb") as err:
            proc = subprocess.Popen(  # noqa: S603 - fixed argv, our own module
                cmd, stdout=out, stderr=err, env=_child_env(proxy_url, env),
                stdin=subprocess.DEVNULL,
            )
            try:
                if started is not None:
                    started(proc, stderr_path)
                wait_exit(proc, size_of(stderr_path), size_of(stdout_path),
                          _content_of(progress_path), what="crawl", stall=stall,
                          ceiling=ceiling)
            except Stalled as exc:  # wait_exit has killed the child
                raise CrawlTimeout(f"{exc}; stderr tail:\n{stderr_tail()}") from exc
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        stdout = stdout_path.read_bytes().decode("utf-8", "replace")
        stderr = stderr_path.read_bytes().decode("utf-8", "replace")
        if not out_path.exists():
            raise CrawlError(
                f"crawl exited {proc.returncode} without a result; stderr tail:\n"
                f"{stderr[-3000:]}"
            )
        data = json.loads(out_path.read_text(encoding="utf-8"))
    return CrawlResult(
        stats=data["stats"],
        items=data["items"],
        finish_reason=data["finish_reason"],
        returncode=proc.returncode,
        stderr=stderr,
        stdout=stdout,
        warnings=data.get("warnings", []),
        errors=data.get("errors", []),
        cpu_seconds=data.get("cpu_seconds"),
    )


def _content_of(path: Path) -> Callable[[], bytes | None]:
    """A progress signal: the content of the (small) file at *path*."""

    def signal() -> bytes | None:
        try:
            return path.read_bytes()
        except OSError:
            return None

    return signal


# --------------------------------------------------------------------------- child side


def _write_progress(crawler: Any, path: Path, last: list[str]) -> None:
    """Write the crawl's :data:`PROGRESS_STATS` to *path* when they changed."""
    stats = crawler.stats.get_stats() if crawler.stats is not None else {}
    text = json.dumps([stats.get(key) for key in PROGRESS_STATS], default=str)
    if text != last[0]:
        last[0] = text
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)


def _child(config_path: str, result_path: str) -> int:
    """Run one crawl as described by *config_path*; write the JSON result."""
    config = json.loads(Path(config_path).read_text(encoding="utf-8"))
    if config.get("cpus") is not None:
        os.sched_setaffinity(0, config["cpus"])
    from scrapy.exceptions import ScrapyDeprecationWarning

    if os.environ.get(DEPRECATIONS_ENV, "") not in ("", "0"):
        warnings.simplefilter("error", ScrapyDeprecationWarning)
    else:
        warnings.simplefilter("always", ScrapyDeprecationWarning)

    from scrapy import signals
    from scrapy.crawler import CrawlerProcess

    from tests.support.spider import AliasSpider, load_object

    items: list[dict[str, Any]] = []
    errors: list[str] = []
    recorded: list[str] = []
    process = CrawlerProcess(config["settings"])
    # Installed after CrawlerProcess: Scrapy's configure_logging() replaces showwarning.
    previous_show = warnings.showwarning

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: Any = None, line: str | None = None) -> None:
        if issubclass(category, ScrapyDeprecationWarning):
            recorded.append(f"{filename}:{lineno}: {category.__name__}: {message}")
        previous_show(message, category, filename, lineno, file, line)

    warnings.showwarning = show
    spider = config.get("spider")
    crawler = process.create_crawler(load_object(spider) if spider else AliasSpider)

    def on_item(item: Any, **_: Any) -> None:
        items.append(dict(item))

    cpu: dict[str, float] = {}
    # the parent's progress signal: the stats written twice a second while they change
    progress_path = Path(config["progress"]) if config.get("progress") else None
    last_progress = [""]
    progress: list[Any] = []

    def on_opened(**_: Any) -> None:
        cpu["opened"] = time.process_time()
        if progress_path is not None:
            from twisted.internet.task import LoopingCall

            loop = LoopingCall(_write_progress, crawler, progress_path, last_progress)
            loop.start(0.5, now=True)
            progress.append(loop)

    def on_closed(**_: Any) -> None:
        cpu["closed"] = time.process_time()
        for loop in progress:
            if loop.running:
                loop.stop()

    crawler.signals.connect(on_item, signal=signals.item_scraped)
    crawler.signals.connect(on_opened, signal=signals.spider_opened)
    crawler.signals.connect(on_closed, signal=signals.spider_closed)
    deferred = process.crawl(crawler, start_urls=config["start_urls"], **config["spider_kwargs"])
    deferred.addErrback(lambda failure: errors.append(failure.getTraceback()))
    process.start()
    stats = crawler.stats.get_stats() if crawler.stats is not None else {}
    result = {
        "stats": stats,
        "items": items,
        "finish_reason": stats.get("finish_reason"),
        "warnings": recorded,
        "errors": errors,
        # CPU time (user + system) of this process from spider_opened to spider_closed
        "cpu_seconds": cpu["closed"] - cpu["opened"] if len(cpu) == 2 else None,
    }
    Path(result_path).write_text(json.dumps(result, default=str, ensure_ascii=False),
                                 encoding="utf-8")
    # bootstrap_failed: what makes ``scrapy crawl`` exit with 1 (e.g. a start-up refusal)
    return 1 if errors or process.bootstrap_failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the crawl subprocess: ``CONFIG.json RESULT.json``."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        print("usage: python -m tests.support.crawl CONFIG.json RESULT.json",
              file=sys.stderr)
        return 2
    return _child(args[0], args[1])


if __name__ == "__main__":
    raise SystemExit(main())
