"""Tests of the test infrastructure: the demo alias web, its server and the crawl harness.

Everything is real: the server listens on 127.0.0.1, requests go through it as an
HTTP proxy (urllib, or a raw socket for non-ASCII request targets), and the crawl
test runs stock Scrapy in a subprocess.
"""

from __future__ import annotations

import html
import json
import os
import socket
import subprocess
import sys
import unicodedata
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.crawl import CrawlResult, run_crawl
from tests.support.server import (
    SiteServer,
    normalize_component,
    resolve_target,
    resolve_url,
    serve_site,
)
from tests.support.site import (
    DEMO_SITE,
    ResourceKey,
    absolute_href,
    distinct_resource_count,
    remove_dot_segments,
    to_alabel,
)

REPO = Path(__file__).resolve().parents[2]
#: socket timeout of the direct requests: no byte for this long (a generous bound,
#: the server answers in milliseconds when the machine is not busy)
IO_TIMEOUT = 60


# --------------------------------------------------------------------------- helpers


@pytest.fixture(scope="module")
def srv() -> Iterator[SiteServer]:
    with serve_site(DEMO_SITE) as server:
        yield server


def _get(srv: SiteServer, url: str) -> tuple[int, str, dict[str, str]]:
    """GET *url* through the proxy; non-ASCII targets go out as raw UTF-8 bytes."""
    if url.isascii():
        req = urllib.request.Request(url)
        opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({"http": srv.proxy_url}), _NoRedirect()
        )
        try:
            with opener.open(req, timeout=IO_TIMEOUT) as resp:
                return resp.status, resp.read().decode("utf-8"), dict(resp.headers)
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode("utf-8"), dict(err.headers)
    return _raw_get(srv.port, url.encode("utf-8"), host=None)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def _raw_get(port: int, target: bytes, host: bytes | None) -> tuple[int, str, dict[str, str]]:
    """Send one raw HTTP/1.1 GET and read the whole response (Connection: close)."""
    lines = [b"GET " + target + b" HTTP/1.1"]
    if host is not None:
        lines.append(b"Host: " + host)
    lines += [b"Connection: close", b"", b""]
    with socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT) as sock:
        sock.sendall(b"\r\n".join(lines))
        chunks = []
        for _ in range(1000):  # bounded read loop
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = dict(h.split(": ", 1) for h in header_lines)
    return int(status_line.split()[1]), body.decode("utf-8"), headers


def _title(body: str) -> str:
    return html.unescape(body.split("<title>", 1)[1].split("</title>", 1)[0])


# --------------------------------------------------------------------------- the site model


def test_site_shape() -> None:
    site = DEMO_SITE
    assert distinct_resource_count() == len(site.resources) >= 30
    assert site.redirect_keys == {ResourceKey("www.example.test", "/docs", None)}
    assert site.page_keys | site.redirect_keys == site.keys
    scripts = {h.name for h in site.hosts}
    assert {"пример.испытание", "例子.测试", "παράδειγμα.δοκιμή", "مثال.إختبار"} <= scripts
    assert to_alabel("bücher.example") == "xn--bcher-kva.example"
    assert to_alabel("straße.example") == "xn--strae-oqa.example"  # IDNA 2008, not "strasse"
    assert {r.name for r in site} == site.reachable()


def test_every_link_resolves_to_its_declared_target() -> None:
    bad = []
    for src, link in DEMO_SITE.links():
        key = resolve_url(absolute_href(src.iri, link.href))
        if key != DEMO_SITE.get(link.to).key:
            bad.append((src.name, link.href, key))
    assert bad == []


def test_near_misses_are_distinct_resources() -> None:
    site = DEMO_SITE
    pairs = [
        ("en-ab", "en-a2fb"),
        ("en-page", "en-Page"),
        ("en-search", "en-search-empty"),
        ("en-list-ab", "en-list-ba"),
        ("en-q-escaped", "en-q-amp"),
        ("de-cafe-nfc", "de-cafe-nfd"),
        ("el-page", "el-Page"),
    ]
    for a, b in pairs:
        assert site.get(a).key != site.get(b).key
    nfc, nfd = site.get("de-cafe-nfc").path, site.get("de-cafe-nfd").path
    assert unicodedata.normalize("NFC", nfd) == nfc != nfd


def test_aliases_cover_the_required_spellings() -> None:
    aliases = {a for r in DEMO_SITE for a in DEMO_SITE.aliases(r.name)}
    assert "HTTP://WWW.Example.TEST/docs/" in aliases
    assert "http://www.example.test:80/docs/" in aliases
    assert "http://www.example.test/%7euser/" in aliases
    assert "http://www.example.test/search?" in aliases
    assert any("%d1%81" in a for a in aliases)  # lowercase %hh
    assert "http://xn--e1afmkfd.xn--80akhbyknj4f/" in aliases
    assert len(DEMO_SITE.aliases("ru-article")) >= 4


