"""``--lean-ceiling``: the user sets the ceiling of a node's lean first prompt (issue 13)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from anti_sprawl.cli.app import app

from . import e2e_fixture as fx
from .conftest import GIT_ENV

runner = CliRunner()


pytestmark = pytest.mark.usefixtures("python_on_path")


def first_prompt(tmp_path: Path, *extra: str) -> tuple[int, str]:
    """Tokens of node a's first call and the form its big read-scope file took."""
    repo = fx.make_repo(tmp_path)
    big = "".join(f"def f{i}(x: int) -> int:\n    return x + {i}\n\n\n" for i in range(900))
    (repo / "pkg/base.py").write_text(big)
    env = {**os.environ, **GIT_ENV}
    subprocess.run(["git", "commit", "-qam", "big base"], cwd=repo, env=env, check=True)
    plan = fx.plan(max_attempts=1)
    plan["tasks"] = plan["tasks"][:1]
    plan_path, script_path = fx.write_inputs(tmp_path, plan, fx.script())
    args = ["execute", str(plan_path), "--repo", str(repo), "--script", str(script_path)]
    result = runner.invoke(app, [*args, "--json", *extra])
    assert result.exit_code == 0, result.output
    run_id = json.loads(result.stdout)["run_id"]
    shown = runner.invoke(
        app, ["inspect", run_id, "--repo", str(repo), "--task", "a", "--manifests", "--json"]
    )
    first = json.loads(shown.stdout)[0]
    [choice] = [c for c in first["choices"] if c["path"] == "pkg/base.py"]
    return first["total_tokens"], choice["form"]


def test_a_lower_ceiling_makes_a_leaner_first_prompt(tmp_path: Path) -> None:
    default_tokens, default_form = first_prompt(tmp_path / "default")
    lean_tokens, lean_form = first_prompt(tmp_path / "lean", "--lean-ceiling", "1000")
    # the 900-function file's outline fits the default ceiling (12k; 40% of the 40k cap is 16k); at
    # a 1k ceiling not even the outline fits, and the first prompt shrinks to the essentials
    assert (default_form, lean_form) == ("outline", "dropped")
    assert lean_tokens < default_tokens / 4


def test_a_ceiling_below_the_minimum_is_a_usage_error(tmp_path: Path) -> None:
    repo = fx.make_repo(tmp_path)
    plan_path, script_path = fx.write_inputs(tmp_path, fx.plan(), fx.script())
    args = ["execute", str(plan_path), "--repo", str(repo), "--script", str(script_path)]
    result = runner.invoke(app, [*args, "--lean-ceiling", "10"])
    assert result.exit_code == 2
