"""One root for the package's errors: every exception class derives from ``IRIScrapyError``.

Every module of the package is imported and every exception class it defines (at
module level or inside a class, private ones too) must derive from
:class:`iri_scrapy.IRIScrapyError`, so that ``except iri_scrapy.IRIScrapyError``
catches whatever the package raises of its own and a new class cannot escape the
root.  A class defined inside a function is out of the import's sight, so the
source is read too: no exception class may be defined there.  Each class keeps the
builtin base it had (``ValueError``, ``RuntimeError``) for callers that catch that.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import pkgutil
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import iri_scrapy
from iri_scrapy import IRIScrapyError

PACKAGE = Path(iri_scrapy.__file__).resolve().parent


def module_names() -> list[str]:
    names = ["iri_scrapy"]
    for info in pkgutil.walk_packages(iri_scrapy.__path__, "iri_scrapy."):
        if not info.name.endswith(".__main__"):  # runs the CLI; imports cli.main only
            names.append(info.name)
    return names


def classes_of(owner: object, module: str) -> Iterator[type]:
    """The classes *owner* (a module or a class) defines, nested ones included."""
    for value in vars(owner).values():
        if inspect.isclass(value) and value.__module__ == module and value is not owner:
            yield value
            yield from classes_of(value, module)


@cache
def exception_classes() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for name in module_names():
        for cls in classes_of(importlib.import_module(name), name):
            if issubclass(cls, BaseException):
                found[f"{name}.{cls.__qualname__}"] = cls
    return found


def test_every_exception_class_derives_from_the_root() -> None:
    found = exception_classes()
    assert len(found) >= 20, sorted(found)  # the walk sees the package's errors
    assert "iri_scrapy.frontier.lock.JobdirLocked" in found
    assert "iri_scrapy.cli.main._Error" in found
    escaped = sorted(name for name, cls in found.items() if not issubclass(cls, IRIScrapyError))
    assert escaped == []


def test_the_root_is_on_the_facade_and_the_builtin_bases_stay() -> None:
    assert "IRIScrapyError" in iri_scrapy.__all__
    assert issubclass(IRIScrapyError, Exception) and not issubclass(IRIScrapyError, ValueError)
    found = exception_classes()
    assert issubclass(iri_scrapy.IRISyntaxError, ValueError)
    if importlib.util.find_spec("iri_scrapy.protocol") is not None:  # the optional folder
        assert issubclass(found["iri_scrapy.protocol.document.RulesDataError"], ValueError)
    assert issubclass(found["iri_scrapy.store.crawl_report.ReportError"], ValueError)
    for name in ("frontier.lock.JobdirLocked", "frontier.redis_client.IRIRedisError",
                 "store.fpstore.FingerprintFileError", "store.frontier_file.SalvageError"):
        assert issubclass(found[f"iri_scrapy.{name}"], RuntimeError), name


def classes_in_functions(node: ast.AST, inside: bool = False) -> Iterator[ast.ClassDef]:
    for child in ast.iter_child_nodes(node):
        if inside and isinstance(child, ast.ClassDef):
            yield child
        yield from classes_in_functions(
            child, inside or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)))


def test_no_exception_class_is_defined_inside_a_function() -> None:
    """Where the walk above cannot see: a class statement in a function body whose
    bases name an error (``...Error``, ``...Exception``, a package error)."""
    errors = {name.rpartition(".")[2] for name in exception_classes()}
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in classes_in_functions(ast.parse(path.read_text(encoding="utf-8"))):
            bases = [ast.unparse(b).rpartition(".")[2] for b in node.bases]
            if any(b.endswith(("Error", "Exception")) or b in errors for b in bases):
                bad.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name}")
    assert bad == []


def test_the_function_check_sees_a_class_in_a_function() -> None:
    tree = ast.parse("def f():\n    class Lost(RuntimeError):\n        pass\n")
    assert [c.name for c in classes_in_functions(tree)] == ["Lost"]