def test_page_html() -> None:
    body = DEMO_SITE.render(DEMO_SITE.get("ar-home")).decode("utf-8")
    assert '<html lang="ar" dir="rtl">' in body
    assert "<title>مثال — الصفحة الرئيسية</title>" in body
    assert 'href="/list?a=1&amp;b=2"' in DEMO_SITE.render(DEMO_SITE.get("en-home")).decode()


# --------------------------------------------------------------------------- resolution


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"/%7e%7Euser", "/~~user"),
        (b"/a%2fb", "/a%2Fb"),
        (b"/caf%c3%a9", "/café"),
        (b"/caf\xc3\xa9", "/café"),
        (b"/bad%ff", "/bad%FF"),
        (b"/100%", "/100%25"),
        (b'/"q"', "/%22q%22"),
        (b"x=%26&y=+", "x=%26&y=+"),
    ],
)
def test_normalize_component(raw: bytes, expected: str) -> None:
    assert normalize_component(raw) == expected


def test_rfc3986_reference_resolution_examples() -> None:
    base = "http://a/b/c/d;p?q"
    examples = {
        "g": "http://a/b/c/g", "./g": "http://a/b/c/g", "g/": "http://a/b/c/g/",
        "/g": "http://a/g", "//g": "http://g", "?y": "http://a/b/c/d;p?y",
        "g?y": "http://a/b/c/g?y", "#s": "http://a/b/c/d;p?q", "": "http://a/b/c/d;p?q",
        ".": "http://a/b/c/", "..": "http://a/b/", "../..": "http://a/", "../../../g": "http://a/g",
        "/./g": "http://a/g", "g.": "http://a/b/c/g.", "g/../h": "http://a/b/c/h",
        "g;x=1/../y": "http://a/b/c/y", "g:h": "g:h",
    }
    for ref, want in examples.items():
        assert absolute_href(base, ref) == want, ref
    assert remove_dot_segments("/a/b/c/./../../g") == "/a/g"
    assert remove_dot_segments("mid/content=5/../6") == "mid/6"


def test_resolve_target_forms() -> None:
    key = ResourceKey("www.example.test", "/b", "x")
    assert resolve_target("http://WWW.Example.TEST:80/a/../b?x#frag") == key
    assert resolve_target("/a/./../b?x", "www.example.test") == key
    assert resolve_target("/b?x", "www.example.test:8080") is None  # other ports: unknown
    assert resolve_target("/", None) is None
    assert resolve_url("http://ПРИМЕР.испытание/") == ("xn--e1afmkfd.xn--80akhbyknj4f", "/", None)


# --------------------------------------------------------------------------- the server


def test_every_alias_of_every_page_is_served_as_that_page(srv: SiteServer) -> None:
    srv.reset()
    for res in DEMO_SITE:
        want = 301 if res.is_redirect else 200
        for alias in DEMO_SITE.aliases(res.name):
            status, body, headers = _get(srv, alias)
            assert status == want, alias
            assert headers["Content-Type"] == "text/html; charset=utf-8"
            assert int(headers["Content-Length"]) == len(body.encode("utf-8"))
            if want == 200:
                assert _title(body) == res.title, alias
    counts = srv.hits.counts()
    for res in DEMO_SITE:
        assert counts[res.key] == len(DEMO_SITE.aliases(res.name))
    assert set(counts) == DEMO_SITE.keys


def test_near_misses_are_served_as_different_pages(srv: SiteServer) -> None:
    base = "http://www.example.test"
    titles = {}
    for path in ["/a/b", "/a%2Fb", "/page", "/Page", "/search", "/search?", "/list?a=1&b=2",
                 "/list?b=2&a=1", "/q?x=%26", "/q?x=&"]:
        status, body, _ = _get(srv, base + path)
        assert status == 200, path
        titles[path] = _title(body)
    assert len(set(titles.values())) == len(titles)
    nfc = _get(srv, "http://bücher.example/café")
    nfd = _get(srv, "http://xn--bcher-kva.example/cafe%cc%81")
    assert nfc[0] == nfd[0] == 200 and _title(nfc[1]) != _title(nfd[1])


def test_redirect_and_not_found(srv: SiteServer) -> None:
    status, _, headers = _get(srv, "http://www.example.test/docs")
    assert status == 301 and headers["Location"] == "http://www.example.test/docs/"
    srv.reset()
    assert _get(srv, "http://www.example.test/nope")[0] == 404
    assert _get(srv, "http://strasse.example/")[0] == 404  # IDNA 2003 spelling: other host
    assert _get(srv, "http://www.example.test:8080/")[0] == 404
    assert [h.status for h in srv.hits.hits] == [404, 404, 404]
    assert srv.hits.targets[0] == "http://www.example.test/nope"
    assert srv.hits.hits[1].key == ResourceKey("strasse.example", "/", None)


