"""Crash safety: SIGKILL at named points and at random times, then resume.

After resume the branch tree equals an uninterrupted run's, each task trailer appears exactly
once, ``git fsck`` is clean and no ``*.lock`` file is left in the git directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from anti_sprawl.agent.artifacts import read_json_lines
from anti_sprawl.git.layout import RunPaths
from anti_sprawl.run.journal import read_state

from . import e2e_fixture as fx

# The CLI behind the test launcher, which installs the crash hook ANTI_SPRAWL_CRASH_AT names.
CLI = [sys.executable, str(Path(__file__).with_name("crash_launcher.py"))]


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}"
    env.pop("ANTI_SPRAWL_CRASH_AT", None)
    env.update(extra)
    return env


def _setup(tmp_path: Path) -> tuple[Path, Path, Path]:
    repo = fx.make_repo(tmp_path)
    plan_path, script_path = fx.write_inputs(tmp_path, fx.plan(), fx.script())
    return repo, plan_path, script_path


def _execute(
    repo: Path, plan: Path, script: Path, *extra: str, **env: str
) -> subprocess.CompletedProcess[str]:
    args = [*CLI, "execute", str(plan), "--repo", str(repo), "--script", str(script), "--jobs", "2"]
    args += extra
    return subprocess.run(args, env=_env(**env), capture_output=True, text=True, timeout=300)


def _run_ids(repo: Path) -> list[str]:
    runs = repo / ".anti-sprawl" / "runs"
    return sorted(p.name for p in runs.iterdir()) if runs.is_dir() else []


def _resume(repo: Path, script: Path, run_id: str, *extra: str) -> subprocess.CompletedProcess[str]:
    args = [*CLI, "resume", run_id, "--repo", str(repo), "--script", str(script), *extra]
    return subprocess.run(args, env=_env(), capture_output=True, text=True, timeout=300)


@pytest.fixture(params=["local", "dask-processes"])
def where(request: pytest.FixtureRequest) -> list[str]:
    """Nodes run here, or on a real Dask cluster of two worker processes (the central CLI
    is the subprocess either way, so a central crash point kills it in both)."""
    if request.param == "local":
        return []
    cluster = request.getfixturevalue("dask_processes")
    return ["--executor", "dask", "--dask-scheduler", cluster.scheduler_address]


def _assert_clean(repo: Path, golden: dict[str, str]) -> None:
    assert fx.branch_tree(repo) == golden
    trailers = fx.task_trailers(repo)
    assert sorted(trailers) == ["a", "b", "c"], trailers
    fsck = subprocess.run(
        ["git", "fsck", "--no-progress"], cwd=repo, capture_output=True, text=True
    )
    assert fsck.returncode == 0, fsck.stderr
    assert not [p for p in (repo / ".git").rglob("*.lock")]
    assert not list((repo / ".anti-sprawl" / "worktrees").glob("*"))
    assert fx.git(repo, "status", "--porcelain") == ""


@pytest.fixture(scope="module")
def golden(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    repo, plan, script = _setup(tmp_path_factory.mktemp("golden"))
    done = _execute(repo, plan, script)
    assert done.returncode == 0, done.stdout + done.stderr
    return fx.branch_tree(repo)


@pytest.mark.parametrize(
    "point",
    [
        "after_llm_response:a",
        "mid_write:b",
        "before_audit:c",
        "before_commit:a",
        "after_commit_before_journal:c",
        "after_commit_before_journal:a",
    ],
)
def test_kill_at_point_then_resume(
    tmp_path: Path, golden: dict[str, str], point: str, where: list[str]
) -> None:
    repo, plan, script = _setup(tmp_path)
    crashed = _execute(repo, plan, script, *where, ANTI_SPRAWL_CRASH_AT=point)
    (run_id,) = _run_ids(repo)
    if where and not point.startswith("after_commit_before_journal"):
        # Inside a remote node the point kills the Dask worker process, not the run: the
        # attempt fails as worker_lost, the run goes on and ends failed.
        assert crashed.returncode == 1, crashed.stdout + crashed.stderr
        state = json.loads((repo / ".anti-sprawl" / "runs" / run_id / "run.json").read_text())
        task = point.partition(":")[2]
        assert state["tasks"][task]["reason"] == "worker_lost", state["tasks"][task]
    else:
        assert crashed.returncode == -signal.SIGKILL, crashed.stdout + crashed.stderr
    # Transcripts are appended line by line: whatever the kill cut, every complete line reads
    # (a remote node's comes back whole with its outcome; a killed worker's never arrives).
    artifacts = repo / ".anti-sprawl" / "runs" / run_id / "artifacts"
    transcripts = sorted(artifacts.glob("*/transcript.jsonl"))
    assert transcripts or where  # on Dask, a killed worker may have held both first nodes
    for transcript in transcripts:
        assert len(read_json_lines(transcript)) == transcript.read_bytes().count(b"\n") > 0
    resumed = _resume(repo, script, run_id, *where)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    _assert_clean(repo, golden)  # the same tree and trailers as an uninterrupted local run
    again = _resume(repo, script, run_id, *where)  # a finished run resumes as a no-op
    assert again.returncode == 0
    assert sorted(fx.task_trailers(repo)) == ["a", "b", "c"]


def test_chaos_kills_of_the_whole_process_group(tmp_path: Path, golden: dict[str, str]) -> None:
    rng = random.Random(20261130)
    repo, plan, script = _setup(tmp_path)
    for _ in range(4):
        run_ids = _run_ids(repo)
        if run_ids:
            args = [*CLI, "resume", run_ids[0], "--repo", str(repo), "--script", str(script)]
        else:
            args = [*CLI, "execute", str(plan), "--repo", str(repo), "--script", str(script)]
        proc = subprocess.Popen(
            args,
            env=_env(),
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(rng.uniform(0.2, 2.5))
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 10
        while _group_alive(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
    run_ids = _run_ids(repo)
    final = _execute(repo, plan, script) if not run_ids else _resume(repo, script, run_ids[0])
    assert final.returncode == 0, final.stdout + final.stderr
    _assert_clean(repo, golden)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_concurrent_resume_only_one_proceeds(tmp_path: Path) -> None:
    repo = fx.make_repo(tmp_path)
    slow = fx.plan()
    # node c's tests take a while, so the first resume surely still holds the lock
    slow["tasks"][2]["test_command"] = [sys.executable, "-c", "import time; time.sleep(2)"]
    plan, script = fx.write_inputs(tmp_path, slow, fx.script())
    crashed = _execute(repo, plan, script, ANTI_SPRAWL_CRASH_AT="before_commit:c")
    assert crashed.returncode == -signal.SIGKILL
    (run_id,) = _run_ids(repo)
    args = [*CLI, "resume", run_id, "--repo", str(repo), "--script", str(script)]

    def start() -> subprocess.Popen[str]:
        return subprocess.Popen(
            args, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    first = start()
    lock = repo / ".git" / "anti-sprawl-run.flock"  # in the common git dir, shared by worktrees
    deadline = time.monotonic() + 60
    # start the second only once the first holds the lock (it records its pid there)
    while f'"pid": {first.pid}' not in (lock.read_text() if lock.exists() else ""):
        assert time.monotonic() < deadline, "first resume never locked"
        assert first.poll() is None, "first resume never locked"
        time.sleep(0.01)
    second = start()
    results = [(*p.communicate(timeout=300), p.returncode) for p in (first, second)]
    codes = sorted(r[2] for r in results)
    assert codes == [0, 2], results
    refused = next(r for r in results if r[2] == 2)
    assert "another anti-sprawl run is active" in refused[1]
    assert sorted(fx.task_trailers(repo)) == ["a", "b", "c"]


def test_resume_unknown_run_is_a_usage_error(tmp_path: Path) -> None:
    repo, _, script = _setup(tmp_path)
    done = _resume(repo, script, "no-such-run")
    assert done.returncode == 2
    assert "no run 'no-such-run'" in done.stderr


def _running(runs: Path, task: str) -> bool:
    """Whether the run's journal (its snapshot and the changes logged since) says so."""
    for journal in runs.glob("*/run.json"):
        state, _ = read_state(RunPaths(journal.parent))
        return state.tasks[task].status == "running"
    return False


