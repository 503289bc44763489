"""The GitHub Action's files: the documented workflow passes actionlint (run on a copy laid out
as a repository using this action, so actionlint also checks its ``with:`` against
action.yml's inputs), and action.yml's own structure, which actionlint does not check: a
composite action whose every input and output is declared and used, whose scripts parse, and
which never splices an expression into a script."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
ACTION = ROOT / "action.yml"
WORKFLOW = ROOT / "docs" / "workflows" / "anti-sprawl.yml"
ACTIONLINT = shutil.which("actionlint", path=str(Path(sys.executable).parent)) or shutil.which(
    "actionlint"
)
INPUTS = {"provider", "model", "max-usd", "base-branch", "branch-prefix", "trigger-phrase"}
INPUTS |= {"label-trigger", "api-key", "base-url"}
OUTPUTS = {"plan-file", "branch-name", "pr-url", "cost-usd", "nodes-failed"}
_EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def load(path: Path) -> dict[Any, Any]:
    # YAML 1.1 reads the key `on` as True; GitHub reads it as "on".
    data = yaml.safe_load(path.read_text())
    if True in data:
        data["on"] = data.pop(True)
    return dict(data)


def actionlint(tmp_path: Path, workflow: str) -> subprocess.CompletedProcess[str]:
    assert ACTIONLINT is not None, "actionlint is not installed (pip install -e '.[dev]')"
    repo = tmp_path / "repo"
    (repo / ".github" / "workflows").mkdir(parents=True)
    shutil.copy(ACTION, repo / "action.yml")
    (repo / ".github" / "workflows" / "anti-sprawl.yml").write_text(workflow)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    return subprocess.run(
        [ACTIONLINT, "-no-color", ".github/workflows/anti-sprawl.yml"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_the_documented_workflow_passes_actionlint(tmp_path: Path) -> None:
    result = actionlint(tmp_path, WORKFLOW.read_text())
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_reads_the_actions_inputs(tmp_path: Path) -> None:
    """The check is real: an input action.yml does not declare, and a bad expression, fail."""
    text = WORKFLOW.read_text().replace("max-usd: ", "max-dollars: ")
    text = text.replace("github.event_name == 'issues'", "github.event_nme == 'issues'")
    result = actionlint(tmp_path, text)
    assert result.returncode == 1
    assert '"max-dollars" is not defined' in result.stdout
    assert 'property "event_nme" is not defined' in result.stdout


def test_the_workflow_asks_for_least_permissions_and_one_run_per_issue() -> None:
    flow = load(WORKFLOW)
    assert flow["permissions"] == {
        "contents": "write",
        "pull-requests": "write",
        "issues": "write",
    }
    assert set(flow["on"]) == {"issues", "issue_comment"}
    (job,) = flow["jobs"].values()
    assert "github.event.issue.number" in job["concurrency"]["group"]
    assert "/anti-sprawl cancel" in job["concurrency"]["cancel-in-progress"]
    assert "author_association" in job["if"]


def test_action_yml_is_a_composite_action_with_its_inputs_and_outputs() -> None:
    action = load(ACTION)
    assert {"name", "description", "inputs", "outputs", "runs"} <= set(action)
    assert action["runs"]["using"] == "composite"
    assert set(action["inputs"]) >= INPUTS
    assert set(action["outputs"]) >= OUTPUTS
    for name, spec in action["inputs"].items():
        assert spec.get("description"), name
        assert "default" in spec or spec.get("required"), name
    steps = action["runs"]["steps"]
    ids = {s["id"] for s in steps if "id" in s}
    for name, spec in action["outputs"].items():
        (expr,) = _EXPR.findall(spec["value"])
        step, _, out = expr.removeprefix("steps.").partition(".outputs.")
        assert step in ids, name
        assert out == name
    used = {m for s in steps for m in re.findall(r"inputs\.([a-z-]+)", yaml.safe_dump(s))}
    assert used == set(action["inputs"])  # each declared input is used, none undeclared


def test_action_scripts_parse_and_take_inputs_through_the_environment() -> None:
    action = load(ACTION)
    scripts = [s for s in action["runs"]["steps"] if "run" in s]
    assert scripts
    for step in scripts:
        assert step["shell"] == "bash"
        # An expression in a script is spliced in as text (script injection); env is not.
        assert _EXPR.findall(step["run"]) == [], step["name"]
        proc = subprocess.run(["bash", "-n"], input=step["run"], text=True, capture_output=True)
        assert proc.returncode == 0, proc.stderr
    assert 'anti-sprawl "${args[@]}"' in scripts[-1]["run"]
    assert "github event" in scripts[-1]["run"]


@pytest.mark.parametrize(
    "flag", ["--provider", "--model", "--base-url", "--max-usd", "--base-branch"]
)
def test_every_flag_the_action_passes_exists(flag: str) -> None:
    from typer.testing import CliRunner

    from anti_sprawl.cli.app import app

    assert flag in load(ACTION)["runs"]["steps"][-1]["run"]
    help_text = CliRunner().invoke(app, ["github", "event", "--help"]).output
    assert flag in help_text
