"""Code outlines: interface stubs of source files, bodies dropped.

A worker that needs another module's contract gets its signatures, not its 800 lines. Python is
outlined from ``ast`` (the code is parsed, never executed); other languages go through
``outline.langs`` (tree-sitter when a grammar package happens to be installed, else regexes).
What the repository map needs of a Python module without outlining it is ``outline.pyfacts``.
"""

from __future__ import annotations

import ast
import copy
import re

from .langs import OutlineLine, language_for, outline_other, outline_other_lines
from .pyrefs import name_chain

__all__ = [
    "FALLBACK_LINES",
    "OutlineLine",
    "outlinable",
    "outline_file",
    "outline_lines",
    "outline_python",
    "python_outline_lines",
    "tree_outline_lines",
    "unparsed_lines",
]

FALLBACK_LINES = 20
"""How many raw lines a file that does not parse contributes instead of an outline."""

_VALUE_LIMIT = 60  # longer constant values are elided: they cost tokens and say little
_STRING_LIMIT = 32  # long string literals are the likeliest to be credentials or blobs
_SECRETISH = re.compile(r"key|secret|token|passw|credential|auth", re.IGNORECASE)
_PY_SUFFIXES = (".py", ".pyi")


def outline_python(source: str, path: str = "") -> str:
    """Stub of a Python module: docstring line, imports, constants, classes, signatures."""
    return "\n".join(entry.text for entry in python_outline_lines(source, path))


def python_outline_lines(source: str, path: str = "") -> list[OutlineLine]:
    """``outline_python``'s lines, each with the source lines it stands for and its name."""
    try:
        tree = ast.parse(source, filename=path or "<unknown>")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        return unparsed_lines(source, path, exc)
    return tree_outline_lines(tree)


def tree_outline_lines(tree: ast.Module) -> list[OutlineLine]:
    """``python_outline_lines`` of a module already parsed (``outline.parsed``)."""
    lines: list[OutlineLine] = []
    _doc(tree, lines, "", 0)
    _outline_body(tree.body, lines, indent="", top=True)
    return lines


def outline_file(path: str, text: str) -> str | None:
    """Outline of ``text`` chosen by ``path``'s extension; None when we cannot outline it."""
    if path.lower().endswith(_PY_SUFFIXES):
        return outline_python(text, path)
    language = language_for(path)
    if language is None:
        return None
    return outline_other(language, text)


def outline_lines(path: str, text: str) -> list[OutlineLine] | None:
    """``outline_file`` as numbered entries; None when we cannot outline the file."""
    if path.lower().endswith(_PY_SUFFIXES):
        return python_outline_lines(text, path)
    language = language_for(path)
    return None if language is None else outline_other_lines(language, text)


def outlinable(path: str) -> bool:
    """Whether ``outline_file`` can outline a file with this name."""
    return path.lower().endswith(_PY_SUFFIXES) or language_for(path) is not None


def unparsed_lines(source: str, path: str, exc: BaseException) -> list[OutlineLine]:
    """What stands for the outline of a module that does not parse: its first lines."""
    lines = source.splitlines()
    where = f" at line {exc.lineno}" if isinstance(exc, SyntaxError) and exc.lineno else ""
    shown = min(FALLBACK_LINES, len(lines))
    head = f"# unparsed ({type(exc).__name__}{where}): first {shown} of {len(lines)} lines"
    head += f" of {path}" if path else ""
    out = [OutlineLine(0, 0, 0, "other", "", head)]
    out += [OutlineLine(i, i, 0, "other", "", t) for i, t in enumerate(lines[:shown], 1)]
    return out


def _doc(node: ast.AST, out: list[OutlineLine], indent: str, depth: int) -> None:
    doc = _doc_line(node)
    body = getattr(node, "body", None)
    if doc is not None and body:
        first = body[0]
        out.append(
            OutlineLine(
                first.lineno, first.end_lineno or first.lineno, depth, "doc", "", indent + doc
            )
        )


