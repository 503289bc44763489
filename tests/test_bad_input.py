"""Hostile input files through the real CLI: each is one line on stderr, exit 2, no traceback.

Plans nested 10,000 deep, 5,000-digit integers, endless files, duplicate keys, booleans as
budgets, task ids git cannot use and test commands execute cannot split: every one is caught
where the file is read or validated, never as a Python error, and never after a run started.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner, Result

from anti_sprawl.cli.app import app

from . import e2e_fixture as fx
from .conftest import node, plan_data

runner = CliRunner()
CLI = [sys.executable, "-m", "anti_sprawl"]


def one_line_error(result: Result, code: int = 2) -> str:
    """The single stderr line of a failed command; asserts the exit code and no traceback."""
    assert result.exit_code == code, (result.stdout, result.stderr)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    return lines[0]


def deep_yaml(depth: int) -> str:
    return "plan_id: p\nrequirement: r\ntasks: " + "[" * depth + "]" * depth + "\n"


def deep_json(depth: int) -> str:
    return '{"plan_id": "p", "requirement": "r", "tasks": ' + "[" * depth + "]" * depth + "}"


@pytest.mark.parametrize(
    ("name", "text", "needle"),
    [
        ("deep.yaml", deep_yaml(10_000), "nesting is limited to 64 levels"),
        ("deep.json", deep_json(10_000), "nesting is limited to 64 levels"),
        ("deep100.yaml", deep_yaml(100), "nesting is limited to 64 levels"),
        ("deep100.json", deep_json(100), "nesting is limited to 64 levels"),
        (
            "bigint.yaml",
            "plan_id: p\nrequirement: r\ntasks:\n- task_id: a\n  token_budget: " + "9" * 5000,
            "5000 digits; integers are limited to 20 digits",
        ),
        (
            "bigint.json",
            '{"plan_id": "p", "tasks": [{"token_budget": ' + "9" * 5000 + "}]}",
            "5000 digits; integers are limited to 20 digits",
        ),
        (
            "dup.yaml",
            "plan_id: p\nrequirement: r\nplan_id: q\n",
            "duplicate key 'plan_id' on line 3",
        ),
        ("dup.json", '{"plan_id": "p", "plan_id": "q"}', "duplicate key 'plan_id'"),
        (
            "duptask.yaml",
            "plan_id: p\nrequirement: r\ntasks:\n- task_id: a\n  token_budget: 5\n  token_budget: 9\n",
            "duplicate key 'token_budget' on line 6",
        ),
        ("binary.yaml", "plan_id: \udcff", "is not UTF-8 text"),
    ],
)
def test_hostile_plan_files(tmp_path: Path, name: str, text: str, needle: str) -> None:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    for command in ("validate", "show"):
        line = one_line_error(runner.invoke(app, [command, str(path)]))
        assert needle in line, line


def test_hostile_plan_refused_by_execute_before_any_run(tmp_path: Path) -> None:
    repo = fx.make_repo(tmp_path)
    before = fx.checkout_fingerprint(repo)
    path = tmp_path / "deep.json"
    path.write_text(deep_json(10_000))
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump(fx.script()))
    args = ["execute", str(path), "--repo", str(repo), "--script", str(script)]
    line = one_line_error(runner.invoke(app, args))
    assert "nesting is limited" in line
    assert not (repo / ".anti-sprawl" / "runs").exists()
    assert fx.checkout_fingerprint(repo) == before


def test_endless_files_stop_at_the_size_limit(tmp_path: Path) -> None:
    """/dev/zero as plan, --script and @requirement: a bounded read and one line each."""
    repo = fx.make_repo(tmp_path)
    good_script = tmp_path / "script.yaml"
    good_script.write_text(yaml.safe_dump({"plan": fx.plan()}))
    good_plan = tmp_path / "plan.yaml"
    good_plan.write_text(yaml.safe_dump(fx.plan()))
    for args, what in (
        (["validate", "/dev/zero"], "plan"),
        (["show", "/dev/zero"], "plan"),
        (["plan", "req", "--repo", str(repo), "--script", "/dev/zero"], "script"),
        (["plan", "@/dev/zero", "--repo", str(repo), "--script", str(good_script)], "requirement"),
        (["execute", str(good_plan), "--repo", str(repo), "--script", "/dev/zero"], "script"),
    ):
        line = one_line_error(runner.invoke(app, args))
        assert f"{what} file /dev/zero is larger than the 64 MiB limit" in line, line


def test_oversized_regular_file_is_refused_from_its_size(tmp_path: Path) -> None:
    path = tmp_path / "huge.yaml"
    with path.open("wb") as fh:  # sparse: 65 MiB of apparent size, nothing written
        fh.truncate(65 * 1024 * 1024)
    line = one_line_error(runner.invoke(app, ["validate", str(path)]))
    assert "larger than the 64 MiB limit" in line


@pytest.mark.parametrize("value", [True, False, 30000.0, "30000"])
def test_budgets_must_be_integers(tmp_path: Path, value: object) -> None:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan_data(node("a", token_budget=value, max_tool_calls=value))))
    result = runner.invoke(app, ["validate", str(path), "--json"])
    assert result.exit_code == 1
    errors = json.loads(result.stdout)["errors"]
    where = sorted(e["message"].split(":")[0] for e in errors)
    assert where == ["task 'a' field 'max_tool_calls'", "task 'a' field 'token_budget'"], errors


@pytest.mark.parametrize(
    ("task_id", "plan_id", "code"),
    [
        ("a..b", "p1", "bad_task_id"),
        ("ab.lock", "p1", "bad_task_id"),
        ("ab.", "p1", "bad_task_id"),
        ("a", "p..1", "bad_plan_id"),
        ("a", "p1.lock", "bad_plan_id"),
    ],
)
def test_ids_must_be_git_ref_components(
    tmp_path: Path, task_id: str, plan_id: str, code: str
) -> None:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan_data(node(task_id), plan_id=plan_id)))
    result = runner.invoke(app, ["validate", str(path), "--json"])
    assert result.exit_code == 1
    assert [e["code"] for e in json.loads(result.stdout)["errors"]] == [code]


@pytest.mark.parametrize(
    ("where", "command", "needle"),
    [
        ("task", 'python -c "print(1)', "cannot be split into arguments (No closing quotation)"),
        ("task", "python -c print(1)\x00", "contains a NUL byte"),
        ("task", ["python", "-c", "print(1)\x00"], "contains a NUL byte"),
        ("plan", "pytest 'unclosed", "cannot be split into arguments"),
    ],
)
def test_commands_execute_could_not_run_fail_validation(
    tmp_path: Path, where: str, command: object, needle: str
) -> None:
    data = fx.plan()
    if where == "task":
        data["tasks"][1]["test_command"] = command
    else:
        data["test_command"] = command
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(data))
    result = runner.invoke(app, ["validate", str(path), "--json"])
    assert result.exit_code == 1
    (error,) = json.loads(result.stdout)["errors"]
    assert error["code"] == "bad_command", error
    assert needle in error["message"], error


def test_unrunnable_command_refused_by_execute_before_the_run(tmp_path: Path) -> None:
    """What validate refuses, execute refuses too: no run, no branch, nothing left running."""
    repo = fx.make_repo(tmp_path)
    data = fx.plan()
    data["tasks"][1]["test_command"] = "python -c 'print(1)\x00'"
    plan_path, script_path = fx.write_inputs(tmp_path, data, fx.script())
    proc = subprocess.run(
        [*CLI, "execute", str(plan_path), "--repo", str(repo), "--script", str(script_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1
    assert "Traceback" not in proc.stderr
    assert "test_command contains a NUL byte" in proc.stderr
    assert not (repo / ".anti-sprawl" / "runs").exists()
    assert fx.git(repo, "branch", "--list", "anti-sprawl/*") == ""


def test_show_clips_long_texts_to_one_line_each(tmp_path: Path) -> None:
    """A 2 MB one-line requirement, a name with newlines, 2,000 scope entries: short lines."""
    data = plan_data(
        node(
            "a",
            name="first line\nsecond line\x00",
            read_scope=[f"src/m{i}.py" for i in range(2000)],
            test_command=["python", "-c", "x" * 100_000],
        ),
        requirement="word " * 400_000,
    )
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(data))
    result = runner.invoke(app, ["show", str(path)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    # each text clipped to a few hundred characters, then (in a pipe) broken at spaces within
    # the 80 columns, the continuations under the tree's guides; one unbreakable token may
    # keep a line of its own (views/plan.py)
    assert len(lines) <= 20, lines
    assert all(len(line) <= 80 or len(line.split()) == 1 for line in lines), lines
    assert max(len(line) for line in lines) < 400
    flat = " ".join(" ".join(line.strip(" │├└─").split()) for line in lines)
    assert "… (1,999,799 more characters)" in flat
    assert "└── a first line second line?" in result.stdout
    assert "(2,000 entries, 26,888 characters)" in flat
    assert flat.endswith("(3 entries, 100,010 characters)")


def test_unwritable_plan_output_is_one_line(tmp_path: Path) -> None:
    """-o under a regular file: one line naming the file, exit 2, no traceback."""
    repo = fx.make_repo(tmp_path)
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump({"plan": fx.plan()}))
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    args = ["plan", "req", "--repo", str(repo), "--script", str(script)]
    target = blocker / "plan.yaml"
    line = one_line_error(runner.invoke(app, [*args, "-o", str(target)]))
    assert line == f"anti-sprawl: error: cannot write the plan file {target}: File exists", line


def test_the_boundary_maps_every_exception_onto_the_tree() -> None:
    from anti_sprawl.errors import (
        InternalError,
        RunError,
        StorageError,
        UsageError,
        at_boundary,
    )

    usage = UsageError("bad flag")
    assert at_boundary(usage) is usage
    full = at_boundary(OSError(28, "No space left on device", "/x/run.json"))
    assert isinstance(full, StorageError)
    assert str(full) == "No space left on device: /x/run.json"
    assert type(at_boundary(MemoryError())) is RunError
    bug = at_boundary(KeyError("task"))
    assert isinstance(bug, InternalError)
    assert bug.exit_code == 1
    assert str(bug) == (
        "internal error (KeyError: 'task'); set ANTI_SPRAWL_DEBUG=1 to see the traceback"
    )
