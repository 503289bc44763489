"""What the repository map needs of a Python module without outlining it: imports and names.

``python_imports`` feeds the import graph (the repository map's ranking, the planner's
one-hop read scopes); ``scan_python`` adds the defined class and function names, from the
same one parse (``ast``: the code is parsed, never executed). ``planner.repomap.pyscan`` reads
the same facts by line patterns, faster, and is tested against this.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import NamedTuple

__all__ = [
    "PythonFacts",
    "from_base",
    "imported_names",
    "is_test_module",
    "python_imports",
    "scan_python",
    "tree_facts",
]


def python_imports(source: str, module_path: str) -> list[str]:
    """Dotted names a module may import, relative imports resolved against its package.

    ``import a.b`` gives ``a.b``; ``from m import x`` gives ``m`` and ``m.x`` (``x`` may be a
    submodule; callers keep the names that exist). ``module_path`` is the repo-relative POSIX
    path of the module; its directory is the package a leading ``.`` refers to. Imports that
    climb above the repository root and files that do not parse give nothing.
    """
    facts = scan_python(source, module_path)
    return facts.imports if facts is not None else []


class PythonFacts(NamedTuple):
    """What the repository map needs from a module without outlining it."""

    imports: list[str]
    symbols: list[str]


def scan_python(source: str, module_path: str) -> PythonFacts | None:
    """Imports (as ``python_imports``) and defined class/function names, from one parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return tree_facts(tree, module_path)


def tree_facts(tree: ast.Module, module_path: str) -> PythonFacts:
    """``scan_python`` of a module already parsed (``outline.parsed``)."""
    package = [p for p in module_path.split("/")[:-1] if p not in ("", ".")]
    found: dict[str, None] = {}
    symbols: dict[str, None] = {}
    for node in _statements(tree.body):
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.update(dict.fromkeys(imported_names(node, package)))
        elif isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            symbols[node.name] = None
    return PythonFacts(list(found), list(symbols))


def imported_names(node: ast.Import | ast.ImportFrom, package: list[str]) -> Iterator[str]:
    """The dotted names one import statement may load: a from-import's base module, then
    each name under it (a submodule, or a symbol the caller cannot tell from one)."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
        return
    base = from_base(node, package)
    if base is None:
        return
    if base:
        yield base
    for alias in node.names:
        if alias.name != "*":
            yield f"{base}.{alias.name}" if base else alias.name


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement, nested ones included, without visiting expressions (``ast.walk`` does,
    and imports and definitions are only ever statements)."""
    stack = [body]
    while stack:
        for node in stack.pop():
            yield node
            for field in ("body", "orelse", "finalbody"):
                block = getattr(node, field, None)
                if block:
                    stack.append(block)
            for holder in (*getattr(node, "handlers", ()), *getattr(node, "cases", ())):
                stack.append(holder.body)


def from_base(node: ast.ImportFrom, package: list[str]) -> str | None:
    """The absolute module a ``from`` import names (relative ones against ``package``), or
    None when it climbs above the repository root."""
    if node.level == 0:
        return node.module or ""
    if node.level - 1 > len(package):
        return None
    parts = package[: len(package) - (node.level - 1)]
    if node.module:
        parts = [*parts, *node.module.split(".")]
    return ".".join(parts)


def is_test_module(path: str) -> bool:
    """Whether ``path`` names a test module by the usual layouts: ``test_*.py``,
    ``*_test.py``, ``conftest.py`` or any file under a ``tests`` directory."""
    p = PurePosixPath(path)
    return (
        p.name.startswith("test_")
        or p.stem.endswith("_test")
        or p.name == "conftest.py"
        or "tests" in p.parent.parts
    )
