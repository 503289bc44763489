"""The tool's own state directory, ``<repo>/.anti-sprawl``, is never repository content.

A repository someone else committed could ship ``.anti-sprawl`` (or a path under it) as a
symlink: the lock, the run data (transcripts hold read-scope contents), the worktrees and the
PR body would then land wherever the link points, and the stale-worktree cleanup would delete
that directory's entries. So before any use: nothing under ``.anti-sprawl`` may be tracked
(in the index or in ``HEAD``), ``.anti-sprawl`` itself and every fixed name below it must be a
real directory or file (``lstat``, never following a link), and it must sit directly in the
resolved repository root. Any breach is a ``UsageError``: one line, exit 2, nothing written.
The directory is created mode 0700: run data is private to the user who ran the tool.

``StateLayout`` is the one place that spells out what lives where; every other module asks it
for a path instead of joining names itself::

    <git common dir>/anti-sprawl-run.flock     the run lock (one execute/resume per repository)
    .anti-sprawl/runs/<run_id>/run.json        the journal's snapshot (RunState)
    .anti-sprawl/runs/<run_id>/events.jsonl    the journal's changes since the snapshot
    .anti-sprawl/runs/<run_id>/manifests/      one ContextManifest per model call
    .anti-sprawl/runs/<run_id>/artifacts/      transcripts, full tool outputs, test logs
    .anti-sprawl/runs/<run_id>/PR.md           the pull-request body
    .anti-sprawl/runs/<run_id>/report.html     the HTML run report (``report``, ``pr``)
    .anti-sprawl/runs/<run_id>/integration/    the integration command's logs, per commit
    .anti-sprawl/worktrees/                    per-node worktrees (temporary)
    .anti-sprawl/plans/<plan_id>.yaml          plans written by ``plan`` without ``-o``
    .anti-sprawl/planner/<stamp>/manifests/    the planner's context manifests
    .anti-sprawl/memory.yaml                   facts the user keeps for every run
    .anti-sprawl/baseline/<key>.json           a test command's outcome at a commit (cache)

The lock lives in the common git directory, not here, so every checkout of one repository
(the main one and each ``git worktree add``) shares it.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError
from ..ids import STATE_DIR_NAME
from .cmd import common_dir, run_git

__all__ = [
    "LOCK_NAME",
    "STATE_DIR_NAME",
    "InternalStateError",
    "RunPaths",
    "StateLayout",
    "check_state_dir",
    "ensure_state_dir",
]

# Not "*.lock": git's own stale-lock cleanup (git/locks.py) removes those.
LOCK_NAME = "anti-sprawl-run.flock"
_RUNS, _WORKTREES, _PLANS, _PLANNER, _MEMORY, _BASELINE = (
    "runs",
    "worktrees",
    "plans",
    "planner",
    "memory.yaml",
    "baseline",
)
# Names the tool itself creates directly under the state directory ("run.lock" is where 0.1
# kept its lock: an older anti-sprawl would still follow it, so it is checked too).
_FIXED = (_RUNS, _WORKTREES, _PLANS, _PLANNER, "run.lock", _MEMORY, _BASELINE)
# Directories whose entries are per-run (or per-node) and must be real directories too.
_PER_ENTRY = (_RUNS, _WORKTREES)


@dataclass(frozen=True)
class RunPaths:
    """Where one run's files live: ``.anti-sprawl/runs/<run_id>/``."""

    root: Path

    @property
    def journal(self) -> Path:
        return self.root / "run.json"

    @property
    def events(self) -> Path:
        """The journal's log of changes since ``run.json`` was written (run/journal_log.py)."""
        return self.root / "events.jsonl"

    @property
    def manifests(self) -> Path:
        return self.root / "manifests"

    @property
    def artifacts(self) -> Path:
        return self.root / "artifacts"

    @property
    def pr_body(self) -> Path:
        return self.root / "PR.md"

    @property
    def revised_plan(self) -> Path:
        """The run's plan with the scopes it granted added (run/scope_grants.py)."""
        return self.root / "plan.revised.yaml"

    @property
    def report(self) -> Path:
        """The self-contained HTML report (views/html_report.py)."""
        return self.root / "report.html"

    @property
    def integration(self) -> Path:
        """Logs of the integration command on the branch and its bisection (run/integration.py)."""
        return self.root / "integration"


