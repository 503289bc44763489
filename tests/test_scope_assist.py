"""Scope assistance units: the default-budget formula, globbed write scopes, import resolution."""

from __future__ import annotations

from anti_sprawl.plan import Plan
from anti_sprawl.scope_assist import (
    MAX_DEFAULT_TOKENS,
    MIN_DEFAULT_TOKENS,
    budget_for,
    default_budgets,
    estimated_tokens,
    expand_read_scopes,
    missing_test_warnings,
    tool_calls_for,
)
from anti_sprawl.tokens import count_tokens

from .conftest import node, plan_data

SOURCES = {
    "src/pkg/__init__.py": "",
    "src/pkg/a.py": "import pkg.b\nfrom pkg import c, helper\nimport os\n",
    "src/pkg/b.py": "from . import d\n",
    "src/pkg/c.py": "",
    "src/pkg/d.py": "",
    "src/pkg/a_test.py": "",
    "tests/unit/test_c.py": "",
}
FILES = sorted(SOURCES)


def read(path: str) -> str | None:
    return SOURCES.get(path)


def plan(*tasks: dict[str, object]) -> Plan:
    return Plan.model_validate(plan_data(*tasks))


def test_budget_formula_and_clamps() -> None:
    assert budget_for(0, 0) == 3 * 2_000 + 8_000 >= MIN_DEFAULT_TOKENS
    assert budget_for(10_000, 2_000) == 3 * 12_000 + 2_000 + 8_000
    assert budget_for(10_001, 0) == 45_000  # rounded up to a thousand
    assert budget_for(1_000_000, 0) == MAX_DEFAULT_TOKENS
    assert [tool_calls_for(n) for n in (0, 1, 3, 27, 100)] == [8, 8, 12, 60, 60]


def test_test_locations_and_globbed_write_scopes() -> None:
    modules = ["src/pkg/a.py", "src/pkg/b.py", "src/pkg/c.py", "src/pkg/__init__.py"]
    tester = node("t", dependencies=["w"], write_scope=["tests/unit/test_c.py"])
    warnings = missing_test_warnings(plan(node("w", write_scope=modules), tester), FILES)
    # c.py's test under tests/unit/ is written by t; __init__ needs none
    assert warnings == [
        "task 'w' changes src/pkg/a.py but its tests (src/pkg/a_test.py) are in no task's "
        "write scope",
        "task 'w' changes src/pkg/b.py but no task writes a test for it "
        "(expected tests/test_b.py or src/pkg/b_test.py)",
    ]
    # a glob that lets the task create or change the sibling tests covers them
    globbed = plan(node("w", write_scope=["src/pkg/*.py"]), tester)
    assert missing_test_warnings(globbed, FILES) == []


def test_expansion_resolves_absolute_relative_and_package_imports() -> None:
    p = plan(node("a", write_scope=["src/pkg/a.py"]), node("b", write_scope=["src/pkg/b.py"]))
    expanded, warnings = expand_read_scopes(p, FILES, read)
    a, b = expanded.tasks
    # `import pkg.b` is written by the unordered task b: refused with a warning;
    # `from pkg import c, helper`: c is a module, helper is a name in pkg/__init__.py
    assert a.read_scope == ["src/pkg/__init__.py", "src/pkg/c.py"]
    assert b.read_scope == ["src/pkg/d.py"]
    assert warnings == [
        "task 'a': not adding import src/pkg/b.py to its read scope: task 'b' writes it and "
        "neither depends on the other"
    ]


def test_default_budgets_only_fill_missing_fields() -> None:
    big = {**SOURCES, "src/pkg/a.py": "x = 1\n" * 30_000}
    p = plan(node("a", write_scope=["src/pkg/a.py", "src/pkg/new.py"], max_tool_calls=3))
    [a] = default_budgets(p, {"a": {"token_budget"}}, FILES, big.get).tasks
    assert (a.token_budget, a.max_tool_calls) == (MAX_DEFAULT_TOKENS, 3)
    filled = default_budgets(p, {"a": {"token_budget", "max_tool_calls"}}, FILES, read)
    a_tokens = count_tokens(SOURCES["src/pkg/a.py"])
    assert filled.tasks[0].token_budget == budget_for(a_tokens, a_tokens)
    assert filled.tasks[0].max_tool_calls == tool_calls_for(2)  # one existing, one new file
    assert estimated_tokens(filled) == filled.tasks[0].token_budget
    untouched = default_budgets(p, {}, FILES, read)
    assert untouched.tasks[0].token_budget == p.tasks[0].token_budget
