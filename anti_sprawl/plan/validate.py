"""Plan validation: every problem reported at once, each naming its task(s) and path(s).

The checks, in order: schema (pydantic), ids and dependencies, cycles, ids usable as git ref
components and test commands that split into a NUL-free argument list (what ``validate``
accepts, ``execute`` can run), scope entries, budgets; warnings for files the requirement
names that no node may write and a setup command that needs a network the run withholds
(``intent_checks``); with a repository, entries that name nothing in it (``repo_checks``) and a
``base`` that is no commit; then — on an acyclic plan — write/write overlap and stale
reads between nodes that the DAG leaves unordered (``overlap``), and, with a repository,
warnings for names the write files use from modules an unordered task writes or that no
scope covers (``reference_checks``).
"""

from __future__ import annotations

import gc
import shlex
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..fs.deny_rules import DEFAULT_ALLOW, DEFAULT_DENY, DenyRules
from ..fs.scopes import entry_problem, is_glob, normalize_entry
from ..sandbox.command_template import template_problem
from .graph import dependency_edges, find_cycle
from .intent_checks import base_problem, network_setup_warning, requirement_path_warnings
from .model import Plan, TaskNode, command_argv
from .overlap import overlap_problems
from .reference_checks import reference_warnings
from .repo_checks import repo_files, repo_problems
from .report import Problem, Report
from .report import problem as _p
from .wording import closest, describe_error

__all__ = [
    "MAX_TOKEN_BUDGET",
    "MAX_TOOL_CALLS",
    "Problem",
    "Report",
    "collector_paused",
    "command_problem",
    "ref_component_problem",
    "validate",
]

MAX_TOKEN_BUDGET = 10_000_000
MAX_TOOL_CALLS = 2_000


def validate(
    data: dict[str, Any] | Plan, repo: Path | None = None, *, setup_network: bool = False
) -> Report:
    """Check a plan (a parsed mapping or a Plan) and, with ``repo``, its scopes on disk and
    its base; ``setup_network``: the run lets the setup command use the network."""
    with collector_paused():
        return _validate(data, repo, setup_network)


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cycle collector off while a plan is checked (and while every node's first
    prompt is assembled: context/essentials.py).

    Validation allocates many small objects that hold no reference cycles (models, trie
    nodes, problems); the collector's full passes over them are pure cost and grow with the
    heap, which made time per node rise with plan size. Measured with
    benchmarks/validate_scale.py's 10k-node plan, best of 3, same session: 1.1-1.6 s with
    the collector, 0.79-0.81 s without (the 1k-node plan: the same either way). Reference
    counting still frees everything; the collector is back on (if it was on) on return.

    At the end, what is young (mostly what the pause made and kept) goes to the oldest
    generation unscanned (``gc.freeze`` then ``gc.unfreeze``: two list splices): back on, the
    collector's first pass otherwise walked all of it at once, 0.02-0.03 s of ``validate
    --repo`` of the 1,000-node benchmark plan (75,000 objects) and 0.002 s of plain
    ``validate`` (issue 29, item 3). A cycle among them is collected by the next full
    collection, at exit at the latest. Not done when something else has frozen objects
    (a process that embeds us and forks): ``unfreeze`` would release those too.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if not gc.get_freeze_count():
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def _validate(data: dict[str, Any] | Plan, repo: Path | None, setup_network: bool) -> Report:
    if isinstance(data, Plan):
        plan = data
    else:
        try:
            plan = Plan.model_validate(data)
        except ValidationError as exc:
            return Report(valid=False, errors=list(_schema_problems(exc, data)))

    duplicates = list(_duplicate_ids(plan))
    errors = [*duplicates, *_dependency_problems(plan)]
    edges = dependency_edges(plan)
    cycle = find_cycle(edges)
    if cycle:
        shown = " -> ".join([*cycle, cycle[0]])
        errors.append(_p("cycle", f"dependency cycle: {shown}", cycle))
    errors.extend(_ref_name_problems(plan))
    errors.extend(_command_problems(plan))
    entry_errors = list(_entry_problems(plan))
    errors.extend(entry_errors)
    warnings = [*_secret_entries(plan), *requirement_path_warnings(plan)]
    offline = network_setup_warning(plan, setup_network)
    if offline is not None:
        warnings.append(offline)
    errors.extend(_budget_problems(plan))
    files = repo_files(repo) if repo is not None and repo.is_dir() else []
    if repo is not None:
        errors.extend(repo_problems(plan, repo, files))
        base = base_problem(plan, repo) if (repo / ".git").exists() else None
        if base is not None:
            errors.append(base)
    if not cycle and not duplicates:  # the overlap checks need a DAG of distinct ids
        errors.extend(overlap_problems(plan, edges))
        if repo is not None and not entry_errors:  # the reference checks parse every scope
            warnings.extend(reference_warnings(plan, repo, files, edges))
    return Report(valid=not errors, errors=errors, warnings=warnings, plan=plan)


def _duplicate_ids(plan: Plan) -> Iterator[Problem]:
    seen: set[str] = set()
    for t in plan.tasks:
        tid = t.task_id
        if tid in seen:
            yield _p("duplicate_task", f"task id '{tid}' is used more than once", [tid])
        seen.add(tid)


