"""What a node costs the orchestrator, whole, against the git a node cannot do without.

Scripted runs of the real CLI (``anti-sprawl execute``, a subprocess) on a seeded random DAG
whose nodes each write one file and have no test command, so what is left is orchestration:
worktree, firewall, prompt, worker loop, audit, secret scan, commit, landing, journal, views.
Each size runs at ``--jobs 1`` and ``--jobs 4``; a node's cost is the difference between the
100- and the 10-node run divided by 90 (start-up, the branch, the first-prompt checks and the
wind-up cancel out): CPU time of the run and every process it waited for (git included), and
wall time.

The git floor is measured in the same run, on the same machine, right before each pair of
runs (the load of a shared machine moves): a bare loop doing what a node must (``git worktree add``, write a file, ``git add``, ``git commit``, ``git update-ref``,
``git worktree remove``), 10 and 100 rounds, the same difference taken.

Git processes per node come from a separate pair of runs (10 and 30 nodes, ``--jobs 4``, so
most landings replay onto a moved tip) with a counting ``git`` first on ``PATH``: the
orchestrator's git is the one on its start-up ``PATH`` (host_tools.py), so the wrapper is the
git every call uses. The timed runs do not use it.

Seconds per node, flat or not (issue 29: within 1.3x from 40 to 320 nodes): runs of 40 and 320
nodes (``--flat``) at ``--jobs 1`` (``--flat-jobs``), with full worktrees and with ``--sparse``;
each prints the whole run's seconds per node at both sizes, and, within the large run, the
seconds per node of its last 40 nodes against its nodes 2-41, from the time each node's
``succeeded`` line reached stderr (start-up and wind-up in neither). Each node adds a file, so
a full checkout grows with the run; the git floor's own 320 rounds show what that costs git.

Prints figures and ratios measured in this run; asserts nothing about time.
Run: ``.venv/bin/python benchmarks/per_node.py [--small 10] [--large 100] [--flat 40 320]
[--skip-floor]`` (``--skip-floor``: the flatness runs only).
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import yaml
from _git_counter import counted_calls, counting_env

CLI = [sys.executable, "-m", "anti_sprawl"]
IDENT = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@localhost",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@localhost",
}


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def make_repo(root: Path) -> Path:
    repo = root / "repo"
    (repo / "gen").mkdir(parents=True)
    (repo / "README.md").write_text("# synthetic\n")
    (repo / "gen" / "__init__.py").write_text("")
    env = {**os.environ, **IDENT}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "base"]):
        subprocess.run(["git", *args], cwd=repo, check=True, env=env)
    return repo


def write_inputs(root: Path, n: int, seed: int = 29) -> tuple[Path, Path]:
    """A seeded DAG (each node depends on 0-2 earlier ones), one file per node, no tests."""
    rng = random.Random(seed)
    tasks: list[dict[str, Any]] = []
    workers: dict[str, Any] = {}
    for i in range(n):
        tid = f"n{i:03d}"
        earlier = [f"n{j:03d}" for j in range(max(0, i - 10), i)]
        deps = rng.sample(earlier, min(len(earlier), rng.randint(0, 2)))
        tasks.append(
            {
                "task_id": tid,
                "name": f"Write {tid}",
                "goal": f"Create gen/{tid}.py",
                "dependencies": sorted(deps),
                "read_scope": ["README.md"],
                "write_scope": [f"gen/{tid}.py"],
                "token_budget": 20_000,
                "max_tool_calls": 5,
            }
        )
        workers[tid] = [
            {"tool": "write_file", "args": {"path": f"gen/{tid}.py", "content": f"X = {i}\n"}},
            {"tool": "finish", "args": {"summary": f"wrote {tid}"}},
        ]
    plan = {"plan_id": "pernode", "requirement": "Generate modules", "tasks": tasks}
    plan_path, script_path = root / "plan.yaml", root / "script.yaml"
    plan_path.write_text(yaml.safe_dump(plan))
    script_path.write_text(yaml.safe_dump({"workers": workers}))
    return plan_path, script_path


def run_cli(
    root: Path,
    n: int,
    jobs: int,
    env: dict[str, str],
    finished: list[float] | None = None,
    extra: tuple[str, ...] = (),
) -> tuple[float, float]:
    """(CPU seconds incl. every waited-for child, wall seconds) of one scripted execute.

    ``finished`` gets the time (seconds from the start) of each node's ``succeeded`` line on
    stderr, as the line arrives: the progress a node's landing prints."""
    root.mkdir(parents=True)
    repo = make_repo(root)
    plan, script = write_inputs(root, n)
    args = ["execute", str(plan), "--repo", str(repo), "--script", str(script)]
    argv = [*CLI, *args, "--jobs", str(jobs), "--json", *extra]
    cpu, start = children_cpu(), time.perf_counter()
    with subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    ) as proc:
        assert proc.stdout is not None
        assert proc.stderr is not None
        out: list[str] = []
        reader = threading.Thread(target=lambda: out.append(proc.stdout.read()))  # type: ignore[union-attr]
        reader.start()
        err: list[str] = []
        for line in proc.stderr:
            if finished is not None and line.startswith("n") and ": succeeded" in line:
                finished.append(time.perf_counter() - start)
            err.append(line)
        reader.join()
        returncode = proc.wait()
    wall, cpu = time.perf_counter() - start, children_cpu() - cpu
    if returncode != 0:
        tail = "".join(err)[-2000:]
        raise SystemExit(f"run of {n} nodes failed:\n{''.join(out)[-2000:]}\n{tail}")
    return cpu, wall


