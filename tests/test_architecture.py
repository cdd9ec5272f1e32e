"""The layers of docs/architecture.md, read from the code's own imports.

Every ``import`` and ``from ... import`` of every module of the package, at module
level, inside functions and under ``TYPE_CHECKING`` alike, is an arrow.  The tests
fail on any import circle, on any arrow that runs up a layer or sideways between
two layers that must not know each other, and on a third-party import a layer may
not make.  The Scrapy-free promise is also checked at run time: ``import
iri_scrapy``, ``normalize``, ``explain`` and the CLI's ``dedupe`` load no Scrapy,
w3lib or Twisted.  Finally every dotted ``iri_scrapy.x.y`` path that the README or
``docs/`` names must import.
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

import iri_scrapy

PACKAGE = Path(iri_scrapy.__file__).resolve().parent
REPO = Path(__file__).resolve().parents[1]

#: Each layer, what it may import of the package (besides itself), and the
#: third-party top-level packages it may import.  The same table is drawn in
#: docs/architecture.md.
LAYERS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "version": (frozenset(), frozenset()),
    "core": (frozenset(), frozenset({"idna", "regex"})),
    "store": (frozenset({"core"}), frozenset()),
    "plugin": (frozenset({"core", "store"}),
               frozenset({"scrapy", "w3lib", "twisted", "parsel", "lxml", "typing_extensions"})),
    "integrations": (frozenset({"core", "store"}), frozenset({"pyspark", "pyarrow"})),
    "frontier": (frozenset({"core", "store", "plugin"}),
                 frozenset({"scrapy", "twisted", "redis", "scrapy_redis", "typing_extensions"})),
    "protocol": (frozenset({"core", "store", "plugin", "frontier"}),
                 frozenset({"scrapy", "twisted", "redis", "typing_extensions"})),
    "addon": (frozenset({"core", "store", "plugin", "frontier", "protocol"}),
              frozenset({"scrapy", "typing_extensions"})),
    "commands": (frozenset({"plugin", "addon"}), frozenset({"scrapy"})),
    "cli": (frozenset({"version", "core", "store", "integrations"}),
            frozenset({"pyspark", "pyarrow"})),
    "facade": (frozenset({"version", "core"}), frozenset()),
}


def layer_of(module: str) -> str:
    """The layer of a module of the package, by its dotted name."""
    parts = module.split(".")
    if module in ("iri_scrapy", "iri_scrapy.__main__"):
        return "cli" if module.endswith("__main__") else "facade"
    if parts[1] in ("addon", "commands", "version"):
        return parts[1]
    if parts[1] in LAYERS:
        return parts[1]
    raise AssertionError(f"{module} is in no layer of docs/architecture.md: add it there and here")


@cache
def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        name = ".".join(rel.parts)
        found[name.removesuffix(".__init__")] = path
    return found


@cache
def imports() -> dict[str, dict[str, int]]:
    """module -> {imported module of the package or third-party top-level name: line}."""
    mods = modules()
    out: dict[str, dict[str, int]] = {}
    for name, path in mods.items():
        is_pkg = path.name == "__init__.py"
        seen: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = name.split(".") if is_pkg else name.split(".")[:-1]
                    anchor = anchor[: len(anchor) - node.level + 1]
                    base = ".".join([*anchor, *([base] if base else [])])
                targets = [base] + [f"{base}.{a.name}" for a in node.names]
            for target in targets:
                if target.split(".")[0] != "iri_scrapy":
                    seen.setdefault(target.split(".")[0], node.lineno)
                    continue
                while target and target not in mods:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    seen.setdefault(target, node.lineno)
        out[name] = seen
    return out


def test_the_layout_is_what_the_table_says() -> None:
    layers = {layer_of(m) for m in modules()}
    assert layers == set(LAYERS), layers ^ set(LAYERS)


def test_no_import_circle() -> None:
    graph = {m: {t for t in ts if t in modules()} for m, ts in imports().items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(m: str) -> None:  # Tarjan's strongly connected components
        index[m] = low[m] = len(index)
        stack.append(m)
        for t in graph[m]:
            if t not in index:
                visit(t)
                low[m] = min(low[m], low[t])
            elif t in stack:
                low[m] = min(low[m], index[t])
        if low[m] == index[m]:
            component = []
            while True:
                t = stack.pop()
                component.append(t)
                if t == m:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for m in sorted(graph):
        if m not in index:
            visit(m)
    assert circles == []


def test_no_import_runs_up_a_layer() -> None:
    bad = []
    for module, targets in imports().items():
        mine = layer_of(module)
        allowed, third_party = LAYERS[mine]
        for target, line in targets.items():
            if target.startswith("iri_scrapy"):
                theirs = layer_of(target)
                if theirs != mine and theirs not in allowed:
                    bad.append(f"{modules()[module].relative_to(PACKAGE.parent)}:{line} "
                               f"({mine}) imports {target} ({theirs})")
            elif target not in sys.stdlib_module_names and target not in third_party:
                bad.append(f"{modules()[module].relative_to(PACKAGE.parent)}:{line} "
                           f"({mine}) imports {target}")
    assert bad == []


def test_the_checks_see_an_arrow_that_runs_up(tmp_path: Path) -> None:
    """The reader above finds function-level and relative imports (a check that can
    see nothing passes everything)."""
    got = imports()
    assert "iri_scrapy.addon" in got["iri_scrapy.commands"]  # inside a function
    assert "iri_scrapy.core.surt" in got["iri_scrapy.core.ladder"]
    assert "scrapy" in got["iri_scrapy.plugin.compat"]
    assert "scrapy" not in got["iri_scrapy.core.ladder"]


# --------------------------------------------------------------- no hidden wiring
#
# The plugin's components share one crawl's state through the crawl context the
# add-on puts into the crawler's settings (iri_scrapy/plugin/context.py), not
# through attributes set on Scrapy's crawler nor module-level registries.

#: ``crawler.<attr> = ...`` that is Scrapy's own attribute, set the one way Scrapy
#: offers to make a failed start's exit status 1 (no public way yet).
SCRAPY_CRAWLER_ATTRIBUTES = frozenset({"spider"})
#: Modules allowed a module-level weak mapping: the seams of compat (``Request()``'s
#: spelling, see its docstring).
WEAK_REGISTRY_ALLOWED = frozenset({"iri_scrapy.plugin.compat"})
_WEAK = frozenset({"WeakKeyDictionary", "WeakValueDictionary", "WeakSet"})


def _names_crawler(node: ast.expr) -> bool:
    """True for ``crawler``, ``self.crawler``, ``x._crawler`` and the like."""
    name = node.id if isinstance(node, ast.Name) else (
        node.attr if isinstance(node, ast.Attribute) else "")
    return name.lstrip("_").endswith("crawler")


def crawler_attributes_set(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, attribute) of each ``setattr(crawler, ...)`` and ``crawler.x = ...``."""
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id == "setattr" and node.args and _names_crawler(node.args[0])):
            found.append((node.lineno, "setattr"))
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        for target in targets:
            for sub in ast.walk(target):
                if isinstance(sub, ast.Attribute) and _names_crawler(sub.value) and (
                        sub.attr not in SCRAPY_CRAWLER_ATTRIBUTES):
                    found.append((node.lineno, sub.attr))
    return found