def test_origin_form_and_raw_utf8_targets(srv: SiteServer) -> None:
    status, body, _ = _raw_get(srv.port, "/статья".encode(), "пример.испытание".encode())
    assert status == 200 and _title(body) == "Статья"
    target, host = b"/%E6%96%87%E7%AB%A0/%E4%BA%8C", b"xn--fsqu00a.xn--0zwm56d"
    status, body, _ = _raw_get(srv.port, target, host)
    assert status == 200 and _title(body) == "文章二"


def test_control_endpoint(srv: SiteServer) -> None:
    srv.reset()
    _get(srv, "http://www.example.test/")
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with direct.open(srv.proxy_url + "/_iri_scrapy/hits", timeout=IO_TIMEOUT) as resp:
        hits = json.loads(resp.read())
    assert [[h["key"], h["status"]] for h in hits] == [[["www.example.test", "/", None], 200]]
    with direct.open(srv.proxy_url + "/_iri_scrapy/reset", timeout=IO_TIMEOUT):
        pass
    assert srv.hits.hits == []


def test_standalone_server_process() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.server", "--port", "0"],
        stdout=subprocess.PIPE, text=True, cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )
    try:
        assert proc.stdout is not None
        proxy = proc.stdout.readline().strip()
        assert proxy.startswith("http://127.0.0.1:")
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": proxy}))
        with opener.open("http://www.example.test/", timeout=IO_TIMEOUT) as resp:
            assert resp.status == 200
    finally:
        proc.terminate()
        proc.wait(timeout=IO_TIMEOUT)


# --------------------------------------------------------------------------- stock Scrapy


def test_stock_scrapy_quirks_the_site_exercises() -> None:
    """Observed Scrapy 2.19 / w3lib 2.5 behaviour that explains the stock crawl's misses."""
    from scrapy import Request

    assert Request("http://straße.example/").url == "http://strasse.example/"  # IDNA 2003
    assert Request("http://www.example.test/search?").url == "http://www.example.test/search"
    assert Request("http://пример.испытание/").url == "http://xn--e1afmkfd.xn--80akhbyknj4f/"
    verbatim = Request("http://www.example.test/search?", meta={"verbatim_url": True})
    assert verbatim.url == "http://www.example.test/search?"


@pytest.fixture(scope="module")
def stock_crawl(srv: SiteServer) -> tuple[CrawlResult, SiteServer]:
    srv.reset()
    result = run_crawl({}, list(DEMO_SITE.start_urls), srv.proxy_url)
    return result, srv


@pytest.mark.slow
def test_stock_scrapy_crawl(stock_crawl: tuple[CrawlResult, SiteServer]) -> None:
    result, srv = stock_crawl
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.finish_reason == "finished"
    assert result.warnings == []
    # every request went through the proxy (absolute-form targets)
    assert all(t.startswith("http://") for t in srv.hits.targets)
    fetched = srv.hits.fetched()
    traps = DEMO_SITE.trap_keys("idna2008", "empty-query", "query-order")
    assert DEMO_SITE.keys - traps <= fetched
    missed = DEMO_SITE.keys - fetched
    # stock Scrapy misses: straße.example (IDNA 2003 -> strasse.example, 404), the bare '?',
    # and one of the two query orders (canonicalize_url sorts the query)
    assert DEMO_SITE.trap_keys("idna2008", "empty-query") <= missed <= traps
    assert ResourceKey("strasse.example", "/", None) in {h.key for h in srv.hits.not_found()}
    # ... and it fetches some resources more than once: the duplication the plugin removes
    dups = srv.hits.duplicates()
    assert dups and ResourceKey("www.example.test", "/docs/", None) in dups
    assert sum(srv.hits.counts().values()) > len(fetched)
    assert result.items and all(i["status"] == 200 for i in result.items)
    assert result.stats["downloader/response_status_count/301"] >= 1


_SPIDER_ARG_MW = '''
class SpiderArgMiddleware:
    """Old-style middleware: Scrapy 2.19 deprecates a required spider argument."""

    def process_request(self, request, spider):
        return None
'''


