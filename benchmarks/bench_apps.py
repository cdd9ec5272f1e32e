"""Crawl two real web applications from PyPI beside stock Scrapy: Roundup and Trac.

Issue 30 asks what the learned protocol level (``IRI_LEVEL = "protocol"``,
docs/protocol.md) does on sites no one here wrote.  This script sets up an issue
tracker (Roundup, classic template) and a wiki with tickets (Trac), populated
through their own Python APIs (120 issues with messages, three pages of the
list; 20 wiki pages and 40 tickets, some edited or closed), serves each on 127.0.0.1 from its own
virtualenv (``--app-venv``, e.g. made with ``python -m venv /tmp/appsvenv &&
/tmp/appsvenv/bin/pip install Trac roundup``), and crawls it anonymously three
ways: stock Scrapy (no add-on), the add-on at its default level, the add-on at
``IRI_LEVEL = "protocol"``.  Each crawl is a plain ``CrawlSpider`` following
every link under the application's root, with ``DEPTH_LIMIT`` and
``CLOSESPIDER_PAGECOUNT`` as bounds, in its own subprocess.

The server hits are counted by a small reverse proxy in this process in front of
the application (every request the application answers).  Pages are judged by
content: the body with its per-request noise removed (scripts, hidden form
inputs, tokens of 16 or more letters with digits, relative ages such as "36
seconds ago", clocks) hashed; a page of stock (its URLs with one content) that
another crawl reached under none of those URLs and under no URL with that
content is *missed*; ``extra`` counts contents stock did not see (noise the
judge left, or pages stock did not reach); URLs of one crawl answering the same
content are an *alias group left unmerged*, each spelling classified against
the group's shortest by what differs (:func:`alias_kind`: ``paths``,
``param-order``, ``encoding``, ``empty-param``, ``extra-param``: a parameter
at its default value or one the page ignores, ``other``).  The content hash
only judges the crawl; it is not what the protocol level compares.

Run from the repository root (Scrapy from this venv, the applications from
theirs)::

    PYTHONPATH=$PWD python benchmarks/bench_apps.py --app-venv /tmp/appsvenv \
        [--apps roundup,trac] [--workdir DIR] [--depth 3] [--pages 1500] [--no-compression]

``--no-compression`` sets ``COMPRESSION_ENABLED = False`` in every crawl (no
``Accept-Encoding: gzip``): Roundup gzips its pages, and the protocol level's
content evidence is taken before Scrapy's ``HttpCompressionMiddleware`` decodes
the body, so on a gzipped site it compares compressed bytes and never matches.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

MODES: dict[str, dict[str, Any]] = {
    "stock": {},
    "default": {"ADDONS": {"iri_scrapy.Addon": 0}},
    "protocol": {"ADDONS": {"iri_scrapy.Addon": 0}, "IRI_LEVEL": "protocol"},
}

_NOISE = [
    re.compile(r"<script\b.*?</script>", re.S | re.I),
    re.compile(r'<input[^>]*type="hidden"[^>]*>', re.S),
    re.compile(r"\b(?=[\w-]*\d)(?=[\w-]*[A-Za-z])[\w-]{16,}\b"),
    # relative ages, as Trac and Roundup write them ("36 seconds ago", "just now")
    re.compile(r"(?<=>)[^<>]*\b(?:ago|just now|in a moment|yesterday|tomorrow)\b[^<>]*(?=<)"),
    re.compile(r"\b\d+ (?:second|minute|hour|day|week|month|year)s?\b"),
    re.compile(r"\b\d\d:\d\d(?::\d\d)?Z?\b"),  # a clock (Trac's localization preferences)
]

ROUNDUP_POPULATE = '''
import sys
import roundup.date
import roundup.instance
db = roundup.instance.open(sys.argv[1]).open("admin")
words = "parser crash unicode login export search index cache timeout layout".split()
users = [db.user.create(username=f"dev{i}", realname=f"Developer {i}", roles="User")
         for i in range(4)]
for n in range(120):
    w1, w2 = words[n % 10], words[(n * 3 + 1) % 10]
    msg = db.msg.create(content=f"Steps to reproduce the {w1} problem {n}. See {w2}.",
                        author=users[n % 4], date=roundup.date.Date("."))
    db.issue.create(title=f"{w1.capitalize()} fails with {w2} ({n})", messages=[msg],
                    priority=str(n % 5 + 1), status=str(n % 8 + 1), nosy=[users[n % 4]],
                    assignedto=users[(n + 1) % 4] if n % 3 else None)
db.commit()
'''

TRAC_POPULATE = '''
import sys
from trac.env import Environment
from trac.ticket.model import Ticket
from trac.wiki.model import WikiPage
env = Environment(sys.argv[1])
words = "parser crash unicode login export search index cache timeout layout".split()
name = [f"Topic{words[n % 10].capitalize()}{n}" for n in range(20)]
for n in range(20):
    page = WikiPage(env, name[n])
    link = name[(n + 1) % 20]
    page.text = f"= Topic {n} =\\nAbout {words[n % 10]}. See [wiki:{link}], #{n + 1}.\\n"
    page.save("dev0", "created")
    if n % 4 == 0:
        page.text += "\\nEdited once more.\\n"
        page.save("dev1", "second version")
start = WikiPage(env, "WikiStart")
start.text += "\\n== Topics ==\\n" + "".join(f" * [wiki:{x}]\\n" for x in name)
start.save("dev0", "index of topics")
for n in range(40):
    t = Ticket(env)
    t["summary"] = f"{words[n % 10].capitalize()} fails with {words[(n * 3 + 1) % 10]} ({n})"
    t["description"] = f"Steps to reproduce the {words[n % 10]} problem number {n}."
    t["reporter"], t["owner"] = f"dev{n % 4}", f"dev{(n + 1) % 4}"
    t["type"] = ["defect", "enhancement", "task"][n % 3]
    t["priority"] = ["blocker", "critical", "major", "minor", "trivial"][n % 5]
    t["component"] = ["component1", "component2"][n % 2]
    t["milestone"] = f"milestone{n % 4 + 1}"
    t["status"] = "new"
    t.insert()
    if n % 5 == 0:
        t["status"], t["resolution"] = "closed", "fixed"
        t.save_changes("dev2", f"Fixed in the {words[n % 10]} module.")
'''


def page_digest(body: str) -> str:
    """Hash of *body* with the applications' per-request noise removed (judging only)."""
    for pattern in _NOISE:
        body = pattern.sub("", body)
    return hashlib.sha1(body.encode("utf-8", "replace")).hexdigest()


