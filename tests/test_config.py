"""Config files (cli/config.py, issue 24 item 5): ``init`` writes a commented one; values
become the commands' defaults, flags override them, ``--help`` and ``doctor`` say where each
came from; a key in a config file is refused."""

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

from . import e2e_fixture as fx

runner = CliRunner()


@pytest.fixture(autouse=True)
def _own_config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    return home


def test_init_writes_commented_files_and_values_become_defaults(tmp_path: Path) -> None:
    repo = fx.make_repo(tmp_path)
    made = runner.invoke(app, ["init", "--repo", str(repo)])
    assert made.exit_code == 0, made.output
    project = repo / ".anti-sprawl.toml"
    text = project.read_text()
    for key in ("provider", "model", "base_url", "request_timeout", "test_command", "jobs"):
        assert f"# {key} = " in text
    assert "API keys never go here" in text
    again = runner.invoke(app, ["init", "--repo", str(repo)])
    assert again.exit_code == 2
    assert "exists already" in again.stderr
    user = runner.invoke(app, ["init", "--scope", "user"])
    assert user.exit_code == 0
    user_file = Path(os.environ["XDG_CONFIG_HOME"]) / "anti-sprawl" / "config.toml"
    assert user_file.is_file()
    # the user's file sets jobs and a model; the project's file wins for the model
    user_file.write_text('jobs = 3\nmodel = "user-model"\n')
    project.write_text('model = "project-model"\ntest_command = "python -m pytest -q"\n')
    helped = runner.invoke(app, ["execute", "--help", "--repo", str(repo)])
    flat = " ".join(helped.stdout.split())
    assert "[default: 3; 1<=x<=64]" in flat
    assert "[default: project-model]" in flat
    dense = "".join(helped.stdout.split())  # long paths wrap anywhere
    assert f"modelfrom{project}" in dense
    assert f"jobsfrom{user_file}" in dense
    doctor = runner.invoke(app, ["doctor", "--repo", str(repo)])
    assert f"config      model = 'project-model' (from {project})" in doctor.stdout
    assert f"config      jobs = 3 (from {user_file})" in doctor.stdout
    # plan takes the default test command; a flag overrides the config
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump({"plan": {**fx.plan(), "test_command": None}}))
    args = ["plan", "req", "--repo", str(repo), "--script", str(script), "--json"]
    planned = json.loads(runner.invoke(app, args).stdout)
    assert planned["plan"]["test_command"] == "python -m pytest -q"
    flagged = json.loads(runner.invoke(app, [*args, "--test-command", "make test"]).stdout)
    assert flagged["plan"]["test_command"] == "make test"
    # the planner's own test commands give way to the user's, each with a warning (make
    # real-model run p: a task's `python test_calc.py`, which runs no test, won over it)
    theirs = fx.plan(test_command="python test_calc.py")
    theirs["tasks"][0]["test_command"] = ["python", "-m", "pytest", "-q"]  # the same: kept
    theirs["tasks"][1]["test_command"] = "python pkg/b.py"
    script.write_text(yaml.safe_dump({"plan": theirs}))
    planned = json.loads(runner.invoke(app, args).stdout)
    assert planned["plan"]["test_command"] == "python -m pytest -q"
    assert [t.get("test_command") for t in planned["plan"]["tasks"]] == [
        ["python", "-m", "pytest", "-q"],
        None,
        None,
    ]
    left_out = [w for w in planned["warnings"] if "left out: the user set the test command" in w]
    assert len(left_out) == 2
    assert "the plan's test_command 'python test_calc.py' left out" in left_out[0]
    assert "task 'b' test_command 'python pkg/b.py' left out" in left_out[1]


def test_a_key_or_a_bad_value_in_a_config_file_is_one_line(tmp_path: Path) -> None:
    repo = fx.make_repo(tmp_path)
    (repo / "pyproject.toml").write_text('[tool.anti-sprawl]\nanthropic_api_key = "sk-x"\n')
    result = runner.invoke(app, ["doctor", "--repo", str(repo)])
    assert result.exit_code == 2
    assert "'anthropic_api_key' looks like a secret" in result.stderr
    assert "sk-x" not in result.output
    (repo / "pyproject.toml").write_text("[tool.anti-sprawl]\njobs = 'many'\n")
    result = runner.invoke(app, ["doctor", "--repo", str(repo)])
    assert result.exit_code == 2
    assert result.stderr.strip().startswith(
        f"anti-sprawl: error: config file {repo}/pyproject.toml: jobs:"
    )


def test_shell_completion_is_on(tmp_path: Path) -> None:
    """``--show-completion`` takes no shell: Typer asks shellingham for the nearest shell among
    the process's ancestors. So the command runs from bash, as a user's does; run in-process,
    the answer was that of whatever shell started pytest (under ``sh -c``, dash: "Shell sh not
    supported.", exit 1), the flakiness seen in long runs."""
    helped = runner.invoke(app, ["--help"])
    assert "--install-completion" in helped.stdout
    command = Path(sys.executable).parent / "anti-sprawl"
    # "; exit $?" keeps bash alive as the parent: a lone command would be exec'd in its place
    script = subprocess.run(
        ["bash", "-c", '"$0" --show-completion; exit $?', str(command)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert script.returncode == 0, script.stderr
    assert "_anti_sprawl_completion" in script.stdout
    assert "complete -o default -F _anti_sprawl_completion anti-sprawl" in script.stdout


def test_a_repository_config_cannot_choose_the_server(tmp_path: Path) -> None:
    """A cloned repository's config cannot send the user's key and code anywhere, not even to
    a port on this machine (docs/security.md, PI-11): its base_url is ignored, said in one note;
    the user's own config may set it."""
    repo = fx.make_repo(tmp_path)
    for url in ("https://collector.example/v1", "http://127.0.0.1:11434/v1"):
        (repo / ".anti-sprawl.toml").write_text(f'base_url = "{url}"\nmodel = "m"\n')
        shown = runner.invoke(app, ["doctor", "--repo", str(repo)])
        assert f"base_url {url!r} ignored" in " ".join(shown.stderr.split())
        assert "no model provider" in shown.stdout  # no server was taken from the file
        assert "model = 'm'" in shown.stdout  # the rest of the file holds
    user = tmp_path / "xdg" / "anti-sprawl" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text('base_url = "http://127.0.0.1:11434/v1"\n')
    (repo / ".anti-sprawl.toml").unlink()
    mine = runner.invoke(app, ["doctor", "--repo", str(repo)])
    assert "ignored" not in mine.stderr
    assert "127.0.0.1:11434" in mine.stdout