def test_ctrl_c_stops_cleanly_and_resume_finishes(
    tmp_path: Path, golden: dict[str, str], where: list[str]
) -> None:
    repo = fx.make_repo(tmp_path)
    slow = fx.plan()
    slow["tasks"][0]["test_command"] = [sys.executable, "-c", "import time; time.sleep(1)"]
    plan, script = fx.write_inputs(tmp_path, slow, fx.script())
    args = [*CLI, "execute", str(plan), "--repo", str(repo), "--script", str(script), "--jobs", "1"]
    proc = subprocess.Popen(
        [*args, *where], env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    runs = repo / ".anti-sprawl" / "runs"
    deadline = time.monotonic() + 60
    while not _running(runs, "a"):
        assert time.monotonic() < deadline, "node a never started"
        assert proc.poll() is None, "node a never started"
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert "Traceback" not in err
    (run_id,) = _run_ids(repo)
    state = json.loads((runs / run_id / "run.json").read_text())
    assert state["status"] == "interrupted"
    assert {t["status"] for t in state["tasks"].values()} <= {"succeeded", "pending"}
    assert not list((repo / ".anti-sprawl" / "worktrees").glob("*"))
    resumed = _resume(repo, script, run_id, *where)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    _assert_clean(repo, golden)


@pytest.mark.parametrize("keep", [0, 1, 57, 400])
def test_truncated_journal_fails_loudly(tmp_path: Path, keep: int) -> None:
    repo, plan, script = _setup(tmp_path)
    crashed = _execute(repo, plan, script, ANTI_SPRAWL_CRASH_AT="before_commit:c")
    assert crashed.returncode == -signal.SIGKILL
    (run_id,) = _run_ids(repo)
    journal = repo / ".anti-sprawl" / "runs" / run_id / "run.json"
    journal.write_bytes(journal.read_bytes()[:keep])
    done = _resume(repo, script, run_id)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "damaged" in done.stderr
    assert "Traceback" not in done.stderr
    assert sorted(fx.task_trailers(repo)) == ["a", "b"]  # nothing was skipped or redone