# --- the applications -----------------------------------------------------------------


def _run(cmd: list[str], stdin: str | None = None) -> None:
    subprocess.run(cmd, input=stdin, text=True, check=True, capture_output=True, timeout=300)


def setup_roundup(venv: Path, home: Path, proxy_port: int) -> None:
    """Install and initialise a classic Roundup tracker at *home* and create its issues."""
    if (home / "db").exists():
        return
    admin = str(venv / "bin" / "roundup-admin")
    _run([admin, "-i", str(home), "install", "classic", "sqlite"])
    config = (home / "config.ini").read_text()
    config = config.replace("#web = NO DEFAULT", f"web = http://127.0.0.1:{proxy_port}/rt/")
    config = config.replace("#domain = NO DEFAULT", "domain = example.test")
    (home / "config.ini").write_text(config)
    _run([admin, "-i", str(home), "initialise", "adminpw"], stdin="y\n")
    _run([str(venv / "bin" / "python"), "-c", ROUNDUP_POPULATE, str(home)])
    if os.geteuid() == 0:  # roundup-server refuses to run as root: it runs as nobody,
        _run(["chmod", "-R", "a+rwX", str(home)])  # which must reach *home* (mkdtemp: 0700)
        for parent in home.parents:
            if parent == Path(tempfile.gettempdir()) or parent == parent.parent:
                break
            parent.chmod(parent.stat().st_mode | 0o711)


def setup_trac(venv: Path, home: Path) -> None:
    """Create a Trac environment at *home* (SQLite) and its wiki pages and tickets."""
    if home.exists():
        return
    _run([str(venv / "bin" / "trac-admin"), str(home), "initenv", "Bench", "sqlite:db/trac.db"])
    _run([str(venv / "bin" / "python"), "-c", TRAC_POPULATE, str(home)])


