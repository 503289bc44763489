"""``anti-sprawl clean``: list, then remove, what finished runs left behind.

Three kinds, each chosen by a flag (``--runs``, ``--branches``; ``--all`` or none: both, and
leftover worktrees): the run data of finished runs (``.anti-sprawl/runs/<id>``), the run
branches of those runs, and leftover worktrees and temporary branches of no live run
(git/workspace.py's ``remove_stale_worktrees``, which only touches what ``git worktree list``
reports). A run branch is removed only when it is named ``anti-sprawl/...``, its tip carries
this run's trailer, it is checked out nowhere: a user's own branch (``execute --branch main``)
is never one. Nothing is removed while a run holds the repository's lock.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from ..errors import UsageError
from ..git.branch import TRAILER_RUN
from ..git.cmd import run_git
from ..git.layout import StateLayout
from ..git.reorder import scratch_ref
from ..git.workspace import remove_stale_worktrees
from .journal import RepoLock, RunState, list_runs

__all__ = ["CleanPlan", "clean", "parse_age"]

RUN_BRANCH_PREFIX = "anti-sprawl/"
_AGE = re.compile(r"^(\d+)([mhdw])$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_age(text: str) -> timedelta:
    """``30m``, ``12h``, ``7d``, ``2w``; anything else is a usage error."""
    m = _AGE.match(text.strip())
    if not m:
        raise UsageError(f"--older-than {text!r}: write a number and m, h, d or w (e.g. 7d)")
    return timedelta(**{_UNITS[m.group(2)]: int(m.group(1))})


@dataclass
class CleanPlan:
    """What ``clean`` removes (or, with ``--dry-run``, would)."""

    runs: list[Path] = field(default_factory=list)
    branches: list[str] = field(default_factory=list)
    worktrees: list[Path] = field(default_factory=list)


def _ours(repo: Path, state: RunState) -> bool:
    """The run's branch is the tool's: prefixed, its tip made by this run, checked out nowhere."""
    if not state.branch.startswith(RUN_BRANCH_PREFIX):
        return False
    ref = f"refs/heads/{state.branch}"
    tip = run_git(
        ["log", "-1", f"--format=%(trailers:key={TRAILER_RUN},valueonly)", ref], repo, check=False
    )
    if tip.returncode != 0 or tip.stdout.decode().strip() != state.run_id:
        return False
    listed = run_git(["worktree", "list", "--porcelain"], repo).stdout.decode()
    return f"branch {ref}\n" not in listed + "\n"


def _old(state: RunState, cutoff: datetime) -> bool:
    try:
        return datetime.fromisoformat(state.updated_at) < cutoff
    except ValueError:
        return False


def clean(
    repo: Path, older_than: timedelta, *, runs: bool, branches: bool, dry_run: bool
) -> CleanPlan:
    """Find and (unless ``dry_run``) remove what finished runs older than ``older_than`` left."""
    layout = StateLayout.checked(repo)
    cutoff = datetime.now(UTC) - older_than
    finished = [s for s in list_runs(repo) if s.status != "running" and _old(s, cutoff)]
    plan = CleanPlan()
    if runs:
        plan.runs = [layout.run(s.run_id).root for s in finished]
    if branches:
        plan.branches = [s.branch for s in finished if _ours(repo, s)]
    if dry_run:
        return plan
    lock = RepoLock(repo)
    lock.acquire("clean")  # refuses (exit 2) while a run is active
    try:
        for name in plan.branches:
            run_git(["update-ref", "-d", f"refs/heads/{name}"], repo)
            # Left only by a kill mid-reorder; absent (and so not an error) otherwise.
            run_git(["update-ref", "-d", scratch_ref(name)], repo, check=False)
        for path in plan.runs:
            shutil.rmtree(path)
        if runs and branches:
            plan.worktrees = remove_stale_worktrees(repo, layout.worktrees)
    finally:
        lock.release()
    return plan
