"""A Python module's imports and defined names, found without parsing it.

The repository map needs only these two facts from every module, and ``ast.parse`` spent
two thirds of the map's time on a real repository (Django 4.2: 14.8 of 23.8 s, profiled with
``benchmarks/repomap_scale.py --repo ... --profile``). Here comments and string literals are
blanked by one regular expression, line continuations and bracketed import lists joined,
and the statements read by line patterns: the same facts as ``outline.pyfacts.scan_python`` for
ordinary code (checked against it in the tests), in a fraction of the time. A module ``ast``
cannot parse still yields what its lines say, which only helps a ranking heuristic.
"""

from __future__ import annotations

import re

from ...outline.pyfacts import PythonFacts

__all__ = ["scan_python_fast"]

# Comments and string literals (prefix letters stay behind, harmlessly), written "unrolled"
# so the engine runs through a literal's body without trying alternatives at each character.
_LITERALS = re.compile(
    "|".join(
        (
            r"#[^\n]*",
            r'"""[^"\\]*(?:(?:\\.|"(?!""))[^"\\]*)*"""',
            r"'''[^'\\]*(?:(?:\\.|'(?!''))[^'\\]*)*'''",
            r'"[^"\\\n]*(?:\\.[^"\\\n]*)*"',
            r"'[^'\\\n]*(?:\\.[^'\\\n]*)*'",
        )
    ),
    re.DOTALL,  # a backslash may escape a line break inside a literal
)
_CONTINUATION = re.compile(r"\\\n")
_FROM = re.compile(
    r"^[ \t]*+from[ \t]+(\.*)[ \t]*([\w.]*)[ \t]+import[ \t]*(\([^)]*\)|[^\n]*)", re.M
)
_IMPORT = re.compile(r"^[ \t]*+import[ \t]+([^\n]*)", re.M)
_DEFINED = re.compile(r"^[ \t]*+(?:async[ \t]+)?(?:def|class)[ \t]+([A-Za-z_]\w*)", re.M)
_NAME = re.compile(r"^[A-Za-z_][\w.]*$")
_AS = re.compile(r"\s+as\s+")


def _names(clause: str) -> list[str]:
    """``a.b as c, d`` -> ``["a.b", "d"]`` (parentheses and stray spaces removed)."""
    out = []
    for part in clause.strip().strip("()").split(","):
        name = "".join(_AS.split(part.strip())[0].split())  # `a . b` is legal, if unusual
        if name == "*" or _NAME.match(name):
            out.append(name)
    return out


def scan_python_fast(source: str, module_path: str) -> PythonFacts:
    """Imports (relative ones resolved against ``module_path``'s package) and defined names."""
    # A literal or comment becomes one space: what follows a multi-line string's closing
    # quotes is still on the line it was on, so statement starts stay line starts.
    # Outside literals a semicolon only separates statements: give each its own line.
    code = _CONTINUATION.sub(" ", _LITERALS.sub(" ", source)).replace(";", "\n")
    package = [p for p in module_path.split("/")[:-1] if p not in ("", ".")]
    found: dict[str, None] = {}
    events: list[tuple[int, list[str]]] = []
    for m in _IMPORT.finditer(code):
        events.append((m.start(), [n for n in _names(m.group(1)) if n != "*"]))
    for m in _FROM.finditer(code):
        dots, module, clause = m.group(1), m.group(2), m.group(3)
        if not dots and not module:
            continue
        base = _base(len(dots), module, package)
        if base is None:
            continue
        names = [base] if base else []
        for name in _names(clause):
            if name != "*":
                names.append(f"{base}.{name}" if base else name)
        events.append((m.start(), names))
    for _, names in sorted(events):
        for name in names:
            found[name] = None
    symbols = dict.fromkeys(_DEFINED.findall(code))
    return PythonFacts(list(found), list(symbols))


def _base(level: int, module: str, package: list[str]) -> str | None:
    """The absolute module a ``from`` clause names (``outline.pyfacts.from_base``'s rule)."""
    if level == 0:
        return module
    if level - 1 > len(package):
        return None
    parts = package[: len(package) - (level - 1)]
    if module:
        parts = [*parts, *module.split(".")]
    return ".".join(parts)
