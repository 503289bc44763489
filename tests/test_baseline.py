"""Baseline before spending (run/baseline.py, issue 24 item 2): each test command runs once at
the start commit in the run's sandbox; one that cannot start refuses the run before any model
call; pre-existing failures are a warning and nodes are judged on the failures they add."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from anti_sprawl.cli.app import app

from . import e2e_fixture as fx
from .conftest import node, plan_data
from .fake_llm_server import FakeLLMServer

runner = CliRunner()
PYTEST = "python -m pytest -q"
SRC_FILES = {
    "src/mypkg/__init__.py": "def one() -> int:\n    return 1\n",
    "tests/test_one.py": "import mypkg\n\n\ndef test_one():\n    assert mypkg.one() == 1\n",
    "pyproject.toml": "[project]\nname = 'mypkg'\nversion = '0'\n",
}
FAILING_FILES = {
    "pkg/__init__.py": "",
    "tests/test_old.py": "def test_ok():\n    assert True\n\n\ndef test_broken():\n    assert 1 == 2\n",
}


def _plan(tmp_path: Path, test_command: Any, **kw: Any) -> Path:
    data = plan_data(
        node("a", write_scope=["src/mypkg/a.py"], token_budget=40_000, max_tool_calls=8),
        test_command=test_command,
        **kw,
    )
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _left_behind(repo: Path) -> tuple[str, list[str]]:
    branches = fx.git(repo, "branch", "--list", "anti-sprawl/*")
    worktrees = repo / ".anti-sprawl" / "worktrees"
    return branches, sorted(p.name for p in worktrees.iterdir()) if worktrees.exists() else []


def test_a_src_layout_that_cannot_import_is_refused_before_any_model_call(
    tmp_path: Path, make_repo: Any, server: FakeLLMServer
) -> None:
    repo = make_repo(SRC_FILES)
    plan_path = _plan(tmp_path, PYTEST)
    model = ["--provider", "openai", "--base-url", f"{server.url}/v1", "--model", "m"]
    result = runner.invoke(app, ["execute", str(plan_path), "--repo", str(repo), *model])
    assert result.exit_code == 1, result.output
    err = " ".join(result.stderr.split())
    assert "test command 'python -m pytest -q' at " in err
    assert "cannot start: No module named 'mypkg'" in err
    assert "a src layout wants PYTHONPATH=src" in err
    assert "try test_command: 'env PYTHONPATH=src python -m pytest -q'" in err
    assert "Traceback" not in result.output
    assert server.requests == []  # not one token spent
    assert _left_behind(repo) == ("", [])
    assert not (repo / ".anti-sprawl" / "runs").exists()
    # validate --repo finds the same, for free, and --dry-run refuses the same way
    checked = runner.invoke(app, ["validate", str(plan_path), "--repo", str(repo)])
    assert checked.exit_code == 1
    assert "cannot start: No module named 'mypkg'" in " ".join(checked.stderr.split())
    dry = runner.invoke(app, ["execute", str(plan_path), "--repo", str(repo), *model, "--dry-run"])
    assert dry.exit_code == 1
    assert "cannot start" in dry.stderr
    # The suggested command works: the baseline passes, and is cached per command and commit
    fixed = _plan(tmp_path, f"env PYTHONPATH=src {PYTEST}")
    ok = runner.invoke(app, ["validate", str(fixed), "--repo", str(repo)])
    assert ok.exit_code == 0, ok.output
    assert "baseline: 'env PYTHONPATH=src python -m pytest -q' at" in ok.stderr
    assert " passes (" in ok.stderr
    cached = sorted(p.suffix for p in (repo / ".anti-sprawl" / "baseline").iterdir())
    assert cached.count(".json") == 1  # this one: a command that cannot start runs again
    assert _left_behind(repo) == ("", [])


def test_a_program_not_on_path_cannot_start_one_line_per_command(
    tmp_path: Path, make_repo: Any
) -> None:
    repo = make_repo(FAILING_FILES)
    data = plan_data(
        node("a", write_scope=["pkg/a.py"], test_command="no-such-runner --all"),
        node("b", write_scope=["pkg/b.py"], test_command="no-such-checker"),
        test_command=PYTEST,
    )
    plan_path, script_path = fx.write_inputs(tmp_path, data, fx.script())
    args = ["execute", str(plan_path), "--repo", str(repo), "--script", str(script_path)]
    result = runner.invoke(app, [*args, "--dry-run"])
    assert result.exit_code == 1
    lines = [ln for ln in result.stderr.splitlines() if "cannot start" in ln]
    assert len(lines) == 2, result.stderr
    assert "'no-such-runner --all'" in lines[0]
    assert "its program was not found (no-such-runner: not found on PATH)" in lines[0]
    assert "'no-such-checker'" in lines[1]


def test_pre_existing_failures_warn_and_nodes_are_judged_on_the_failures_they_add(
    tmp_path: Path, make_repo: Any
) -> None:
    repo = make_repo(FAILING_FILES)
    data = plan_data(
        node("a", write_scope=["pkg/a.py"], token_budget=40_000, max_tool_calls=8),
        node("b", write_scope=["tests/test_new.py"], token_budget=40_000, max_tool_calls=8),
        plan_id="fails",
        max_attempts=1,
        test_command=PYTEST,
    )
    plan_path = tmp_path / "plan.yaml"
    plan_path.write_text(yaml.safe_dump(data))
    new_test = "def test_new():\n    assert False\n"
    script = fx.script(
        a=fx.worker_turns("pkg/a.py", "A = 1\n"), b=fx.worker_turns("tests/test_new.py", new_test)
    )
    script_path = tmp_path / "script.yaml"
    script_path.write_text(yaml.safe_dump(script))
    args = ["execute", str(plan_path), "--repo", str(repo), "--script", str(script_path)]
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 1, result.output
    err = " ".join(result.stderr.split())
    assert "warning: baseline: 'python -m pytest -q' at" in err
    assert "fails with 1 failure(s): tests/test_old.py::test_broken" in err
    assert "nodes fail on tests only for failures they introduce" in err
    state = json.loads(result.stdout)
    a, b = state["tasks"]["a"], state["tasks"]["b"]
    assert a["status"] == "succeeded", a["message"]
    assert a["tests"]["exit_code"] == 1
    assert a["tests"]["known_failures"] == ["tests/test_old.py::test_broken"]
    assert b["status"] == "failed"
    assert b["reason"] == "tests"
    # --no-baseline: judged by the exit code alone, so the untouched failure fails node a too
    plan_path.write_text(yaml.safe_dump({**data, "plan_id": "nobase"}))
    again = runner.invoke(app, [*args, "--json", "--no-baseline"])
    assert json.loads(again.stdout)["tasks"]["a"]["status"] == "failed"
    assert "baseline" not in again.stderr
    # ...unless the plan marks it as known
    marked = {**data, "plan_id": "marked", "known_failures": ["tests/test_old.py::test_broken"]}
    plan_path.write_text(yaml.safe_dump(marked))
    third = runner.invoke(app, [*args, "--json", "--no-baseline"])
    assert json.loads(third.stdout)["tasks"]["a"]["status"] == "succeeded"
    assert _left_behind(repo)[1] == []


def test_a_resumed_node_is_judged_against_the_runs_baseline(tmp_path: Path, make_repo: Any) -> None:
    """The first session's baseline holds for ``resume`` too: a node resumed after a failure is
    not failed for the failure the start commit already had."""
    repo = make_repo(FAILING_FILES)
    data = plan_data(
        node("a", write_scope=["pkg/a.py"], token_budget=40_000, max_tool_calls=8),
        plan_id="resumed",
        max_attempts=1,
        test_command=PYTEST,
    )
    plan_path = tmp_path / "plan.yaml"
    plan_path.write_text(yaml.safe_dump(data))
    # first session: the worker changes nothing it may change, so the node fails
    stray = tmp_path / "stray.yaml"
    stray.write_text(yaml.safe_dump(fx.script(a=fx.worker_turns("tests/stray.py", "X = 1\n"))))
    first = runner.invoke(
        app, ["execute", str(plan_path), "--repo", str(repo), "--script", str(stray), "--json"]
    )
    assert first.exit_code == 1, first.output
    run_id = json.loads(first.stdout)["run_id"]
    assert json.loads(first.stdout)["tasks"]["a"]["status"] == "failed"
    fixed = tmp_path / "fixed.yaml"
    fixed.write_text(yaml.safe_dump(fx.script(a=fx.worker_turns("pkg/a.py", "A = 1\n"))))
    again = runner.invoke(
        app, ["resume", run_id, "--repo", str(repo), "--script", str(fixed), "--json"]
    )
    assert "warning: baseline: 'python -m pytest -q' at" in " ".join(again.stderr.split())
    a = json.loads(again.stdout)["tasks"]["a"]
    assert a["status"] == "succeeded", a["message"]
    assert a["tests"]["known_failures"] == ["tests/test_old.py::test_broken"]
    assert again.exit_code == 0, again.output


COLLECTION_FILES = {
    "pkg/__init__.py": "",
    "tests/test_ok.py": "def test_ok():\n    assert True\n",
    # pytest cannot import it: the whole run is interrupted before any test runs
    "tests/test_needs_db.py": "raise RuntimeError('no database here')\n",
}


def test_a_test_file_pytest_cannot_collect_refuses_the_run_unless_a_node_writes_it(
    tmp_path: Path, make_repo: Any, server: FakeLLMServer
) -> None:
    repo = make_repo(COLLECTION_FILES)
    model = ["--provider", "openai", "--base-url", f"{server.url}/v1", "--model", "m"]
    plan_path = tmp_path / "plan.yaml"
    plan_path.write_text(
        yaml.safe_dump(plan_data(node("a", write_scope=["pkg/a.py"]), test_command=PYTEST))
    )
    result = runner.invoke(app, ["execute", str(plan_path), "--repo", str(repo), *model])
    assert result.exit_code == 1, result.output
    err = " ".join(result.stderr.split())
    assert "cannot start: pytest cannot collect tests/test_needs_db.py, which no node writes" in err
    assert "see " in err
    assert "Traceback" not in result.output
    assert server.requests == []  # not one token spent
    assert _left_behind(repo) == ("", [])
    # A node that writes the file may be there to fix it: a warning, not a refusal.
    fixing = plan_data(node("a", write_scope=["tests/test_needs_db.py"]), test_command=PYTEST)
    plan_path.write_text(yaml.safe_dump(fixing))
    checked = runner.invoke(app, ["validate", str(plan_path), "--repo", str(repo)])
    assert checked.exit_code == 0, checked.output
    assert "warning: baseline:" in checked.stderr
    assert "cannot start" not in checked.stderr


def test_a_command_line_pytest_rejects_cannot_start(tmp_path: Path, make_repo: Any) -> None:
    repo = make_repo(FAILING_FILES)
    plan_path = tmp_path / "plan.yaml"
    data = plan_data(node("a", write_scope=["pkg/a.py"]), test_command=f"{PYTEST} --no-such-flag")
    plan_path.write_text(yaml.safe_dump(data))
    checked = runner.invoke(app, ["validate", str(plan_path), "--repo", str(repo)])
    assert checked.exit_code == 1, checked.output
    err = " ".join(checked.stderr.split())
    assert "cannot start: pytest rejected its command line (a usage error, exit code 4)" in err


# attrs 26.1.0 and click 8.5.1 sdists (issue 24's checks, run 2026-12-03): a test file or
# conftest whose import fails was refused as "No module named ...", whoever wrote it
IMPORT_FILES = {
    "pkg/__init__.py": "",
    "tests/test_ok.py": "def test_ok():\n    assert True\n",
    "tests/test_new.py": "import does_not_exist\n\n\ndef test_new():\n    assert True\n",
}


def _validated(tmp_path: Path, repo: Path, write_scope: list[str], command: str = PYTEST) -> Any:
    plan_path = tmp_path / "plan.yaml"
    plan_path.write_text(
        yaml.safe_dump(plan_data(node("a", write_scope=write_scope), test_command=command))
    )
    return runner.invoke(app, ["validate", str(plan_path), "--repo", str(repo)])


def test_a_test_file_whose_import_fails_is_judged_as_a_file_pytest_cannot_collect(
    tmp_path: Path, make_repo: Any
) -> None:
    repo = make_repo(IMPORT_FILES)
    refused = _validated(tmp_path, repo, ["pkg/a.py"])
    assert refused.exit_code == 1, refused.output
    err = " ".join(refused.stderr.split())
    assert (
        "cannot start: pytest cannot collect tests/test_new.py, which no node writes: "
        "No module named 'does_not_exist'" in err
    )
    assert "the tests import does_not_exist, which " in err
    assert "cannot: install it there" in err
    assert "name the program with a full path" not in err
    # the node that writes the test file (test first, or to fix it) is judged on its result
    written = _validated(tmp_path, repo, ["tests/test_new.py"])
    assert written.exit_code == 0, written.output
    assert "warning: baseline:" in written.stderr


def test_a_test_first_plan_in_a_src_layout_is_not_refused(tmp_path: Path, make_repo: Any) -> None:
    """attrs: a test importing ``attr._newmod``, which a node is to create under src/."""
    files = {
        **SRC_FILES,
        "tests/test_new.py": "from mypkg.newmod import two\n\n\ndef test_two():\n    assert two() == 2\n",
    }
    repo = make_repo(files)
    command = f"env PYTHONPATH=src {PYTEST}"
    checked = _validated(tmp_path, repo, ["src/mypkg/newmod.py", "tests/test_new.py"], command)
    assert checked.exit_code == 0, checked.output
    assert "cannot start" not in checked.stderr
    # not written by the plan and not the project's: the environment lacks it
    missing = {**SRC_FILES, "tests/test_new.py": "import yaml_or_not_at_all\n"}
    refused = _validated(tmp_path, make_repo(missing, "other"), ["src/mypkg/a.py"], command)
    assert refused.exit_code == 1
    assert "No module named 'yaml_or_not_at_all'" in refused.stderr


def test_a_relative_venv_path_is_said_to_be_looked_up_in_the_worktree(
    tmp_path: Path, make_repo: Any
) -> None:
    """A git-ignored ``.venv`` is in the checkout but not in a node's worktree."""
    repo = make_repo(FAILING_FILES)
    venv = repo / ".venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(Path(sys.executable))
    (repo / ".venv" / "pyvenv.cfg").write_text("home = /usr\n")
    (repo / ".git" / "info" / "exclude").write_text(".venv\n")
    checked = _validated(tmp_path, repo, ["pkg/a.py"], ".venv/bin/python -m pytest -q")
    assert checked.exit_code == 1, checked.output
    err = " ".join(checked.stderr.split())
    assert "note: .venv/bin/python is looked up in each node's worktree" in err
    assert "(.venv/bin/python: not found in the worktree)" in err
    assert "try test_command: '{checkout}/.venv/bin/python -m pytest -q'" in err
    assert "not found on PATH" not in err


def test_a_failing_baseline_of_a_command_that_stops_at_the_first_failure_says_so(
    tmp_path: Path, make_repo: Any
) -> None:
    """attrs with ``-x``: each node's run stops at the known failure, which is excused, so no
    test after it ever runs; the warning says so and how to mend the command."""
    repo = make_repo(FAILING_FILES)
    stops = _validated(tmp_path, repo, ["pkg/a.py"], f"{PYTEST} -x")
    assert stops.exit_code == 0, stops.output
    err = " ".join(stops.stderr.split())
    assert "fails with 1 failure(s): tests/test_old.py::test_broken" in err
    assert "stops at the first failure, so no test after a known one runs in any node" in err
    plain = _validated(tmp_path, repo, ["pkg/a.py"])
    assert "stops at the first failure" not in plain.stderr