def _dependency_problems(plan: Plan) -> Iterator[Problem]:
    known = {t.task_id for t in plan.tasks}
    for t in plan.tasks:
        for dep in t.dependencies:
            if dep == t.task_id:
                yield _p("self_dependency", f"task '{dep}' depends on itself", [dep])
            elif dep not in known:
                msg = f"task '{t.task_id}' depends on unknown task '{dep}'"
                guess = closest(dep, sorted(known))
                msg += f" (did you mean '{guess}'?)" if guess else ""
                yield _p("unknown_dependency", msg, [t.task_id, dep])


def _schema_problems(exc: ValidationError, data: dict[str, Any]) -> Iterator[Problem]:
    """Each schema error in the words of whoever edited the file (plan/wording.py)."""
    fields = {"plan": list(Plan.model_fields), "task": list(TaskNode.model_fields)}
    for err in exc.errors():
        message, tids = describe_error(err, data, fields)
        yield _p("schema", message, tids)


def ref_component_problem(name: str) -> str | None:
    """Why ``name`` cannot be one component of a git ref (``git check-ref-format``), or None.

    Task ids name each node's worktree branch and the plan id the default run branch; the id
    pattern already limits the characters, so only these rules are left to check.
    """
    if ".." in name:
        return "contains '..'"
    if name.endswith(".lock"):
        return "ends with '.lock'"
    if name.endswith("."):
        return "ends with '.'"
    return None


def _ref_name_problems(plan: Plan) -> Iterator[Problem]:
    problem = ref_component_problem(plan.plan_id)
    if problem:
        msg = f"plan_id {plan.plan_id!r} {problem}: it cannot name the run branch"
        yield _p("bad_plan_id", msg)
    for t in plan.tasks:
        problem = ref_component_problem(t.task_id)
        if problem:
            msg = f"task id {t.task_id!r} {problem}: it cannot name a git branch"
            yield _p("bad_task_id", msg, [t.task_id])


def command_problem(command: str | list[str] | None) -> str | None:
    """Why ``command`` cannot be run as an argument list, or None: what execute would hit."""
    if command is None:
        return None
    parts = command if isinstance(command, list) else [command]
    if any("\0" in part for part in parts):
        return "contains a NUL byte"
    words = parts
    if isinstance(command, str):
        try:
            words = shlex.split(command)
        except ValueError as exc:
            return f"cannot be split into arguments ({exc})"
    program = words[0] if words else ""
    if program and not any(c.isalnum() for c in program):
        # a small model filled every command with "{{}}" (make real-model 2026-12-03, runs 10
        # and 13): a literal "{}" to run, which no node could ever pass
        return f"names no program: its first word is {program!r}"
    return None


def _entry_problems(plan: Plan) -> Iterator[Problem]:
    for t in plan.tasks:
        for field in ("read_scope", "write_scope"):
            entries: list[str] = getattr(t, field)
            for entry in entries:
                problem = entry_problem(entry)
                if problem:
                    msg = f"task '{t.task_id}' {field} entry {entry!r}: {problem}"
                    yield _p("bad_scope", msg, [t.task_id], [entry])
        if not t.write_scope:
            msg = f"task '{t.task_id}' has an empty write_scope (nothing it does could land)"
            yield _p("empty_write_scope", msg, [t.task_id])


def _secret_entries(plan: Plan) -> Iterator[Problem]:
    """Entries naming files the firewall always refuses (secrets): legal, but surely a mistake."""
    rules = DenyRules(DEFAULT_DENY, DEFAULT_ALLOW)
    for t in plan.tasks:
        for field in ("read_scope", "write_scope"):
            for entry in getattr(t, field):
                if entry_problem(entry) or is_glob(entry):
                    continue
                if rules.reason(normalize_entry(entry).rstrip("/")) == "denied_secret":
                    msg = (
                        f"task '{t.task_id}' {field} entry {entry!r} is a secret file: "
                        "the firewall will always refuse it"
                    )
                    yield _p("secret_in_scope", msg, [t.task_id], [entry])


def _budget_problems(plan: Plan) -> Iterator[Problem]:
    for t in plan.tasks:
        if t.token_budget <= 0 or t.token_budget > MAX_TOKEN_BUDGET:
            msg = (
                f"task '{t.task_id}' token_budget {t.token_budget} (the per-call token cap) "
                f"must be in 1..{MAX_TOKEN_BUDGET:,}"
            )
            yield _p("bad_budget", msg, [t.task_id])
        if t.max_tool_calls <= 0 or t.max_tool_calls > MAX_TOOL_CALLS:
            msg = f"task '{t.task_id}' max_tool_calls {t.max_tool_calls} must be in 1..{MAX_TOOL_CALLS}"
            yield _p("bad_budget", msg, [t.task_id])


def _command_problems(plan: Plan) -> Iterator[Problem]:
    """Commands execute could not run (NUL bytes, unsplittable strings), or whose
    placeholders are unknown or malformed (sandbox/command_template.py)."""
    for where, tasks, command in plan.commands():
        problem = command_problem(command)
        if problem:
            yield _p("bad_command", f"{where} {problem}", tasks)
            continue
        problem = template_problem(command_argv(command) or [])
        if problem:
            yield _p("bad_command", f"{where}: {problem}", tasks)
