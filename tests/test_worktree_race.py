"""Another process adds and removes linked worktrees of its own while a run goes on.

``git worktree add/remove`` makes and deletes ``.git/worktrees/<id>/`` in steps; a git command
that walks the admin dirs in between fails (``failed to read .git/worktrees/X/commondir``),
and a worktree add fails when a removal deletes the empty ``.git/worktrees`` under it. The
README supports linked worktrees of the user's own, so a run must not lose finished work to
them: every node lands exactly once, nothing is left behind, the user's checkout is untouched.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

from anti_sprawl.git.workspace import Workspace, remove_stale_worktrees

from . import e2e_fixture as fx

CLI = [sys.executable, "-m", "anti_sprawl"]
NODES = 40

# The user's side: linked worktrees of their own, added and removed in a loop, bounded in
# count and time; it stops when the run is over (the stop file) or at its bounds.
CHURN = """
import os, subprocess, sys, time
repo, where, stop = sys.argv[1:4]
deadline = time.monotonic() + 300
for i in range(4000):
    if os.path.exists(stop) or time.monotonic() > deadline:
        break
    path = os.path.join(where, f"wt{i % 3}")
    subprocess.run(["git", "-C", repo, "worktree", "add", "-q", "--detach", path],
                   capture_output=True)
    subprocess.run(["git", "-C", repo, "worktree", "remove", "--force", path],
                   capture_output=True)
print(i)
"""


def _plan(tmp_path: Path) -> tuple[Path, Path]:
    tasks = [fx.node(f"n{i:02d}", [], f"pkg/n{i:02d}.py", "") for i in range(NODES - 1)]
    tasks.append(fx.node("last", [t["task_id"] for t in tasks[:4]], "pkg/last.py", ""))
    # No test command: the nodes' git work is what races, not their tests.
    workers = {t["task_id"]: _turns(t["write_scope"][0]) for t in tasks}
    return fx.write_inputs(tmp_path, fx.plan(tasks=tasks, test_command=None), {"workers": workers})


def _turns(path: str) -> list[object]:
    return [t for t in fx.worker_turns(path, "X = 1\n") if t["tool"] != "run_tests"]


def test_user_worktrees_added_and_removed_during_a_run_lose_no_node(tmp_path: Path) -> None:
    repo = fx.make_repo(tmp_path)
    before = fx.checkout_fingerprint(repo)
    plan, script = _plan(tmp_path)
    theirs = tmp_path / "theirs"
    stop = tmp_path / "stop"
    churns = [
        subprocess.Popen(
            [sys.executable, "-c", CHURN, str(repo), str(theirs / str(n)), str(stop)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in range(3)
    ]
    try:
        args = ["execute", str(plan), "--repo", str(repo), "--script", str(script)]
        run = subprocess.run(
            [*CLI, *args, "--jobs", "4", "--json"], capture_output=True, text=True, timeout=600
        )
    finally:
        stop.touch()
        churned = [int(c.communicate(timeout=60)[0] or 0) for c in churns]
    assert min(churned) > 0  # the other processes really churned during the run
    assert run.returncode == 0, run.stdout + run.stderr
    state = json.loads(run.stdout)
    assert state["status"] == "succeeded"
    trailers = fx.task_trailers(repo)
    assert sorted(trailers) == sorted(state["tasks"])  # every node landed, exactly once
    assert len(trailers) == NODES
    fx.git(repo, "fsck", "--strict")
    assert fx.git(repo, "branch", "--list", "anti-sprawl/wt/*") == ""
    assert not list((repo / ".anti-sprawl" / "worktrees").glob("*"))
    assert fx.checkout_fingerprint(repo) == before


def test_cleaning_another_folder_never_deletes_a_branch_being_checked_out(
    tmp_path: Path,
) -> None:
    """A Dask worker removes a dead worker process's leftovers from the shared cache clone
    while live nodes add worktrees there: `worktree add -B` makes its branch before the
    worktree that checks it out, and a `branch -D` in between left a worktree with no HEAD."""
    repo = fx.make_repo(tmp_path)
    base = fx.git(repo, "rev-parse", "HEAD")
    dead = tmp_path / "dead"  # a dead process's folder: nothing registered in it
    done = threading.Event()
    errors: list[BaseException] = []

    def clean() -> None:
        while not done.is_set():
            try:
                remove_stale_worktrees(repo, dead)
            except BaseException as exc:  # reported below, in the test's thread
                errors.append(exc)
                return

    cleaner = threading.Thread(target=clean)
    cleaner.start()
    try:
        for i in range(40):
            with Workspace.create(repo, tmp_path / "live", f"node-{i}", base) as ws:
                assert ws.head == base
                assert ws.git(["ls-tree", "HEAD"]).stdout
    finally:
        done.set()
        cleaner.join()
    assert errors == []
    fx.git(repo, "fsck", "--strict")
    assert fx.git(repo, "branch", "--list", "anti-sprawl/wt/*") == ""
