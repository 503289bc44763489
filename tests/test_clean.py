"""``anti-sprawl clean`` on a real repository: ``--dry-run`` lists, then the run data, the
``anti-sprawl/*`` branches of finished runs and leftover worktrees go; a user's branch (one a
run was given with ``--branch``, or one the user named ``anti-sprawl/...``) never does, nor a
run newer than ``--older-than``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from anti_sprawl.cli.app import app
from anti_sprawl.git.reorder import scratch_ref

from . import e2e_fixture as fx

pytestmark = pytest.mark.usefixtures("python_on_path")
runner = CliRunner()


def run(repo: Path, plan: Path, script: Path, *extra: str) -> str:
    args = ["execute", str(plan), "--repo", str(repo), "--script", str(script), "--json", *extra]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    run_id: str = json.loads(result.stdout)["run_id"]
    return run_id


def age(repo: Path, run_id: str) -> None:
    """The run finished long ago (its journal says so)."""
    path = repo / ".anti-sprawl" / "runs" / run_id / "run.json"
    state = json.loads(path.read_text())
    state["updated_at"] = "2020-01-01T00:00:00+00:00"
    path.write_text(json.dumps(state))


def branches(repo: Path) -> set[str]:
    return set(fx.git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads").split())


def test_clean_lists_then_removes_only_what_finished_runs_left(tmp_path: Path) -> None:
    repo = fx.make_repo(tmp_path)
    plan, script = fx.write_inputs(tmp_path, fx.plan(), fx.script())
    old = run(repo, plan, script)
    mine = run(repo, plan, script, "--branch", "feature")  # the user's own branch name
    recent = run(repo, plan, script, "--branch", "anti-sprawl/recent")
    age(repo, old)
    age(repo, mine)
    fx.git(repo, "branch", "anti-sprawl/notes", "main")  # the user's, by its name only
    # what a kill mid-reorder leaves (git/reorder.py): goes with its branch
    fx.git(repo, "update-ref", scratch_ref("anti-sprawl/demo"), "anti-sprawl/demo")
    before = branches(repo)
    assert {"anti-sprawl/demo", "feature", "anti-sprawl/recent", "anti-sprawl/notes"} <= before

    listed = runner.invoke(app, ["clean", "--repo", str(repo), "--dry-run"])
    assert listed.exit_code == 0, listed.output
    assert "would remove branch anti-sprawl/demo" in listed.output
    assert f"would remove run data {repo / '.anti-sprawl' / 'runs' / old}" in listed.output
    assert "feature" not in listed.output
    assert recent not in listed.output
    assert branches(repo) == before  # a dry run removes nothing

    done = runner.invoke(app, ["clean", "--repo", str(repo)])
    assert done.exit_code == 0, done.output
    assert branches(repo) == before - {"anti-sprawl/demo"}
    assert fx.git(repo, "for-each-ref", scratch_ref("anti-sprawl/demo")) == ""
    runs = {p.name for p in (repo / ".anti-sprawl" / "runs").iterdir()}
    assert runs == {recent}
    assert fx.git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "main"

    again = runner.invoke(app, ["clean", "--repo", str(repo), "--branches"])
    assert "nothing to clean" in again.output
    bad = runner.invoke(app, ["clean", "--repo", str(repo), "--older-than", "soon"])
    assert bad.exit_code == 2