def _line(node: ast.stmt, depth: int, kind: str, name: str, text: str) -> OutlineLine:
    return OutlineLine(node.lineno, node.end_lineno or node.lineno, depth, kind, name, text)


def _doc_line(node: ast.AST) -> str | None:
    if not isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.Module, ast.AsyncFunctionDef)):
        return None
    body = node.body
    if not body or not isinstance(body[0], ast.Expr):
        # what ``ast.get_docstring`` sees first, here without a call for every definition
        # (most have no docstring: each class and function of a plan's modules, issue 29)
        return None
    doc = ast.get_docstring(node, clean=True)
    if not doc:
        return None
    first = doc.strip().splitlines()[0].strip().replace('"""', "'''").rstrip("\\")
    return f'"""{first}"""' if first else None


def _outline_body(body: list[ast.stmt], out: list[OutlineLine], indent: str, *, top: bool) -> None:
    depth = len(indent) // 4
    for node in body:  # definitions first: most statements outlined are
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            _outline_function(node, out, indent)
        elif isinstance(node, ast.ClassDef):
            _outline_class(node, out, indent)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out.append(_line(node, depth, "import", "", indent + _import_text(node)))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            line = _assignment(node)
            if line is not None:
                name = line.split("=", 1)[0].split(":", 1)[0].strip()
                out.append(_line(node, depth, "name", name, indent + line))
        elif type(node).__name__ == "TypeAlias":  # Python 3.12 ``type X = ...``
            name = ast.unparse(getattr(node, "name", node))
            out.append(_line(node, depth, "name", name, indent + ast.unparse(node)))
        elif top and isinstance(node, ast.If | ast.Try) and not _is_main_guard(node):
            # ``if TYPE_CHECKING:`` / ``try: import x`` blocks hold real imports and defs.
            for block in _blocks(node):
                _outline_body(block, out, indent, top=True)


def _blocks(node: ast.If | ast.Try) -> list[list[ast.stmt]]:
    if isinstance(node, ast.If):
        return [node.body, node.orelse]
    return [node.body, *(h.body for h in node.handlers), node.orelse, node.finalbody]


def _is_main_guard(node: ast.If | ast.Try) -> bool:
    return isinstance(node, ast.If) and "__main__" in ast.unparse(node.test)


def _decorators(
    node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef, out: list[OutlineLine], indent: str
) -> None:
    depth = len(indent) // 4
    for d in node.decorator_list:
        out.append(
            OutlineLine(
                d.lineno,
                d.end_lineno or d.lineno,
                depth,
                "decorator",
                "",
                f"{indent}@{_unparse(d)}",
            )
        )


def _outline_class(node: ast.ClassDef, out: list[OutlineLine], indent: str) -> None:
    _decorators(node, out, indent)
    bases = [_unparse(b) for b in node.bases]
    bases += [ast.unparse(k) for k in node.keywords]
    params = _type_params(node)
    head = f"{indent}class {node.name}{params}" + (f"({', '.join(bases)})" if bases else "")
    inner: list[OutlineLine] = []
    depth = len(indent) // 4
    _doc(node, inner, indent + "    ", depth + 1)
    _outline_body(node.body, inner, indent + "    ", top=False)
    out.append(_line(node, depth, "class", node.name, head + (":" if inner else ": ...")))
    out.extend(inner)


def _outline_function(
    node: ast.FunctionDef | ast.AsyncFunctionDef, out: list[OutlineLine], indent: str
) -> None:
    _decorators(node, out, indent)
    keyword = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
    returns = f" -> {_unparse(node.returns)}" if node.returns is not None else ""
    params = _params(node.args)
    head = f"{indent}{keyword} {node.name}{_type_params(node)}({params}){returns}:"
    depth = len(indent) // 4
    doc = _doc_line(node)
    if doc is None:
        out.append(_line(node, depth, "def", node.name, head + " ..."))
    else:
        out.append(_line(node, depth, "def", node.name, head))
        _doc(node, out, indent + "    ", depth + 1)
        last = node.body[0].end_lineno or node.lineno
        out.append(OutlineLine(last, last, depth + 1, "other", "", f"{indent}    ..."))


