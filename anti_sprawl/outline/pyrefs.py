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

from .pyfacts import from_base, imported_names

__all__ = ["Binding", "ModuleRefs", "module_refs", "name_chain", "tree_refs"]

_ANNOTATION_CHARS = 200  # a string annotation longer than this is not parsed
_SELF = frozenset({"self", "cls"})


class Binding(NamedTuple):
    """What an import binds a local name to: a module (``attr`` empty) or a name in one."""

    module: str
    attr: str


class ModuleRefs(NamedTuple):
    """One module's facts: top-level definitions and class members (name -> line), import
    bindings, star-imported modules, dotted chains it uses (with counts), class bases, the
    attributes each class reaches through ``self``/``cls`` (a class with no bases, or no such
    attributes, has no entry there), and the dotted names its import statements may load
    (``outline.pyfacts.python_imports``'s set, in walk order)."""

    defined: dict[str, int]
    members: dict[str, dict[str, int]]
    bindings: dict[str, Binding]
    stars: list[str]
    uses: Counter[tuple[str, ...]]
    bases: dict[str, list[tuple[str, ...]]]
    self_uses: dict[str, set[str]]
    imports: list[str]


def module_refs(source: str, module_path: str) -> ModuleRefs | None:
    """The facts of ``source`` (at repo-relative ``module_path``); None if it does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return tree_refs(tree, module_path)


def tree_refs(tree: ast.Module, module_path: str) -> ModuleRefs:
    """``module_refs`` of a module already parsed (``outline.parsed``). The tree is walked
    once (``_walk``, in ``ast.walk``'s order) and every fact is read in one pass over that
    list: five passes were a fifth of ``validate --repo`` at 1,000 nodes (issue 29, item 3).
    The imports come from the same pass, which meets every import statement anyway (a walk
    of the statements for them alone was 0.04 s of the 1,000 modules there)."""
    refs = ModuleRefs({}, {}, {}, [], Counter(), {}, {}, [])
    _top_level(tree.body, refs)
    nodes, parents = _walk(tree)
    module = _ModuleFacts(refs, [p for p in module_path.split("/")[:-1] if p not in ("", ".")])
    _read_nodes(nodes, refs.uses, module, parents)
    # A class without bases or ``self`` attributes gets no entry (its readers ask with a
    # default: outline/references.py): every module of a plan stays in the parse cache
    # (outline/parsed.py), and an empty list and set per class were a sixth of the objects
    # the cycle collector walked over at the end of validate --repo (issue 29, item 3). The
    # first class of a name still decides its bases.
    named: set[str] = set()
    for i, node in module.classes.items():
        if node.name not in named:
            named.add(node.name)
            bases = [c for b in node.bases if (c := name_chain(b))]
            if bases:
                refs.bases[node.name] = bases
        attrs = module.self_attrs.get(i)
        if attrs:
            refs.self_uses.setdefault(node.name, set()).update(attrs)
    for root in module.annotations:
        _read_nodes(_walk(root)[0], refs.uses)
    refs.imports.extend(module.imports)
    return refs


class _ModuleFacts:
    """What one pass over a module's nodes gathers besides the names it uses: import
    bindings (into ``refs``), its classes (by index in the walk), the attributes read through
    ``self``/``cls`` below each class, and the string annotations to read next."""

    def __init__(self, refs: ModuleRefs, package: list[str]):
        self.refs = refs
        self.package = package
        self.classes: dict[int, ast.ClassDef] = {}
        self.self_attrs: dict[int, set[str]] = {}
        self.annotations: list[ast.AST] = []
        self.imports: dict[str, None] = {}

    def statement(self, node: ast.AST, i: int) -> None:
        """A node that is not a name: an import, a class, an annotation. The most frequent
        kinds are tested first (arguments, then functions): 41,000 calls for the 1,000
        modules of the benchmark plan (issue 29, item 3)."""
        if isinstance(node, (ast.arg, ast.AnnAssign)):
            _string_annotation(node.annotation, self.annotations)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            _string_annotation(node.returns, self.annotations)
        elif isinstance(node, ast.ClassDef):
            self.classes[i] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            _bind(node, self.package, self.refs)
            self.imports.update(dict.fromkeys(imported_names(node, self.package)))

    def self_attr(
        self, node: ast.Attribute, i: int, nodes: list[ast.AST], parents: list[int]
    ) -> None:
        """``self.x``/``cls.x`` at ``nodes[i]``: ``x`` for every class enclosing it."""
        value = node.value
        if type(value) is not ast.Name or value.id not in _SELF:
            return
        up = parents[i]
        while up >= 0:
            if type(nodes[up]) is ast.ClassDef:
                self.self_attrs.setdefault(up, set()).add(node.attr)
            up = parents[up]


def _read_nodes(
    nodes: list[ast.AST],
    counts: Counter[tuple[str, ...]],
    module: _ModuleFacts | None = None,
    parents: list[int] | None = None,
) -> None:
    """One pass over walked ``nodes``: the maximal dotted chains of loaded names into
    ``counts`` and, with ``module`` (and the walk's ``parents``), its other facts. In walk
    order an attribute comes before the expression it reads, so by the time a node is
    reached, ``inner`` already says whether it is part of a longer chain."""
    inner: set[int] = set()
    facts = _FACT_KINDS if module is not None else ()
    for i, node in enumerate(nodes):
        kind = type(node)
        if kind is ast.Attribute:
            assert isinstance(node, ast.Attribute)
            inner.add(id(node.value))
            if module is not None and parents is not None:
                module.self_attr(node, i, nodes, parents)
            if id(node) not in inner:
                chain = name_chain(node)
                if chain and chain[0] not in _SELF:
                    counts[chain] += 1
        elif kind is ast.Name:
            assert isinstance(node, ast.Name)
            if id(node) not in inner and type(node.ctx) is ast.Load and node.id not in _SELF:
                counts[(node.id,)] += 1
        elif kind in facts:
            assert module is not None
            module.statement(node, i)


# The node types ``_ModuleFacts.statement`` reads something of (most nodes are none of them).
_FACT_KINDS = frozenset(
    {
        ast.Import,
        ast.ImportFrom,
        ast.ClassDef,
        ast.arg,
        ast.AnnAssign,
        ast.FunctionDef,
        ast.AsyncFunctionDef,
    }
)


def _string_annotation(annotation: ast.AST | None, parsed: list[ast.AST]) -> None:
    """A ``x: "Foo"``-style annotation, parsed into ``parsed`` (short ones only)."""
    if type(annotation) is not ast.Constant:
        return
    value = annotation.value
    if isinstance(value, str) and len(value) <= _ANNOTATION_CHARS:
        with contextlib.suppress(SyntaxError, ValueError, RecursionError):
            parsed.append(ast.parse(value.strip(), mode="eval"))


# Fields ``_walk`` does not descend into: a name's load/store context and an operator (leaves
# shared by every expression, which say nothing here), and those that only ever hold a string,
# a number or None in the grammar (an identifier, a module name, a flag), so they hold no node.
# Testing each of those fields of every node was a quarter of the walk; a test compares the
# walk with ``ast.walk`` on every module of this repository.
_LEAF_FIELDS = frozenset(
    {
        "ctx",
        "op",
        "ops",
        "id",
        "attr",
        "name",
        "arg",
        "asname",
        "module",
        "level",
        "kind",
        "type_comment",
        "simple",
        "is_async",
        "conversion",
        "kwd_attrs",
        "rest",
    }
)
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {ast.Constant: ()}  # per node type, filled as met


def _child_fields(kind: type) -> tuple[str, ...]:
    """The fields of node type ``kind`` that may hold a node (Python 3.12's ``type X = ...``
    names its alias with a node, unlike every other ``name``)."""
    fields = getattr(kind, "_fields", ())
    if kind.__name__ == "TypeAlias":
        return tuple(f for f in fields if f != "ctx")
    return tuple(f for f in fields if f not in _LEAF_FIELDS)


def _walk(root: ast.AST) -> tuple[list[ast.AST], list[int]]:
    """Every node below ``root`` (itself first) in ``ast.walk``'s breadth-first order but for
    contexts and operators, and the index of each one's parent (-1 for ``root``):
    ``ast.iter_child_nodes`` inlined, over the fields that may hold a node (``_LEAF_FIELDS``).
    A list field holds only nodes but for ``_MIXED_LISTS``, so the others are added whole."""
    nodes: list[ast.AST] = [root]
    parents = [-1]
    add, add_parent = nodes.append, parents.append
    extend, extend_parents = nodes.extend, parents.extend
    # ``ast.AST`` bound here (a global and an attribute lookup per field before), an empty
    # list (most definitions' decorators, a call's keywords) and a None (a missing annotation
    # or return) passed over at once: the walk of the benchmark plan's 1,051 modules 4-6%
    # faster, ``tree_refs`` 3-4 ms (issue 29, item 3).
    child_fields, node_type, mixed = _CHILD_FIELDS, ast.AST, _MIXED_LISTS
    for i, node in enumerate(nodes):  # the list grows as it is read: breadth-first
        kind = type(node)
        fields = child_fields.get(kind)
        if fields is None:
            fields = child_fields[kind] = _child_fields(kind)
        for name in fields:
            value = getattr(node, name, None)
            if value is None:
                continue
            if type(value) is list:
                if not value:
                    continue
                if name in mixed:
                    value = [item for item in value if isinstance(item, node_type)]
                extend(value)
                extend_parents([i] * len(value))
            elif isinstance(value, node_type):
                add(value)
                add_parent(i)
    return nodes, parents


# List fields that may hold something other than a node: a dict display's keys (None for
# ``**m``), keyword-only defaults (None where there is none), ``global``/``nonlocal`` names.
_MIXED_LISTS = frozenset({"keys", "kw_defaults", "names"})


def _top_level(body: list[ast.stmt], refs: ModuleRefs) -> None:
    """Names the module defines at its top level (``if``/``try`` blocks included)."""
    for node in body:
        if isinstance(node, ast.ClassDef):
            refs.defined.setdefault(node.name, node.lineno)
            refs.members.setdefault(node.name, {}).update(_class_members(node))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            refs.defined.setdefault(node.name, node.lineno)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for name in _assigned(node):
                refs.defined.setdefault(name, node.lineno)
        elif isinstance(node, (ast.If, ast.Try)):
            blocks = [node.body, node.orelse]
            if isinstance(node, ast.Try):
                blocks += [h.body for h in node.handlers] + [node.finalbody]
            for block in blocks:
                _top_level(block, refs)


def _class_members(node: ast.ClassDef) -> dict[str, int]:
    members: dict[str, int] = {}
    for item in node.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            members.setdefault(item.name, item.lineno)
        elif isinstance(item, (ast.Assign, ast.AnnAssign)):
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


def name_chain(node: ast.expr) -> tuple[str, ...] | None:
    """``a.b.c`` -> ``("a", "b", "c")``; None for anything not rooted at a plain name."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return (node.id, *reversed(parts))
