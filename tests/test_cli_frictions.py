"""What a newcomer tripped over, each through the real CLI at 80 columns (issue 14, item 6)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from anti_sprawl import __version__
from anti_sprawl.cli.app import app

from . import e2e_fixture as fx

runner = CliRunner()
NARROW = {"COLUMNS": "80"}


pytestmark = pytest.mark.usefixtures("python_on_path")


def _execute(tmp_path: Path, plan: dict, script: dict) -> tuple[Path, object]:
    repo = fx.make_repo(tmp_path)
    fx.git(repo, "config", "user.name", "Ada Lovelace")
    fx.git(repo, "config", "user.email", "ada@example.org")
    plan_path, script_path = fx.write_inputs(tmp_path, plan, script)
    args = ["execute", str(plan_path), "--repo", str(repo), "--script", str(script_path)]
    return repo, runner.invoke(app, args, env=NARROW)


def test_plan_json_goes_to_stdout(tmp_path: Path) -> None:
    repo = fx.make_repo(tmp_path)
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump({"plan": fx.plan()}))
    args = ["plan", "Add modules", "--repo", str(repo), "--script", str(script), "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["valid"] is True
    assert doc["plan"]["plan_id"] == "demo"
    assert "{" not in result.stderr


def test_a_run_reads_well_at_80_columns(tmp_path: Path) -> None:
    plan = fx.plan(max_attempts=1)  # the script holds one attempt of b
    plan["tasks"][1]["test_command"] = [
        sys.executable,
        "-c",
        # fails once the node wrote pkg/b.py: at the start commit (the baseline) it passes
        "import os, sys\nif not os.path.exists('pkg/b.py'): sys.exit(0)\n"
        "print('collected 2 items'); print('FAILED test_b.py::test_b - assert 2 == 3'); "
        "raise SystemExit(1)",
    ]
    repo, result = _execute(tmp_path, plan, fx.script())
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    verdict = lines[lines.index(next(ln for ln in lines if "run demo-" in ln)) :]
    # the verdict fits; only the PR body path is never broken (it is copied whole)
    # (nor is a suggested command: it runs as printed)
    whole = ("PR body: ", "  anti-sprawl ")
    assert all(len(ln) <= 80 for ln in verdict if not ln.startswith(whole)), result.stdout
    # each node's progress says "running" once
    for task in ("a", "b"):
        assert lines.count(f"{task}: running") == 1, result.stdout
    rows = [ln for ln in lines if ln.startswith("│")]
    assert any("│ failed " in r for r in rows)
    assert any("│ skipped " in r for r in rows)
    assert len(rows) == 3
    assert "failed b (tests): tests failed after the audit (exit code 1)" in result.stdout
    assert "last test output: FAILED test_b.py::test_b - assert 2 == 3" in result.stdout
    assert "skipped c: b failed" in result.stdout
    # the scripted model is free; the skipped node spent nothing: no model is "not priced"
    assert "$0.0000;" in result.stdout
    assert "not priced" not in result.stdout
    run_id = next(ln for ln in lines if ln.startswith("run id: ")).removeprefix("run id: ")

    # status shows the whole run id, which inspect and pr take
    status = runner.invoke(app, ["status", "--repo", str(repo)], env=NARROW)
    assert status.exit_code == 0
    assert run_id in status.stdout
    assert all(len(line) <= 80 for line in status.stdout.splitlines())
    assert runner.invoke(app, ["inspect", run_id, "--repo", str(repo)]).exit_code == 0


def test_commits_are_authored_by_the_user(tmp_path: Path) -> None:
    repo, result = _execute(tmp_path, fx.plan(), fx.script())
    assert result.exit_code == 0, result.output
    fmt = "--format=%an <%ae>|%cn|%(trailers:key=Anti-Sprawl-Task,valueonly,separator=)%x1e"
    log = fx.git(repo, "log", fmt, "anti-sprawl/demo")
    records = [r.strip() for r in log.split("\x1e") if r.strip()]
    nodes = [r for r in records if r.split("|")[2]]
    assert len(nodes) == 3  # a and b ran in parallel: one of them was replayed onto the tip
    for record in nodes:
        author, committer, _ = record.split("|")
        assert author == "Ada Lovelace <ada@example.org>"
        assert committer == "anti-sprawl"


def test_status_outside_a_repository_is_a_usage_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["status", "--repo", str(tmp_path)])
    assert result.exit_code == 2
    assert result.stderr.strip().startswith(
        f"anti-sprawl: error: not a git repository: {tmp_path} ("
    )
    assert len(result.stderr.strip().splitlines()) == 1


def test_version_and_clean_help_placeholders() -> None:
    version = runner.invoke(app, ["--version"])
    assert version.exit_code == 0
    assert version.stdout == f"anti-sprawl {__version__}\n"
    usage = {
        "plan": "Usage: anti-sprawl plan [OPTIONS] REQUIREMENT",
        "execute": "Usage: anti-sprawl execute [OPTIONS] PLAN",
        "status": "Usage: anti-sprawl status [OPTIONS] [RUN_ID]",
        "resume": "Usage: anti-sprawl resume [OPTIONS] RUN_ID",
    }
    for command, line in usage.items():
        text = runner.invoke(app, [command, "--help"], env=NARROW).stdout
        assert text.splitlines()[0] == line
        assert "{" not in text
        assert "[[" not in text
