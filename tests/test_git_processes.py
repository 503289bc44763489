"""What a node costs in git processes, counted by a ``git`` first on the run's ``PATH``.

The orchestrator finds git once, on the ``PATH`` it started with (host_tools.py), so a small
script named ``git`` placed first there is the git every call of a run uses: it appends its
argv to a log and execs the real one. Two scripted runs of the same shape (3 and 9 nodes, no
test command, 3 parallel so landings replay onto a moved tip) give the per-node cost as the
difference, the run's fixed cost (its branch, the first prompt checks, the wind-up) cancelled
out. Issue 29: at most 10 per node.
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from . import e2e_fixture as fx

CLI = [sys.executable, "-m", "anti_sprawl"]
LOG_VAR = "ANTI_SPRAWL_TEST_GIT_LOG"  # not GIT_*: git.cmd.git_env drops those
WRAPPER = """#!/bin/sh
printf '%s\\n' "$*" >> "${ANTI_SPRAWL_TEST_GIT_LOG}"
exec REAL_GIT "$@"
"""


@pytest.fixture
def counting_git(tmp_path: Path) -> Path:
    """A directory holding the counting ``git``."""
    real = shutil.which("git")
    assert real is not None
    bindir = tmp_path / "counting-bin"
    bindir.mkdir()
    script = bindir / "git"
    script.write_text(WRAPPER.replace("REAL_GIT", real))
    script.chmod(0o755)
    return bindir


def subcommand(line: str) -> str:
    """``worktree add`` from ``-c k=v ... --git-dir=X --work-tree=Y worktree add ...``."""
    words = line.split(" ")
    i = 0
    while i < len(words) and words[i].startswith("-"):
        i += 2 if words[i] in ("-c", "-C") else 1
    rest = words[i : i + 2]
    return " ".join(rest) if rest[:1] in (["worktree"], ["diff"]) else " ".join(rest[:1])


def run_counted(root: Path, nodes: int, bindir: Path) -> collections.Counter[str]:
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
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}", LOG_VAR: str(log)}
    args = ["execute", str(plan), "--repo", str(repo), "--script", str(script), "--jobs", "3"]
    run = subprocess.run(
        [*CLI, *args, "--json"], capture_output=True, text=True, env=env, timeout=600
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert json.loads(run.stdout)["status"] == "succeeded"
    assert len(fx.task_trailers(repo)) == nodes
    return collections.Counter(subcommand(line) for line in log.read_text().splitlines())


def test_a_node_costs_at_most_ten_git_processes(tmp_path: Path, counting_git: Path) -> None:
    small = run_counted(tmp_path / "small", 3, counting_git)
    big = run_counted(tmp_path / "big", 9, counting_git)
    # The wrapper really was the run's git: one worktree per node went through it.
    assert small["worktree add"] == 3
    assert big["worktree add"] == 9
    per_node = (sum(big.values()) - sum(small.values())) / 6
    difference = {k: (big[k] - small[k]) / 6 for k in big if big[k] != small[k]}
    assert per_node <= 10, f"{per_node:.1f} git processes per node: {difference}"
