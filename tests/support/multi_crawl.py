"""Run several Scrapy crawlers in ONE process (phases in turn, the crawls of a phase at once).

``python -m tests.support.multi_crawl CONFIG.json RESULT.json``.  What the
one-crawl harness (:mod:`tests.support.crawl`) cannot show: two crawlers sharing
a process, one with the add-on and one without, or several add-on orders run by
one interpreter.  CONFIG::

    {"proxy": "http://127.0.0.1:PORT",
     "phases": [[{"name": "a", "spider": "module.Class", "settings": {...},
                  "kwargs": {...}, "hold_until_closed": "b"}, ...], ...]}

Every request goes through the test proxy (``ForceProxyMiddleware``).  A crawl
with ``hold_until_closed`` stays open (idle) until the named crawl of its phase
has closed: the two surely overlap.  RESULT maps each name to its ``stats``,
``errors`` and the spider's ``record`` (a dict the test spiders fill).
Like the rest of :mod:`tests.support`, nothing here imports the IRI core.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["main"]


def _run(config: dict[str, Any]) -> dict[str, Any]:
    from scrapy.utils.reactor import install_reactor

    install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
    from scrapy import signals
    from scrapy.crawler import Crawler, CrawlerRunner
    from scrapy.exceptions import DontCloseSpider
    from scrapy.utils.log import configure_logging
    from twisted.internet import defer, reactor

    from tests.support.spider import load_object

    configure_logging({"LOG_LEVEL": "INFO"})
    results: dict[str, Any] = {}
    runner = CrawlerRunner()

    def start(spec: dict[str, Any], crawlers: dict[str, Crawler]) -> defer.Deferred[Any]:
        settings = {
            "ROBOTSTXT_OBEY": False, "TELNETCONSOLE_ENABLED": False, "LOG_LEVEL": "INFO",
            "IRI_SCRAPY_TEST_PROXY": config["proxy"],
            "CLOSESPIDER_TIMEOUT": 120,  # bound for a held crawl
            **spec.get("settings", {}),
        }
        mws = dict(settings.get("DOWNLOADER_MIDDLEWARES") or {})
        mws["tests.support.crawl.ForceProxyMiddleware"] = 1
        settings["DOWNLOADER_MIDDLEWARES"] = mws
        crawler = Crawler(load_object(spec["spider"]), settings)
        crawlers[spec["name"]] = crawler
        out: dict[str, Any] = {"errors": []}
        results[spec["name"]] = out
        hold = spec.get("hold_until_closed")

        def idle(**_: Any) -> None:
            if hold is not None and hold not in closed:
                raise DontCloseSpider

        def on_closed(spider: Any, **_: Any) -> None:
            closed.add(spec["name"])
            out["record"] = getattr(spider, "record", {})
            for other in phase_specs:
                if other.get("hold_until_closed") == spec["name"]:
                    held = crawlers.get(other["name"])
                    if held is not None and held.crawling:
                        held.stop()

        keep.extend((idle, on_closed))  # the signal manager holds weak references
        crawler.signals.connect(idle, signal=signals.spider_idle)
        crawler.signals.connect(on_closed, signal=signals.spider_closed)
        d = runner.crawl(crawler, **spec.get("kwargs", {}))

        def done(result: Any) -> Any:
            out["stats"] = crawler.stats.get_stats() if crawler.stats is not None else {}
            return result

        d.addBoth(done)
        d.addErrback(lambda failure: out["errors"].append(failure.getTraceback()))
        return d

    closed: set[str] = set()
    keep: list[Any] = []
    phase_specs: list[dict[str, Any]] = []

    @defer.inlineCallbacks
    def phases() -> Any:
        try:
            for phase in config["phases"]:
                phase_specs[:] = phase
                crawlers: dict[str, Crawler] = {}
                yield defer.DeferredList([start(spec, crawlers) for spec in phase])
        finally:
            reactor.stop()  # type: ignore[attr-defined]

    reactor.callWhenRunning(phases)  # type: ignore[attr-defined]
    reactor.run()  # type: ignore[attr-defined]
    return results


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        print("usage: python -m tests.support.multi_crawl CONFIG.json RESULT.json",
              file=sys.stderr)
        return 2
    config = json.loads(Path(args[0]).read_text(encoding="utf-8"))
    results = _run(config)
    Path(args[1]).write_text(json.dumps(results, default=str, ensure_ascii=False),
                             encoding="utf-8")
    return 1 if any(r["errors"] for r in results.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
