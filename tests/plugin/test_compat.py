"""Public APIs only: no third-party private name outside ``iri_scrapy/plugin/compat.py``.

Two parts:

* a static check of the package (and ``sample_project``): every import from a
  third-party package is a documented public name (``PUBLIC`` below, with the
  evidence), no underscore name is imported from another package, and no
  ``obj._name`` / ``super()._name`` / ``getattr(obj, "_name")`` / method
  override names a private attribute that a third-party class we build on
  defines or uses (our own ``_names`` are fine);
* the seams of ``compat.py``, called on the installed Scrapy: they break here
  first when a Scrapy release changes them.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import inspect
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import scrapy
from scrapy.core.engine import ExecutionEngine
from scrapy.http import HtmlResponse
from scrapy.link import Link
from scrapy.spiders import CrawlSpider, Rule
from twisted.internet.defer import Deferred

import iri_scrapy
from iri_scrapy.plugin import compat

ROOT = Path(__file__).resolve().parents[2]
#: The package under test, wherever it is imported from (source tree or site-packages).
PACKAGE = Path(iri_scrapy.__file__).resolve().parent
COMPAT = PACKAGE / "plugin" / "compat.py"
SOURCES = sorted(PACKAGE.rglob("*.py")) + sorted((ROOT / "sample_project").rglob("*.py"))


def _rel(path: Path) -> Path:
    """*path* relative to where its top-level package lives (the package's parent for
    iri_scrapy, the checkout for sample_project, its folder for a scratch file)."""
    for base in (PACKAGE.parent, ROOT):
        if base in path.parents:
            return path.relative_to(base)
    return Path(path.name)
OURS = {"iri_scrapy", "sample_project", "tests"}

#: Third-party names the package may import, each public and documented:
#: "docs" = Scrapy's reference documentation (docs/topics/*.rst, 2.13 and 2.19).
PUBLIC: dict[str, set[str]] = {
    # docs: request-response.rst, spiders.rst, signals.rst, api.rst
    "scrapy": {"Request", "Spider", "signals", "Item", "Field"},
    # docs: scheduler.rst (autoclass BaseScheduler, the interface; Scheduler, __init__)
    "scrapy.core.scheduler": {"Scheduler", "BaseScheduler"},
    "scrapy.crawler": {"Crawler", "CrawlerProcess"},  # docs: api.rst
    "scrapy.downloadermiddlewares.offsite": {"OffsiteMiddleware"},  # downloader-middleware.rst
    "scrapy.downloadermiddlewares.robotstxt": {"RobotsTxtMiddleware"},  # the same page
    "scrapy.downloadermiddlewares.redirect": {"MetaRefreshMiddleware"},  # the same page
    "scrapy.robotstxt": {"RobotParser"},  # downloader-middleware.rst (autoclass, its interface)
    "scrapy.dupefilters": {"BaseDupeFilter"},  # docs: settings.rst (autoclass)
    # docs: feed-exports.rst (FEED_STORAGES_BASE names it; "Storage backends", Local filesystem)
    "scrapy.extensions.feedexport": {"FileFeedStorage"},
    # docs: exceptions.rst; ScrapyDeprecationWarning is that documented module's
    # public warning category (used by the test harness only)
    "scrapy.exceptions": {
        "NotConfigured", "ScrapyDeprecationWarning", "IgnoreRequest", "CloseSpider",
        "DontCloseSpider",
    },
    "scrapy.http": {"Response", "TextResponse", "HtmlResponse", "XmlResponse"},
    "scrapy.http.request": {"NO_CALLBACK"},  # docs: request-response.rst (autofunction)
    "scrapy.link": {"Link"},  # docs: link-extractors.rst
    # IGNORED_EXTENSIONS: in __all__, the documented default of deny_extensions
    "scrapy.linkextractors": {"IGNORED_EXTENSIONS", "LinkExtractor"},
    "scrapy.linkextractors.lxmlhtml": {"LxmlLinkExtractor"},  # docs: link-extractors.rst
    # docs: media-pipeline.rst (FilesPipeline.file_path / ImagesPipeline.thumb_path
    # are the documented override points)
    "scrapy.pipelines.files": {"FilesPipeline"},
    "scrapy.pipelines.images": {"ImagesPipeline"},
    "scrapy.selector": {"Selector"},  # docs: selectors.rst
    "scrapy.settings": {"BaseSettings", "SETTINGS_PRIORITIES"},  # docs: api.rst
    "scrapy.spidermiddlewares.base": {"BaseSpiderMiddleware"},  # spider-middleware.rst
    "scrapy.spiders": {"CrawlSpider", "Rule"},  # docs: spiders.rst
    "scrapy.statscollectors": {"StatsCollector"},  # docs: api.rst
    # docs: asyncio.rst (autofunction, both)
    "scrapy.utils.defer": {"deferred_from_coro", "maybe_deferred_to_future"},
    # request-response.rst: autoclass RequestFingerprinter; request_from_dict, the
    # documented inverse of Request.to_dict (cross-referenced from Request.attributes)
    # fingerprint: request-response.rst, "Request fingerprints" (autofunction)
    "scrapy.utils.request": {"RequestFingerprinter", "request_from_dict", "fingerprint"},
    "scrapy_redis.spiders": {"RedisSpider", "RedisCrawlSpider"},  # scrapy-redis README
    "twisted.internet": {"reactor"},  # Twisted API docs: twisted.internet.reactor
    "twisted.internet.defer": {"Deferred"},  # Twisted API docs: twisted.internet.defer
    "twisted.internet.task": {"LoopingCall"},
    "w3lib.html": {"get_base_url", "get_meta_refresh"},  # w3lib docs: w3lib.html
    "w3lib.url": {"safe_url_string"},  # w3lib docs: w3lib.url
    "lxml": {"etree"},
    "parsel": {"css2xpath"},  # parsel.__all__, parsel docs
    "redis.backoff": {"NoBackoff"},
    "redis.cluster": {"RedisCluster"},  # redis-py docs: clustering (RedisCluster.from_url)
    # redis-py docs: exceptions (automodule redis.exceptions); the cluster errors are the
    # replies a cluster node gives (ASK/MOVED, CLUSTERDOWN, TRYAGAIN) and its client's own
    "redis.exceptions": {
        "ConnectionError", "NoScriptError", "ReadOnlyError", "RedisError", "TimeoutError",
        "ResponseError", "AskError", "ClusterDownError", "TryAgainError",
        "RedisClusterException", "OutOfMemoryError",
    },
    "redis.retry": {"Retry"},
    "typing_extensions": {"Self"},
    # iri_scrapy.integrations.spark, cli/dedupe_spark.py; PySpark API reference (pyspark.TaskContext;
    # pyspark.sql: Column, DataFrame, SparkSession, Window, the functions and types modules;
    # functions.arrow_udf, 4.1+)
    "pyspark": {"TaskContext"},
    "pyspark.sql": {"Column", "DataFrame", "SparkSession", "Window", "functions", "types"},
    "pyspark.sql.functions": {"arrow_udf"},
}
#: Third-party modules the package may ``import`` as a whole.
#: pyarrow, pyarrow.compute: Apache Arrow Python API reference (iri_scrapy.integrations.spark).
PUBLIC_MODULES = {"scrapy", "idna", "redis", "regex", "pyarrow", "pyarrow.compute"}
#: Standard-library modules without ``__all__`` whose non-underscore names are documented.
STDLIB_WITHOUT_ALL: set[str] = {"bisect"}  # docs.python.org: bisect (insort, bisect_*)
#: Documented public methods of named tuples (``urllib.parse.SplitResult._replace``).
NAMEDTUPLE_API = {"_replace", "_asdict", "_fields", "_make", "_field_defaults"}


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _third_party(module: str) -> bool:
    top = module.split(".")[0]
    return top not in OURS and top not in sys.stdlib_module_names and top != "__future__"


def _module_name(path: Path) -> str:
    rel = _rel(path).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _trees() -> dict[Path, ast.Module]:
    return {path: ast.parse(path.read_text(encoding="utf-8")) for path in SOURCES}


def _own_private_names(trees: dict[Path, ast.Module]) -> set[str]:
    """``_names`` this project defines: functions, classes, variables, attributes it sets."""
    names: set[str] = set()
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Name, ast.Attribute)) and isinstance(
                node.ctx, ast.Store
            ):
                names.add(node.id if isinstance(node, ast.Name) else node.attr)
            elif isinstance(node, ast.alias) and node.asname:
                names.add(node.asname)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
    return {name for name in names if _is_private(name)}


@functools.cache
def _private_names_of(cls: type) -> frozenset[str]:
    """Private names a third-party class defines or uses on ``self``/``cls``."""
    names = {name for name in vars(cls) if _is_private(name)}
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):
        return frozenset(names)
    for node in ast.walk(ast.parse(textwrap.dedent(source))):
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            names.add(node.attr)
    return frozenset(names)


def _third_party_bases(trees: dict[Path, ast.Module]) -> dict[str, set[type]]:
    """Per class of ours (``module.qualname``): the third-party classes it builds on.

    Includes those of every class of ours that derives from it (a mixin meets
    the classes it is mixed into).
    """
    ours: dict[str, type] = {}
    for path, tree in trees.items():
        module = importlib.import_module(_module_name(path))
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                cls = getattr(module, node.name, None)
                if isinstance(cls, type):
                    ours[f"{module.__name__}.{node.name}"] = cls
    result: dict[str, set[type]] = {}
    for key, cls in ours.items():
        related = [cls] + [other for other in ours.values() if cls in other.__mro__]
        result[key] = {
            base
            for klass in related
            for base in klass.__mro__
            if base is not object and _third_party(base.__module__)
        }
    return result


class _Checker(ast.NodeVisitor):
    def __init__(
        self, path: Path, own: set[str], bases: dict[str, set[type]], everywhere: set[str]
    ) -> None:
        self.path = path
        self.module = _module_name(path)
        self.own = own
        self.bases = bases
        self.everywhere = everywhere  # private names of every third-party base
        self.cls: list[str] = []
        self.problems: list[str] = []

    def report(self, node: ast.AST, text: str) -> None:
        self.problems.append(f"{_rel(self.path)}:{getattr(node, 'lineno', 0)}: {text}")

    def third_party_private(self) -> set[str]:
        if self.cls:
            bases = self.bases.get(f"{self.module}.{self.cls[-1]}", set())
            return set().union(*(_private_names_of(b) for b in bases)) if bases else set()
        return set()

    def check_name(self, node: ast.AST, name: str, receiver: ast.AST | None) -> None:
        if not _is_private(name) or name in NAMEDTUPLE_API:
            return
        in_class = receiver is not None and (
            (isinstance(receiver, ast.Name) and receiver.id in ("self", "cls"))
            or (isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Name)
                and receiver.func.id == "super")
        )
        theirs = self.third_party_private() if in_class else self.everywhere
        if name in theirs:
            self.report(node, f"{name}: a private name of a third-party class we build on")
        elif name not in self.own:
            self.report(node, f"{name}: a private name this project does not define")

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.cls.append(node.name)
        theirs = self.third_party_private()
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name in theirs:
                self.report(item, f"{item.name}: overrides a private method of a third-party class")
        self.generic_visit(node)
        self.cls.pop()

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if _third_party(alias.name) and alias.name not in PUBLIC_MODULES:
                self.report(node, f"import {alias.name}: not a documented public module")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level or not _third_party(module):
            if not node.level and module.split(".")[0] not in OURS:  # the standard library
                for part in module.split("."):
                    if _is_private(part):
                        self.report(node, f"from {module}: a private module")
                for alias in node.names:
                    if _is_private(alias.name):
                        self.report(node, f"from {module} import {alias.name}: private")
                    elif not _public_in_stdlib(module, alias.name):
                        self.report(node, f"from {module} import {alias.name}: not a public name")
            return
        for alias in node.names:
            if alias.name not in PUBLIC.get(module, set()):
                self.report(node, f"from {module} import {alias.name}: not a documented public name")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self.check_name(node, node.attr, node.value)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if (
            isinstance(func, ast.Name)
            and func.id in ("getattr", "setattr", "hasattr", "delattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            self.check_name(node, node.args[1].value, node.args[0])
        self.generic_visit(node)


def _public_in_stdlib(module: str, name: str) -> bool:
    """A standard-library name is public if its module lists it in ``__all__``.

    Modules without ``__all__``: a C module's names count as public, and so do
    those of the few pure-Python modules listed here (documented whole).
    """
    mod = importlib.import_module(module)
    public = getattr(mod, "__all__", None)
    if public is None:
        return not (getattr(mod, "__file__", None) or "").endswith(".py") or (
            module in STDLIB_WITHOUT_ALL
        )
    return name in public or importlib.util.find_spec(f"{module}.{name}") is not None


def private_uses() -> list[str]:
    trees = _trees()
    own = _own_private_names(trees)
    bases = _third_party_bases(trees)
    everywhere = set().union(*(_private_names_of(b) for bs in bases.values() for b in bs))
    problems: list[str] = []
    for path, tree in trees.items():
        if path == COMPAT:
            continue
        checker = _Checker(path, own, bases, everywhere)
        checker.visit(tree)
        problems += checker.problems
    return problems


@pytest.mark.slow
def test_no_private_third_party_names_outside_compat() -> None:
    assert private_uses() == []


def test_the_checker_sees_the_whole_package() -> None:
    names = {p.relative_to(PACKAGE).as_posix() for p in SOURCES if PACKAGE in p.parents}
    assert {"plugin/compat.py", "plugin/linkextractor.py", "core/hosts.py", "cli/main.py"} <= names
    assert COMPAT.exists()


def test_the_checker_catches_private_uses(monkeypatch: Any, tmp_path: Path) -> None:
    """Each kind of private use, planted in a scratch module, is reported."""
    planted = tmp_path / "_planted_private_uses.py"
    planted.write_text(
        "from json.encoder import encode_basestring_ascii\n"
        "from scrapy.linkextractors.lxmlhtml import _collect_string_content\n"
        "from scrapy.utils.misc import arg_to_iter\n"
        "from scrapy.spiders import CrawlSpider\n"
        "from scrapy.downloadermiddlewares.offsite import OffsiteMiddleware\n"
        "class S(CrawlSpider):\n"
        "    def _build_request(self, rule_index, link):\n"
        "        return super()._build_request(rule_index, link)\n"
        "class O(OffsiteMiddleware):\n"
        "    def should_follow(self, request, spider):\n"
        "        self._update_host_regex(spider)\n"
        "        return getattr(self, '_allowed_domains')\n"
        "def f(extractor):\n"
        "    return extractor.link_extractor._process_links([])\n",
        encoding="utf-8",
    )
    try:
        monkeypatch.syspath_prepend(str(tmp_path))  # the checker imports it to see its bases
        monkeypatch.setattr(sys.modules[__name__], "SOURCES", [*SOURCES, planted])
        problems = "\n".join(private_uses())
    finally:
        sys.modules.pop("_planted_private_uses", None)
    for needle in (
        ":1: from json.encoder import encode_basestring_ascii: not a public name",
        ":2: from scrapy.linkextractors.lxmlhtml import _collect_string_content",
        ":3: from scrapy.utils.misc import arg_to_iter: not a documented public name",
        ":7: _build_request: overrides a private method",
        ":8: _build_request: a private name of a third-party class",
        ":11: _update_host_regex: a private name",  # (Scrapy 2.13 lacks it)
        ":12: _allowed_domains: a private name",
        ":14: _process_links: a private name",
    ):
        assert needle in problems, (needle, problems)
    assert "_planted_private_uses.py:4" not in problems  # CrawlSpider is public


# ------------------------------------------------------------------ the seams


def follow_rules(spidercls: type[CrawlSpider], response: HtmlResponse) -> list[Any]:
    """The requests the rules of a *spidercls* spider (built by Scrapy, from a crawler)
    make for the links of *response*: ``CrawlSpider.parse_with_rules`` (public) with no
    callback, as for a response of a link its rules follow."""
    from scrapy.utils.test import get_crawler

    spider = spidercls.from_crawler(get_crawler(spidercls))
    out: list[Any] = []

    async def collect() -> None:
        async for request in spider.parse_with_rules(response, None, {}, follow=True):
            out.append(request)

    failures: list[Any] = []
    done = Deferred.fromCoroutine(collect())  # nothing is awaited: it runs to the end now
    done.addErrback(failures.append)
    assert done.called
    if failures:
        failures[0].raiseException()
    return out


def test_supported_range_names_the_installed_scrapy() -> None:
    # No upper bound here: a newer Scrapy is supported as long as the seams hold
    # (the import-time checks of compat.py and the tests below say when one breaks).
    major_minor = tuple(int(x) for x in scrapy.__version__.split(".")[:2])
    assert major_minor >= (2, 18), scrapy.__version__
    assert compat.SUPPORTED_SCRAPY == "Scrapy 2.18 or later (tested on 2.18.0 and the newest)"


def test_verbatim_url_keeps_the_url_as_given() -> None:
    """The floor of the range: Scrapy 2.17 added ``meta["verbatim_url"]``."""
    from scrapy import Request

    for url in ("http://www.example.test/search?", "http://www.example.test/a#"):
        assert Request(url, meta={"verbatim_url": True}).url == url
        assert Request(url).url != url  # what it protects against


def test_build_request_seam_signature_and_use() -> None:
    """``CrawlSpider._build_request(rule_index, link)`` exists and builds rule requests."""
    assert list(inspect.signature(CrawlSpider._build_request).parameters) == [
        "self", "rule_index", "link",
    ]
    from iri_scrapy import IRICrawlSpider, IRILinkExtractor

    class Spider(IRICrawlSpider):
        name = "t"
        rules = (Rule(IRILinkExtractor(), cb_kwargs={"k": 1}),)

    body = b'<a href="/search?">s</a><a href="/plain">p</a>'
    response = HtmlResponse("http://www.example.test/", body=body, encoding="utf-8")
    # CrawlSpider's own loop: it must still call _build_request for every link
    requests = follow_rules(Spider, response)
    assert [r.url for r in requests] == [
        "http://www.example.test/search?", "http://www.example.test/plain",
    ]
    assert requests[0].meta["rule"] == 0 and requests[0].meta["link_text"] == "s"
    assert requests[0].meta["verbatim_url"] and "verbatim_url" not in requests[1].meta
    assert requests[0].callback == requests[1].callback  # CrawlSpider's rule callback


def test_rule_request_hook_sees_request_and_link() -> None:
    seen: list[tuple[str, str]] = []

    def links(found: list[Link]) -> list[Link]:  # the link as an IRI-aware extractor gives it
        return [Link("http://www.example.test/a?", "a")]

    class Spider(compat.LinkRequestCrawlSpider):
        name = "t"
        rules = (Rule(process_links=links),)

        def rule_request(self, request: Any, link: Link) -> Any:
            seen.append((request.url, link.url))
            return request

    response = HtmlResponse("http://www.example.test/", body=b'<a href="/a?">a</a>',
                            encoding="utf-8")
    (request,) = follow_rules(Spider, response)
    assert seen == [("http://www.example.test/a", "http://www.example.test/a?")]
    assert request.url == "http://www.example.test/a"  # Request() dropped the bare "?"


def test_close_spider_async_is_there() -> None:
    """Public since 2.14; the Redis filter closes the spider with it."""
    params = inspect.signature(ExecutionEngine.close_spider_async).parameters
    assert params["reason"].kind is inspect.Parameter.KEYWORD_ONLY
    assert inspect.iscoroutinefunction(ExecutionEngine.close_spider_async)


def test_a_missing_seam_fails_at_import_with_a_clear_message() -> None:
    code = (
        "import scrapy.spiders\n"
        "del scrapy.spiders.CrawlSpider._build_request\n"
        "import iri_scrapy.plugin.compat\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120,
        check=False,
    )
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last == (
        "ImportError: iri_scrapy needs scrapy.spiders.CrawlSpider._build_request(rule_index, "
        f"link), which Scrapy {scrapy.__version__} does not have; supported: Scrapy 2.18 or later (tested on 2.18.0 and the newest)"
    )


@pytest.mark.parametrize("name", ["IRICrawlSpider", "IRILinkExtractor"])
def test_public_classes_import_through_compat(name: str) -> None:
    import iri_scrapy

    assert getattr(iri_scrapy, name).__module__ == "iri_scrapy.plugin.linkextractor"


def test_every_scrapy_facing_adapter_runs_the_checks() -> None:
    """Each plugin, frontier, add-on or command module that imports Scrapy at run time
    imports compat first (``from iri_scrapy.plugin import compat`` or names from it)."""
    paths = [*(PACKAGE / "plugin").glob("*.py"), *(PACKAGE / "frontier").glob("*.py"),
             PACKAGE / "addon.py", PACKAGE / "commands.py"]
    assert len(paths) > 10
    for path in sorted(paths):
        if path.name in ("compat.py", "__init__.py"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        runtime = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        meets_scrapy = any(
            isinstance(n, ast.ImportFrom) and (n.module or "").startswith(
                ("scrapy", "iri_scrapy.plugin.middleware", "iri_scrapy.plugin.dupefilter"))
            for n in runtime
        )
        checks = any(
            isinstance(n, ast.ImportFrom) and (
                n.module == "iri_scrapy.plugin.compat"
                or (n.module == "iri_scrapy.plugin" and any(a.name == "compat" for a in n.names)))
            for n in runtime
        )
        assert checks or not meets_scrapy, path.name


# ----------------------------------------- safe_url_string: IDNA 2008 in Request()


def test_safe_url_string_seam_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    """Request._set_url and w3lib.html's base/meta refresh parsers call the module-level
    safe_url_string, which is w3lib.url's function (compat's clones replace that name)."""
    import scrapy.http.request as request_module
    import w3lib.html
    import w3lib.url

    assert not compat.idna2008_installed()
    assert request_module.safe_url_string is w3lib.url.safe_url_string
    assert w3lib.html.safe_url_string is w3lib.url.safe_url_string
    from scrapy import Request

    assert "safe_url_string" in Request._set_url.__code__.co_names
    assert "safe_url_string" in w3lib.html.get_base_url.__code__.co_names
    assert list(inspect.signature(w3lib.url.safe_url_string).parameters) == [
        "url", "encoding", "path_encoding", "quote_path",
    ]
    # get_base_url and get_meta_refresh make their URLs with that module-level name
    monkeypatch.setattr(w3lib.html, "safe_url_string", lambda url, *a, **k: "http://seam.test/")
    html = '<base href="/b/"><meta http-equiv="refresh" content="0; url=/r">'
    assert w3lib.html.get_base_url(html, "http://x.test/") == "http://seam.test/"
    assert w3lib.html.get_meta_refresh(html, "http://x.test/") == (0.0, "http://seam.test/")


def test_idna2008_seam_changes_nothing_for_other_crawlers_and_is_counted() -> None:
    """Installed, the seam only records spellings: Request() and w3lib's parsers give
    exactly what they give without it; apply_idna2008 (the add-on's components) and the
    cloned parsers give the IDNA 2008 URLs."""
    from scrapy import Request
    from w3lib.html import get_base_url, get_meta_refresh

    html = ('<base href="http://straße.test/b/"><meta http-equiv="refresh" '
            'content="0; url=http://σοφός.test/">')
    urls = ["http://straße.test/s?", "http://example.test/search?", "http://example.test/straße",
            "http://क्\u200dष.test/?#f", "http://example.test/a?b"]
    stock = [Request(u).url for u in urls]
    assert stock[0] == "http://strasse.test/s"
    compat.install_idna2008()
    compat.install_idna2008()
    try:
        requests = [Request(u) for u in urls]
        assert [r.url for r in requests] == stock  # exactly stock
        assert get_base_url(html, "http://x.test/") == "http://strasse.test/b/"
        assert get_meta_refresh(html, "http://x.test/") == (0.0, "http://xn--0xahbl4a.test/")
        changed = [compat.apply_idna2008(r) for r in requests]
        assert [r.url for r in requests] == [
            "http://xn--strae-oqa.test/s?", "http://example.test/search?",
            "http://example.test/stra%C3%9Fe", "http://xn--11b2ezcw70k.test/?#f",
            "http://example.test/a?b"]
        assert changed == [True, True, False, True, False]
        assert [compat.apply_idna2008(r) for r in requests] == [False] * len(urls)  # once
        assert compat.get_base_url(html, "http://x.test/") == "http://xn--strae-oqa.test/b/"
        assert compat.get_meta_refresh(html, "http://x.test/") == (
            0.0, "http://xn--0xagbn4a.test/")
        compat.uninstall_idna2008()
        assert compat.idna2008_installed()
    finally:
        compat.uninstall_idna2008()
    assert not compat.idna2008_installed()
    late = Request("http://straße.test/s?")  # not recorded once uninstalled
    assert late.url == "http://strasse.test/s" and not compat.apply_idna2008(late)


def test_idna2008_safe_url_string_is_w3lib_but_for_host_and_bare_query() -> None:
    """Same output as w3lib on every w3lib test input, except a non-ASCII host (UTS 46
    non-transitional A-label) and a kept bare "?"."""
    import json

    from w3lib.url import safe_url_string

    from iri_scrapy.core.hosts import host_to_ascii

    inputs = [json.loads(line)["input"] for line in
              (ROOT / "tests" / "data" / "w3lib_safe_url_string.jsonl").read_text().splitlines()]
    inputs += ["http://straße.test/a?q=é", "http://user:pw@ΣΑΣ.test:81/?", "http://h.test/?#f",
               "http://a\u200db.test/", "http://[::1]:8/x?", "  http://faß.de/x  "]
    differ = 0
    for url in inputs:
        try:
            theirs = safe_url_string(url, "cp1251")
        except Exception as exc:  # noqa: BLE001 - the same error from ours
            with pytest.raises(type(exc)):
                compat.idna2008_safe_url_string(url, "cp1251")
            continue
        ours = compat.idna2008_safe_url_string(url, "cp1251")
        if ours == theirs:
            continue
        differ += 1
        host = url.strip().split("/")[2].rpartition("@")[2].split(":")[0]
        try:
            alabel = host_to_ascii(host)
        except Exception:  # noqa: BLE001
            alabel = None
        if alabel is not None and not host.isascii() and alabel not in theirs:
            assert alabel in ours, url
            theirs = theirs.replace(safe_url_string(f"http://{host}/").split("/")[2], alabel)
        assert ours in (theirs, theirs.replace("#", "?#", 1), theirs + "?"), (url, ours, theirs)
    assert differ >= 4


def test_a_changed_safe_url_string_seam_fails_at_import() -> None:
    code = (
        "import scrapy.http.request\n"
        "scrapy.http.request.safe_url_string = lambda url, encoding='utf8': url\n"
        "import iri_scrapy.plugin.compat\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120,
        check=False,
    )
    assert proc.returncode != 0
    assert "safe_url_string" in proc.stderr.strip().splitlines()[-1]
    assert proc.stderr.strip().splitlines()[-1].startswith("ImportError: iri_scrapy needs ")


def test_fetch_command_seam() -> None:
    """scrapy fetch builds Request() in run(args, opts), before any add-on: ours is registered."""
    from importlib.metadata import entry_points

    from scrapy.commands.fetch import Command

    assert list(inspect.signature(Command.run).parameters) == ["self", "args", "opts"]
    assert "Request" in Command.run.__code__.co_names
    (ep,) = [e for e in entry_points(group="scrapy.commands") if e.name == "fetch"]
    from iri_scrapy import commands

    assert ep.load() is commands.FetchCommand
    assert issubclass(commands.FetchCommand, Command)
    from scrapy.settings import Settings

    assert commands.addon_wants_idna2008(Settings({"ADDONS": {"iri_scrapy.Addon": 0}}))
    assert not commands.addon_wants_idna2008(Settings({"ADDONS": {"iri_scrapy.Addon": None}}))
    assert not commands.addon_wants_idna2008(Settings({}))
    assert not commands.addon_wants_idna2008(Settings(
        {"ADDONS": {"iri_scrapy.Addon": 0}, "IRI_IDNA2008_REQUESTS": False}))


def test_idna2008_safe_url_string_shortcut_only_where_w3lib_keeps_the_url() -> None:
    """URLs the shortcut returns as they are (no w3lib call) are exactly ones w3lib's
    safe_url_string returns unchanged: random http(s) URLs of that shape and near it."""
    import random

    from w3lib.url import safe_url_string

    rnd = random.Random(12)
    good = "aZ09_.~!$&()*+,;=:@/-'"
    bad = "?#[]|\\ \"<>^`{}\x7f\té%"
    tricky = ["/.", "/..", "xn--", "%2e", "%2E", "//", "?", "#", "%41", "%7e", "%zz", "%C3%A9"]
    hosts = ["1.2.3.4", "123", "a.1", "xn--bcher-kva.example", "a..b", ".a", "a.", "-a.b-",
             "a" * 64 + ".com", "a" * 63 + ".com", "0x1.com", "a.0x1", "docs.example"]

    def component(n: int) -> str:
        out = []
        for _ in range(rnd.randint(0, n)):
            r = rnd.random()
            out.append(rnd.choice(tricky) if r < 0.08 else rnd.choice(bad) if r < 0.12
                       else rnd.choice(good))
        return "".join(out)

    kept = 0
    for _ in range(30000):
        host = rnd.choice(hosts) if rnd.random() < 0.3 else ".".join(
            "".join(rnd.choice("abz09-") for _ in range(rnd.randint(1, 6)))
            for _ in range(rnd.randint(1, 3)))
        url = f"{rnd.choice(['http', 'https'])}://{host}/{component(12)}"
        if rnd.random() < 0.5:
            url += "?" + component(8)
        if rnd.random() < 0.5:
            url += "#" + component(8)
        if compat.w3lib_keeps(url):
            kept += 1
            assert safe_url_string(url) == url
            assert compat.idna2008_safe_url_string(url) == url
    assert kept > 3000
    for url in ("http://docs.example/library/os.path.html#os.path.join",
                "https://a-b.example/x/y;p=1?q=a&b=%C3%A9#f?x'"):
        assert compat.w3lib_keeps(url)
        assert safe_url_string(url) == url
    for url in ("http://h.example/?", "http://h.example/#", "http://h.example:81/",
                "http://h.example/?q='", "http://H.example/", "http://h.example/a/../b",
                "http://1.2.3.4/", "http://h.example/%7e", "http://u@h.example/"):
        assert not compat.w3lib_keeps(url) or safe_url_string(url) == url