def module_level_weak_mappings(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, name) of each module-level ``WeakKeyDictionary``/``WeakValueDictionary``/
    ``WeakSet`` (a registry keyed by objects: a crawler, a request, a response)."""
    found = []
    for node in tree.body:
        if not isinstance(node, (ast.Assign, ast.AnnAssign)):
            continue
        parts = [node.value] if node.value is not None else []
        if isinstance(node, ast.AnnAssign):
            parts.append(node.annotation)
        names = [sub.id if isinstance(sub, ast.Name) else sub.attr
                 for part in parts for sub in ast.walk(part)
                 if isinstance(sub, (ast.Name, ast.Attribute))]
        weak = [name for name in names if name in _WEAK]
        if weak:
            found.append((node.lineno, weak[0]))
    return found


def _scrapy_facing() -> dict[str, Path]:
    return {m: p for m, p in modules().items()
            if layer_of(m) in ("plugin", "frontier", "addon", "commands")}


def test_no_attribute_is_set_on_the_crawler() -> None:
    bad = [f"{path.relative_to(PACKAGE.parent)}:{line} sets crawler.{attr}"
           for module, path in _scrapy_facing().items()
           for line, attr in crawler_attributes_set(ast.parse(path.read_text("utf-8")))]
    assert bad == []


def test_no_module_level_registry() -> None:
    bad = [f"{path.relative_to(PACKAGE.parent)}:{line} {name} at module level"
           for module, path in _scrapy_facing().items() if module not in WEAK_REGISTRY_ALLOWED
           for line, name in module_level_weak_mappings(ast.parse(path.read_text("utf-8")))]
    assert bad == []


def test_the_hidden_wiring_checks_see_what_they_look_for() -> None:
    source = """
