"""The package needs only its declared runtime dependencies (docs/reference.md, "Dependencies").

networkx is a development dependency (these tests' oracle for the graph code) and GitPython is
not a dependency at all: no module of the package may import either, at the top or inside a
function, or an install without the development extras would break.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import anti_sprawl

PACKAGE = Path(anti_sprawl.__file__).parent
NOT_AT_RUN_TIME = {"networkx", "git", "gitdb"}


def _imported_roots(path: Path) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def test_no_module_imports_a_development_only_library() -> None:
    offenders = {
        str(path.relative_to(PACKAGE)): sorted(_imported_roots(path) & NOT_AT_RUN_TIME)
        for path in sorted(PACKAGE.rglob("*.py"))
        if _imported_roots(path) & NOT_AT_RUN_TIME
    }
    assert offenders == {}


def test_every_module_imports_with_those_libraries_missing() -> None:
    blocked = "; ".join(f"sys.modules[{name!r}] = None" for name in sorted(NOT_AT_RUN_TIME))
    code = (
        f"import importlib, pkgutil, sys; {blocked}\n"
        "import anti_sprawl\n"
        "names = [m.name for m in pkgutil.walk_packages(anti_sprawl.__path__, 'anti_sprawl.')]\n"
        "for name in names: importlib.import_module(name)\n"
        "print(len(names))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) > 50  # every module was imported, not an empty walk
