"""Plan validation: every problem reported at once, each naming its task(s) and path(s).

The checks, in order: schema (pydantic), ids and dependencies, cycles, ids usable as git ref
components and test commands that split into a NUL-free argument list (what ``validate``
accepts, ``execute`` can run), scope entries, budgets,
then — on an acyclic plan — write/write overlap and stale reads between nodes that the DAG
leaves unordered (either could run first, or both at once). With a repository, read entries
must match an existing file and write entries must exist or have an existing parent.

Overlap checks avoid comparing every pair of nodes: entries are bucketed by their literal
path prefix in a trie, so only entries on one root-to-leaf path of the trie are compared, and
"is A an ancestor of B" is a bit test on per-node ancestor sets (``plan_graph.Ordering``).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from ..fs.path_rules import DEFAULT_ALLOW, DEFAULT_DENY, DenyRules
from ..fs.scopes import (
    ALWAYS_DENIED_DIRS,
    Scope,
    entry_problem,
    is_glob,
    literal_prefix,
    may_overlap,
    normalize_entry,
)
from ..sandbox.command_template import template_problem
from .graph import Ordering, dependency_edges, find_cycle
from .model import Plan, TaskNode, command_argv

__all__ = [
    "MAX_TOKEN_BUDGET",
    "MAX_TOOL_CALLS",
    "Problem",
    "Report",
    "command_problem",
    "ref_component_problem",
    "validate",
]

MAX_TOKEN_BUDGET = 10_000_000
MAX_TOOL_CALLS = 2_000
# Reasonable cap on how many repository files we list for repo-aware checks.
MAX_REPO_FILES = 500_000


class Problem(BaseModel):
    """One validation finding."""

    code: str
    message: str
    tasks: list[str] = Field(default_factory=list)
    paths: list[str] = Field(default_factory=list)


class Report(BaseModel):
    """The outcome of ``validate``: ``valid`` is False when there is any error."""

    valid: bool
    errors: list[Problem] = Field(default_factory=list)
    warnings: list[Problem] = Field(default_factory=list)
    plan: Plan | None = Field(default=None, exclude=True)


def validate(data: dict[str, Any] | Plan, repo: Path | None = None) -> Report:
    """Check a plan (a parsed mapping or a Plan) and, with ``repo``, its scopes on disk."""
    errors: list[Problem] = []
    warnings: list[Problem] = []
    if isinstance(data, Plan):
        plan = data
    else:
        try:
            plan = Plan.model_validate(data)
        except ValidationError as exc:
            return Report(valid=False, errors=list(_schema_problems(exc, data)))

    ids = [t.task_id for t in plan.tasks]
    seen: set[str] = set()
    for tid in ids:
        if tid in seen:
            errors.append(_p("duplicate_task", f"task id '{tid}' is used more than once", [tid]))
        seen.add(tid)
    known = set(ids)
    for t in plan.tasks:
        for dep in t.dependencies:
            if dep == t.task_id:
                errors.append(_p("self_dependency", f"task '{dep}' depends on itself", [dep]))
            elif dep not in known:
                msg = f"task '{t.task_id}' depends on unknown task '{dep}'"
                errors.append(_p("unknown_dependency", msg, [t.task_id, dep]))

    edges = dependency_edges(plan)
    cycle = find_cycle(edges)
    if cycle:
        shown = " -> ".join([*cycle, cycle[0]])
        errors.append(_p("cycle", f"dependency cycle: {shown}", cycle))

    errors.extend(_ref_name_problems(plan))
    errors.extend(_command_problems(plan))
    errors.extend(_entry_problems(plan))
    warnings.extend(_secret_entries(plan))
    errors.extend(_budget_problems(plan))

    if repo is not None:
        r_errors, r_warnings = _repo_problems(plan, repo)
        errors.extend(r_errors)
        warnings.extend(r_warnings)

    duplicate_ids = len(seen) != len(ids)
    if not cycle and not duplicate_ids:
        errors.extend(_overlap_problems(plan, edges))
    return Report(valid=not errors, errors=errors, warnings=warnings, plan=plan)


def _p(code: str, message: str, tasks: Sequence[str] = (), paths: Sequence[str] = ()) -> Problem:
    return Problem(code=code, message=message, tasks=list(tasks), paths=list(paths))


def _schema_problems(exc: ValidationError, data: dict[str, Any]) -> Iterator[Problem]:
    tasks = data.get("tasks") if isinstance(data, dict) else None
    for err in exc.errors():
        loc = err.get("loc", ())
        where = ".".join(str(x) for x in loc) or "(plan)"
        tids: list[str] = []
        if (
            len(loc) >= 2
            and loc[0] == "tasks"
            and isinstance(loc[1], int)
            and isinstance(tasks, list)
        ):
            item = tasks[loc[1]] if loc[1] < len(tasks) else None
            tid = item.get("task_id") if isinstance(item, dict) else None
            tids = [str(tid)] if tid is not None else [f"#{loc[1]}"]
        yield _p("schema", f"{where}: {err.get('msg', 'invalid')}", tids)


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
    if isinstance(command, str):
        try:
            shlex.split(command)
        except ValueError as exc:
            return f"cannot be split into arguments ({exc})"
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
    placeholders are unknown or malformed (command_template.py)."""
    for where, tasks, command in plan.commands():
        problem = command_problem(command)
        if problem:
            yield _p("bad_command", f"{where} {problem}", tasks)
            continue
        problem = template_problem(command_argv(command) or [])
        if problem:
            yield _p("bad_command", f"{where}: {problem}", tasks)


# --- repository-aware checks -------------------------------------------------------------


