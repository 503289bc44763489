"""Scheduler efficiency on random DAGs, and per-node orchestration overhead on the sample repo.

1. Seeded random DAGs of 200 nodes (each depends on 0-3 earlier nodes), simulated workers that
   sleep 5-50 ms: ``run_dag`` makespan at jobs 1, 2, 4, 8, 32 against the two lower bounds,
   the critical path and total work / jobs (both from the durations measured in this run).
2. The sample repository (``sandbox/`` + ``tasks/sample``): a real scripted ``execute`` at
   jobs 1, each node's wall time taken through the public ``on_event`` hook and each test
   run's duration printed by the (wrapped) test command into the node's test log; and the
   orchestration pieces (worktree create + remove, audit, commit + land) timed directly on a
   copy of the same repo. Together they split a node's wall time into overhead, tests, rest.

Prints figures measured in this run; asserts nothing about time (machines vary).
Run: ``.venv/bin/python benchmarks/scheduler.py``.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from anti_sprawl.git.audit import audit
from anti_sprawl.git.branch import TRAILER_RUN, TRAILER_TASK, RunBranch
from anti_sprawl.git.workspace import Workspace, commit
from anti_sprawl.lifecycle import NodeVerdict
from anti_sprawl.plan.model import Plan, command_argv, load_plan_data
from anti_sprawl.providers import Script, ScriptedProvider
from anti_sprawl.run.result import TaskResult
from anti_sprawl.run.runner import ExecuteOptions, RunHooks, RunSettings, execute
from anti_sprawl.run.scheduler import run_dag

ROOT = Path(__file__).resolve().parent.parent
NODES = 200
SEEDS = (1, 2)
JOBS = (1, 2, 4, 8, 32)
PIECE_ROUNDS = 10
SAMPLE = ROOT / "tasks" / "sample"
TIMED_PYTEST = (
    "import time; t = time.perf_counter(); import sys, pytest; rc = pytest.main(sys.argv[1:]); "
    "print('BENCH-TEST-SECONDS %.6f' % (time.perf_counter() - t)); sys.exit(rc)"
)


# --- 1. scheduler on random DAGs ------------------------------------------------------------


def random_dag(n: int, seed: int) -> tuple[dict[str, list[str]], dict[str, float]]:
    """``task -> dependencies`` (0-3 earlier nodes) and nominal durations in seconds."""
    rng = random.Random(seed)
    deps: dict[str, list[str]] = {}
    durations: dict[str, float] = {}
    for i in range(n):
        picked = rng.sample(range(i), rng.randint(0, min(3, i)))
        deps[f"n{i:03d}"] = [f"n{j:03d}" for j in sorted(picked)]
        durations[f"n{i:03d}"] = rng.uniform(0.005, 0.050)
    return deps, durations


def critical_path(deps: dict[str, list[str]], durations: dict[str, float]) -> tuple[float, int]:
    """Longest path by duration (seconds) and its length in nodes; deps precede in dict order."""
    finish: dict[str, tuple[float, int]] = {}
    for task, ds in deps.items():
        before = max((finish[d] for d in ds), default=(0.0, 0))
        finish[task] = (before[0] + durations[task], before[1] + 1)
    return max(finish.values())


def simulate(deps: dict[str, list[str]], nominal: dict[str, float], jobs: int) -> dict[str, float]:
    measured: dict[str, float] = {}

    def run_node(task: str) -> NodeVerdict:
        start = time.perf_counter()
        time.sleep(nominal[task])
        measured[task] = time.perf_counter() - start
        return "succeeded"

    start = time.perf_counter()
    sched = run_dag(deps, run_node, jobs=jobs)
    makespan = time.perf_counter() - start
    assert set(sched.status.values()) == {"succeeded"}
    cp, _ = critical_path(deps, measured)
    work = sum(measured.values())
    bound = max(cp, work / jobs)
    return {"makespan": makespan, "cp": cp, "work_per_job": work / jobs, "ratio": makespan / bound}


def bench_scheduler() -> None:
    print(f"== run_dag on random DAGs: {NODES} nodes, 0-3 deps each, sleeps of 5-50 ms")
    for seed in SEEDS:
        deps, nominal = random_dag(NODES, seed)
        cp, depth = critical_path(deps, nominal)
        edges = sum(len(d) for d in deps.values())
        print(
            f"seed {seed}: {edges} edges, nominal work {sum(nominal.values()):.2f} s, "
            f"critical path {cp * 1000:.0f} ms over {depth} nodes"
        )
        print(
            f"  {'jobs':>4}  {'makespan':>9}  {'crit.path':>9}  {'work/jobs':>9}  "
            f"{'makespan / max(bounds)':>22}"
        )
        for jobs in JOBS:
            r = simulate(deps, nominal, jobs)
            print(
                f"  {jobs:>4}  {r['makespan'] * 1000:>7.0f}ms  {r['cp'] * 1000:>7.0f}ms  "
                f"{r['work_per_job'] * 1000:>7.0f}ms  {r['ratio']:>22.3f}"
            )
    print("(bounds from the sleep times measured in this run, so sleep overshoot is not counted)")


# --- 2. orchestration overhead on the sample repository --------------------------------------


def sample_repo(root: Path) -> Path:
    repo = root / "orders"
    shutil.copytree(ROOT / "sandbox", repo)
    ident = ["-c", "user.name=bench", "-c", "user.email=bench@localhost"]
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], [*ident, "commit", "-qm", "sample"]):
        subprocess.run(["git", *args], cwd=repo, check=True)
    return repo


def command_env() -> dict[str, str]:
    # `python -m pytest` in the sample's test command must find this environment's Python.
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}"
    return env


def timed_execute(repo: Path) -> tuple[float, dict[str, float], dict[str, list[float]], str]:
    """Whole-run wall time, per-node wall times, per-node test-run times, run status.

    The sample's ``python -m pytest ...`` runs as ``python -c TIMED_PYTEST ...``: the same
    pytest, in the same sandbox, printing its own duration into the node's test log.
    """
    data = load_plan_data(SAMPLE / "plan.yaml")
    argv = command_argv(data["test_command"]) or []
    assert argv[1:3] == ["-m", "pytest"], argv
    data["test_command"] = [argv[0], "-c", TIMED_PYTEST, *argv[3:]]
    plan = Plan.model_validate(data)
    provider = ScriptedProvider(Script.load(SAMPLE / "script.yaml"))
    started: dict[str, float] = {}
    walls: dict[str, float] = {}
    lock = threading.Lock()

    def on_event(record: TaskResult) -> None:
        # A node reports "running" when it starts and again when its worktree work ends
        # (before landing): only the first starts the clock.
        with lock:
            if record.status == "running":
                started.setdefault(record.task_id, time.perf_counter())
            elif record.status in ("succeeded", "failed") and record.task_id in started:
                walls[record.task_id] = time.perf_counter() - started[record.task_id]

    opts = ExecuteOptions(
        provider, RunSettings(jobs=1, command_env=command_env()), RunHooks(on_event=on_event)
    )
    start = time.perf_counter()
    state = execute(plan, repo, opts)
    total = time.perf_counter() - start
    artifacts = repo / ".anti-sprawl" / "runs" / state.run_id / "artifacts"
    tests: dict[str, list[float]] = {}
    for task in state.tasks:
        for log in sorted((artifacts / task).glob("tests-*.log")):
            found = re.findall(r"^BENCH-TEST-SECONDS ([0-9.]+)$", log.read_text(), re.M)
            tests.setdefault(task, []).extend(float(x) for x in found)
    return total, walls, tests, state.status


@contextmanager
def clock(samples: dict[str, list[float]], key: str) -> Iterator[None]:
    start = time.perf_counter()
    yield
    samples.setdefault(key, []).append(time.perf_counter() - start)


def time_pieces(repo: Path) -> dict[str, list[float]]:
    """Seconds of each orchestration step, per round, for one node with a small real change."""
    branch = RunBranch(repo, "anti-sprawl/bench", "bench-run")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True)
    branch.create(head.stdout.strip())
    worktrees = repo / ".anti-sprawl" / "worktrees"
    samples: dict[str, list[float]] = {}
    for i in range(PIECE_ROUNDS):
        with clock(samples, "worktree create"):
            ws = Workspace.create(repo, worktrees, f"bench-{i}", branch.tip())
        events = ws.path / "orders" / "events.py"
        events.write_text(events.read_text() + f"\nBENCH_{i} = {i}\n")
        test_file = f"tests/test_bench_{i}.py"
        (ws.path / test_file).write_text(f"def test_bench_{i}() -> None:\n    assert {i} == {i}\n")
        with clock(samples, "audit"):
            checked = audit(ws, ["orders/events.py", test_file])
        assert not checked.violations
        with clock(samples, "commit"):
            sha = commit(ws, f"bench {i}", {TRAILER_RUN: "bench-run", TRAILER_TASK: f"t{i}"})
        assert sha is not None
        with clock(samples, "land"):
            branch.land(sha, f"t{i}")
        with clock(samples, "worktree remove"):
            ws.remove()
    return samples


def bench_overhead() -> None:
    print("\n== per-node orchestration overhead on the sample repository (scripted provider)")
    with tempfile.TemporaryDirectory(prefix="anti-sprawl-bench-") as tmp:
        pieces = time_pieces(sample_repo(Path(tmp) / "pieces"))
        total, walls, tests, status = timed_execute(sample_repo(Path(tmp) / "run"))
    print(f"orchestration pieces over {PIECE_ROUNDS} rounds:      mean   median")
    for key, values in pieces.items():
        mean, median = statistics.mean(values) * 1000, statistics.median(values) * 1000
        print(f"  {key:<36} {mean:6.1f}ms {median:6.1f}ms")
    overhead_ms = sum(statistics.median(v) for v in pieces.values()) * 1000
    overhead_mean = sum(statistics.mean(v) for v in pieces.values()) * 1000
    print(f"  {'overhead per node (sum)':<36} {overhead_mean:6.1f}ms {overhead_ms:6.1f}ms")
    print(
        f"execute at jobs 1: {status}, {len(walls)} nodes in {total:.2f} s "
        f"= {total / max(1, len(walls)) * 1000:.0f} ms per node including run setup and PR body"
    )
    print(f"  {'node':<11} {'wall':>7} {'overhead':>9} {'share':>6} {'test runs':>16} {'rest':>7}")
    for task, wall in walls.items():
        wall_ms = wall * 1000
        runs = tests.get(task, [])
        test_ms = sum(runs) * 1000
        rest = wall_ms - overhead_ms - test_ms
        if test_ms > wall_ms:
            raise SystemExit(f"{task}: test runs ({test_ms:.0f} ms) exceed the wall time measured")
        print(
            f"  {task:<11} {wall_ms:5.0f}ms {overhead_ms:7.0f}ms {overhead_ms / wall_ms:6.1%} "
            f"{len(runs):>2} = {test_ms:9.0f}ms {rest:5.0f}ms"
        )
    print(
        "(wall and test runs measured inside the execute; overhead = the median pieces above; "
        "rest = wall - overhead - tests: firewall, prompt assembly, scripted model turns, "
        "tools, journal, manifests, sandbox and interpreter start-up)"
    )


def main() -> int:
    bench_scheduler()
    bench_overhead()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