def start_app(app: str, venv: Path, home: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    """Start the application's own server on 127.0.0.1:*port*; wait until it answers."""
    if app == "roundup":
        cmd = [str(venv / "bin" / "roundup-server"), "-p", str(port), "-n", "127.0.0.1"]
        if os.geteuid() == 0:
            cmd += ["-u", "nobody"]
        cmd.append(f"rt={home}")
        probe = "/rt/"
    else:
        cmd = [str(venv / "bin" / "tracd"), "-p", str(port), "-b", "127.0.0.1", "-s", str(home)]
        probe = "/"
    proc = subprocess.Popen(cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    for _ in range(100):
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", probe)
            if conn.getresponse().status == 200:
                return proc
        except OSError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise SystemExit(f"{app} did not start on port {port}; see {log}")


def app_version(venv: Path, module: str) -> str:
    """The installed version of *module* in the application venv."""
    code = f"import importlib.metadata as m; print(m.version({module!r}))"
    out = subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True,
                         text=True, timeout=60)
    return out.stdout.strip() or "?"


# --- the counting reverse proxy -------------------------------------------------------


class CountingProxy(ThreadingHTTPServer):
    """Forwards every GET/HEAD to the application and records its target and status."""

    daemon_threads = True

    def __init__(self, port: int, upstream: int) -> None:
        super().__init__(("127.0.0.1", port), _ProxyHandler)
        self.upstream = upstream
        self.hits: list[tuple[str, int]] = []
        self.lock = threading.Lock()


class _ProxyHandler(BaseHTTPRequestHandler):
    server: CountingProxy
    protocol_version = "HTTP/1.1"
    _HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "proxy-connection"}

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        """Quiet: the hits are recorded, not logged."""

    def do_GET(self) -> None:
        """Relay the request upstream, then the answer back."""
        conn = http.client.HTTPConnection("127.0.0.1", self.server.upstream, timeout=120)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in self._HOP}
        conn.request(self.command, self.path, headers=headers)
        resp = conn.getresponse()
        body = resp.read()
        conn.close()
        with self.server.lock:
            self.server.hits.append((self.path, resp.status))
        self.send_response(resp.status, resp.reason)
        for key, value in resp.getheaders():
            if key.lower() not in self._HOP:
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_HEAD = do_GET


# --- one crawl, in a subprocess -------------------------------------------------------


def child(config_path: str) -> None:
    """Run one crawl as configured in *config_path*; write items and stats beside it."""
    from scrapy.crawler import CrawlerProcess
    from scrapy.linkextractors import LinkExtractor
    from scrapy.spiders import CrawlSpider, Rule

    config = json.loads(Path(config_path).read_text())
    out = Path(config["out"])

    class AppSpider(CrawlSpider):
        name = "app"
        allowed_domains = ["127.0.0.1"]
        start_urls = [config["start"]]
        rules = (Rule(LinkExtractor(allow=[re.escape(config["start"])]), callback="page",
                      follow=True),)

        def parse_start_url(self, response: Any, **kwargs: Any) -> Any:
            return self.page(response)

        def page(self, response: Any) -> Any:
            return {"url": response.url, "status": response.status,
                    "digest": page_digest(response.text)}

        def closed(self, reason: str) -> None:
            stats = self.crawler.stats.get_stats()
            stats["finish_reason"] = reason
            (out / "stats.json").write_text(json.dumps(stats, default=str))

    settings = {
        "LOG_LEVEL": "INFO", "LOG_FILE": str(out / "crawl.log"), "ROBOTSTXT_OBEY": False,
        "TELNETCONSOLE_ENABLED": False, "CONCURRENT_REQUESTS": 4, "RETRY_ENABLED": False,
        "DEPTH_LIMIT": config["depth"], "CLOSESPIDER_PAGECOUNT": config["pages"],
        "DOWNLOAD_TIMEOUT": 120, "FEEDS": {str(out / "items.jsonl"): {"format": "jsonlines"}},
        **MODES[config["mode"]],
        **({"COMPRESSION_ENABLED": False} if config.get("no_compression") else {}),
    }
    process = CrawlerProcess(settings)
    process.crawl(AppSpider)
    process.start()


def crawl(mode: str, start: str, proxy: CountingProxy, work: Path, depth: int,
          pages: int, no_compression: bool = False) -> dict[str, Any]:
    """One crawl of *start* at *mode*; returns its hits, items and stats."""
    out = work / mode
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    config = {"mode": mode, "start": start, "out": str(out), "depth": depth, "pages": pages,
              "no_compression": no_compression}
    (out / "config.json").write_text(json.dumps(config))
    with proxy.lock:
        proxy.hits.clear()
    began = time.monotonic()
    subprocess.run([sys.executable, __file__, "--child", str(out / "config.json")],
                   check=True, timeout=1800)
    with proxy.lock:
        hits = list(proxy.hits)
    items = [json.loads(line) for line in (out / "items.jsonl").read_text().splitlines()]
    stats = json.loads((out / "stats.json").read_text())
    return {"hits": hits, "items": items, "stats": stats, "seconds": time.monotonic() - began}