@pytest.mark.slow
def test_deprecation_warnings_recorded_or_fatal(srv: SiteServer, tmp_path: Path) -> None:
    (tmp_path / "old_style_mw.py").write_text(_SPIDER_ARG_MW)
    settings = {
        "DOWNLOADER_MIDDLEWARES": {"old_style_mw.SpiderArgMiddleware": 100},
        "CLOSESPIDER_PAGECOUNT": 1,
    }
    env = {"PYTHONPATH": str(tmp_path)}
    lenient = run_crawl(settings, list(DEMO_SITE.start_urls), srv.proxy_url, env=env)
    assert lenient.returncode == 0 and lenient.finish_reason == "closespider_pagecount"
    assert any("requires a spider argument" in w for w in lenient.warnings)
    strict = run_crawl(settings, list(DEMO_SITE.start_urls), srv.proxy_url,
                       env={**env, "IRI_SCRAPY_DEPRECATIONS_AS_ERRORS": "1"})
    assert strict.returncode == 1 and not strict.ok and strict.finish_reason is None
    assert any("ScrapyDeprecationWarning" in e for e in strict.errors)


@pytest.mark.slow
def test_run_crawl_cpus_and_wrapper(srv: SiteServer, tmp_path: Path) -> None:
    """``cpus`` pins the crawl process (bench_crawl --pin); ``wrapper`` runs it under a
    command (bench_crawl --instructions: valgrind), here a shell script that marks a file."""
    cpu = min(os.sched_getaffinity(0))
    mark = tmp_path / "ran"
    wrapper = tmp_path / "wrap.sh"
    wrapper.write_text(f'#!/bin/sh\necho yes > "{mark}"\nexec "$@"\n')
    wrapper.chmod(0o755)
    settings = {"CLOSESPIDER_PAGECOUNT": 1}
    result = run_crawl(settings, list(DEMO_SITE.start_urls), srv.proxy_url,
                       cpus=[cpu], wrapper=[str(wrapper)])
    assert result.returncode == 0 and result.finish_reason == "closespider_pagecount"
    assert mark.read_text().strip() == "yes"
    assert result.cpu_seconds is not None


@pytest.mark.slow
def test_jobdir_resume(srv: SiteServer, tmp_path: Path) -> None:
    srv.reset()
    start = list(DEMO_SITE.start_urls)
    jobdir = tmp_path / "job"
    first = run_crawl({"CLOSESPIDER_PAGECOUNT": 3, "CONCURRENT_REQUESTS": 1}, start,
                      srv.proxy_url, jobdir=jobdir)
    assert first.finish_reason == "closespider_pagecount"
    assert (jobdir / "requests.seen").exists()
    second = run_crawl({}, start, srv.proxy_url, jobdir=jobdir)
    assert second.ok
    assert "Resuming crawl" in second.stderr
    # together the two runs reach what one stock run reaches
    assert DEMO_SITE.keys - DEMO_SITE.trap_keys() <= srv.hits.fetched()


def test_testing_package_does_not_import_the_core() -> None:
    """The servers are an independent oracle: they and the crawl harness import no
    module of iri_scrapy (the vector loaders beside them in tests/support do)."""
    import ast

    import tests.support

    pkg = Path(tests.support.__file__).parent
    oracle = ("site", "server", "wire", "dirsite", "bigsite", "crawl", "spider")
    offenders = []
    for py in sorted(pkg / f"{name}.py" for name in oracle):
        for node in ast.walk(ast.parse(py.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = ["." * node.level + (node.module or "")]
            for name in names:
                if name.startswith((".", "iri_scrapy")):
                    offenders.append((py.name, name))
    assert offenders == []


def test_dir_server_serves_a_local_tree_as_one_host(tmp_path: Path) -> None:
    """bench_crawl's real-site mode: files under the root, index.html for a directory,
    %-decoded paths; other hosts, missing files and paths out of the root are 404."""
    from tests.support.dirsite import DirServer

    (tmp_path / "lib").mkdir()
    (tmp_path / "index.html").write_text("<a href='lib/os.html#x'>os</a>", encoding="utf-8")
    (tmp_path / "lib" / "os path.html").write_text("<title>os</title>", encoding="utf-8")
    (tmp_path.parent / "secret.txt").write_text("no", encoding="utf-8")
    with DirServer(tmp_path, host="docs.example") as srv:
        opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({"http": srv.proxy_url}))

        def get(url: str) -> tuple[int, bytes, str]:
            try:
                with opener.open(url, timeout=IO_TIMEOUT) as resp:
                    return resp.status, resp.read(), resp.headers["Content-Type"]
            except urllib.error.HTTPError as exc:
                return exc.code, b"", ""

        assert srv.start_url == "http://docs.example/"
        assert get(srv.start_url) == (
            200, b"<a href='lib/os.html#x'>os</a>", "text/html; charset=utf-8")
        assert get("http://DOCS.example/lib/os%20path.html")[:2] == (200, b"<title>os</title>")
        assert get("http://other.example/")[0] == 404
        assert get("http://docs.example/lib/missing.html")[0] == 404
        assert get("http://docs.example/%2E%2E/secret.txt")[0] == 404
        assert [h.status for h in srv.hits.hits] == [200, 200, 404, 404, 404]
