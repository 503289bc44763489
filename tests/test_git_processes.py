"""What a node costs in git processes, counted by a ``git`` first on the run's ``PATH``.

The orchestrator finds git once, on the ``PATH`` it started with (host_tools.py), so a small
script named ``git`` placed first there is the git every call of a run uses: it appends its
argv to a log and execs the real one (benchmarks/_git_counter.py, shared with
benchmarks/per_node.py). Two scripted runs of the same shape (3 and 9 nodes, no test command,
3 parallel so landings replay onto a moved tip) give the per-node cost as the difference, the
run's fixed cost (its branch, the first prompt checks, the wind-up) cancelled out. Issue 29:
at most 10 per node. (``git worktree add`` runs ``update-ref`` and ``reset --hard`` itself,
which the wrapper does not see; a worktree is now added without its checkout, which then runs
as its own ``reset --hard``: one more counted, none more run. git/workspace.py.) A node that
gets a finished node's worktree (git/worktree_pool.py) runs one ``reset --hard`` instead of
``worktree add`` and the checkout, and ``clean`` only when something untracked was left:
about 9 a node, 10 before.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
from pathlib import Path

from benchmarks._git_counter import counted_calls, counting_env

from . import e2e_fixture as fx

CLI = [sys.executable, "-m", "anti_sprawl"]


def run_counted(root: Path, nodes: int) -> collections.Counter[str]:
    root.mkdir()
    repo = fx.make_repo(root)
    tasks = [fx.node(f"n{i:02d}", [], f"pkg/n{i:02d}.py", "") for i in range(nodes)]
    turns = {
        t["task_id"]: [
            s for s in fx.worker_turns(t["write_scope"][0], "X = 1\n") if s["tool"] != "run_tests"
        ]
        for t in tasks
    }
    plan, script = fx.write_inputs(
        root, fx.plan(tasks=tasks, test_command=None), {"workers": turns}
    )
    log = root / "git.log"
    env = counting_env(root / "counting-bin", log, os.environ)
    args = ["execute", str(plan), "--repo", str(repo), "--script", str(script), "--jobs", "3"]
    run = subprocess.run(
        [*CLI, *args, "--json"], capture_output=True, text=True, env=env, timeout=600
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert json.loads(run.stdout)["status"] == "succeeded"
    assert len(fx.task_trailers(repo)) == nodes
    calls = counted_calls(log)
    # A reorder (git/reorder.py) is a cost of the run, not of its nodes: at most once per
    # check, whatever the number of nodes, and only when the nodes happened to land out of
    # order, so one of the two runs may need it and the other not. Its processes besides the
    # ``log`` every run reads (cat-file, diff-tree, fast-import, rev-parse, update-ref) are
    # left out, so the difference is the nodes'.
    for _ in range(calls["fast-import"]):
        for name in ("cat-file", "diff-tree", "fast-import", "rev-parse", "update-ref"):
            calls[name] -= 1
    return calls


def test_a_node_costs_at_most_ten_git_processes(tmp_path: Path) -> None:
    small = run_counted(tmp_path / "small", 3)
    big = run_counted(tmp_path / "big", 9)
    # The wrapper really was the run's git: at most one worktree per slot was made, and
    # every other node was handed a finished node's worktree (git/worktree_pool.py).
    assert 1 <= small["worktree add"] <= 3
    assert 1 <= big["worktree add"] <= 3
    # One `reset --hard` a node: a fresh worktree's checkout, or a used one brought to its base.
    assert (small["reset"], big["reset"]) == (3, 9)
    per_node = (sum(big.values()) - sum(small.values())) / 6
    difference = {k: (big[k] - small[k]) / 6 for k in big if big[k] != small[k]}
    assert per_node <= 10, f"{per_node:.1f} git processes per node: {difference}"