def _type_params(node: ast.AST) -> str:
    params = getattr(node, "type_params", None)  # PEP 695, Python 3.12+
    if not params:
        return ""
    return "[" + ", ".join(ast.unparse(p) for p in params) + "]"


def _assignment(node: ast.Assign | ast.AnnAssign) -> str | None:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    if not all(isinstance(t, ast.Name | ast.Tuple) for t in targets):
        return None  # attribute / subscript stores are behaviour, not interface
    names = " = ".join(ast.unparse(t) for t in targets)
    annotation = f": {ast.unparse(node.annotation)}" if isinstance(node, ast.AnnAssign) else ""
    if node.value is None:
        return names + annotation
    return f"{names}{annotation} = {_value(names, node.value)}"


def _params(args: ast.arguments) -> str:
    """``ast.unparse(_safe_defaults(args))``. Most signatures are plain names, some annotated
    with a name or a dotted one: those are joined here, since ``ast.unparse`` (a visitor in
    Python) and the copy were half the outline's time, what ``validate --repo`` pays for every
    module of a large plan (issue 29, item 3). Anything else goes through ``ast.unparse``."""
    if args.posonlyargs or args.vararg or args.kwonlyargs or args.kwarg or args.defaults:
        return ast.unparse(_safe_defaults(args))
    parts: list[str] = []
    for arg in args.args:
        if arg.annotation is None:
            parts.append(arg.arg)
            continue
        annotation = _dotted(arg.annotation)
        if annotation is None:
            return ast.unparse(args)
        parts.append(f"{arg.arg}: {annotation}")
    return ", ".join(parts)


def _import_text(node: ast.Import | ast.ImportFrom) -> str:
    """``ast.unparse(node)`` of an import statement, written here: its visitor was a third
    of the outline of a module whose only import line it was (every module of a plan's
    pre-flight, issue 29, item 3)."""
    names = ", ".join(f"{a.name} as {a.asname}" if a.asname else a.name for a in node.names)
    if isinstance(node, ast.Import):
        return f"import {names}"
    return f"from {'.' * (node.level or 0)}{node.module or ''} import {names}"


def _unparse(node: ast.expr) -> str:
    """``ast.unparse(node)``, a plain or dotted name without it."""
    dotted = _dotted(node)
    return ast.unparse(node) if dotted is None else dotted


def _dotted(node: ast.expr) -> str | None:
    """``a.b.c`` for a name or attribute chain of names (as ``ast.unparse`` writes it)."""
    chain = name_chain(node)
    return None if chain is None else ".".join(chain)


def _safe_defaults(args: ast.arguments) -> ast.arguments:
    """``args`` with long or secret-looking default values shown as ``...``."""
    positional = [*args.posonlyargs, *args.args][
        len(args.posonlyargs) + len(args.args) - len(args.defaults) :
    ]
    safe = copy.copy(args)
    safe.defaults = [_elided(a.arg, d) for a, d in zip(positional, args.defaults, strict=True)]
    safe.kw_defaults = [
        None if d is None else _elided(a.arg, d)
        for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)
    ]
    return safe


def _elided(name: str, value: ast.expr) -> ast.expr:
    return ast.Constant(...) if _value(name, value) == "..." else value


def _value(names: str, value: ast.expr) -> str:
    text = ast.unparse(value)
    if len(text) > _VALUE_LIMIT or _SECRETISH.search(names):
        return "..."
    long_string = any(
        isinstance(n, ast.Constant)
        and isinstance(n.value, str | bytes)
        and len(n.value) > _STRING_LIMIT
        for n in ast.walk(value)
    )
    return "..." if long_string else text