def window_ratio(times: list[float], window: int) -> tuple[float, float]:
    """Seconds per node over the first and the last ``window`` nodes of a run, each measured
    between node finishes, so start-up and wind-up are in neither."""
    return (times[window] - times[0]) / window, (times[-1] - times[-1 - window]) / window


def flatness(root: Path, sizes: tuple[int, int], jobs: int, env: dict[str, str]) -> None:
    """Seconds per node of a small and a large run, and the large run's last nodes against
    its first: anything a node costs that grows with the run (a scan of every task, the
    journal, the views, the checkout of a tree that grows by a file a node) shows as a ratio
    above 1. Full worktrees and ``--sparse`` ones; and the git floor's own rounds."""
    small, large = sizes
    for label, extra in (("full checkout", ()), ("--sparse", ("--sparse",))):
        done: dict[int, list[float]] = {small: [], large: []}
        walls = {
            n: run_cli(root / f"flat-{label[:6].strip('-')}-{n}", n, jobs, env, done[n], extra)[1]
            for n in sizes
        }
        per = {n: walls[n] / n for n in sizes}
        print(
            f"seconds per node, {label}, --jobs {jobs}: {per[small] * 1000:.0f} ms ({small} "
            f"nodes, {walls[small]:.1f} s), {per[large] * 1000:.0f} ms ({large} nodes, "
            f"{walls[large]:.1f} s): {per[large] / per[small]:.2f}x"
        )
        if len(done[large]) != large:
            print(f"  (saw {len(done[large])} of {large} nodes finish on stderr)")
            continue
        first, last = window_ratio(done[large], small)
        print(
            f"  within the {large}-node run: nodes 2-{small + 1} {first * 1000:.0f} ms each, "
            f"the last {small} {last * 1000:.0f} ms each: {last / first:.2f}x"
        )
    rounds: list[float] = []
    git_floor(root / f"flat-floor-{large}", large, rounds)
    first, last = window_ratio(rounds, small)
    print(
        f"  the git floor's {large} rounds (a full checkout each): the first {small} "
        f"{first * 1000:.0f} ms each, the last {small} {last * 1000:.0f} ms each: "
        f"{last / first:.2f}x"
    )


