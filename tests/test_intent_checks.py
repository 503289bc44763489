"""Plans that cannot meet their requirement or run where they say (issue 23, item 7).

A file the requirement names that no node may write (a warning, and the planner is told once),
a ``base`` that is no commit (an error: it used to fall back to HEAD silently), and a
``setup_command`` that needs a network the run withholds (a warning), on real repositories and
through the real planner against the local fake OpenAI server.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from anti_sprawl.cli.app import app
from anti_sprawl.plan.validate import validate
from anti_sprawl.planner.planner import plan_requirement
from anti_sprawl.providers import OpenAIProvider

from .conftest import node, plan_data
from .fake_llm_server import FakeLLMServer
from .test_planner_sdk import no_sleep, openai_submit

runner = CliRunner()
REQUIREMENT = "Add subtract(a, b) to calc.py, e.g. subtract(3, 1) == 2, and a test in test_calc.py."


def warning_codes(data: dict[str, object], **kw: bool) -> list[str]:
    return [p.code for p in validate(data, **kw).warnings]


def test_a_file_the_requirement_names_in_no_write_scope_is_a_warning() -> None:
    short = plan_data(node("calc", write_scope=["calc.py"]), requirement=REQUIREMENT)
    (warning,) = validate(short).warnings
    assert warning.code == "requirement_path_unwritten"
    assert warning.paths == ["test_calc.py"]
    whole = plan_data(node("calc", write_scope=["calc.py", "test_*.py"]), requirement=REQUIREMENT)
    assert warning_codes(whole) == []


def test_a_base_that_is_no_commit_is_an_error(
    make_repo: Callable[[dict[str, str]], Path],
) -> None:
    repo = make_repo({"src/a.py": ""})
    report = validate(plan_data(node("a"), base="no-such-branch"), repo)
    assert [p.code for p in report.errors] == ["base_unresolved"]
    assert "'no-such-branch' is not a commit of this repository" in report.errors[0].message
    assert validate(plan_data(node("a"), base="main"), repo).valid


@pytest.mark.parametrize(
    ("command", "warned"),
    [
        ("npm ci", True),
        ("npm ci --offline", False),
        (["pip", "install", "-r", "requirements.txt"], True),
        ("pip install --no-index --find-links wheels -r requirements.txt", False),
        ("python -m compileall -q .", False),
    ],
)
def test_a_setup_command_that_needs_the_network_is_a_warning(
    command: str | list[str], warned: bool
) -> None:
    data = plan_data(node("a"), setup_command=command)
    assert ("setup_needs_network" in warning_codes(data)) is warned
    assert "setup_needs_network" not in warning_codes(data, setup_network=True)


def test_execute_says_so_before_it_starts(
    tmp_path: Path, make_repo: Callable[[dict[str, str]], Path]
) -> None:
    repo = make_repo({"src/a.py": ""})
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(plan_data(node("a"), setup_command="npm ci")))
    result = runner.invoke(
        app, ["execute", str(path), "--repo", str(repo), "--dry-run", "--provider", "scripted",
              "--script", str(path)],
    )  # fmt: skip
    assert "warning: setup_command 'npm ci' looks like it needs the network" in result.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(plan_data(node("a"), base="nowhere")))
    result = runner.invoke(app, ["validate", str(bad), "--repo", str(repo)])
    assert result.exit_code == 1
    assert "base_unresolved" in result.output


def test_the_planner_is_told_once_and_may_keep_its_plan(
    server: FakeLLMServer, make_repo: Callable[[dict[str, str]], Path]
) -> None:
    repo = make_repo({"calc.py": "def add(a, b):\n    return a + b\n", "test_calc.py": ""})
    short = plan_data(node("calc", write_scope=["calc.py"]), plan_id="sdk")
    whole = plan_data(node("calc", write_scope=["calc.py", "test_calc.py"]), plan_id="sdk")
    server.enqueue(openai_submit(short, "c1"))
    server.enqueue(openai_submit(whole, "c2"))
    provider = OpenAIProvider("local", base_url=server.url, sleep=no_sleep)
    result = plan_requirement(REQUIREMENT, repo, provider)
    assert result.ok, result.message
    assert result.plan is not None
    assert result.plan.tasks[0].write_scope == ["calc.py", "test_calc.py"]
    told = server.requests[1].body["messages"][-1]["content"]
    assert "cannot meet the requirement as written" in told
    assert "test_calc.py, which is in no task's write_scope" in told


def test_a_plan_sent_back_for_that_warning_stays_the_answer_when_none_better_comes(
    tmp_path: Path, make_repo: Callable[[dict[str, str]], Path]
) -> None:
    """A requirement may name a file to leave alone ("leave test_calc.py untouched"): the
    planner is told once, and when it answers with no new plan (here its script ends), the
    valid plan it submitted is the result, its warning kept."""
    repo = make_repo({"calc.py": "def add(a, b):\n    return a + b\n", "test_calc.py": ""})
    once = plan_data(node("calc", write_scope=["calc.py"]), plan_id="sdk")
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump({"plan": once, "workers": {}}))
    out = tmp_path / "plan.yaml"
    args = ["plan", "Add subtract; leave test_calc.py untouched.", "--repo", str(repo)]
    args += ["--provider", "scripted", "--script", str(script), "-o", str(out), "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert shown["valid"] is True
    assert shown["plan"]["tasks"][0]["write_scope"] == ["calc.py"]
    assert any("test_calc.py" in w for w in shown["warnings"])
    assert out.is_file()


def test_named_paths_are_named_as_a_diff_names_them() -> None:
    """A goal's ``./calc.py`` is the diff's ``calc.py``: the worker's finish (goal_files) and
    the PR's unchanged-file note compare the two."""
    from anti_sprawl.plan.intent_checks import named_paths

    goal = "Add subtract() to ./calc.py (and to calc.py's docstring), a test in tests/test_calc.py"
    assert named_paths(goal) == ["calc.py", "tests/test_calc.py"]
