"""What one Python module refers to: its import bindings, definitions and the names it uses.

Read scopes follow references, not only imports (issue 27): a name a module uses is traced to
the module that defines it, through re-exports (``from ._make import attrib`` in a package
``__init__``), aliases (``import pkg.mod as m; m.f()``), class bases, decorators and type
annotations. This module reads one file's facts from ``ast`` (parsed, never executed);
``outline.references`` resolves them across files.
"""

from __future__ import annotations

import ast
import contextlib
from collections import Counter
from typing import NamedTuple

from .pyfacts import from_base

__all__ = ["Binding", "ModuleRefs", "module_refs", "tree_refs"]

_ANNOTATION_CHARS = 200  # a string annotation longer than this is not parsed
_SELF = frozenset({"self", "cls"})


class Binding(NamedTuple):
    """What an import binds a local name to: a module (``attr`` empty) or a name in one."""

    module: str
    attr: str


class ModuleRefs(NamedTuple):
    """One module's facts: top-level definitions and class members (name -> line), import
    bindings, star-imported modules, dotted chains it uses (with counts), class bases, and
    the attributes each class reaches through ``self``/``cls``."""

    defined: dict[str, int]
    members: dict[str, dict[str, int]]
    bindings: dict[str, Binding]
    stars: list[str]
    uses: Counter[tuple[str, ...]]
    bases: dict[str, list[tuple[str, ...]]]
    self_uses: dict[str, set[str]]


def module_refs(source: str, module_path: str) -> ModuleRefs | None:
    """The facts of ``source`` (at repo-relative ``module_path``); None if it does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return tree_refs(tree, module_path)


def tree_refs(tree: ast.Module, module_path: str) -> ModuleRefs:
    """``module_refs`` of a module already parsed (``outline.parsed``). The tree is walked
    once (``_walk``, in ``ast.walk``'s order); every fact is read from that one list."""
    package = [p for p in module_path.split("/")[:-1] if p not in ("", ".")]
    refs = ModuleRefs({}, {}, {}, [], Counter(), {}, {})
    _top_level(tree.body, refs)
    nodes, parents = _walk(tree)
    self_attrs = _self_attrs(nodes, parents)
    for i, node in enumerate(nodes):
        if isinstance(node, ast.Import | ast.ImportFrom):
            _bind(node, package, refs)
        elif isinstance(node, ast.ClassDef):
            refs.bases.setdefault(node.name, [c for b in node.bases if (c := _chain(b))])
            refs.self_uses.setdefault(node.name, set()).update(self_attrs.get(i, ()))
    _uses(nodes, refs.uses)
    for root in _string_annotations(nodes):
        _uses(_walk(root)[0], refs.uses)
    return refs


def _walk(root: ast.AST) -> tuple[list[ast.AST], list[int]]:
    """Every node below ``root`` (itself first) in ``ast.walk``'s breadth-first order, and
    the index of each one's parent (-1 for ``root``): ``ast.iter_child_nodes`` inlined."""
    nodes: list[ast.AST] = [root]
    parents = [-1]
    i = 0
    while i < len(nodes):
        node = nodes[i]
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, ast.AST):
                nodes.append(value)
                parents.append(i)
            elif isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.AST):
                        nodes.append(item)
                        parents.append(i)
        i += 1
    return nodes, parents


def _top_level(body: list[ast.stmt], refs: ModuleRefs) -> None:
    """Names the module defines at its top level (``if``/``try`` blocks included)."""
    for node in body:
        if isinstance(node, ast.ClassDef):
            refs.defined.setdefault(node.name, node.lineno)
            refs.members.setdefault(node.name, {}).update(_class_members(node))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            refs.defined.setdefault(node.name, node.lineno)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            for name in _assigned(node):
                refs.defined.setdefault(name, node.lineno)
        elif isinstance(node, ast.If | ast.Try):
            blocks = [node.body, node.orelse]
            if isinstance(node, ast.Try):
                blocks += [h.body for h in node.handlers] + [node.finalbody]
            for block in blocks:
                _top_level(block, refs)


def _class_members(node: ast.ClassDef) -> dict[str, int]:
    members: dict[str, int] = {}
    for item in node.body:
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            members.setdefault(item.name, item.lineno)
        elif isinstance(item, ast.Assign | ast.AnnAssign):
            for name in _assigned(item):
                members.setdefault(name, item.lineno)
    return members


def _assigned(node: ast.Assign | ast.AnnAssign) -> list[str]:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    names: list[str] = []
    for t in targets:
        elements = t.elts if isinstance(t, ast.Tuple) else [t]
        names += [e.id for e in elements if isinstance(e, ast.Name)]
    return names


def _bind(node: ast.Import | ast.ImportFrom, package: list[str], refs: ModuleRefs) -> None:
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.asname:
                refs.bindings[alias.asname] = Binding(alias.name, "")
            else:  # ``import a.b`` binds ``a``; ``a.b.f`` is resolved through it
                top = alias.name.split(".")[0]
                refs.bindings.setdefault(top, Binding(top, ""))
        return
    base = from_base(node, package)
    if base is None:
        return
    for alias in node.names:
        if alias.name == "*":
            refs.stars.append(base)
        elif base:
            refs.bindings[alias.asname or alias.name] = Binding(base, alias.name)
        else:  # ``from . import x`` at the top of the repository: x is a module
            refs.bindings[alias.asname or alias.name] = Binding(alias.name, "")


def _chain(node: ast.expr) -> tuple[str, ...] | None:
    """``a.b.c`` -> ``("a", "b", "c")``; None for anything not rooted at a plain name."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return (node.id, *reversed(parts))


def _self_attrs(nodes: list[ast.AST], parents: list[int]) -> dict[int, set[str]]:
    """Per class (its index in ``nodes``), the attributes read through ``self``/``cls``
    anywhere below it, nested classes and functions included."""
    found: dict[int, set[str]] = {}
    for i, sub in enumerate(nodes):
        if (
            isinstance(sub, ast.Attribute)
            and isinstance(sub.value, ast.Name)
            and sub.value.id in _SELF
        ):
            up = parents[i]
            while up >= 0:
                if isinstance(nodes[up], ast.ClassDef):
                    found.setdefault(up, set()).add(sub.attr)
                up = parents[up]
    return found


def _uses(nodes: list[ast.AST], uses: Counter[tuple[str, ...]]) -> None:
    """Maximal dotted chains of loaded names among ``nodes`` (one tree, walked)."""
    inner = {id(n.value) for n in nodes if isinstance(n, ast.Attribute)}
    for node in nodes:
        if id(node) in inner or not isinstance(node, ast.Attribute | ast.Name):
            continue
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            continue
        chain = _chain(node)
        if chain and chain[0] not in _SELF:
            uses[chain] += 1


def _string_annotations(nodes: list[ast.AST]) -> list[ast.AST]:
    """``x: "Foo"``-style annotations among ``nodes``, parsed (short ones only)."""
    parsed: list[ast.AST] = []
    for node in nodes:
        annotation = None
        if isinstance(node, ast.arg | ast.AnnAssign):
            annotation = node.annotation
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            annotation = node.returns
        if not (isinstance(annotation, ast.Constant) and isinstance(annotation.value, str)):
            continue
        if len(annotation.value) <= _ANNOTATION_CHARS:
            with contextlib.suppress(SyntaxError, ValueError, RecursionError):
                parsed.append(ast.parse(annotation.value.strip(), mode="eval"))
    return parsed
