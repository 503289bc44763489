"""Scope assistance units: the default-budget formula, globbed write scopes, import resolution."""

from __future__ import annotations

from anti_sprawl.plan.model import Plan
from anti_sprawl.planner.assist import (
    MAX_DEFAULT_TOKENS,
    MAX_ESSENTIAL_TOKENS,
    MIN_DEFAULT_TOKENS,
    PROMPT_OVERHEAD,
    budget_for,
    cost_estimate,
    default_budgets,
    estimated_tokens,
    expand_read_scopes,
    missing_test_warnings,
    prompt_sizes,
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
    # The per-call cap at which the prompt the node needs is 40%, within 24k..40k ...
    assert budget_for(0, 0) == MIN_DEFAULT_TOKENS == 24_000
    assert budget_for(12_001, 5_000) == 31_000  # 12,001 / 0.4, rounded up to a thousand
    assert budget_for(1_000_000, 5_000) == MAX_DEFAULT_TOKENS == 40_000
    # ... more only when even the smallest essentials plus a turn's room need it.
    assert budget_for(100_000, 50_000) == 56_000  # + 4,096 output and 1,500 for a result
    assert budget_for(10**7, 10**6) == MAX_ESSENTIAL_TOKENS
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
    # a test_<module>.py beside the module counts, written or not yet there (make real-model
    # run b: calc.py and test_calc.py in one task, warned about)
    beside = plan(node("w", write_scope=["./calc.py", "./test_calc.py"]))
    assert missing_test_warnings(beside, ["calc.py"]) == []
    assert missing_test_warnings(beside, ["calc.py", "test_calc.py"]) == []
    alone = plan(node("w", write_scope=["calc.py"]))
    assert missing_test_warnings(alone, ["calc.py", "test_calc.py"]) == [
        "task 'w' changes calc.py but its tests (test_calc.py) are in no task's write scope"
    ]


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
    # 30,000 module-level names: even the names-only outline is ~150k tokens
    big = {**SOURCES, "src/pkg/a.py": "x = 1\n" * 30_000}
    p = plan(node("a", write_scope=["src/pkg/a.py", "src/pkg/new.py"], max_tool_calls=3))
    [a] = default_budgets(p, {"a": {"token_budget"}}, FILES, big.get).tasks
    assert MAX_DEFAULT_TOKENS < a.token_budget == budget_for(*prompt_sizes(a, FILES, big.get))
    assert a.max_tool_calls == 3
    huge = {**SOURCES, "src/pkg/a.py": "x = 1\n" * 60_000}
    [a] = default_budgets(p, {"a": {"token_budget"}}, FILES, huge.get).tasks
    assert a.token_budget == MAX_ESSENTIAL_TOKENS
    outlined = {
        **SOURCES,
        "src/pkg/a.py": "".join(f"def f{i}(x):\n    return x * {i}\n" for i in range(3000)),
    }
    [a] = default_budgets(p, {"a": {"token_budget"}}, FILES, outlined.get).tasks
    assert a.token_budget == MAX_DEFAULT_TOKENS  # shown as outline + regions: 40k is plenty
    filled = default_budgets(p, {"a": {"token_budget", "max_tool_calls"}}, FILES, read)
    natural, minimal = prompt_sizes(filled.tasks[0], FILES, read)
    a_tokens = count_tokens(SOURCES["src/pkg/a.py"])
    assert natural > PROMPT_OVERHEAD + a_tokens
    assert minimal > PROMPT_OVERHEAD
    assert filled.tasks[0].token_budget == budget_for(natural, minimal) == MIN_DEFAULT_TOKENS
    assert filled.tasks[0].max_tool_calls == tool_calls_for(2)  # one existing, one new file
    # every call at its cap, for each of the plan's default two attempts
    assert estimated_tokens(filled) == filled.tasks[0].token_budget * (tool_calls_for(2) + 2) * 2
    untouched = default_budgets(p, {}, FILES, read)
    assert untouched.tasks[0].token_budget == p.tasks[0].token_budget


def test_cost_estimate_is_a_range_per_task_and_in_total() -> None:
    p = plan(
        node("a", write_scope=["src/pkg/a.py"], token_budget=24_000, max_tool_calls=8),
        node(
            "b",
            write_scope=["src/pkg/b.py"],
            token_budget=40_000,
            max_tool_calls=20,
            max_attempts=3,
        ),
    )
    cost = cost_estimate(p, {"a": 3_100, "b": 9_000})
    # high: every call (max_tool_calls + 2) at its cap, for every attempt (plan default 2)
    assert [(t.task_id, t.low, t.high, t.attempts) for t in cost.tasks] == [
        ("a", 3_100, 24_000 * 10 * 2, 2),
        ("b", 9_000, 40_000 * 22 * 3, 3),
    ]
    assert (
        (cost.low, cost.high)
        == (12_100, 24_000 * 10 * 2 + 40_000 * 22 * 3)
        == (12_100, estimated_tokens(p))
    )
    once = p.model_copy(update={"max_attempts": 1})
    assert cost_estimate(once, {}).tasks[0].high == 24_000 * 10
