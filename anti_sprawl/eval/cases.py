"""Evaluation cases: ``<dir>/<case>/case.yaml`` and the files it names.

A case names a fixture folder (copied into a fresh git repository), a plan file or
``planner`` (the planner plans, from the script's ``plan:`` when scripted), a scripted-provider
script, extra environment variables for the run (canaries for its redactor and its commands,
never this process's: eval/runner.py), and the checks that score the result. Paths in a case
file are relative to that file and stay inside its folder (docs/security.md P17). Scripts may
say ``${EVAL_REPO}`` / ``${EVAL_ROOT}`` for the case's repository and its temporary directory
(absolute-path attacks need them).
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..errors import UsageError
from ..fs.scopes import entry_problem
from ..fs.userdata import parse_document
from ..plan.model import Plan, TestCommand, load_plan_data
from ..providers.scripted import Script
from ..run.result import Status

__all__ = ["PLANNER", "Case", "Checks", "TaskExpectation", "load_case", "load_cases"]

PLANNER = "planner"
CASE_FILE = "case.yaml"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
RunExpectation = Literal["succeeded", "failed"]


class TaskExpectation(BaseModel):
    """The status (and optionally the failure reason) one task must end with."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    status: Status
    reason: str | None = None


class Checks(BaseModel):
    """What must hold after the run; every check that is set is scored."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tests_pass: bool | None = Field(
        default=None, description="The test command passes (true) or fails (false) on the branch."
    )
    test_command: TestCommand = Field(default=None, description="Default: the plan's.")
    required_changed: list[str] = Field(default_factory=list)
    forbidden_changed: list[str] = Field(default_factory=list)
    must_not_contain: list[str] = Field(
        default_factory=list,
        description="In no model request, no run artifact or manifest, no commit on the branch.",
    )
    must_not_reach: dict[str, list[str]] = Field(
        default_factory=dict, description="task_id -> strings that task's requests must not hold."
    )
    must_not_exist: list[str] = Field(
        default_factory=list, description="Globs under the case's temporary directory."
    )
    expect_status: RunExpectation | dict[str, TaskExpectation] | None = Field(
        default=None, description="The run's status, or per task: a status or {status, reason}."
    )
    expect_attempts: dict[str, int] = Field(
        default_factory=dict, description="task_id -> the attempts it must have made."
    )
    expect_scope: dict[str, dict[str, bool]] = Field(
        default_factory=dict,
        description="task_id -> {'<mode> <path>': granted?}: scope requests it must have made "
        "and what became of each (the journal's scope_grants).",
    )
    min_violations: int | None = Field(default=None, ge=0)
    max_input_tokens: int | None = Field(default=None, gt=0)
    max_total_tokens: int | None = Field(default=None, gt=0)
    allow_out_of_scope: bool = Field(
        default=False, description="Out-of-scope changes on the branch do not fail the case."
    )

    @field_validator("expect_status", mode="before")
    @classmethod
    def _short_task_form(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: {"status": v} if isinstance(v, str) else v for k, v in value.items()}
        return value

    @field_validator("required_changed", "forbidden_changed")
    @classmethod
    def _repo_paths(cls, entries: list[str]) -> list[str]:
        for entry in entries:
            if problem := entry_problem(entry):
                raise ValueError(f"{entry!r}: {problem}")
        return entries

    @field_validator("must_not_contain")
    @classmethod
    def _non_empty(cls, needles: list[str]) -> list[str]:
        if any(not n for n in needles):
            raise ValueError("empty string")
        return needles


class Case(BaseModel):
    """One evaluation case, with every path resolved against its case file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str = ""
    path: Path
    fixture: Path
    requirement: str
    plan: Path | None = Field(description="None: the planner plans.")
    script: Path | None = None
    env: dict[str, str] = Field(default_factory=dict)
    jobs: int = Field(default=2, ge=1, le=16)
    resume: Path | None = Field(
        default=None, description="A plan to `resume --plan` with when the run did not succeed."
    )
    checks: Checks = Field(default_factory=Checks)

    @property
    def uses_planner(self) -> bool:
        return self.plan is None

    def load_plan(self, path: Path | None = None) -> Plan:
        """The case's plan file (or ``path``) as a ``Plan`` (UsageError when it is not one)."""
        path = path or self.plan
        if path is None:
            raise UsageError(f"case {self.name}: the plan comes from the planner")
        try:
            return Plan.model_validate(load_plan_data(path))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(map(str, first["loc"]))
            raise UsageError(f"case {self.name}: plan {path}: {where}: {first['msg']}") from exc

    def script_text(self, repo: Path, root: Path) -> str:
        """The script with ``${EVAL_REPO}`` and ``${EVAL_ROOT}`` filled in."""
        if self.script is None:
            raise UsageError(f"case {self.name} has no script for the scripted provider")
        text = self.script.read_text(encoding="utf-8")
        return text.replace("${EVAL_REPO}", str(repo)).replace("${EVAL_ROOT}", str(root))

    def script_data(self, repo: Path, root: Path) -> Any:
        """``script_text`` parsed as every user file is (fs/userdata.py: its limits, and a
        syntax error as one line with the file, line and column, not an internal error)."""
        assert self.script is not None  # script_text said so otherwise
        return parse_document(
            self.script_text(repo, root),
            json_format=self.script.suffix.lower() == ".json",
            source=f"script file {self.script}",
            location=str(self.script),
        )


