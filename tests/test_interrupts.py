"""Ctrl-C through the real CLI, while a slow fake model server holds a call.

The first SIGINT stops handing out nodes at once; nodes stuck in a model call are abandoned
after a short grace period; a second SIGINT leaves at once. Either way the process exits with
130 and one line, the journal says ``interrupted`` with every unfinished node ``pending``, the
branch and the user's checkout are untouched, and ``resume`` (possible at once: the lock is
free once the process is gone) finishes the run with one commit per node.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from . import e2e_fixture as fx
from .fake_llm_server import FakeLLMServer, openai_completion

CLI = [sys.executable, "-m", "anti_sprawl"]
HELD = 120.0  # the fake server holds the first call this long: far past any test timeout


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}"
    for key in ("ANTI_SPRAWL_CRASH_AT", "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY"):
        env.pop(key, None)
    return env


def _wait(predicate: Any, proc: subprocess.Popen[str], what: str) -> None:
    deadline = time.monotonic() + 120
    while not predicate():
        assert proc.poll() is None, f"the run ended before {what}: {proc.communicate()}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _held_run(tmp_path: Path, server: FakeLLMServer) -> tuple[Path, subprocess.Popen[str]]:
    """An execute whose first model call is held by the server; returns once it is."""
    repo = fx.make_repo(tmp_path)
    plan, _ = fx.write_inputs(tmp_path, fx.plan(), fx.script())
    for _ in range(2):  # nodes a and b start together; both calls are held
        server.enqueue({"never": "sent"}, delay=HELD)
    args = ["execute", str(plan), "--repo", str(repo), "-j", "2"]
    args += ["--provider", "openai", "--base-url", f"{server.url}/v1", "--model", "m"]
    proc = subprocess.Popen(
        [*CLI, *args], env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    _wait(lambda: len(server.requests) >= 2, proc, "the first model calls")
    return repo, proc


BASELINE = "anti-sprawl: baseline: "


def _finish(proc: subprocess.Popen[str], timeout: float) -> tuple[str, str]:
    """The process's output; fails (and kills it) if it does not exit within ``timeout``."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"still running {timeout}s after Ctrl-C (a held model call kept it)")


def _assert_interrupted(
    repo: Path, out: str, err: str, code: int, by: signal.Signals = signal.SIGINT
) -> str:
    assert code == 128 + by, out + err
    assert "Traceback" not in out + err
    (run_id,) = [p.name for p in (repo / ".anti-sprawl" / "runs").iterdir()]
    if by != signal.SIGHUP:  # a closed terminal: no one reads the line
        # The baseline's line (cli/environment.py) comes before the run starts.
        (line,) = [ln for ln in err.strip().splitlines() if not ln.startswith(BASELINE)]
        how = "" if by == signal.SIGINT else f" by {by.name}"
        assert line == (
            f"anti-sprawl: interrupted{how}: "
            f"to finish the run: anti-sprawl resume {run_id} --repo {repo}"
        )
    state = json.loads((repo / ".anti-sprawl" / "runs" / run_id / "run.json").read_text())
    assert state["status"] == "interrupted"
    assert {t["status"] for t in state["tasks"].values()} <= {"pending", "succeeded"}
    assert fx.task_trailers(repo) == []
    assert fx.git(repo, "rev-parse", "anti-sprawl/demo") == fx.git(repo, "rev-parse", "main")
    assert fx.git(repo, "status", "--porcelain") == ""
    assert fx.git(repo, "branch", "--list", "anti-sprawl/wt/*") == ""
    assert not list((repo / ".anti-sprawl" / "worktrees").glob("*"))
    assert fx.git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    return run_id


