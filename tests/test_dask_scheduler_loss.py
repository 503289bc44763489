"""A real Dask scheduler process killed mid-run: one event for the run, no node blamed.

The scheduler and its worker are real processes (``dask scheduler``, ``dask worker``); the
scheduler gets SIGKILL once the first node has landed. The run stops handing out nodes, ends
``interrupted`` with one line naming the lost scheduler and the resume command, and no node
is failed for it (before: a dozen ``internal`` and one ``storage``). ``resume`` finishes it.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from . import e2e_fixture as fx

pytest.importorskip("distributed")
pytestmark = pytest.mark.usefixtures("python_on_path", "_dask_env")

CLI = [sys.executable, "-m", "anti_sprawl"]
DASK = str(Path(sys.executable).parent / "dask")
NODES = 8


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def cluster() -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A scheduler process and one worker process; yields (address, scheduler)."""
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    serve = ["scheduler", "--host", "127.0.0.1", "--port", str(port), "--dashboard-address", ":0"]
    scheduler = subprocess.Popen([DASK, *serve, "--no-show"], stderr=subprocess.DEVNULL)
    work = ["worker", address, "--nthreads", "2", "--nworkers", "1", "--no-dashboard"]
    worker = subprocess.Popen([DASK, *work], stderr=subprocess.DEVNULL)
    try:
        yield address, scheduler
    finally:
        for proc in (worker, scheduler):
            proc.kill()
            proc.wait()


def test_losing_the_scheduler_mid_run_stops_it_and_blames_no_node(
    tmp_path: Path, cluster: tuple[str, subprocess.Popen[bytes]]
) -> None:
    address, scheduler = cluster
    repo = fx.make_repo(tmp_path)
    before = fx.checkout_fingerprint(repo)
    slow = [sys.executable, "-c", "import time; time.sleep(2)"]
    tasks = [
        fx.node(f"n{i:02d}", [], f"pkg/n{i:02d}.py", "", test_command=slow) for i in range(NODES)
    ]
    workers = {t["task_id"]: fx.worker_turns(t["write_scope"][0], "X = 1\n") for t in tasks}
    plan, script = fx.write_inputs(tmp_path, fx.plan(tasks=tasks), {"workers": workers})
    args = ["execute", str(plan), "--repo", str(repo), "--script", str(script), "-j", "2"]
    run = subprocess.Popen(
        [*CLI, *args, "--executor", "dask", "--dask-scheduler", address],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 300
    while not (repo / ".git" / "refs" / "heads" / "anti-sprawl" / "demo").exists() or not (
        fx.task_trailers(repo)
    ):
        assert run.poll() is None, run.communicate()
        assert time.monotonic() < deadline, "no node landed"
        time.sleep(0.2)
    scheduler.kill()
    scheduler.wait()
    _, err = run.communicate(timeout=300)
    assert run.returncode == 1, err
    assert "Traceback" not in err
    line = err.strip().splitlines()[-1]
    (run_id,) = [p.name for p in (repo / ".anti-sprawl" / "runs").iterdir()]
    assert line.startswith(f"anti-sprawl: error: lost the Dask scheduler at {address}"), line
    # resume reuses the run's options, so the hint names where to finish it
    again = f"anti-sprawl resume {run_id} --executor local --repo {repo}"
    assert line.endswith(f"to finish the run: {again} (or --dask-scheduler with a running one)")
    state = json.loads((repo / ".anti-sprawl" / "runs" / run_id / "run.json").read_text())
    assert state["status"] == "interrupted"
    assert {t["status"] for t in state["tasks"].values()} <= {"succeeded", "pending"}
    assert {t["reason"] for t in state["tasks"].values()} == {None}  # nobody blamed
    assert any(t["status"] == "pending" for t in state["tasks"].values())
    landed = fx.task_trailers(repo)
    assert len(landed) == len(set(landed))
    local = ["--executor", "local"]  # the run recorded the lost cluster: flags override
    resumed = subprocess.run(
        [*CLI, "resume", run_id, "--repo", str(repo), "--script", str(script), *local],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert sorted(fx.task_trailers(repo)) == sorted(state["tasks"])  # one commit per node
    fx.git(repo, "fsck", "--strict")
    assert fx.git(repo, "branch", "--list", "anti-sprawl/wt/*") == ""
    assert fx.checkout_fingerprint(repo) == before


def test_distributed_logs_a_closed_comm_as_one_line_not_a_traceback() -> None:
    # What distributed/batched.py does when the scheduler's comm closes mid-write: the record
    # the flaky end-to-end run above once printed with its whole stack.
    emit = (
        "import logging, distributed\n"
        "from anti_sprawl.run.scheduler_loss import one_line_logs\n"
        "one_line_logs(); one_line_logs()\n"
        "try:\n"
        "    raise OSError('Stream is closed')\n"
        "except OSError:\n"
        "    logging.getLogger('distributed.batched').info('Batched Comm Closed %r', 'comm', "
        "exc_info=True)\n"
    )
    run = subprocess.run([sys.executable, "-c", emit], capture_output=True, text=True, check=True)
    assert "Traceback" not in run.stderr
    (line,) = [x for x in run.stderr.splitlines() if "Batched Comm Closed" in x]
    assert line.endswith("Batched Comm Closed 'comm' (OSError: Stream is closed)"), line
