"""One parse of a Python module for the three things a prompt needs of it.

A node's first prompt needs, of each scoped Python file, its outline (``outline.python``),
the names it uses (``outline.pyrefs``: the signatures the change will use, and the plan's
reference warnings) and what it imports (``outline.pyfacts``'s names, read in the same walk
as the names it uses). Each of those parsed the file itself, so ``validate --repo`` of a 1,000-node plan parsed every module three times (issue 29,
item 3). ``python_module`` parses once and derives all three from that one tree, kept per
(text, path) in this process (the facts are only ever read, so one object serves every
caller); ``parse_count`` says how many parses it has made, what a test reads to check that a
plan of many nodes parses each file once. ``forget_parses`` drops them when a command is done
with them (``validate --repo``: every module of the plan, 30,000 objects the interpreter's
collections at exit walked again, issue 29, item 3).
"""

from __future__ import annotations

import ast
import threading
from functools import lru_cache
from typing import NamedTuple

from .pyrefs import ModuleRefs, tree_refs
from .python import OutlineLine, tree_outline_lines, unparsed_lines
from .views import file_outline

__all__ = ["PythonModule", "file_entries", "forget_parses", "parse_count", "python_module"]

_PY_SUFFIXES = (".py", ".pyi")
_parses = 0
_lock = threading.Lock()


class PythonModule(NamedTuple):
    """``python_outline_lines``, ``module_refs`` and ``python_imports`` of one module."""

    outline: list[OutlineLine]
    refs: ModuleRefs | None
    imports: list[str]


@lru_cache(maxsize=4096)
def python_module(text: str, path: str) -> PythonModule:
    """The outline, references and imports of ``text`` at repo-relative ``path``, parsed once;
    a module that does not parse has its first lines as outline, no references, no imports
    (one whose outline cannot be rendered, an expression nested too deep, the same outline)."""
    global _parses
    with _lock:
        _parses += 1
    try:
        tree = ast.parse(text, filename=path or "<unknown>")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        return PythonModule(unparsed_lines(text, path, exc), None, [])
    try:
        outline = tree_outline_lines(tree)
    except RecursionError as exc:  # an expression too deep to unparse: its references still count
        outline = unparsed_lines(text, path, exc)
    refs = tree_refs(tree, path)
    return PythonModule(outline, refs, refs.imports)


def file_entries(path: str, text: str) -> list[OutlineLine] | None:
    """``outline.views.file_outline``, a Python module's from ``python_module``."""
    if path.lower().endswith(_PY_SUFFIXES):
        return python_module(text, path).outline
    return file_outline(path, text)


def parse_count() -> int:
    """Python modules ``python_module`` has parsed in this process."""
    return _parses


def forget_parses() -> None:
    """Drop every parse ``python_module`` keeps (the count stays): for a command done with
    them, whose exit would otherwise walk them in the interpreter's last collections."""
    python_module.cache_clear()