from weakref import WeakKeyDictionary
import weakref
_A: WeakKeyDictionary[object, int] = WeakKeyDictionary()
_B = weakref.WeakSet()
def f(crawler, self):
    setattr(crawler, "_x", 1)
    crawler._iri = 2
    self.crawler.rules = 3
    crawler.spider = None  # Scrapy's own attribute
    other.value = 4
    _C = WeakKeyDictionary()  # not module level
"""
    tree = ast.parse(source)
    assert sorted(crawler_attributes_set(tree)) == [(7, "setattr"), (8, "_iri"), (9, "rules")]
    assert module_level_weak_mappings(tree) == [(4, "WeakKeyDictionary"), (5, "WeakSet")]


def requests_returned(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, what) of each ``process_request`` that may return something: one not
    annotated ``-> None`` or with a ``return <value>`` (other than ``None``)."""
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                and node.name == "process_request"):
            continue
        returns = node.returns
        if not (isinstance(returns, ast.Constant) and returns.value is None):
            found.append((node.lineno, "annotation"))
        for sub in ast.walk(node):
            if (isinstance(sub, ast.Return) and sub.value is not None
                    and not (isinstance(sub.value, ast.Constant) and sub.value.value is None)):
                found.append((sub.lineno, "return"))
    return found


def test_no_downloader_middleware_returns_a_request() -> None:
    """Entry, stamp, fingerprint, dupefilter, once: a request returned from a downloader
    middleware's ``process_request`` would go back through the scheduler (plugin/entry.py)."""
    bad = [f"{path.relative_to(PACKAGE.parent)}:{line} process_request {what}"
           for module, path in _scrapy_facing().items()
           for line, what in requests_returned(ast.parse(path.read_text("utf-8")))]
    assert bad == []
    source = """
class A:
    def process_request(self, request) -> None:
        return None
class B:
    async def process_request(self, request) -> Request | None:
        return request.replace(url="x")
"""
    assert requests_returned(ast.parse(source)) == [(6, "annotation"), (7, "return")]


def test_the_lazy_names_of_the_facade_resolve() -> None:
    """``iri_scrapy.Addon`` & co. are loaded on first use; each names a real class."""
    for name, module in iri_scrapy._LAZY.items():
        assert name in iri_scrapy.__all__
        assert getattr(importlib.import_module(module), name).__name__ == name
        assert module in modules()


SCRAPY_FREE = """
import sys, tempfile, os
import iri_scrapy
assert iri_scrapy.normalize("HTTP://Example.COM:80/a/./b/%7euser") == "http://example.com/a/b/~user"
assert iri_scrapy.explain("http://a/", "HTTP://A:80/").equivalent
iri_scrapy.surt("http://www.example.com/a")
from iri_scrapy.cli.main import main
with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "urls.txt")
    with open(path, "w") as f:
        f.write("HTTP://EXAMPLE.COM\\nhttp://example.com/\\n")
    sys.stdout = open(os.devnull, "w")
    sys.stderr = open(os.devnull, "w")
    code = main(["dedupe", "-o", os.path.join(d, "out.txt"), path])
    sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
assert code == 0, code
loaded = sorted({m.split(".")[0] for m in sys.modules} & {"scrapy", "w3lib", "twisted", "pyspark", "redis"})
print(" ".join(loaded))
"""


def test_the_core_and_the_cli_load_no_scrapy() -> None:
    out = subprocess.run([sys.executable, "-c", SCRAPY_FREE], capture_output=True, text=True,
                         timeout=120, cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == ""


def documented_paths() -> list[str]:
    texts = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")),
             REPO / "sample_project" / "README.md"]
    found = set()
    for path in texts:
        found |= set(re.findall(r"(?<![\w/.])(iri_scrapy(?:\.[A-Za-z_]\w*)+)",
                                path.read_text(encoding="utf-8")))
    return sorted(found)


def test_documentation_names_some_paths() -> None:
    assert len(documented_paths()) >= 3


@pytest.mark.parametrize("dotted", documented_paths())
def test_every_documented_import_path_works(dotted: str) -> None:
    module, _, attr = dotted, "", ""
    while True:
        try:
            obj = importlib.import_module(module)
            break
        except ModuleNotFoundError:
            module, _, last = module.rpartition(".")
            attr = f"{last}.{attr}" if attr else last
            assert module, dotted
    for name in filter(None, attr.split(".")):
        obj = getattr(obj, name)


