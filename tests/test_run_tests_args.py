"""run_tests with arguments runs only what it names; the final check always runs everything.

Real CLI, real repository, the real sandbox; what ran is read from the test logs the run keeps.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from anti_sprawl.cli.app import app

from .conftest import GIT_ENV

runner = CliRunner()
TESTS = (
    "def test_alpha():\n    assert True\n\n\n"
    "def test_beta():\n    assert True\n\n\n"
    "def test_gamma():\n    assert True\n"
)


pytestmark = pytest.mark.usefixtures("python_on_path")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "tests/test_one.py").write_text(TESTS)
    (repo / "tests/test_two.py").write_text("def test_other():\n    assert True\n")
    env = {**os.environ, **GIT_ENV}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "init"]):
        subprocess.run(["git", *args], cwd=repo, check=True, env=env)
    return repo


def verify_only_plan(
    test_command: str | list[str], *, goal: str = "Run the tests", write: str = "tests/test_one.py"
) -> dict[str, Any]:
    """A one-task plan whose node t runs tests and may change nothing (``expect_changes``)."""
    task = {
        "task_id": "t",
        "name": goal,
        "goal": goal,
        "read_scope": ["tests/"],
        "write_scope": [write],
        "expect_changes": False,  # a verify-only node: it runs tests, changes nothing
    }
    plan = {"plan_id": "p", "requirement": "Check the tests", "test_command": test_command}
    return {**plan, "tasks": [task]}


def run_tests_observations(repo: Path, state: Any) -> list[str]:
    """What each run_tests call of node t answered, from its transcript."""
    artifacts = repo / ".anti-sprawl/runs" / state["run_id"] / "artifacts/t"
    events = [
        json.loads(line) for line in (artifacts / "transcript.jsonl").read_text().splitlines()
    ]
    return [e["result"]["content"] for e in events if e["event"] == "tool"
            and e["call"]["name"] == "run_tests"]  # fmt: skip


def executed(tmp_path: Path, repo: Path, plan: dict[str, Any], turns: list[Any]) -> Any:
    """The run state of ``execute --json`` of ``plan`` on ``repo``, node t scripted ``turns``."""
    plan_path, script_path = tmp_path / "plan.yaml", tmp_path / "script.yaml"
    plan_path.write_text(yaml.safe_dump(plan))
    script_path.write_text(yaml.safe_dump({"workers": {"t": turns}}))
    result = runner.invoke(
        app,
        ["execute", str(plan_path), "--repo", str(repo), "--script", str(script_path), "--json"],
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_arguments_narrow_the_run_and_the_final_check_runs_all(tmp_path: Path, repo: Path) -> None:
    pytest = [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider"]
    plan = verify_only_plan(pytest, goal="Run test_alpha only")
    turns = [
        {"tool": "run_tests", "args": {"args": ["tests/test_one.py::test_alpha"]}},
        {"tool": "run_tests", "args": {"args": ["tests/test_one.py", "-k", "beta or gamma"]}},
        {"tool": "finish", "args": {"summary": "ran one test"}},
    ]
    state = executed(tmp_path, repo, plan, turns)
    logs = sorted((repo / ".anti-sprawl/runs" / state["run_id"] / "artifacts/t").glob("tests-*"))
    assert [p.name for p in logs] == ["tests-1-1.log", "tests-1-2.log", "tests-1-3.log"]
    one, two, final = (p.read_text() for p in logs)
    assert "test_one.py::test_alpha PASSED" in one
    assert "1 passed" in one
    assert "test_beta" not in one
    assert "test_other" not in one
    assert "test_beta PASSED" in two
    assert "test_gamma PASSED" in two
    assert "2 passed" in two
    assert "1 deselected" in two
    assert "test_alpha" not in two
    for name in ("test_alpha", "test_beta", "test_gamma", "test_other"):
        assert f"{name} PASSED" in final
    assert "4 passed" in final
    # the recorded outcome is the final, full command
    assert state["tasks"]["t"]["tests"]["command"] == plan["test_command"]


@pytest.mark.parametrize(
    "args",
    [
        ["python -m pytest -v -p no:cacheprovider"],
        ["python", "-m", "pytest", "-v", "-p", "no:cacheprovider"],
    ],
)
def test_arguments_that_restate_the_test_command_run_it_once(
    tmp_path: Path, repo: Path, args: list[str]
) -> None:
    """make real-model 2026-12-04 run c, call 9: run_tests with the test command as its args,
    which ran ``python -m pytest -q python -m pytest -q`` ("file or directory not found"). Args
    that spell the command itself are dropped: it runs once, whole, and the model is told."""
    plan = verify_only_plan("python -m pytest -v -p no:cacheprovider")
    turns = [
        {"tool": "run_tests", "args": {"args": args}},
        {"tool": "finish", "args": {"summary": "ran the tests"}},
    ]
    state = executed(tmp_path, repo, plan, turns)
    artifacts = repo / ".anti-sprawl/runs" / state["run_id"] / "artifacts/t"
    first = (artifacts / "tests-1-1.log").read_text()
    assert "4 passed" in first
    assert "not found" not in first
    (observed,) = run_tests_observations(repo, state)
    assert "note: your args were the test command itself, so it ran once, whole" in observed


def test_args_that_select_no_test_are_told_as_no_test_not_as_failing(
    tmp_path: Path, repo: Path
) -> None:
    """make real-model 2026-12-05 run an, call 7: the test node's first call was run_tests
    ``-k subtract`` before any test of subtract existed; pytest exits 5 ("1 deselected"), which
    the node was told as "tests failed", and it answered that it could not fix the failures.
    Exit code 5 of pytest is told as no test run; a failing selection stays "failed"."""
    pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    plan = verify_only_plan(pytest, write="tests/test_three.py")
    failing = "def test_delta():\n    assert False\n"
    turns = [
        {"tool": "run_tests", "args": {"args": ["tests/test_one.py", "-k", "delta"]}},
        {"tool": "write_file", "args": {"path": "tests/test_three.py", "content": failing}},
        {"tool": "run_tests", "args": {"args": ["tests/test_three.py", "-k", "delta"]}},
        {"tool": "delete_file", "args": {"path": "tests/test_three.py"}},
        {"tool": "finish", "args": {"summary": "ran the tests"}},
    ]
    none_ran, failed = run_tests_observations(repo, executed(tmp_path, repo, plan, turns))
    assert "\ntests ran none (exit code 5): " in none_ran
    assert "note: pytest found no test to run: no test matches your args" in none_ran
    assert "\ntests failed (exit code 1): " in failed
    assert "no test" not in failed
