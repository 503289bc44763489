"""Every command the tool suggests runs as printed: the hints of a failed node's verdict, of a
stop at the token cap and of ``pr``'s refusal are collected from the real CLI's output and run
word for word (from another directory: they name the repository), on real repositories.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from anti_sprawl.cli.app import app

from . import e2e_fixture as fx

pytestmark = pytest.mark.usefixtures("python_on_path")
runner = CliRunner()
HINT = re.compile(r"(anti-sprawl (?:resume|inspect|pr|status|cancel|clean) .*)$")


def hints(text: str) -> list[list[str]]:
    """Each suggested command in ``text``, as the argv a shell would make of it."""
    found = [m.group(1) for line in text.splitlines() if (m := HINT.search(line.rstrip()))]
    return [shlex.split(cmd)[1:] for cmd in found]


def run_hint(argv: list[str]) -> Result:
    result = runner.invoke(app, argv)
    assert result.exit_code in (0, 1), (argv, result.output)  # never a usage error
    assert "Traceback" not in result.output
    return result


def inputs(tmp_path: Path, **workers: list[object]) -> tuple[Path, Path, Path]:
    repo = fx.make_repo(tmp_path)
    plan_path, script_path = fx.write_inputs(tmp_path, fx.plan(), fx.script(**workers))
    return repo, plan_path, script_path


def test_a_failed_nodes_hints_run_as_printed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    unfinished = [{"tool": "read_file", "args": {"path": "pkg/base.py"}}]
    repo, plan_path, script = inputs(tmp_path, a=unfinished)
    first = runner.invoke(
        app, ["execute", str(plan_path), "--repo", str(repo), "--script", str(script)]
    )
    assert first.exit_code == 1
    suggested = hints(first.output)
    assert [argv[0] for argv in suggested] == ["inspect", "resume"]
    monkeypatch.chdir(tmp_path)
    for argv in suggested:
        again = run_hint(argv)
    # the resumed node used its two attempts: a fresh allowance, said, never "attempt 3 of 2"
    assert "a: running (attempt 1 of 2; a fresh allowance, 2 used before)" in again.output
    assert "3 of 2" not in again.output
    assert "failed (script) after 2 attempts" in again.output
    # pr refuses the failed run and says how to finish it
    bare = tmp_path / "origin.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    fx.git(repo, "remote", "add", "origin", str(bare))
    run_id = first.output.split("run id: ")[1].split()[0]
    refused = runner.invoke(app, ["pr", run_id, "--repo", str(repo)])
    assert refused.exit_code == 1
    (resume,) = hints(refused.stderr)
    assert resume[:2] == ["resume", run_id]
    run_hint(resume)


def test_the_cap_hint_finishes_the_run_as_printed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, plan_path, script = inputs(tmp_path)
    args = ["execute", str(plan_path), "--repo", str(repo), "--script", str(script)]
    result = runner.invoke(app, [*args, "--max-tokens", "10000", "--jobs", "1"])
    monkeypatch.chdir(tmp_path)
    for _ in range(6):  # each session gets the run's allowance again
        assert result.exit_code == 1, result.output
        (hint,) = hints(result.output)
        assert hint[0] == "resume"
        result = run_hint(hint)
        if result.exit_code == 0:
            break
    assert result.exit_code == 0, result.output
    assert sorted(fx.task_trailers(repo)) == ["a", "b", "c"]