def _resume_finishes(tmp_path: Path, repo: Path, run_id: str) -> None:
    """The lock is free and the run completes with the scripted model, one commit per node."""
    _, script = fx.write_inputs(tmp_path, fx.plan(), fx.script())
    done = subprocess.run(
        [*CLI, "resume", run_id, "--repo", str(repo), "--script", str(script)],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(fx.task_trailers(repo)) == ["a", "b", "c"]
    assert not list((repo / ".anti-sprawl" / "worktrees").glob("*"))
    state = json.loads((repo / ".anti-sprawl" / "runs" / run_id / "run.json").read_text())
    assert state["status"] == "succeeded"
    fx.git(repo, "fsck", "--strict")
    assert fx.git(repo, "status", "--porcelain") == ""
    assert fx.git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "main"


def test_second_ctrl_c_exits_at_once(tmp_path: Path, server: FakeLLMServer) -> None:
    repo, proc = _held_run(tmp_path, server)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    out, err = _finish(proc, timeout=4)  # well inside the 5 s grace of a single Ctrl-C
    run_id = _assert_interrupted(repo, out, err, proc.returncode)
    _resume_finishes(tmp_path, repo, run_id)
    assert len(server.requests) == 2  # both ready nodes' first calls; nothing after Ctrl-C


def test_one_ctrl_c_abandons_a_hung_call_after_the_grace(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    repo, proc = _held_run(tmp_path, server)
    proc.send_signal(signal.SIGINT)
    out, err = _finish(proc, timeout=30)  # the server would hold the call for 120 s
    run_id = _assert_interrupted(repo, out, err, proc.returncode)
    _resume_finishes(tmp_path, repo, run_id)


def test_one_ctrl_c_starts_no_queued_node(tmp_path: Path) -> None:
    """Twenty ready nodes at --jobs 2: after Ctrl-C only the two running ones ever started."""
    repo = fx.make_repo(tmp_path)
    slow = [sys.executable, "-c", "import time; time.sleep(1.5)"]
    tasks = [fx.node(f"n{i:02d}", [], f"pkg/n{i:02d}.py", "", test_command=slow) for i in range(20)]
    workers = {t["task_id"]: fx.worker_turns(t["write_scope"][0], "X = 1\n") for t in tasks}
    plan, script = fx.write_inputs(tmp_path, fx.plan(tasks=tasks), {"workers": workers})
    args = ["execute", str(plan), "--repo", str(repo), "--script", str(script), "-j", "2"]
    proc = subprocess.Popen(
        [*CLI, *args], env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    runs = repo / ".anti-sprawl" / "runs"
    _wait(lambda: list(runs.glob("*/manifests/*/*.json")), proc, "the first model call")
    proc.send_signal(signal.SIGINT)
    out, err = _finish(proc, timeout=60)
    assert proc.returncode == 130, out + err
    assert "Traceback" not in out + err, out + err
    (run_id,) = [p.name for p in runs.iterdir()]
    state = json.loads((runs / run_id / "run.json").read_text())
    started = sorted(tid for tid, t in state["tasks"].items() if t["attempts"] > 0)
    assert len(started) <= 2, started
    assert state["status"] == "interrupted"
    assert {t["status"] for t in state["tasks"].values()} == {"pending"}
    assert not list((repo / ".anti-sprawl" / "worktrees").glob("*"))


def _status(repo: Path, run_id: str) -> dict[str, Any]:
    shown = subprocess.run(
        [*CLI, "status", run_id, "--repo", str(repo), "--json"],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.returncode == 0, shown.stderr
    data: dict[str, Any] = json.loads(shown.stdout)
    return data


def test_sigterm_stops_the_run_like_ctrl_c(tmp_path: Path, server: FakeLLMServer) -> None:
    """`timeout`, `kill`, a CI cancellation: mid-node, the run stops, cleans up, says how to
    resume, exits 143; resume finishes it."""
    repo, proc = _held_run(tmp_path, server)
    (run_id,) = [p.name for p in (repo / ".anti-sprawl" / "runs").iterdir()]
    assert _status(repo, run_id)["status"] == "running"  # its process holds the lock
    proc.send_signal(signal.SIGTERM)
    out, err = _finish(proc, timeout=30)
    _assert_interrupted(repo, out, err, proc.returncode, signal.SIGTERM)
    shown = _status(repo, run_id)
    assert (shown["status"], shown["stopped_by"]) == ("interrupted", "SIGTERM received")
    _resume_finishes(tmp_path, repo, run_id)
    assert len(server.requests) == 2  # nothing started after the signal


def test_sighup_from_a_closed_terminal_stops_the_run(tmp_path: Path, server: FakeLLMServer) -> None:
    """The terminal went away: nobody reads stdout or stderr any more, then SIGHUP. The run
    still stops cleanly (writes to the closed outputs change nothing), exits 129."""
    repo, proc = _held_run(tmp_path, server)
    assert proc.stdout is not None
    assert proc.stderr is not None
    proc.stdout.close()
    proc.stderr.close()
    proc.send_signal(signal.SIGHUP)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("still running 30 s after SIGHUP")
    run_id = _assert_interrupted(repo, "", "", proc.returncode, signal.SIGHUP)
    _resume_finishes(tmp_path, repo, run_id)


def test_status_never_calls_a_run_whose_process_is_gone_running(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    """kill -9 mid-node: the journal still says running, but the lock is free."""
    repo, proc = _held_run(tmp_path, server)
    (run_id,) = [p.name for p in (repo / ".anti-sprawl" / "runs").iterdir()]
    proc.kill()
    proc.communicate()
    journal = json.loads((repo / ".anti-sprawl" / "runs" / run_id / "run.json").read_text())
    assert journal["status"] == "running"
    shown = _status(repo, run_id)
    assert shown["status"] == "interrupted"
    assert {t["status"] for t in shown["tasks"].values()} == {"pending"}
    listed = subprocess.run(
        [*CLI, "status", "--repo", str(repo), "--json"], env=_env(), capture_output=True, text=True
    )
    assert [r["status"] for r in json.loads(listed.stdout)] == ["interrupted"]
    _resume_finishes(tmp_path, repo, run_id)


def test_an_interrupted_attempt_uses_up_nothing(tmp_path: Path, server: FakeLLMServer) -> None:
    """Ctrl-C while both nodes' calls are out, the calls come back within the grace: each node's
    attempt is ``interrupted`` (never ``failed``) in the journal and the views, counts for
    nothing, and the resumed nodes succeed on their first counted attempt."""
    repo = fx.make_repo(tmp_path)
    plan, _ = fx.write_inputs(tmp_path, fx.plan(), fx.script())
    for _ in range(2):
        server.enqueue(openai_completion(content="thinking"), delay=1.0)
    args = ["execute", str(plan), "--repo", str(repo), "-j", "2"]
    args += ["--provider", "openai", "--base-url", f"{server.url}/v1", "--model", "m"]
    proc = subprocess.Popen(
        [*CLI, *args], env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    _wait(lambda: len(server.requests) >= 2, proc, "the first model calls")
    proc.send_signal(signal.SIGINT)
    out, err = _finish(proc, timeout=30)
    run_id = _assert_interrupted(repo, out, err, proc.returncode)
    journal = repo / ".anti-sprawl" / "runs" / run_id / "run.json"
    state = json.loads(journal.read_text())
    for tid in ("a", "b"):
        record = state["tasks"][tid]
        assert [a["outcome"] for a in record["attempt_log"]] == ["interrupted"], record[
            "attempt_log"
        ]
        assert record["counted"] == 0
    view = subprocess.run(
        [*CLI, "status", run_id, "--repo", str(repo)], env=_env(), capture_output=True, text=True
    )
    rows = [ln for ln in view.stdout.splitlines() if ln.startswith("│")]
    assert sum("│ interrupted " in r for r in rows) == 2, view.stdout
    assert not any("failed" in r for r in rows), view.stdout
    _resume_finishes(tmp_path, repo, run_id)
    final = json.loads(journal.read_text())
    for tid in ("a", "b"):
        record = final["tasks"][tid]
        assert (record["attempts"], record["counted"]) == (2, 1)
        assert [a["outcome"] for a in record["attempt_log"]] == ["interrupted", "succeeded"]
        assert [a["attempt"] for a in record["attempt_log"]] == [1, 2]
        # each attempt keeps its own logs: nothing of the interrupted one was overwritten
        folder = repo / ".anti-sprawl" / "runs" / run_id / "artifacts" / tid
        assert (folder / "transcript.jsonl").is_file()
        assert (folder / "transcript-2.jsonl").is_file()
        assert sorted(p.name for p in folder.glob("tests-*.log")) == [
            "tests-2-1.log",
            "tests-2-2.log",
        ]


def test_cancel_from_another_process_stops_the_run_like_ctrl_c(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    repo, proc = _held_run(tmp_path, server)
    (run_id,) = [p.name for p in (repo / ".anti-sprawl" / "runs").iterdir()]
    cancel = [*CLI, "cancel", run_id, "--repo", str(repo)]
    asked = subprocess.run(cancel, env=_env(), capture_output=True, text=True, timeout=60)
    assert asked.returncode == 0, asked.stderr
    assert f"asked run {run_id} (process {proc.pid}) to stop" in asked.stdout
    out, err = _finish(proc, timeout=30)
    assert _assert_interrupted(repo, out, err, proc.returncode) == run_id
    # nothing runs any more: one line, exit 2
    again = subprocess.run(cancel, env=_env(), capture_output=True, text=True, timeout=60)
    assert again.returncode == 2
    assert again.stderr.strip() == (
        f"anti-sprawl: error: run {run_id} is not running in {repo} (see 'anti-sprawl status')"
    )
    _resume_finishes(tmp_path, repo, run_id)