def repo_files(repo: Path) -> list[str]:
    """Repo-relative POSIX paths of the files under ``repo`` (no .git, no symlinked dirs)."""
    out: list[str] = []
    root = str(repo)
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        rel_dir = os.path.relpath(dirpath, root)
        dirnames[:] = sorted(d for d in dirnames if d.lower() not in ALWAYS_DENIED_DIRS)
        for name in sorted(filenames):
            out.append(name if rel_dir == "." else f"{rel_dir.replace(os.sep, '/')}/{name}")
            if len(out) >= MAX_REPO_FILES:
                return out
    return out


def _repo_problems(plan: Plan, repo: Path) -> tuple[list[Problem], list[Problem]]:
    errors: list[Problem] = []
    warnings: list[Problem] = []
    if not repo.is_dir():
        errors.append(_p("repo", f"repository directory not found: {repo}"))
        return errors, warnings
    files = repo_files(repo)
    file_set = set(files)
    dirs = {"/".join(f.split("/")[:i]) for f in files for i in range(1, f.count("/") + 1)}

    def exists(entry: str) -> bool:
        norm = normalize_entry(entry).rstrip("/")
        if not is_glob(entry):
            return norm in file_set or norm in dirs
        scope = Scope([entry])
        return any(scope.matches(f) for f in files)

    by_id = {t.task_id: t for t in plan.tasks}

    def written_upstream(task: TaskNode, entry: str) -> bool:
        """A read of a file that does not exist yet is fine when an ancestor creates it."""
        seen: set[str] = set()
        stack = list(task.dependencies)
        while stack:
            tid = stack.pop()
            if tid in seen or tid not in by_id:
                continue
            seen.add(tid)
            if any(may_overlap(entry, w) for w in by_id[tid].write_scope if not entry_problem(w)):
                return True
            stack.extend(by_id[tid].dependencies)
        return False

    for t in plan.tasks:
        for entry in t.read_scope:
            if entry_problem(entry) or exists(entry):
                continue
            if not written_upstream(t, entry):
                msg = f"task '{t.task_id}' read_scope entry {entry!r} matches no file in the repository"
                errors.append(_p("read_scope_missing", msg, [t.task_id], [entry]))
        for entry in t.write_scope:
            if entry_problem(entry) or exists(entry):
                continue
            # A new file or directory is fine when the directory it goes into exists.
            prefix = literal_prefix(entry)
            parent = "/".join(prefix if is_glob(entry) else prefix[:-1])
            if parent and parent not in dirs:
                msg = (
                    f"task '{t.task_id}' write_scope entry {entry!r}: neither it nor its parent "
                    f"directory '{parent}/' exists"
                )
                errors.append(_p("write_scope_missing", msg, [t.task_id], [entry]))
    return errors, warnings


# --- ordering and overlap ------------------------------------------------------------------


class _Trie:
    """Scope entries keyed by their literal path prefix."""

    def __init__(self) -> None:
        self.children: dict[str, _Trie] = {}
        self.items: list[tuple[str, str]] = []  # (task_id, entry)

    def add(self, prefix: tuple[str, ...], item: tuple[str, str]) -> None:
        node = self
        for part in prefix:
            node = node.children.setdefault(part, _Trie())
        node.items.append(item)

    def related(self, prefix: tuple[str, ...]) -> Iterator[tuple[str, str]]:
        """Items whose literal prefix is a component-prefix of ``prefix`` or extends it."""
        node: _Trie | None = self
        for part in prefix:
            assert node is not None
            yield from node.items
            node = node.children.get(part)
            if node is None:
                return
        stack = [node]
        while stack:
            cur = stack.pop()
            assert cur is not None
            yield from cur.items
            stack.extend(cur.children.values())


def _overlap_problems(plan: Plan, edges: dict[str, list[str]]) -> list[Problem]:
    ordering = Ordering(edges)
    writes = _Trie()
    for t in plan.tasks:
        for entry in dict.fromkeys(t.write_scope):
            if not entry_problem(entry):
                writes.add(literal_prefix(entry), (t.task_id, normalize_entry(entry)))

    problems: list[Problem] = []
    reported: set[tuple[str, str, str]] = set()
    for t in plan.tasks:
        checks: list[tuple[Literal["write", "read"], str]] = [
            *(("write", e) for e in t.write_scope),
            *(("read", e) for e in t.read_scope),
        ]
        for kind, entry in checks:
            if entry_problem(entry):
                continue
            norm = normalize_entry(entry)
            for other, other_entry in writes.related(literal_prefix(entry)):
                if other == t.task_id or ordering.ordered(t.task_id, other):
                    continue
                if kind == "write" and other < t.task_id:
                    continue  # each unordered pair of writers is reported once
                key = (kind, t.task_id, other)
                if key in reported or not may_overlap(norm, other_entry):
                    continue
                reported.add(key)
                problems.append(_overlap_problem(kind, t.task_id, norm, other, other_entry))
    return problems


def _overlap_problem(
    kind: Literal["write", "read"], task: str, entry: str, other: str, other_entry: str
) -> Problem:
    if kind == "write":
        msg = (
            f"tasks '{task}' and '{other}' may run at the same time but both write "
            f"{_pair(entry, other_entry)}; make one depend on the other or split the scopes"
        )
        return _p("write_overlap", msg, [task, other], sorted({entry, other_entry}))
    msg = (
        f"task '{task}' reads {entry!r}, which task '{other}' writes ({other_entry!r}), but neither "
        f"depends on the other: the read may be stale; add a dependency"
    )
    return _p("stale_read", msg, [task, other], sorted({entry, other_entry}))


def _pair(a: str, b: str) -> str:
    return repr(a) if a == b else f"{a!r} / {b!r}"
