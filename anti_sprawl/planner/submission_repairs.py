"""Repairs of a planner submission: what a small model wrote, taken as the plan it means.

Each repair was recorded from a real model (Qwen2.5-Coder-1.5B, ``make real-model``; the runs
are named in each docstring and listed in docs/local-models.md): a submission that fails
validation on something whose meaning is not in doubt (one task written at the plan's top
level, an empty string for an unset field, a base that names no commit, a repair that re-sent
only the task it fixed) is reshaped and the change reported as a warning, so the user sees it
in the plan review. A plan the user writes keeps every error: there it is a typo to fix.
``planner.py`` applies them in order on each ``submit_plan``.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any

from ..fs.scopes import Scope, entry_problem
from ..plan.intent_checks import named_paths
from ..plan.model import DEFAULT_MAX_ATTEMPTS, Plan, TaskNode, command_argv
from ..plan.validate import Problem, Report
from ..plan.wording import closest

__all__ = [
    "reshaped_submission",
    "unasked_models",
    "with_earlier_tasks",
    "with_users_test_command",
    "without_fewer_attempts",
    "without_missing_reads",
    "without_unknown_dependencies",
    "without_unresolved_base",
]


def unasked_models(
    data: dict[str, Any], allowed: Sequence[str]
) -> tuple[dict[str, Any], list[Problem]]:
    """The submission without the models it names when the user allowed none (no ``plan
    --models``), and a warning for each: every node then runs on the run's own model, which is
    what "leave it out" asks for. Recorded, make real-model 2026-12-04 run c: Qwen2.5-Coder-1.5B
    named model 'python' in all three submissions, and planning failed on that alone."""
    if allowed:
        return data, []
    dropped: list[Problem] = []
    named = data.get("default_model")
    if isinstance(named, str) and named:
        data = {**data, "default_model": None}
        dropped.append(_left_out(f"default_model '{named}'", []))
    tasks = data.get("tasks")
    if isinstance(tasks, list):
        kept: list[Any] = []
        for task in tasks:
            model = task.get("model") if isinstance(task, dict) else None
            if isinstance(model, str) and model:
                task = {**task, "model": None}
                task_id = str(task.get("task_id", "?"))
                dropped.append(_left_out(f"task '{task_id}' model '{model}'", [task_id]))
            kept.append(task)
        data = {**data, "tasks": kept}
    return data, dropped


def without_fewer_attempts(data: dict[str, Any]) -> tuple[dict[str, Any], list[Problem]]:
    """The submission without the ``max_attempts`` below the default it sets, and a warning
    for each: those nodes get the default's attempts. A planner may ask for more attempts for a
    risky task, not fewer: a second attempt costs nothing when the first lands, and how few
    tries a failing node gets is the user's call, made in review (the run's caps bound the
    spending). Recorded, make real-model 2026-12-05 run aa: the plan's ``"max_attempts": 1``,
    with no word why; its test task called finish over no change once, and had no retry."""
    dropped: list[Problem] = []

    def fewer(fields: dict[str, Any], where: str) -> dict[str, Any]:
        asked = fields.get("max_attempts")
        if not isinstance(asked, int) or isinstance(asked, bool) or asked >= DEFAULT_MAX_ATTEMPTS:
            return fields
        dropped.append(
            _reshaped(
                f"{where} max_attempts {asked} left out: fewer attempts than the default "
                f"({DEFAULT_MAX_ATTEMPTS}) are the user's to set"
            )
        )
        return {k: v for k, v in fields.items() if k != "max_attempts"}

    data = fewer(data, "the plan's")
    tasks = data.get("tasks")
    if isinstance(tasks, list):
        kept = [
            fewer(t, f"task '{t.get('task_id', '?')}'") if isinstance(t, dict) else t for t in tasks
        ]
        data = {**data, "tasks": kept}
    return data, dropped


def without_missing_reads(
    data: dict[str, Any], report: Report
) -> tuple[dict[str, Any], list[Problem]]:
    """The submission without the read_scope entries ``report`` found naming no file, and a
    warning for each: a read of nothing reads nothing, and a small model names the repository
    map we showed it as a file (recorded, make real-model 2026-12-04 runs k and o:
    ``./repomap``, ``repo/map/repomap``; run o's one task was otherwise valid, three times, and
    planning failed on that entry alone). A plan the user writes keeps the error: there it is a
    typo to fix."""
    missing: dict[str, set[str]] = {}
    for p in report.errors:
        if p.code == "read_scope_missing":
            for task_id in p.tasks:
                missing.setdefault(task_id, set()).update(p.paths)
    tasks = data.get("tasks")
    if not missing or not isinstance(tasks, list):
        return data, []
    dropped: list[Problem] = []
    kept: list[Any] = []
    for task in tasks:
        named = task.get("task_id") if isinstance(task, dict) else None
        gone = missing.get(named) if isinstance(named, str) else None
        reads = task.get("read_scope") if isinstance(task, dict) else None
        if gone and isinstance(reads, list):
            task = {**task, "read_scope": [e for e in reads if e not in gone]}
            for entry in sorted(gone):
                where = f"task '{named}' read_scope entry {entry!r}"
                dropped.append(_reshaped(f"{where} names no file in the repository: left out"))
        kept.append(task)
    return {**data, "tasks": kept}, dropped


def without_unknown_dependencies(
    data: dict[str, Any], report: Report
) -> tuple[dict[str, Any], list[Problem]]:
    """The submission with each dependency ``report`` found naming no task read as the task
    it most likely means (the spelling validation suggests), or left out when there is none
    or it is the task itself, and a warning for each. Recorded, make real-model 2026-12-05
    run af: dependencies on ``read_file`` (a tool, not a task), then on ``subtract_calc``
    for ``add_subtract_calc`` (itself) and from ``add_subtract_test``; planning failed on
    those alone, three submissions running. Validation runs again after: a cycle this makes
    is still an error. A plan the user writes keeps the errors."""
    codes = {"unknown_dependency", "self_dependency"}
    tasks = data.get("tasks")
    if not any(p.code in codes for p in report.errors) or not isinstance(tasks, list):
        return data, []
    ids = {t["task_id"] for t in tasks if isinstance(t, dict) and _is_text(t.get("task_id"))}
    problems: list[Problem] = []
    kept: list[Any] = []
    for task in tasks:
        own = task.get("task_id") if isinstance(task, dict) else None
        deps = task.get("dependencies") if isinstance(task, dict) else None
        if not _is_text(own) or not isinstance(deps, list):
            kept.append(task)
            continue
        read: list[Any] = []
        for dep in deps:
            meant = dep
            if _is_text(dep) and (dep == own or dep not in ids):
                # the spelling of the task's own id means itself: no dependency at all
                meant = None if dep == own else closest(dep, sorted(ids))
                meant = None if meant == own else meant
                names = "itself" if dep == own else "no task"
                what = f"task '{own}' dependency {dep[:80]!r} names {names}"
                shown = f"read as '{meant}'" if meant else "left out"
                problems.append(_reshaped(f"{what}: {shown}"))
            if meant is not None and meant not in read:
                read.append(meant)
        kept.append({**task, "dependencies": read})
    return {**data, "tasks": kept}, problems


def without_unresolved_base(
    data: dict[str, Any], report: Report, planned: str | None
) -> tuple[dict[str, Any], list[Problem]]:
    """The submission with a ``base`` the model made up, naming no commit, replaced by the
    commit the planner looked at (``planned``, HEAD's), and a warning (recorded, make
    real-model 2026-12-05 run y: ``"base": "repomap"``, the map we showed it taken for a
    commit, then ``"existing_commit_or_branch"``, the words of the error's advice). A plan the
    user writes keeps the error."""
    if not any(p.code == "base_unresolved" for p in report.errors):
        return data, []
    shown = repr(data.get("base"))[:80]
    message = f"the plan's base {shown} names no commit: replaced by the commit planned at"
    return {**data, "base": planned}, [_reshaped(message)]


def with_users_test_command(plan: Plan, command: str) -> tuple[Plan, list[str]]:
    """``plan`` running the user's test command (``plan --test-command`` or the config's)
    everywhere, and a warning for each test command of the planner's it replaced. Recorded,
    make real-model 2026-12-05 run p: asked with ``--test-command "python -m pytest -q"``, the
    model gave its task ``python test_calc.py``, which runs no test and cannot fail; the user's
    command was kept only as the plan's default, which the task's own overrode."""
    warnings: list[str] = []

    def replaced(where: str, theirs: str | list[str]) -> None:
        shown = theirs if isinstance(theirs, str) else shlex.join(theirs)
        warnings.append(
            f"{where} test_command {shown!r} left out: the user set the test command "
            f"({command!r}: plan --test-command, or the config's test_command)"
        )

    wanted = command_argv(command)
    if plan.test_command is not None and command_argv(plan.test_command) != wanted:
        replaced("the plan's", plan.test_command)
    tasks = []
    for task in plan.tasks:
        if task.test_command is not None and command_argv(task.test_command) != wanted:
            replaced(f"task '{task.task_id}'", task.test_command)
            task = task.model_copy(update={"test_command": None})
        tasks.append(task)
    return plan.model_copy(update={"test_command": command, "tasks": tasks}), warnings


# A task's own fields (those a plan does not share): at a plan's top level, the model wrote a
# task there.
_TASK_ONLY = frozenset(TaskNode.model_fields) - frozenset(Plan.model_fields)
# Optional fields that hold text: an empty string is the model's way of leaving one unset.
_OPTIONAL_TEXT = frozenset(
    {"base", "test_command", "integration_command", "setup_command", "default_model", "model"}
)
_EMPTY: tuple[Any, ...] = ("", [], {}, None)


def reshaped_submission(data: dict[str, Any]) -> tuple[dict[str, Any], list[Problem]]:
    """The submission as the plan it means, where a small model wrote a plan's parts in the
    wrong place, and a warning for each change (recorded, make real-model 2026-12-04 second
    session, run i: three submissions of one task written at the plan's top level and again
    inside ``tasks``, with ``"model": ""``, ``"test_command": ""`` and a task holding
    ``"tasks": []``; 12 errors each, and planning failed on them alone):

    - a task's fields at the top level are that task: the plan's only task when it has none,
      left out when ``tasks`` holds a task of the same ``task_id``;
    - an empty string in an optional text field leaves the field unset;
    - a field neither a plan nor a task has, holding nothing, is left out;
    - the schema's ``required`` list copied into the plan is left out (run ao);
    - a task with no write scope gets the files its goal names by path that no other task
      writes (runs s and u: "Write a test for subtract(a, b) in test_calc.py" with
      test_calc.py in its read scope and an empty write scope; run u's repair got empty
      replies only, and planning failed on that error alone)."""
    problems: list[Problem] = []
    data = dict(data)
    top = {k: data[k] for k in _TASK_ONLY if k in data}
    listed = data.get("tasks")
    tasks: list[Any] = listed if isinstance(listed, list) else []
    # ids as the model wrote them may be anything (a list is unhashable): strings only
    ids = {t.get("task_id") for t in tasks if isinstance(t, dict) and _is_text(t.get("task_id"))}
    if top and not tasks and ("goal" in top or "write_scope" in top):
        data = {k: v for k, v in data.items() if k not in _TASK_ONLY} | {"tasks": [top]}
        problems.append(_reshaped("the submission was one task, not a plan: it is the plan's task"))
    elif _is_text(top.get("task_id")) and top["task_id"] in ids:
        data = {k: v for k, v in data.items() if k not in _TASK_ONLY}
        problems.append(
            _reshaped(f"the plan's top level repeated task '{top['task_id']}': left out")
        )
    emptied = _emptied(data, frozenset(Plan.model_fields), "the plan")
    if isinstance(data.get("tasks"), list):
        kept = []
        for task in data["tasks"]:
            if isinstance(task, dict):
                task = dict(task)
                where = f"task '{task.get('task_id', '?')}'"
                emptied += _emptied(task, frozenset(TaskNode.model_fields), where)
            kept.append(task)
        data["tasks"] = kept
    if emptied:
        problems.append(_reshaped(f"empty fields left unset: {', '.join(emptied)}"))
    if _schema_required(data.get("required")):
        del data["required"]
        problems.append(
            _reshaped("the plan's 'required' (the tool schema's list of fields, copied) left out")
        )
    problems += _writes_from_goals(data)
    return data, problems


def _schema_required(value: Any) -> bool:
    """Whether ``value`` is the submit_plan schema's ``required`` list written into the plan:
    field names of a plan, and nothing else (recorded, make real-model 2026-12-05 run ao,
    planner calls 1 and 2: ``"required": ["plan_id", "tasks"]`` beside a good two-task plan,
    refused twice as an unknown field; the third submission left out the test task)."""
    known = Plan.model_fields
    return (
        isinstance(value, list) and bool(value) and all(_is_text(v) and v in known for v in value)
    )


def _writes_from_goals(data: dict[str, Any]) -> list[Problem]:
    """Give, in place, each task of ``data`` with an empty write scope the files its goal
    names by path that no task writes (``./calc.py`` and globs included: run v's test task,
    "Write a test for the subtract function in calc.py", names the file another task
    writes, which is no file of its own); a warning for each task given some."""
    tasks = data.get("tasks")
    if not isinstance(tasks, list):
        return []
    tasks = [t for t in tasks if isinstance(t, dict)]
    entries = [
        entry
        for t in tasks
        if isinstance(t.get("write_scope"), list)
        for entry in t["write_scope"]
        if _is_text(entry) and entry_problem(entry) is None
    ]
    problems: list[Problem] = []
    for task in tasks:
        goal = task.get("goal")
        if task.get("write_scope", []) != [] or not _is_text(goal):
            continue
        written = Scope(entries)
        named = [p for p in named_paths(goal) if not written.matches(p)]
        if named:
            task["write_scope"] = named
            entries += named
            where = f"task '{task.get('task_id', '?')}'"
            shown = ", ".join(named)
            problems.append(
                _reshaped(f"{where} had no write_scope: given {shown}, which its goal names")
            )
    return problems


def with_earlier_tasks(
    data: dict[str, Any], earlier: Sequence[Any]
) -> tuple[dict[str, Any], list[Problem]]:
    """A repair that re-sent only the tasks it fixed, as the whole plan it means: the earlier
    submission's ``tasks`` with each task of the same ``task_id`` replaced, and a warning.
    Taken only when the submission depends on a task it left out that the earlier one held
    (recorded, make real-model 2026-12-05 run t: asked to fix task '1''s empty write scope, the
    model sent "the corrected task with ID 1" alone, twice, and planning failed on task '1'
    depending on an unknown '0')."""
    tasks = data.get("tasks")
    if not isinstance(tasks, list) or not all(isinstance(t, dict) for t in tasks):
        return data, []
    sent = {t.get("task_id"): t for t in tasks if _is_text(t.get("task_id"))}
    before = {t.get("task_id"): t for t in earlier if isinstance(t, dict)}
    needed = {
        d
        for t in tasks
        if isinstance(t.get("dependencies"), list)
        for d in t["dependencies"]
        if _is_text(d) and d not in sent
    }
    kept = [i for i in before if _is_text(i) and i not in sent]
    if len(sent) != len(tasks) or not needed or not needed <= set(kept):
        return data, []
    whole = [sent.get(i, t) for i, t in before.items()]
    whole += [t for i, t in sent.items() if i not in before]
    shown = ", ".join(f"'{i}'" for i in kept)
    message = f"the submission re-sent only some tasks: the earlier submission's {shown} kept"
    return {**data, "tasks": whole}, [_reshaped(message)]


def _is_text(value: Any) -> bool:
    return isinstance(value, str)


def _emptied(fields: dict[str, Any], known: frozenset[str], where: str) -> list[str]:
    """Unset, in place, the empty optional text fields and empty unknown fields of
    ``fields``; what was unset."""
    done = []
    for key in list(fields):
        if key in _OPTIONAL_TEXT and fields[key] == "":
            fields[key] = None
        elif key not in known and any(fields[key] == e for e in _EMPTY):
            del fields[key]
        else:
            continue
        done.append(f"{where} {key}")
    return done


def _reshaped(message: str) -> Problem:
    return Problem(code="submission_reshaped", message=message)


def _left_out(what: str, tasks: list[str]) -> Problem:
    return Problem(
        code="model_left_out",
        message=f"{what} left out: the user allowed no models (plan --models), so the run's "
        "model does this work",
        tasks=tasks,
    )