# ------------------------------------------------------------------ public names


def all_lists() -> dict[str, tuple[list[str], set[str]]]:
    """module -> (the names of its ``__all__``, the names it defines: top-level
    classes, functions and assignments, and the strings its ``__getattr__`` names)."""
    found = {}
    for name, path in modules().items():
        body = ast.parse(path.read_text(encoding="utf-8")).body
        listed: list[str] | None = None
        defined: set[str] = set()
        for node in body:
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                defined.add(node.name)
            if isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
                defined |= {c.value for c in ast.walk(node)
                            if isinstance(c, ast.Constant) and isinstance(c.value, str)}
            targets = (node.targets if isinstance(node, ast.Assign)
                       else [node.target] if isinstance(node, ast.AnnAssign) else [])
            for target in targets:
                if isinstance(target, ast.Name):
                    defined.add(target.id)
                    if target.id == "__all__":
                        assert isinstance(node.value, (ast.List, ast.Tuple)), name
                        listed = [ast.literal_eval(e) for e in node.value.elts]
        if listed is not None:
            found[name] = (listed, defined)
    return found


def documented_code_words() -> set[str]:
    """Every identifier in the code (spans and blocks) of the README and docs/."""
    texts = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")),
             REPO / "sample_project" / "README.md"]
    fence = re.compile(r"^(`{3,}|~{3,})[^\n]*\n(.*?)^\1", re.S | re.M)
    words: set[str] = set()
    for path in texts:
        text = path.read_text(encoding="utf-8")
        code = [m.group(2) for m in fence.finditer(text)]
        code += re.findall(r"`([^`\n]+)`", fence.sub("", text))
        for span in code:
            words |= set(re.findall(r"[A-Za-z_]\w*", span))
    return words


def test_public_names_are_the_facades() -> None:
    """docs/architecture.md, *Public names*: beside the facade, a module's ``__all__``
    lists only names it defines (or builds in its ``__getattr__``), not on the
    facade already, that the docs name: internals are not advertised."""
    lists = all_lists()
    facade, _ = lists.pop("iri_scrapy")
    assert facade == iri_scrapy.__all__
    eager = {name: getattr(getattr(iri_scrapy, name), "__module__", None)
             for name in facade if name not in iri_scrapy._LAZY}
    words = documented_code_words()
    bad = []
    for module, (names, defined) in sorted(lists.items()):
        for name in names:
            if name not in defined:
                bad.append(f"{module}.{name}: not defined there (import it from its module)")
            if module in (iri_scrapy._LAZY.get(name), eager.get(name)):
                bad.append(f"{module}.{name}: on the facade already")
            if name not in words:
                bad.append(f"{module}.{name}: named nowhere in README.md or docs/")
    assert bad == []
    assert sum(len(names) for names, _ in lists.values()) <= 30, (
        "a module's __all__ is only for what users import from its path")


# ------------------------------------------------------------------ the optional protocol level

#: The learned protocol level (RFC 3987 section 5.3.4): an optional folder.
PROTOCOL = "iri_scrapy.protocol"
#: The one module outside it that imports it (docs/architecture.md), and what it imports.
PROTOCOL_SEAM = ("iri_scrapy.addon", "iri_scrapy.protocol.level")


def _in_protocol(module: str) -> bool:
    return module == PROTOCOL or module.startswith(PROTOCOL + ".")


def test_only_the_seam_imports_the_protocol_folder() -> None:
    """Nothing in core/ (nor plugin/, frontier/, the facade) imports iri_scrapy.protocol,
    even under TYPE_CHECKING; the add-on imports its ``level`` module, inside a function
    (the folder may be absent)."""
    importers = {module: sorted(t for t in targets if _in_protocol(t))
                 for module, targets in imports().items() if not _in_protocol(module)}
    importers = {module: targets for module, targets in importers.items() if targets}
    seam, level = PROTOCOL_SEAM
    assert importers == {seam: [level]}
    assert not [m for m in importers if layer_of(m) == "core"]
    tree = ast.parse(modules()[seam].read_text(encoding="utf-8"))
    in_functions = {id(node) for fn in ast.walk(tree) if isinstance(fn, ast.FunctionDef)
                    for node in ast.walk(fn)}
    protocol_imports = [node for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                        and _in_protocol(node.module or "")]
    assert protocol_imports and all(id(node) in in_functions for node in protocol_imports)