# --- judging --------------------------------------------------------------------------


def alias_kind(a: str, b: str) -> tuple[str, str]:
    """How two spellings of one content differ: the kinds (``+``-joined) and the
    parameters or paths at stake.

    ``paths``: other paths; ``param-order``: the same pairs in another order;
    ``encoding``: a pair percent-encoded otherwise (``%2C`` and ``,``, distinct
    under RFC 3986 section 2.2); ``empty-param``: a pair with an empty value in one
    only; ``extra-param``: a parameter in one only (at its default value, or one the
    page ignores); ``other``: a parameter with another value.
    """
    sa, sb = urlsplit(a), urlsplit(b)
    if sa.path != sb.path:
        return "paths", f"{sa.path} | {sb.path}"
    raw_a = [p for p in sa.query.split("&") if p]
    raw_b = [p for p in sb.query.split("&") if p]
    qa = parse_qsl(sa.query, keep_blank_values=True)
    qb = parse_qsl(sb.query, keep_blank_values=True)
    kinds = []
    enc_a = dict(zip(qa, raw_a, strict=False))
    enc_b = dict(zip(qb, raw_b, strict=False))
    if any(enc_a[pair] != enc_b[pair] for pair in enc_a.keys() & enc_b.keys()):
        kinds.append("encoding")
    common_a = [p for p in qa if p in qb]
    common_b = [p for p in qb if p in qa]
    if common_a != common_b:
        kinds.append("param-order")
    only_a, only_b = Counter(qa) - Counter(qb), Counter(qb) - Counter(qa)
    diff = list(only_a) + list(only_b)
    keys_a, keys_b = {k for k, _ in only_a}, {k for k, _ in only_b}
    if any(v == "" for _, v in diff):
        kinds.append("empty-param")
    if any(v != "" for k, v in diff if k not in keys_a & keys_b):
        kinds.append("extra-param")
    if keys_a & keys_b:
        kinds.append("other")
    return "+".join(kinds) or "same", ",".join(sorted({k for k, _ in diff}))


def unmerged_groups(items: list[dict[str, Any]]) -> list[list[str]]:
    """URLs answering 200 with one content, groups of two or more, largest first."""
    by_digest: dict[str, list[str]] = defaultdict(list)
    for item in items:
        if item["status"] == 200 and item["url"] not in by_digest[item["digest"]]:
            by_digest[item["digest"]].append(item["url"])
    groups = [sorted(urls, key=len) for urls in by_digest.values() if len(urls) > 1]
    return sorted(groups, key=len, reverse=True)


def missed_groups(stock: list[dict[str, Any]], other: list[dict[str, Any]]) -> list[list[str]]:
    """Stock's pages (its URLs answering 200 with one content) *other* reached under
    none of stock's spellings and under no URL with that content: a page missed.

    Noise the judge does not remove can only split stock's groups or make a digest
    differ between crawls; a URL fetched by both still counts as reached."""
    fetched = {i["url"] for i in other if i["status"] == 200}
    digests = {i["digest"] for i in other if i["status"] == 200}
    groups: dict[str, list[str]] = defaultdict(list)
    for item in stock:
        if item["status"] == 200:
            groups[item["digest"]].append(item["url"])
    return [urls for digest, urls in groups.items()
            if digest not in digests and not fetched.intersection(urls)]


def summarize(result: dict[str, Any], stock: dict[str, Any] | None) -> dict[str, Any]:
    """The figures of one crawl (and what it missed of *stock*'s contents)."""
    items = result["items"]
    digests = {i["digest"] for i in items if i["status"] == 200}
    hits = result["hits"]
    per_url = Counter(path for path, _ in hits)
    kinds: Counter[str] = Counter()
    for group in unmerged_groups(items):
        for url in group[1:]:
            kinds[alias_kind(group[0], url)[0]] += 1
    stats = result["stats"]
    summary = {
        "hits": len(hits), "pages": len(digests),
        "hits_per_page": round(len(hits) / max(1, len(digests)), 3),
        "status": dict(Counter(str(status) for _, status in hits)),
        "url_fetched_twice": sum(1 for n in per_url.values() if n > 1),
        "unmerged_spellings": dict(kinds),
        "finish_reason": stats.get("finish_reason"),
        "seconds": round(result["seconds"], 1),
        "iri_protocol": {k: v for k, v in stats.items() if k.startswith("iri/protocol/")},
        "decided_by_protocol": stats.get("iri/dupefilter/decided_by/protocol", 0),
    }
    if stock is not None:
        missed = missed_groups(stock["items"], items)
        summary["missed"] = len(missed)
        summary["missed_urls"] = sorted(url for group in missed for url in group)[:20]
        stock_digests = {i["digest"] for i in stock["items"] if i["status"] == 200}
        summary["extra_vs_stock"] = len(digests - stock_digests)
    return summary


