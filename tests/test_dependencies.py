"""The package's import structure, read from the real source: no module import cycles, no
imports hidden inside functions to dodge one, and the ``.anti-sprawl/`` layout spelled out in
one module (``git.layout.StateLayout``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import networkx as nx
import pytest

import anti_sprawl

PACKAGE = Path(anti_sprawl.__file__).parent
# Lazy imports keep `anti-sprawl --help` fast: the CLI, the top of the graph, may defer them.
LAZY_IMPORTS_ALLOWED = {
    f"anti_sprawl.cli.{m}"
    for m in (
        "app",
        "doctor",
        "environment",
        "options",
        "output",
        "plans",
        "quick",
        "report",
        "review",
        "runs",
        "scope_requests",
    )
} | {f"anti_sprawl.cli.{m}" for m in ("ci", "github")}
# Names of files and directories under `.anti-sprawl/`, and the lock: only the layout says them.
LAYOUT_NAMES = {"run.json", "events.jsonl", "PR.md", "manifests", "artifacts", "memory.yaml"}
LAYOUT_NAMES |= {"anti-sprawl-run.flock"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imported(module: str, node: ast.AST) -> list[str]:
    """The anti_sprawl modules an import statement in ``module`` loads: packages included
    (Python runs a package's ``__init__`` before any module in it), except the packages
    ``module`` itself is in (already being imported when it runs)."""
    targets: list[str] = []
    if isinstance(node, ast.ImportFrom):
        package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
        if node.level:
            base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
            source = ".".join(base + ([node.module] if node.module else []))
        else:
            source = node.module or ""
        if source.split(".")[0] == "anti_sprawl":
            for alias in node.names:
                full = f"{source}.{alias.name}"
                targets.append(full if full in MODULES else source)
    elif isinstance(node, ast.Import):
        targets = [a.name for a in node.names if a.name.split(".")[0] == "anti_sprawl"]
    out: list[str] = []
    for target in targets:
        parts = target.split(".")
        out += [".".join(parts[:i]) for i in range(2, len(parts) + 1)]
    return [t for t in out if t in MODULES and not (module + ".").startswith(t + ".")]


def import_graph() -> nx.DiGraph:
    graph = nx.DiGraph()
    for module, path in MODULES.items():
        graph.add_node(module)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            for target in imported(module, node):
                graph.add_edge(module, target)
    return graph


def function_level_imports(module: str) -> Iterator[tuple[int, str]]:
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    for func in ast.walk(tree):
        if isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(func):
                for target in imported(module, node):
                    yield node.lineno, target


def string_constants(path: Path) -> Iterator[tuple[int, str]]:
    """Every string literal of a module except docstrings."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            docstrings.add(id(body[0].value))
    for node in ast.walk(tree):
        text = node.value if isinstance(node, ast.Constant) else None
        if isinstance(text, str) and id(node) not in docstrings:
            yield node.lineno, text


def test_no_module_is_part_of_an_import_cycle() -> None:
    graph = import_graph()
    assert graph.number_of_edges() > 100  # the walk really saw the package's imports
    cycles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    assert cycles == [], f"import cycles: {cycles}; e.g. {nx.find_cycle(graph)}"


def test_the_cycle_check_sees_a_cycle() -> None:
    graph = import_graph()
    graph.add_edge("anti_sprawl.errors", "anti_sprawl.cli.app")  # errors is imported by everyone
    assert any(len(c) > 1 for c in nx.strongly_connected_components(graph))


@pytest.mark.parametrize("module", sorted(set(MODULES) - LAZY_IMPORTS_ALLOWED))
def test_no_import_of_our_own_modules_hides_inside_a_function(module: str) -> None:
    assert list(function_level_imports(module)) == []


def test_the_lazy_import_finder_finds_the_clis() -> None:
    assert "anti_sprawl.run.runner" in {
        t for _, t in function_level_imports("anti_sprawl.cli.runs")
    }


def test_leaf_modules_import_nothing_of_ours() -> None:
    graph = import_graph()
    for leaf in (
        "anti_sprawl.errors",
        "anti_sprawl.ids",
        "anti_sprawl.fs.files",
        "anti_sprawl.redact",
    ):
        assert list(graph.successors(leaf)) == [], leaf


def test_the_state_directory_layout_is_spelled_out_in_one_module() -> None:
    found = []
    for module, path in MODULES.items():
        for line, text in string_constants(path):
            if text.strip("/") == ".anti-sprawl" and module != "anti_sprawl.ids":
                found.append(f"{module}:{line} {text!r}")
            if text in LAYOUT_NAMES and module != "anti_sprawl.git.layout":
                found.append(f"{module}:{line} {text!r}")
    assert found == []


# The package's layers, lowest first: a module may import its own layer and the layers below it,
# never one above. Top-level modules (errors, ids, lifecycle, redact, tokens, trust) are leaves;
# ``__main__`` (``python -m anti_sprawl``) sits above everything.
# docs/architecture.md, "Areas" says what each layer holds.
LAYERS = (
    "<leaves>",
    "fs",
    "git",
    "sandbox",
    "outline",
    "providers",
    "plan",
    "agent",
    "context",
    "planner",
    "run",
    "views",
    "eval",
    "cli",
)


def layer_of(module: str) -> int:
    parts = module.split(".")
    if len(parts) > 2 or (len(parts) == 2 and MODULES[module].name == "__init__.py"):
        return LAYERS.index(parts[1])
    return len(LAYERS) if module in {"anti_sprawl", "anti_sprawl.__main__"} else 0


def upward_imports(graph: nx.DiGraph) -> list[str]:
    return [
        f"{a} ({LAYERS[layer_of(a)]}) imports {b} ({LAYERS[layer_of(b)]})"
        for a, b in graph.edges
        if layer_of(b) > layer_of(a)
    ]


def test_every_package_is_a_known_layer() -> None:
    packages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert packages == set(LAYERS[1:])


def test_each_layer_imports_only_its_own_and_lower_layers() -> None:
    assert upward_imports(import_graph()) == []


def test_the_layering_check_sees_an_upward_import() -> None:
    graph = import_graph()
    graph.add_edge("anti_sprawl.fs.firewall", "anti_sprawl.run.runner")
    assert upward_imports(graph) == [
        "anti_sprawl.fs.firewall (fs) imports anti_sprawl.run.runner (run)"
    ]