def git_floor(root: Path, n: int, rounds: list[float] | None = None) -> tuple[float, float]:
    """(CPU, wall) of ``n`` rounds of the git a node cannot do without, one after another;
    ``rounds`` gets the time each round ended (seconds from the start)."""
    root.mkdir(parents=True)
    repo = make_repo(root)
    env = {**os.environ, **IDENT}
    subprocess.run(["git", "branch", "floor"], cwd=repo, check=True, env=env)
    cpu, start = children_cpu(), time.perf_counter()
    for i in range(n):
        wt = root / f"wt{i}"
        git = ["git", "-C", str(wt)]
        subprocess.run(
            ["git", "worktree", "add", "-q", "--detach", str(wt), "floor"],
            cwd=repo,
            check=True,
            env=env,
        )
        (wt / "gen" / f"n{i:03d}.py").write_text(f"X = {i}\n")
        subprocess.run([*git, "add", "-A"], check=True, env=env)
        subprocess.run([*git, "commit", "-qm", f"node {i}"], check=True, env=env)
        subprocess.run([*git, "update-ref", "refs/heads/floor", "HEAD"], check=True, env=env)
        subprocess.run(
            ["git", "worktree", "remove", "--force", str(wt)], cwd=repo, check=True, env=env
        )
        if rounds is not None:
            rounds.append(time.perf_counter() - start)
    return children_cpu() - cpu, time.perf_counter() - start


def counted(root: Path, n: int, env: dict[str, str]) -> collections.Counter[str]:
    log = root / "git.log"
    run_cli(root / "run", n, 4, counting_env(root / "counting-bin", log, env))
    return counted_calls(log)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--small", type=int, default=10)
    parser.add_argument("--large", type=int, default=100)
    parser.add_argument("--flat", type=int, nargs=2, default=(40, 320), metavar=("N", "M"))
    parser.add_argument("--flat-jobs", type=int, default=1)
    parser.add_argument("--skip-floor", action="store_true", help="only the flatness runs")
    args = parser.parse_args()
    small, large = args.small, args.large
    extra = large - small
    with tempfile.TemporaryDirectory(prefix="bench-per-node-") as tmp:
        root = Path(tmp)
        env = {**os.environ, "ANTI_SPRAWL_CACHE_DIR": str(root / "cache")}
        print(f"== per node: {small}- vs {large}-node scripted runs, no test command")
        print(f"load average at the start {os.getloadavg()[0]:.1f}")
        if args.skip_floor:
            flatness(root, tuple(args.flat), args.flat_jobs, env)
            return 0
        for jobs in (1, 4):
            # The floor right before each pair of runs: a shared machine's load moves.
            floor = [git_floor(root / f"floor-j{jobs}-{n}", n) for n in (small, large)]
            floor_cpu = (floor[1][0] - floor[0][0]) / extra
            floor_wall = (floor[1][1] - floor[0][1]) / extra
            print(
                f"git floor (worktree add, write, add, commit, update-ref, worktree remove): "
                f"{floor_cpu * 1000:.0f} ms CPU, {floor_wall * 1000:.0f} ms wall per node"
            )
            runs = [run_cli(root / f"j{jobs}-{n}", n, jobs, env) for n in (small, large)]
            cpu = (runs[1][0] - runs[0][0]) / extra
            wall = (runs[1][1] - runs[0][1]) / extra
            print(
                f"--jobs {jobs}: {cpu * 1000:.0f} ms CPU ({cpu / floor_cpu:.2f}x the floor), "
                f"{wall * 1000:.0f} ms wall ({wall / floor_wall:.2f}x the floor's) per node; "
                f"whole {large}-node run {runs[1][1]:.1f} s wall, {runs[1][0]:.1f} s CPU"
            )
        few, many = counted(root / "count-10", 10, env), counted(root / "count-30", 30, env)
        per = {k: (many[k] - few[k]) / 20 for k in many if many[k] != few[k]}
        total = (sum(many.values()) - sum(few.values())) / 20
        parts = ", ".join(f"{k} {v:.1f}" for k, v in sorted(per.items(), key=lambda kv: -kv[1]))
        print(f"git processes per node (10 vs 30 nodes, --jobs 4): {total:.1f} ({parts})")
        print(f"git processes per node of the floor: 5; load average now {os.getloadavg()[0]:.1f}")
        flatness(root, tuple(args.flat), args.flat_jobs, env)
        print(f"load average at the end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