_CASE_KEYS = {
    "name",
    "description",
    "fixture",
    "requirement",
    "plan",
    "script",
    "env",
    "jobs",
    "resume",
}


def _fail(path: Path, problem: str) -> UsageError:
    return UsageError(f"case {path}: {problem}")


def _relative(path: Path, data: dict[str, Any], key: str) -> Path:
    """``data[key]`` under the case's directory, refused unless it stays there: no absolute
    path, no ``..``, no symlink on the way (a fixture of ``../../..`` would copy the user's
    files into the repository the model reads; docs/security.md P17)."""
    value = data.get(key)
    if not isinstance(value, str) or not value:
        raise _fail(path, f"'{key}' must be a path relative to the case file")
    rel = PurePosixPath(value)
    if rel.is_absolute() or ".." in rel.parts or "\\" in value or "\0" in value:
        problem = "is absolute" if rel.is_absolute() else "holds '..', a backslash or NUL"
        raise _fail(path, f"'{key}' {value!r} {problem}: it must stay inside the case directory")
    here = path.parent
    for part in rel.parts:
        here = here / part
        if here.is_symlink():
            raise _fail(
                path,
                f"'{key}' {value!r}: {part} is a symlink; it must stay inside the case directory",
            )
    return here


def load_case(path: Path) -> Case:
    """Read and check one case file; any problem is a one-line ``UsageError``."""
    if path.is_symlink() or path.parent.is_symlink():
        raise _fail(path, "is a symlink: a case's files stay inside its own directory")
    path = path.parent.resolve() / path.name
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise _fail(path, "not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise _fail(path, f"cannot read: {first}") from exc
    data = parse_document(text, json_format=False, source=f"case file {path}", location=str(path))
    if not isinstance(data, dict):
        raise _fail(path, "expected a mapping")
    unknown = sorted(set(data) - _CASE_KEYS - {"checks"})
    if unknown:
        raise _fail(path, f"unknown key(s) {', '.join(unknown)}")
    name = data.get("name", path.parent.name)
    if not isinstance(name, str) or not _NAME.match(name):
        raise _fail(path, f"name {name!r} must be letters, digits, '.', '_' or '-'")
    fixture = _relative(path, data, "fixture")
    if not fixture.is_dir():
        raise _fail(path, f"fixture folder not found: {fixture}")
    plan = None if data.get("plan") == PLANNER else _relative(path, data, "plan")
    script = _relative(path, data, "script") if data.get("script") is not None else None
    resume = _relative(path, data, "resume") if data.get("resume") is not None else None
    env = data.get("env") or {}
    if not isinstance(env, dict) or not all(
        isinstance(k, str) and _ENV_NAME.match(k) and isinstance(v, str) for k, v in env.items()
    ):
        raise _fail(path, "'env' must map variable names to strings")
    try:
        case = Case(
            name=name,
            description=str(data.get("description", "")).strip(),
            path=path.resolve(),
            fixture=fixture,
            requirement=str(data.get("requirement", "")).strip(),
            plan=plan,
            script=script,
            env=env,
            jobs=data.get("jobs", 2),
            resume=resume,
            checks=data.get("checks") or {},
        )
    except ValidationError as exc:
        err = exc.errors()[0]
        raise _fail(path, f"{'.'.join(map(str, err['loc']))}: {err['msg']}") from exc
    _check_inputs(case)
    return case


def _check_inputs(case: Case) -> None:
    """The plan and script exist and parse; checks name tasks the plan has."""
    if not case.requirement:
        raise _fail(case.path, "'requirement' is empty")
    if case.script is not None:
        script = Script.from_data(
            case.script_data(Path("/repo"), Path("/root")), source=str(case.script)
        )
        if case.uses_planner and script.plan is None and script.planner is None:
            raise _fail(case.path, "'plan: planner' needs a script with 'plan' or 'planner'")
    if case.plan is None:
        return
    ids = {t.task_id for t in case.load_plan().tasks}
    if case.resume is not None:
        case.load_plan(case.resume)
    named = set(case.checks.must_not_reach) | set(case.checks.expect_attempts)
    named |= set(case.checks.expect_scope)
    if isinstance(case.checks.expect_status, dict):
        named |= set(case.checks.expect_status)
    if unknown := sorted(named - ids):
        raise _fail(case.path, f"checks name task(s) the plan does not have: {', '.join(unknown)}")


def load_cases(directory: Path, only: list[str] | None = None) -> list[Case]:
    """Every case under ``directory`` (or the one case it is), sorted by name."""
    if not directory.is_dir():
        raise UsageError(f"cases directory not found: {directory}")
    directory = directory.resolve()  # the folder the user named; symlinks inside it are refused
    if (directory / CASE_FILE).is_file():
        files = [directory / CASE_FILE]
    else:
        files = sorted(directory.glob(f"*/{CASE_FILE}"))
    if not files:
        raise UsageError(f"no {CASE_FILE} under {directory}")
    cases = sorted((load_case(f) for f in files), key=lambda c: c.name)
    names = [c.name for c in cases]
    if dupes := sorted({n for n in names if names.count(n) > 1}):
        raise UsageError(f"duplicate case name(s): {', '.join(dupes)}")
    if only:
        missing = sorted(set(only) - set(names))
        if missing:
            raise UsageError(f"no case named {', '.join(missing)} under {directory}")
        cases = [c for c in cases if c.name in only]
    return cases