@dataclass(frozen=True)
class StateLayout:
    """Every path anti-sprawl keeps for the repository rooted at ``repo`` (plain data).

    Build it with ``checked`` (nothing created) or ``ensured`` (the directory made, 0700):
    both refuse a state directory that is repository content.
    """

    repo: Path

    @classmethod
    def checked(cls, repo: Path) -> StateLayout:
        check_state_dir(repo)
        return cls(repo.resolve())

    @classmethod
    def ensured(cls, repo: Path) -> StateLayout:
        ensure_state_dir(repo)
        return cls(repo.resolve())

    @property
    def root(self) -> Path:
        return self.repo / STATE_DIR_NAME

    @property
    def runs(self) -> Path:
        return self.root / _RUNS

    def run(self, run_id: str) -> RunPaths:
        return RunPaths(self.runs / run_id)

    @property
    def worktrees(self) -> Path:
        return self.root / _WORKTREES

    def plan_file(self, plan_id: str) -> Path:
        return self.root / _PLANS / f"{plan_id}.yaml"

    def planner_manifests(self, stamp: str) -> Path:
        return self.root / _PLANNER / stamp / "manifests"

    @property
    def memory(self) -> Path:
        return self.root / _MEMORY

    @property
    def baselines(self) -> Path:
        """Test commands' outcomes at a commit, cached with their logs (run/baseline.py)."""
        return self.root / _BASELINE

    def baseline(self, key: str) -> Path:
        return self.baselines / f"{key}.json"

    def lock(self) -> Path:
        """The run lock, in the common git directory (asks git where that is)."""
        return common_dir(self.repo) / LOCK_NAME


class InternalStateError(UsageError):
    """``.anti-sprawl`` is tracked, a symlink, or otherwise not the tool's own directory."""


def _refuse(repo: Path, what: str) -> InternalStateError:
    return InternalStateError(
        f"refusing to use {repo / STATE_DIR_NAME}: {what}; anti-sprawl keeps its own state "
        "there and never follows repository content (remove it from the repository first)"
    )


def _tracked(repo: Path) -> str | None:
    """The first tracked path at or below ``.anti-sprawl`` (index or HEAD), if any."""
    for args in (
        ["ls-files", "-z", "--", STATE_DIR_NAME],
        ["ls-tree", "-r", "-z", "--name-only", "HEAD", "--", STATE_DIR_NAME],
    ):
        proc = run_git(args, repo, check=False)
        if proc.returncode == 0:
            first = proc.stdout.split(b"\0", 1)[0]
            if first:
                return first.decode("utf-8", "replace")
    return None


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UsageError(f"cannot inspect {path}: {exc.strerror}") from exc


def _check_entry(repo: Path, path: Path, *, want_dir: bool | None) -> None:
    st = _lstat(path)
    if st is None:
        return
    rel = path.relative_to(repo).as_posix()
    if stat.S_ISLNK(st.st_mode):
        raise _refuse(repo, f"{rel} is a symlink")
    if want_dir is True and not stat.S_ISDIR(st.st_mode):
        raise _refuse(repo, f"{rel} is not a directory")
    if want_dir is False and not stat.S_ISREG(st.st_mode):
        raise _refuse(repo, f"{rel} is not a regular file")


def check_state_dir(repo: Path) -> Path:
    """The checked state directory of ``repo`` (which may not exist yet); refuses a breach."""
    root = repo.resolve()
    tracked = _tracked(root)
    if tracked is not None:
        raise _refuse(root, f"{tracked} is tracked by git")
    state = root / STATE_DIR_NAME
    _check_entry(root, state, want_dir=True)
    if not os.path.lexists(state):
        return state
    for name in _FIXED:
        _check_entry(root, state / name, want_dir="." not in name)
    for name in _PER_ENTRY:
        parent = state / name
        if not parent.is_dir():
            continue
        try:
            entries = sorted(os.scandir(parent), key=lambda e: e.name)
        except OSError as exc:
            raise UsageError(f"cannot list {parent}: {exc.strerror}") from exc
        for entry in entries:
            if entry.is_symlink() or not entry.is_dir(follow_symlinks=False):
                raise _refuse(root, f"{STATE_DIR_NAME}/{name}/{entry.name} is not a directory")
    if os.path.realpath(state) != str(state):
        raise _refuse(root, "it resolves outside the repository")
    return state


def ensure_state_dir(repo: Path) -> Path:
    """The checked state directory, created (mode 0700) if it does not exist yet."""
    state = check_state_dir(repo)
    try:
        state.mkdir(mode=0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise UsageError(f"cannot create {state}: {exc.strerror}") from exc
    # Re-check what now exists: a directory, not something swapped in since.
    try:
        fd = os.open(state, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise _refuse(state.parent, "it is not a directory") from exc
    os.close(fd)
    return state
