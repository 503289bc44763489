"""The repository map's fast Python scanner agrees with the ast-based one."""

from __future__ import annotations

from pathlib import Path

import pytest

from anti_sprawl.outline.pyfacts import scan_python
from anti_sprawl.planner.repomap.pyscan import scan_python_fast

ROOT = Path(__file__).resolve().parents[1]

TRICKY = '''\
"""Docstring that mentions
import fake_in_docstring
from fake import nothing
"""
from __future__ import annotations
import os, sys as system  # import fake_in_comment
import a . b
from . import sibling
from ..up import (
    one,  # a comment inside the list
    two as deux,
)
from .pkg.mod import *
x = "import fake_in_string"; import json
y = r'from fake import raw\\'' ; z = 1
text = f"{x!r} def fake_def(): pass"
if True:
    import nested.module
    def inner():  # def fake_comment():
        class Inner:
            async def method(self): ...
    longname = 1 + \\
        2
s = \'\'\'
class FakeInString:
\'\'\'
async def top(): pass
'''


def test_tricky_module() -> None:
    slow = scan_python(TRICKY, "pkg/sub/mod.py")
    fast = scan_python_fast(TRICKY, "pkg/sub/mod.py")
    assert slow is not None
    assert set(fast.imports) == set(slow.imports)
    assert set(fast.symbols) == set(slow.symbols) == {"inner", "Inner", "method", "top"}
    assert "pkg.up.two" in fast.imports
    assert "pkg.sub.sibling" in fast.imports
    assert not any("fake" in name for name in [*fast.imports, *fast.symbols])


@pytest.mark.parametrize(
    "path",
    sorted(p for d in ("anti_sprawl", "tests", "benchmarks") for p in (ROOT / d).rglob("*.py")),
    ids=lambda p: p.relative_to(ROOT).as_posix(),
)
def test_agrees_with_ast_on_this_repository(path: Path) -> None:
    rel = path.relative_to(ROOT).as_posix()
    source = path.read_text(encoding="utf-8")
    slow = scan_python(source, rel)
    assert slow is not None
    fast = scan_python_fast(source, rel)
    assert set(fast.imports) == set(slow.imports)
    assert set(fast.symbols) == set(slow.symbols)


def test_unparsable_and_hostile_input_does_not_hang_or_raise() -> None:
    assert scan_python_fast('"""never closed\nimport os\n' * 2000, "m.py").symbols == []
    assert scan_python_fast('"""' + 'x" ' * 100_000, "m.py").imports == []  # linear, no hang
    assert scan_python_fast("from import\nimport\nfrom . import (\n", "m.py").imports == []
    assert scan_python_fast("def ok(:\n  import x\n", "m.py").imports == ["x"]
