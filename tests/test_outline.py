"""Outlines: Python stubs from ast, other languages by tree-sitter or regex, imports."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from anti_sprawl.outline.pyfacts import python_imports, scan_python
from anti_sprawl.outline.python import FALLBACK_LINES, outlinable, outline_file, outline_python

MODULE = '''"""Order service: create and cancel orders.

Everything below this line is detail the outline drops.
"""
from __future__ import annotations

import logging, os
from typing import (
    TYPE_CHECKING,
    Any,
)

if TYPE_CHECKING:
    from orders.bus import Bus

LIMIT: int = 10
RETRIES = 3
API_TOKEN = "abc"
BANNER = "a string literal that is certainly longer than thirty-two characters"
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Order(Base, metaclass=Meta):
    """A stored order.

    Second docstring line, dropped.
    """

    order_id: str
    total: int = 0

    @property
    def size(self) -> int:
        return BODY_MARKER_ONE

    async def pay(self, amount: int = 5, *args: Any, label: str | None = None, **kw: Any) -> None:
        """Pay for it."""
        def helper_inside():
            pass
        return BODY_MARKER_TWO


def create_order(bus: Bus, qty: int = 1, /, *, dry_run: bool = False) -> Order:
    x = BODY_MARKER_THREE
    return Order(x)


if __name__ == "__main__":
    main_only_call()
'''


def test_python_outline_keeps_signatures_and_drops_bodies() -> None:
    out = outline_python(MODULE, "orders/service.py")
    lines = out.splitlines()
    assert lines[0] == '"""Order service: create and cancel orders."""'
    assert "import logging, os" in lines
    assert "from typing import TYPE_CHECKING, Any" in lines  # collapsed to one line
    assert "from orders.bus import Bus" in lines  # from the TYPE_CHECKING block
    assert "LIMIT: int = 10" in lines
    assert "RETRIES = 3" in lines
    assert "logger = logging.getLogger(__name__)" in lines
    assert "@dataclass(frozen=True)" in lines
    assert "class Order(Base, metaclass=Meta):" in lines
    assert '    """A stored order."""' in lines
    assert "    order_id: str" in lines
    assert "    total: int = 0" in lines
    assert "    @property" in lines
    assert "    def size(self) -> int: ..." in lines
    assert (
        "    async def pay(self, amount: int=5, *args: Any, label: str | None=None, **kw: Any)"
        " -> None:" in lines
    )
    assert '        """Pay for it."""' in lines
    assert (
        "def create_order(bus: Bus, qty: int=1, /, *, dry_run: bool=False) -> Order: ..." in lines
    )
    for dropped in ("BODY_MARKER", "helper_inside", "Second docstring", "detail", "main_only_call"):
        assert dropped not in out
    ast.parse(out)  # a stub is still valid Python


def test_python_outline_elides_secret_looking_and_long_values() -> None:
    out = outline_python(MODULE + '\ndef connect(password="hunter22", mode="fast"): pass\n')
    assert "API_TOKEN = ..." in out
    assert "BANNER = ..." in out
    assert "abc" not in out
    assert "thirty-two" not in out
    assert "def connect(password=..., mode='fast'): ..." in out


def test_python_outline_never_executes_the_module(tmp_path: Path) -> None:
    marker = tmp_path / "executed"
    source = f"open({str(marker)!r}, 'w').write('x')\nraise SystemExit(3)\ndef f(): ...\n"
    assert outline_python(source) == "def f(): ..."
    assert not marker.exists()


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("def broken(:\n    pass\n" + "line\n" * 50, "SyntaxError at line 1"),
        ("x = 1\x00\n", "SyntaxError"),  # NUL bytes are not Python source
    ],
)
def test_python_outline_falls_back_on_unparsable_source(source: str, reason: str) -> None:
    out = outline_python(source, "bad.py")
    lines = out.splitlines()
    assert lines[0].startswith("# unparsed (")
    assert reason in lines[0]
    assert "bad.py" in lines[0]
    assert len(lines) <= FALLBACK_LINES + 1
    assert lines[1] == source.splitlines()[0]


def test_empty_module_and_bare_class() -> None:
    assert outline_python("") == ""
    assert outline_python("class A: pass\nclass B(A):\n    x = 1\n") == (
        "class A: ...\nclass B(A):\n    x = 1"
    )


def test_outline_file_dispatches_by_extension() -> None:
    assert outline_file("pkg/mod.py", "def f(a: int) -> int:\n    return a\n") == (
        "def f(a: int) -> int: ..."
    )
    assert outline_file("notes.txt", "function f() {}") is None
    assert outline_file("data.json", "{}") is None
    assert outlinable("a/b.PY")
    assert outlinable("x.ts")
    assert not outlinable("README.md")


def test_javascript_outline_keeps_definitions_only() -> None:
    source = (
        "import x from 'y';\n"
        "export function createOrder(a, b = 2) {\n"
        "  return secretBody(a);\n"
        "}\n"
        "export default class OrderService extends Base {\n"
        "  async publish(evt) {\n"
        "    if (evt) { sendBody(evt); }\n"
        "  }\n"
        "}\n"
        "const handler = async (req) => {\n"
        "  return otherBody;\n"
        "};\n"
    )
    out = outline_file("src/orders.js", source)
    assert out is not None
    assert "export function createOrder(a, b = 2)" in out
    assert "export default class OrderService extends Base" in out
    assert "async publish(evt)" in out
    assert "const handler = async (req) =>" in out
    assert "Body" not in out
    assert "import x" not in out


@pytest.mark.parametrize(
    ("path", "source", "kept", "dropped"),
    [
        (
            "cmd/main.go",
            "package main\ntype Order struct {\n  ID int\n}\n"
            "func (o *Order) Total() int {\n  return hidden\n}\n",
            ["type Order struct", "func (o *Order) Total() int"],
            ["hidden", "ID int"],
        ),
        (
            "src/lib.rs",
            "pub struct Order { id: u32 }\nimpl Order {\n    pub fn total(&self) -> u32 {\n"
            "        hidden()\n    }\n}\npub trait Bus {}\n",
            ["pub struct Order", "impl Order", "pub fn total(&self) -> u32", "pub trait Bus"],
            ["hidden"],
        ),
        (
            "src/Order.java",
            "package x;\npublic class OrderService extends Base {\n"
            "    public List<Order> findAll(int limit) {\n        return hidden;\n    }\n}\n",
            ["public class OrderService extends Base", "public List<Order> findAll(int limit)"],
            ["hidden", "package x"],
        ),
    ],
)
def test_other_language_outlines(
    path: str, source: str, kept: list[str], dropped: list[str]
) -> None:
    out = outline_file(path, source)
    assert out is not None
    for text in kept:
        assert text in out
    for text in dropped:
        assert text not in out


def test_python_imports_resolve_relative_imports_against_the_package() -> None:
    source = (
        "import os.path\n"
        "import json as j\n"
        "from . import sibling\n"
        "from .events import OrderCreated, OrderCancelled\n"
        "from ..shared import bus\n"
        "from .... import too_far\n"
        "from .sub import *\n"
        "def lazy():\n"
        "    from orders import late\n"
    )
    assert python_imports(source, "app/orders/service.py") == [
        "os.path",
        "json",
        "app.orders",
        "app.orders.sibling",
        "app.orders.events",
        "app.orders.events.OrderCreated",
        "app.orders.events.OrderCancelled",
        "app.shared",
        "app.shared.bus",
        "app.orders.sub",
        "orders",
        "orders.late",
    ]


def test_python_imports_in_a_package_init_and_at_the_root() -> None:
    # ``__init__.py``'s package is its own directory; a root module's is the repo root.
    assert python_imports("from . import a\n", "pkg/__init__.py") == ["pkg", "pkg.a"]
    assert python_imports("from . import a\n", "top.py") == ["a"]
    assert python_imports("from .. import a\n", "top.py") == []
    assert python_imports("def broken(:\n", "x.py") == []


def test_scan_python_reports_defined_names() -> None:
    facts = scan_python(MODULE, "orders/service.py")
    assert facts is not None
    assert {"Order", "size", "pay", "create_order"} <= set(facts.symbols)
    assert "orders.bus" in facts.imports
    assert scan_python("def broken(:\n", "x.py") is None


@pytest.mark.parametrize("module", ["argparse", "asyncio.base_events", "dataclasses", "typing"])
def test_signatures_read_as_ast_unparse_writes_them(module: str) -> None:
    """The outline joins plain signatures itself (outline/python.py ``_params``, issue 29):
    on every function of real standard-library modules it writes what ``ast.unparse`` of
    the signature, long or secret-looking defaults elided, writes."""
    import importlib

    from anti_sprawl.outline import python as outline

    source = Path(importlib.import_module(module).__file__ or "").read_text()
    functions = [
        n
        for n in ast.walk(ast.parse(source))
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
    ]
    assert len(functions) > 50
    for f in functions:
        assert outline._params(f.args) == ast.unparse(outline._safe_defaults(f.args)), f.name
        if f.returns is not None:
            assert outline._unparse(f.returns) == ast.unparse(f.returns), f.name


@pytest.mark.parametrize("module", ["argparse", "asyncio.base_events", "dataclasses", "typing"])
def test_imports_bases_and_decorators_read_as_ast_unparse_writes_them(module: str) -> None:
    """The outline writes import lines, and plain or dotted class bases and decorators,
    itself (outline/python.py, issue 29): on real standard-library modules, and on every
    module of this repository, what ``ast.unparse`` writes."""
    import importlib

    from anti_sprawl.outline import python as outline

    sources = [Path(importlib.import_module(module).__file__ or "").read_text()]
    sources += [p.read_text() for p in sorted(Path(outline.__file__).parents[1].rglob("*.py"))]
    imports = 0
    for source in sources:
        for n in ast.walk(ast.parse(source)):
            if isinstance(n, ast.Import | ast.ImportFrom):
                assert outline._import_text(n) == ast.unparse(n)
                imports += 1
            if isinstance(n, ast.ClassDef):
                assert [outline._unparse(b) for b in n.bases] == [ast.unparse(b) for b in n.bases]
            if isinstance(n, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                shown = [outline._unparse(d) for d in n.decorator_list]
                assert shown == [ast.unparse(d) for d in n.decorator_list]
    assert imports > 1000
