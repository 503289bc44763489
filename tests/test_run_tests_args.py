"""run_tests with arguments runs only what it names; the final check always runs everything.

Real CLI, real repository, the real sandbox; what ran is read from the test logs the run keeps.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

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


def test_arguments_narrow_the_run_and_the_final_check_runs_all(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "tests/test_one.py").write_text(TESTS)
    (repo / "tests/test_two.py").write_text("def test_other():\n    assert True\n")
    env = {**os.environ, **GIT_ENV}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "init"]):
        subprocess.run(["git", *args], cwd=repo, check=True, env=env)
    plan = {
        "plan_id": "targeted",
        "requirement": "Check one test",
        "test_command": [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider"],
        "tasks": [
            {
                "task_id": "t",
                "name": "Run one test",
                "goal": "Run test_alpha only",
                "read_scope": ["tests/"],
                "write_scope": ["tests/test_one.py"],
                "expect_changes": False,  # a verify-only node: it runs tests, changes nothing
            }
        ],
    }
    turns = [
        {"tool": "run_tests", "args": {"args": ["tests/test_one.py::test_alpha"]}},
        {"tool": "run_tests", "args": {"args": ["tests/test_one.py", "-k", "beta or gamma"]}},
        {"tool": "finish", "args": {"summary": "ran one test"}},
    ]
    plan_path, script_path = tmp_path / "plan.yaml", tmp_path / "script.yaml"
    plan_path.write_text(yaml.safe_dump(plan))
    script_path.write_text(yaml.safe_dump({"workers": {"t": turns}}))
    result = runner.invoke(
        app,
        ["execute", str(plan_path), "--repo", str(repo), "--script", str(script_path), "--json"],
    )
    assert result.exit_code == 0, result.output
    state = json.loads(result.stdout)
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
