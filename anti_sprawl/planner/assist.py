"""Scope assistance for a valid plan: test coverage warnings, one-hop read scopes, budgets.

Applied by the planner after validation and before saving:

- ``missing_test_warnings``: a module a task changes should have its tests
  (``tests/…/test_<module>.py`` or a sibling ``<module>_test.py``) in some write scope.
- ``with_writer_dependencies``: a task whose write files use names defined in a file another,
  unordered task writes (validation's ``stale_reference`` warning) depends on that task.
- ``with_used_definitions``: add to a task's read scope the files defining names its
  write-scope Python files use that its scopes miss (validation's ``read_coverage``
  warning, applied: a worker cannot read them otherwise).
- ``expand_read_scopes`` (``plan --expand-read-scope``): add the *direct* in-repo imports of each task's write-scope Python
  files to its read scope, and the modules that define the names they use
  (``reference_scope``: re-exports followed, ranked, cut to a share of the lean target),
  never the transitive import closure (that is the crawl we exist to stop), and never an
  entry that another, unordered task writes (a stale read).
- ``default_budgets``: estimate ``token_budget`` (the per-call cap) / ``max_tool_calls`` for
  tasks whose submission left them out, from their lean first prompt (see ``budget_for``).
- ``fit_context_window``: lower a ``token_budget`` above the context window the model is served
  with (a ``--base-url`` server that says), which ``execute`` would refuse.
- ``cost_estimate``: the plan's cost as a range per task and in total, from the lean first
  calls to every call of every attempt at its cap (``planner/estimate.py`` adds dollars).

One cohesive module at ~370 lines: the six passes share the plan's literal files, scope
matching and ordering helpers, and splitting them would export those helpers between modules.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import PurePosixPath

from pydantic import BaseModel

from ..agent.worker import CALL_SLACK
from ..context.lean import LEAN_SHARE, Scoped, lean_target, reserve_for
from ..fs.scopes import Scope, is_glob, normalize_entry
from ..outline.pyfacts import is_test_module, python_imports
from ..outline.references import References
from ..outline.views import MIN_REGION_TOKENS
from ..plan.intent_checks import named_paths
from ..plan.model import Plan, TaskNode
from ..plan.report import Problem
from .reference_scope import ranked_references
from .repomap.ranking import module_index

__all__ = [
    "MAX_DEFAULT_TOKENS",
    "MAX_DEFAULT_TOOL_CALLS",
    "MAX_ESSENTIAL_TOKENS",
    "MIN_DEFAULT_TOKENS",
    "MIN_DEFAULT_TOOL_CALLS",
    "CostEstimate",
    "Reader",
    "TaskCost",
    "budget_for",
    "cost_estimate",
    "default_budgets",
    "estimated_tokens",
    "expand_read_scopes",
    "fit_context_window",
    "missing_test_warnings",
    "prompt_sizes",
    "tool_calls_for",
    "with_named_files",
    "with_used_definitions",
    "with_writer_dependencies",
]

Reader = Callable[[str], str | None]
"""Text of a repo-relative file, or None when it cannot be read (secret, binary, missing)."""

MIN_DEFAULT_TOKENS = 24_000
MAX_DEFAULT_TOKENS = 40_000  # past 30k the lean first prompt is at its 12k ceiling
MAX_ESSENTIAL_TOKENS = 200_000  # a model's context window: no default goes past it
MIN_DEFAULT_TOOL_CALLS = 8
MAX_DEFAULT_TOOL_CALLS = 60
PROMPT_OVERHEAD = 1_500  # rules, tool schemas and brief of a worker's first call
_AMBIGUOUS = 3  # a module name found in more places than this is not followed
REFERENCE_SHARE = 0.5  # of the lean target: what read scopes may add, as smallest outlines


def _thousands(n: float) -> int:
    return int(-(-n // 1000) * 1000)


def budget_for(natural_tokens: int, minimal_tokens: int) -> int:
    """Default per-call cap (``token_budget``): one at which the lean first prompt the node
    needs (``natural_tokens``) is 40% or less, within 24k..40k; more only when its smallest
    essentials (``minimal_tokens``) plus room for the conversation need it (up to 200k).
    Rounded up to a thousand so plans stay readable."""
    lean = max(MIN_DEFAULT_TOKENS, min(MAX_DEFAULT_TOKENS, _thousands(natural_tokens / LEAN_SHARE)))
    essential = _thousands(minimal_tokens + reserve_for(MAX_ESSENTIAL_TOKENS))
    return min(MAX_ESSENTIAL_TOKENS, max(lean, essential))


def prompt_sizes(node: TaskNode, files: Sequence[str], read: Reader) -> tuple[int, int]:
    """Estimated tokens of ``node``'s first prompt as it needs it (write files whole, read
    files as full outlines) and at its smallest (write files at their smallest forms)."""
    natural = minimal = PROMPT_OVERHEAD
    write = Scope(node.write_scope)
    for path in _scoped([*node.read_scope, *node.write_scope], files):
        if not write.matches(path) and natural >= MAX_DEFAULT_TOKENS * LEAN_SHARE:
            continue  # past the ceiling more reading changes nothing
        text = read(path)
        if text is None:
            continue
        f = Scoped(path, text, write=write.matches(path))
        names, full = f.outline("names"), f.outline("full")
        if f.write:
            natural += f.tokens
            smallest = names.item.tokens + MIN_REGION_TOKENS + 150 if names else f.tokens
            minimal += min(f.tokens, smallest)
        elif full is not None:
            natural += min(f.tokens, full.item.tokens)
    return natural, minimal


def tool_calls_for(scoped_files: int) -> int:
    """Default tool-call cap: a read and a write per scoped file plus six, clamped to 8..60."""
    return max(MIN_DEFAULT_TOOL_CALLS, min(MAX_DEFAULT_TOOL_CALLS, 2 * scoped_files + 6))


class TaskCost(BaseModel):
    """What one node may spend: ``low`` its lean first call alone, ``high`` every call at
    its per-call cap for every attempt (``token_budget × (max_tool_calls + CALL_SLACK) ×
    max_attempts``: the worker's model calls are capped at ``max_tool_calls + 2``)."""

    task_id: str
    low: int
    high: int
    attempts: int = 1


class CostEstimate(BaseModel):
    """The plan's cost as a range, per task and in total."""

    tasks: list[TaskCost]
    low: int
    high: int


def cost_estimate(plan: Plan, first_calls: Mapping[str, int]) -> CostEstimate:
    """The range from the first calls (``first_calls``, by task id) to every call at its cap."""
    tasks = [
        TaskCost(
            task_id=t.task_id,
            low=first_calls.get(t.task_id, 0),
            high=t.token_budget * (t.max_tool_calls + CALL_SLACK) * plan.attempts_for(t),
            attempts=plan.attempts_for(t),
        )
        for t in plan.tasks
    ]
    return CostEstimate(tasks=tasks, low=sum(t.low for t in tasks), high=sum(t.high for t in tasks))


def estimated_tokens(plan: Plan) -> int:
    """The plan's cost ceiling: every call of every attempt of every task at its cap."""
    return cost_estimate(plan, {}).high


def _literal_files(entries: Sequence[str]) -> list[str]:
    return [normalize_entry(e) for e in entries if not is_glob(e) and not e.endswith("/")]


def _scoped(entries: Sequence[str], files: Sequence[str]) -> list[str]:
    scope = Scope(entries)
    return [f for f in files if scope.matches(f)]


def _changed_modules(node: TaskNode, files: Sequence[str]) -> list[str]:
    """Python modules (not tests, not ``__init__``) the node may change or create."""
    paths = dict.fromkeys([*_literal_files(node.write_scope), *_scoped(node.write_scope, files)])
    return [
        p
        for p in paths
        if p.endswith(".py") and not is_test_module(p) and PurePosixPath(p).name != "__init__.py"
    ]


def _tests_of(module: str, candidates: Sequence[str]) -> list[str]:
    """The tests of ``module``: ``<module>_test.py`` or ``test_<module>.py`` beside it, or
    ``test_<module>.py`` under a ``tests`` folder (recorded, make real-model 2026-12-04 run b:
    calc.py and test_calc.py side by side in one task's write scope were warned about)."""
    p = PurePosixPath(module)
    siblings = {str(p.with_name(f"{p.stem}_test.py")), str(p.with_name(f"test_{p.stem}.py"))}
    return [
        c
        for c in candidates
        if c in siblings
        or (PurePosixPath(c).name == f"test_{p.stem}.py" and "tests" in PurePosixPath(c).parts)
    ]


def missing_test_warnings(plan: Plan, files: Sequence[str]) -> list[str]:
    """One warning per changed module whose tests are in no task's write scope."""
    writes = Scope([e for t in plan.tasks for e in t.write_scope])
    literals = [f for t in plan.tasks for f in _literal_files(t.write_scope)]
    pool = sorted({*files, *literals})
    warnings: list[str] = []
    seen: set[str] = set()
    for node in plan.tasks:
        for module in _changed_modules(node, files):
            if module in seen:
                continue
            seen.add(module)
            found = _tests_of(module, pool)
            p = PurePosixPath(module)
            defaults = [f"tests/test_{p.stem}.py", str(p.with_name(f"{p.stem}_test.py"))]
            beside = str(p.with_name(f"test_{p.stem}.py"))
            if any(writes.matches(c) for c in [*found, *defaults, beside]):
                continue
            existing = [c for c in found if c in set(files)]
            if existing:
                warnings.append(
                    f"task '{node.task_id}' changes {module} but its tests "
                    f"({', '.join(existing)}) are in no task's write scope"
                )
            else:
                warnings.append(
                    f"task '{node.task_id}' changes {module} but no task writes a test for it "
                    f"(expected {' or '.join(defaults)})"
                )
    return warnings


def _ordering(plan: Plan) -> dict[str, set[str]]:
    """task_id -> its transitive dependencies (the plan is valid, hence acyclic)."""
    by_id = {t.task_id: t for t in plan.tasks}
    memo: dict[str, set[str]] = {}

    def ancestors(tid: str) -> set[str]:
        if tid not in memo:
            out: set[str] = set()
            for dep in by_id[tid].dependencies:
                out |= {dep, *ancestors(dep)}
            memo[tid] = out
        return memo[tid]

    return {tid: ancestors(tid) for tid in by_id}


def _direct_imports(source: str, path: str, index: Mapping[str, list[str]]) -> list[str]:
    """In-repo files ``path`` imports directly.

    ``from pkg import mod`` names both ``pkg`` and ``pkg.mod``; the package itself is left out
    when every name imported from it is a submodule that resolves (then its ``__init__`` is
    not what the code uses), and kept when one is a name defined in the package.
    """
    raw = python_imports(source, path)
    resolved = {n for n in raw if 0 < len(index.get(n, ())) <= _AMBIGUOUS}
    out: dict[str, None] = {}
    for name in raw:
        if name not in resolved:
            continue
        children = [c for c in raw if c.startswith(name + ".") and "." not in c[len(name) + 1 :]]
        if children and all(c in resolved for c in children):
            continue
        out.update(dict.fromkeys(index[name]))
    return [f for f in out if f != path]


# Words that, in the sentence naming a file, ask to leave it alone ("leave orders/util.py
# untouched", "do not change conftest.py"): such a file is never given to a task.
_LEAVE_ALONE = re.compile(
    r"\b(leave|untouched|unchanged|don'?t|do not|never|not change|without|except|keep)\b", re.I
)


def with_named_files(plan: Plan, warnings: Sequence[Problem]) -> tuple[Plan, list[str]]:
    """``plan`` with each file the requirement names and no task may write
    (``requirement_path_unwritten``) added to the write scope of the one task that does that
    part: the one task whose goal names it, else the plan's only task that changes files;
    and a line for each. A file whose sentence in the requirement asks to leave it alone is
    not given. Recorded, make real-model 2026-12-05 run ao: the planner's third and last
    submission was one task, "Implement the subtract function in calc.py and write a test for
    it", that could write calc.py alone; too late to be sent back, it ran and could not write
    the test the requirement asks for in test_calc.py."""
    unwritten = [p.paths[0] for p in warnings if p.code == "requirement_path_unwritten" and p.paths]
    changing = [t for t in plan.tasks if t.expect_changes]
    notes: list[str] = []
    for path in unwritten:
        if _asked_to_leave(plan.requirement, path):
            continue
        naming = [t for t in changing if path in named_paths(t.goal)]
        owners = naming if naming else changing
        if len(owners) != 1:
            continue
        owner = owners[0]
        node = owner.model_copy(update={"write_scope": [*owner.write_scope, path]})
        plan = plan.model_copy(
            update={"tasks": [node if t.task_id == owner.task_id else t for t in plan.tasks]}
        )
        changing = [t for t in plan.tasks if t.expect_changes]
        why = "its goal names it" if naming else "it is the plan's only task that changes files"
        notes.append(
            f"task '{owner.task_id}' write_scope: added {path}, which the requirement names and "
            f"no task could write ({why})"
        )
    return plan, notes


def _asked_to_leave(requirement: str, path: str) -> bool:
    """Whether a sentence of ``requirement`` naming ``path`` asks to leave something alone."""
    sentences = re.split(r"(?<=[.;!?])\s+|\n+", requirement)
    return any(path in named_paths(s) and _LEAVE_ALONE.search(s) for s in sentences)


def with_writer_dependencies(plan: Plan, warnings: Sequence[Problem]) -> tuple[Plan, list[str]]:
    """``plan`` with each ``stale_reference`` warning applied where it makes no cycle: the task
    whose write files use names defined in a file an unordered task writes depends on that
    task, and a line for each. Recorded, make real-model 2026-12-05 run ak: the test of
    subtract() ran beside the task adding it to calc.py, never saw it, defined its own
    subtract() in test_calc.py and tested that; both nodes landed, the run "succeeded" with a
    test of nothing (the copy check reads only files the node may read)."""
    stale = [p for p in warnings if p.code == "stale_reference" and len(p.tasks) == 2]
    by_id = {t.task_id: t for t in plan.tasks}
    notes: list[str] = []
    for (user, writer), path in ((p.tasks, ", ".join(p.paths)) for p in stale):
        if user not in by_id or writer not in by_id or writer in by_id[user].dependencies:
            continue  # an earlier warning of the same pair added it
        if user in _ordering(plan)[writer]:
            continue  # the writer waits for it already: the other way round is a cycle
        node = by_id[user]
        by_id[user] = node.model_copy(update={"dependencies": [*node.dependencies, writer]})
        plan = plan.model_copy(update={"tasks": [by_id[t.task_id] for t in plan.tasks]})
        notes.append(
            f"task '{user}' dependencies: added '{writer}': its files use names defined in "
            f"{path}, which '{writer}' writes"
        )
    return plan, notes


def with_used_definitions(plan: Plan, warnings: Sequence[Problem]) -> tuple[Plan, list[str]]:
    """``plan`` with each ``read_coverage`` warning applied: the files defining names a task's
    write files use, outside its scopes, added to its read scope, and a line for each task.
    Validation leaves out a file an unordered task writes (a stale read), so none is added
    here. Recorded, make real-model 2026-12-05 runs l and s: the planner gave the test of
    subtract() a node of its own that could read test_calc.py only, not the calc.py it
    imports; the worker never saw subtract() and twice finished over no change."""
    used: dict[str, list[str]] = {}
    for p in warnings:
        if p.code == "read_coverage":
            for task_id in p.tasks:
                used.setdefault(task_id, []).extend(p.paths)
    if not used:
        return plan, []
    notes: list[str] = []
    tasks: list[TaskNode] = []
    for node in plan.tasks:
        own = Scope([*node.read_scope, *node.write_scope])
        added = [p for p in dict.fromkeys(used.get(node.task_id, ())) if not own.matches(p)]
        if added:
            node = node.model_copy(update={"read_scope": [*node.read_scope, *added]})
            more = f" and {len(added) - 3} more" if len(added) > 3 else ""
            notes.append(
                f"task '{node.task_id}' read_scope: added {', '.join(added[:3])}{more}: its "
                "files use names defined there, which its worker could not read"
            )
        tasks.append(node)
    return plan.model_copy(update={"tasks": tasks}), notes


def expand_read_scopes(plan: Plan, files: Sequence[str], read: Reader) -> tuple[Plan, list[str]]:
    """``plan`` with each task's read scope grown by its write files' direct imports, then by
    the modules defining the names they use (``reference_scope``), ranked and cut to
    ``REFERENCE_SHARE`` of the task's lean target."""
    index = module_index(files)
    fileset = set(files)
    anc = _ordering(plan)
    writers = {t.task_id: Scope(t.write_scope) for t in plan.tasks}
    refs = References(files, read, index)
    costs: dict[str, int] = {}

    def cost(path: str) -> int:
        if path not in costs:
            text = read(path)
            f = Scoped(path, text, write=False) if text is not None else None
            shown = (f.outline("names") or f.whole) if f is not None else None
            costs[path] = shown.item.tokens if shown is not None else 0
        return costs[path]

    warnings: list[str] = []
    tasks: list[TaskNode] = []
    for node in plan.tasks:
        own = Scope([*node.read_scope, *node.write_scope])
        writes = [p for p in _scoped(node.write_scope, files) if p.endswith(".py")]
        imports: list[str] = []
        for path in writes:
            source = read(path) if path in fileset else None
            if source is not None:
                imports += _direct_imports(source, path, index)
        share = int(lean_target(node.token_budget) * REFERENCE_SHARE)
        left = max(share // 4, share - sum(cost(p) for p in dict.fromkeys(imports)))
        goal = f"{node.name}\n{node.goal}"
        referenced = ranked_references(refs, writes, goal, left, cost)
        added: list[str] = []
        for target in dict.fromkeys([*imports, *referenced]):
            if target in writes or target in added or own.matches(target):
                continue
            clash = [
                t.task_id
                for t in plan.tasks
                if t.task_id != node.task_id
                and writers[t.task_id].matches(target)
                and t.task_id not in anc[node.task_id]
                and node.task_id not in anc[t.task_id]
            ]
            if clash:
                what = "import" if target in imports else "referenced module"
                warnings.append(
                    f"task '{node.task_id}': not adding {what} {target} to its read "
                    f"scope: task '{clash[0]}' writes it and neither depends on the other"
                )
                continue
            added.append(target)
        tasks.append(node.model_copy(update={"read_scope": [*node.read_scope, *added]}))
    return plan.model_copy(update={"tasks": tasks}), warnings


def default_budgets(
    plan: Plan, missing: Mapping[str, set[str]], files: Sequence[str], read: Reader
) -> Plan:
    """Fill the budgets each task left out (``missing[task_id]`` names the fields)."""
    tasks: list[TaskNode] = []
    for node in plan.tasks:
        fields = missing.get(node.task_id, set())
        if not fields:
            tasks.append(node)
            continue
        update: dict[str, int] = {}
        if "token_budget" in fields:
            update["token_budget"] = budget_for(*prompt_sizes(node, files, read))
        if "max_tool_calls" in fields:
            scoped = _scoped([*node.read_scope, *node.write_scope], files)
            new = [f for f in _literal_files(node.write_scope) if f not in set(files)]
            update["max_tool_calls"] = tool_calls_for(len(scoped) + len(new))
        tasks.append(node.model_copy(update=update))
    return plan.model_copy(update={"tasks": tasks})


def fit_context_window(plan: Plan, window: int | None, source: str) -> tuple[Plan, list[str]]:
    """``plan`` with every ``token_budget`` above ``window`` lowered to it, and a warning for
    each: a small model planning for a local server chose 60,000 for a 16,384-token window
    (make real-model 2026-12-03 run 11), and ``execute`` refused the plan. ``source``: where
    the window was read (the server's URL)."""
    if window is None:
        return plan, []
    warnings: list[str] = []
    tasks: list[TaskNode] = []
    for node in plan.tasks:
        if node.token_budget > window:
            warnings.append(
                f"task '{node.task_id}': token_budget {node.token_budget:,} lowered to "
                f"{window:,}, the context window {source} reports"
            )
            node = node.model_copy(update={"token_budget": window})
        tasks.append(node)
    return plan.model_copy(update={"tasks": tasks}), warnings