WITHOUT_PROTOCOL = r'''
import importlib, json, os, pkgutil, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

# An editable install (pip install -e) adds a finder that maps iri_scrapy's submodules
# to the checkout when the copy lacks them: without it, the copy is all there is.
sys.meta_path[:] = [f for f in sys.meta_path if "__editable__" not in repr(f)
                    and "_EditableFinder" not in repr(f)]
import iri_scrapy

package = Path(iri_scrapy.__file__).parent
assert str(package).startswith(sys.argv[1]), package  # the copy, not the checkout
assert not (package / "protocol").exists()
try:
    import iri_scrapy.protocol
except ModuleNotFoundError:
    pass
else:
    raise AssertionError(f"iri_scrapy.protocol found at {iri_scrapy.protocol.__path__}")
for info in pkgutil.walk_packages(iri_scrapy.__path__, "iri_scrapy."):
    if info.name.endswith(".__main__"):
        continue
    try:
        importlib.import_module(info.name)
    except ModuleNotFoundError as exc:  # an optional third-party package is fine
        if (exc.name or "").startswith("iri_scrapy"):
            raise
assert iri_scrapy.normalize("HTTP://Example.COM:80/a/./b/%7euser") == "http://example.com/a/b/~user"

PAGES = {"/": ["/a", "/%61", "/old", "/b"], "/a": ["/"], "/b": ["/a"]}

class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/old":
            self.send_response(301)
            self.send_header("Location", "/B/../b")
            self.end_headers()
            return
        links = PAGES.get(self.path)
        body = "".join(f'<a href="{href}">x</a>' for href in links or []).encode()
        self.send_response(200 if links is not None else 404)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
threading.Thread(target=server.serve_forever, daemon=True).start()
base = f"http://127.0.0.1:{server.server_address[1]}"

import scrapy
from scrapy.crawler import CrawlerProcess

class Site(scrapy.Spider):
    name = "site"
    start_urls = [base + "/"]
    custom_settings = {"JOBDIR": sys.argv[2]}

    def parse(self, response):
        yield {"url": response.url}
        yield from response.follow_all(css="a")

class Learned(Site):
    name = "learned"
    custom_settings = {"IRI_LEVEL": "protocol"}

common = {"ADDONS": {"iri_scrapy.Addon": 0}, "LOG_LEVEL": "WARNING",
          "TELNETCONSOLE_ENABLED": False, "ROBOTSTXT_OBEY": False}
process = CrawlerProcess(common)
site = process.create_crawler(Site)
learned = process.create_crawler(Learned)
process.crawl(site)
process.crawl(learned)
process.start()
server.shutdown()
print(json.dumps({
    "site": {k: site.stats.get_value(k) for k in
             ("finish_reason", "item_scraped_count", "downloader/response_status_count/301")},
    "site_mw": sorted(type(c).__name__ for c in site.engine.downloader.middleware.middlewares),
    "learned": learned.stats.get_value("finish_reason"),
    "learned_requests": learned.stats.get_value("downloader/request_count"),
    "bootstrap_failed": process.bootstrap_failed,
}))
'''


@pytest.mark.slow
def test_the_package_runs_without_the_protocol_folder(tmp_path: Path) -> None:
    """A copy of the package without ``iri_scrapy/protocol/``: every module imports,
    ``normalize`` works, a crawl with the add-on (JOBDIR frontier, a redirect,
    aliases) fetches each page once, and ``IRI_LEVEL = "protocol"`` is refused at
    start (one ERROR line naming the missing folder, nothing fetched)."""
    copy = tmp_path / "copy"
    shutil.copytree(PACKAGE, copy / "iri_scrapy",
                    ignore=lambda d, names: [n for n in names if n == "__pycache__" or (
                        n == "protocol" and Path(d) == PACKAGE)])
    env = {**os.environ, "PYTHONPATH": str(copy)}
    out = subprocess.run([sys.executable, "-c", WITHOUT_PROTOCOL, str(copy),
                          str(tmp_path / "jobdir")], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["site"] == {"finish_reason": "finished", "item_scraped_count": 3,
                           "downloader/response_status_count/301": 1}, out.stderr[-3000:]
    assert "IRILocationMiddleware" in got["site_mw"]
    assert got["learned"] == "iri_bad_setting" and not got["learned_requests"]
    assert got["bootstrap_failed"]  # scrapy crawl's exit status 1
    errors = [line for line in out.stderr.splitlines() if " ERROR: " in line]
    assert len(errors) == 1 and "iri_scrapy/protocol/" in errors[0], errors
