"""Journals on disk across versions, and the views of big runs, through the real CLI.

- A run directory anti-sprawl 0.2 wrote (``run.json`` only, no ``seq``, no event log; the
  files in ``tests/data/journal_v02`` came from a real 0.2 run) reads in ``status`` and
  ``inspect``; a crashed run whose journal is put back in 0.2's form resumes to the end.
- A kill -9 between a change and the snapshot: ``status`` shows what the event log holds.
- ``status`` of a run past ``views.plain.LARGE`` nodes and ``inspect`` of one past
  ``MANY_CALLS`` calls print plain columns with the same cells.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from anti_sprawl.cli.app import app
from anti_sprawl.git.layout import RunPaths
from anti_sprawl.run.journal import read_state
from anti_sprawl.views.plain import LARGE, MANY_CALLS
from anti_sprawl.views.run import Progress, render_verdict

from . import e2e_fixture as fx
from .test_crash import _env
from .test_journal import _state

runner = CliRunner()
V02 = Path(__file__).parent / "data" / "journal_v02"
V02_RUN = "demo-20261201-213800-7c90"
LAUNCHER = [sys.executable, str(Path(__file__).with_name("crash_launcher.py"))]

pytestmark = pytest.mark.usefixtures("python_on_path")


def cli(*args: str) -> Any:
    return runner.invoke(app, list(args))


def test_a_run_directory_written_by_0_2_reads_in_status_and_inspect(tmp_path: Path) -> None:
    repo = fx.make_repo(tmp_path)
    shutil.copytree(V02 / V02_RUN, repo / ".anti-sprawl" / "runs" / V02_RUN)
    shown = cli("status", V02_RUN, "--repo", str(repo), "--json")
    assert shown.exit_code == 0, shown.output
    state = json.loads(shown.stdout)
    assert state["status"] == "succeeded"
    assert {t["status"] for t in state["tasks"].values()} == {"succeeded"}
    text = cli("status", V02_RUN, "--repo", str(repo))
    assert text.exit_code == 0, text.output
    assert f"run {V02_RUN}: succeeded" in text.stdout
    listing = cli("status", "--repo", str(repo), "--json")
    assert [r["run_id"] for r in json.loads(listing.stdout)] == [V02_RUN]
    calls = cli("inspect", V02_RUN, "--repo", str(repo), "--task", "a", "--manifests")
    assert calls.exit_code == 0, calls.output
    assert "a · call 1" in calls.stdout
    assert not (repo / ".anti-sprawl" / "runs" / V02_RUN / "events.jsonl").exists()  # read-only


def _crashed(tmp_path: Path, point: str) -> tuple[Path, Path, str]:
    repo = fx.make_repo(tmp_path)
    plan, script = fx.write_inputs(tmp_path, fx.plan(), fx.script())
    args = [*LAUNCHER, "execute", str(plan), "--repo", str(repo), "--script", str(script)]
    crashed = subprocess.run(
        args, env={**_env(), "ANTI_SPRAWL_CRASH_AT": point}, capture_output=True, timeout=300
    )
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    (run_id,) = [p.name for p in (repo / ".anti-sprawl" / "runs").iterdir()]
    return repo, script, run_id


def test_a_crashed_run_in_0_2_form_resumes_to_the_end(tmp_path: Path) -> None:
    repo, script, run_id = _crashed(tmp_path, "before_commit:c")
    paths = RunPaths(repo / ".anti-sprawl" / "runs" / run_id)
    state, _ = read_state(paths)
    as_02 = state.model_dump(mode="json", exclude={"seq"})
    paths.journal.write_text(json.dumps(as_02, indent=2) + "\n")  # what 0.2 kept on disk
    paths.events.unlink(missing_ok=True)
    resumed = cli("resume", run_id, "--repo", str(repo), "--script", str(script), "--json")
    assert resumed.exit_code == 0, resumed.output
    assert json.loads(resumed.stdout)["status"] == "succeeded"
    assert sorted(fx.task_trailers(repo)) == ["a", "b", "c"]


def test_status_after_a_kill_shows_what_the_event_log_holds(tmp_path: Path) -> None:
    repo, _, run_id = _crashed(tmp_path, "before_commit:c")
    paths = RunPaths(repo / ".anti-sprawl" / "runs" / run_id)
    snapshot = json.loads(paths.journal.read_text())
    assert snapshot["tasks"]["a"]["status"] == "pending"  # the snapshot is the run's start
    shown = cli("status", run_id, "--repo", str(repo), "--json")
    assert shown.exit_code == 0, shown.output
    tasks = json.loads(shown.stdout)["tasks"]
    assert (tasks["a"]["status"], tasks["b"]["status"]) == ("succeeded", "succeeded")
    # c was running when the process died; its lock is free, so status says so (run/liveness.py)
    assert tasks["c"]["status"] == "pending"
    assert json.loads(shown.stdout)["status"] == "interrupted"


def test_the_verdict_of_a_big_run_is_plain_columns_with_the_same_cells() -> None:
    state = _state(LARGE + 1)
    first = state.tasks["t00000"]
    first.start("m")
    first.fail("tests", "2 tests failed")
    out = StringIO()
    render_verdict(state, Console(file=out, width=80))
    lines = out.getvalue().splitlines()
    assert lines[0] == f"run {state.run_id}: running"
    header = ["task", "status", "tokens", "(cap/call)", "calls", "blocked", "tests"]
    assert lines[1].split() == header
    assert lines[3].split() == ["t00000", "failed", "0", "(0/call)", "0/0", "0", "-"]
    assert len([line for line in lines if line.startswith("t0")]) == LARGE + 1
    assert "  failed t00000 (tests): 2 tests failed" in lines
    assert "0 succeeded, 1 failed, 0 skipped" in out.getvalue()


def test_inspect_of_many_calls_gives_each_one_line(tmp_path: Path) -> None:
    repo = fx.make_repo(tmp_path)
    run_dir = repo / ".anti-sprawl" / "runs" / V02_RUN
    shutil.copytree(V02 / V02_RUN, run_dir)
    call = json.loads((run_dir / "manifests" / "a" / "1.json").read_text())
    for n in range(2, MANY_CALLS + 2):
        again = {**call, "n": n, "call_id": f"a-{n}"}
        (run_dir / "manifests" / "a" / f"{n}.json").write_text(json.dumps(again))
    shown = cli("inspect", V02_RUN, "--repo", str(repo), "--manifests")
    assert shown.exit_code == 0, shown.output
    lines = shown.stdout.splitlines()
    assert (
        lines[0]
        == f"{MANY_CALLS + 1} model calls (one line each; --task TASK shows a call's items)"
    )
    rows = [line.split() for line in lines if line.startswith("a ")]
    assert [int(r[1]) for r in rows[: MANY_CALLS + 1]] == list(range(1, MANY_CALLS + 2))
    tokens = f"{call['total_tokens']:,}"
    assert rows[0][4:6] == [str(len(call["items"])), tokens]
    per_task = rows[-1]
    assert per_task[:2] == ["a", str(MANY_CALLS + 1)]
    assert per_task[2] == f"{(MANY_CALLS + 1) * call['total_tokens']:,}"


def test_progress_of_a_big_run_on_a_terminal_is_plain_lines() -> None:
    state = _state(LARGE + 1)
    out = StringIO()
    progress = Progress(Console(file=out, width=100, force_terminal=True))
    progress.start(state)
    record = state.tasks["t00007"]
    record.start("m")
    progress.event(record)
    progress.stop()
    assert out.getvalue().splitlines() == ["t00007: running"]