def print_report(app: str, version: str, summaries: dict[str, dict[str, Any]],
                 groups: dict[str, list[list[str]]]) -> None:
    """The table of the three crawls and the alias groups left by the protocol level."""
    print(f"\n== {app} {version} ==")
    print(f"{'mode':10} {'hits':>6} {'pages':>6} {'hits/page':>9} {'missed':>6} "
          f"{'extra':>6} {'twice':>6} {'proto':>6}  unmerged spellings by kind")
    for mode, s in summaries.items():
        print(f"{mode:10} {s['hits']:>6} {s['pages']:>6} {s['hits_per_page']:>9} "
              f"{s.get('missed', '-'):>6} {s.get('extra_vs_stock', '-'):>6} "
              f"{s['url_fetched_twice']:>6} {s['decided_by_protocol']:>6}  "
              f"{s['unmerged_spellings']}  ({s['finish_reason']}, {s['seconds']} s)")
    print("protocol stats:", json.dumps(summaries["protocol"]["iri_protocol"], sort_keys=True))
    if summaries["protocol"].get("missed_urls"):
        print("missed by protocol:", summaries["protocol"]["missed_urls"])
    shown: Counter[str] = Counter()
    print("alias groups left unmerged at level protocol (examples per kind):")
    for group in groups["protocol"]:
        for url in group[1:]:
            kind, what = alias_kind(group[0], url)
            shown[kind] += 1
            if shown[kind] <= 3:
                print(f"  [{kind}] {what}\n      {group[0]}\n      {url}")


def main() -> None:
    """Set up, serve and crawl each application three ways; print and save the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--app-venv", type=Path, help="virtualenv with Trac and roundup")
    parser.add_argument("--apps", default="roundup,trac")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="where the applications and crawl outputs live (default: temp)")
    parser.add_argument("--depth", type=int, default=3, help="DEPTH_LIMIT")
    parser.add_argument("--pages", type=int, default=1500, help="CLOSESPIDER_PAGECOUNT")
    parser.add_argument("--no-compression", action="store_true",
                        help="COMPRESSION_ENABLED = False in every crawl (see the doc)")
    parser.add_argument("--port", type=int, default=18731,
                        help="first of the 4 loopback ports used (app, proxy per app)")
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    if args.app_venv is None:
        parser.error("--app-venv is required")
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench_apps_"))
    work.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {}
    for offset, app in enumerate(args.apps.split(",")):
        app_port, proxy_port = args.port + 10 * offset, args.port + 10 * offset + 1
        home = work / app / "home"
        home.parent.mkdir(parents=True, exist_ok=True)
        if app == "roundup":
            setup_roundup(args.app_venv, home, proxy_port)
            start, version = f"http://127.0.0.1:{proxy_port}/rt/", "roundup"
        else:
            setup_trac(args.app_venv, home)
            start, version = f"http://127.0.0.1:{proxy_port}/", "Trac"
        version = f"{version} {app_version(args.app_venv, version)}"
        server = start_app(app, args.app_venv, home, app_port, work / app / "server.log")
        proxy = CountingProxy(proxy_port, app_port)
        threading.Thread(target=proxy.serve_forever, daemon=True).start()
        try:
            results = {mode: crawl(mode, start, proxy, work / app, args.depth, args.pages,
                                   args.no_compression)
                       for mode in MODES}
        finally:
            proxy.shutdown()
            server.terminate()
            server.wait(timeout=30)
        summaries = {m: summarize(r, None if m == "stock" else results["stock"])
                     for m, r in results.items()}
        groups = {m: unmerged_groups(r["items"]) for m, r in results.items()}
        print_report(app, version, summaries, groups)
        report[app] = {"version": version, "summaries": summaries, "groups": groups}
    (work / "report.json").write_text(json.dumps(report, indent=1))
    print(f"\nfull report: {work / 'report.json'}")


if __name__ == "__main__":
    main()
