"""The run journal (``run.json``, written atomically after every change) and the repo lock.

Layout under the target repository (excluded from git via ``.git/info/exclude``)::

    .anti-sprawl/run.lock                    flock held by the one execute/resume at a time
    .anti-sprawl/runs/<run_id>/run.json      RunState
    .anti-sprawl/runs/<run_id>/manifests/    one ContextManifest per model call
    .anti-sprawl/runs/<run_id>/artifacts/    transcripts, full tool outputs, test logs
    .anti-sprawl/worktrees/                  per-node worktrees (temporary)

The journal is a cache of progress; git is the truth: on resume, a node whose commit is on
the run branch counts as succeeded even if the journal missed it.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import secrets
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Literal

from pydantic import BaseModel, Field, ValidationError, computed_field

from .errors import UsageError
from .internal_state import check_state_dir
from .plan import Plan, atomic_write_text
from .providers.base import Usage
from .reducer import TaskResult, cache_share, now
from .replan import PlanRevision

__all__ = ["Journal", "RepoLock", "RunState", "list_runs", "new_run_id", "state_dir"]

RunStatus = Literal["running", "succeeded", "failed", "interrupted"]
JOURNAL_VERSION = 1
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,100}$")


def state_dir(repo: Path) -> Path:
    """``<repo>/.anti-sprawl``, checked: never tracked, never a symlink (see internal_state)."""
    return check_state_dir(repo)


def new_run_id(plan_id: str) -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return f"{plan_id[:40]}-{stamp}-{secrets.token_hex(2)}"


class RunState(BaseModel):
    """Everything about one run that must survive a crash."""

    version: int = JOURNAL_VERSION
    run_id: str
    plan_id: str
    repo: str
    base: str
    base_branch: str | None = None  # the branch `base` was taken from, for the PR
    branch: str
    status: RunStatus = "running"
    created_at: str = Field(default_factory=now)
    updated_at: str = Field(default_factory=now)
    jobs: int = 1
    sparse: bool = False
    provider: str = ""
    model: str = ""
    sandbox: str = ""
    # The plan as validated at start: scopes are read from here on resume, never widened
    # (``resume --plan`` may only change nodes that did not succeed; see replan.py).
    plan: Plan
    tasks: dict[str, TaskResult] = Field(default_factory=dict)
    max_tokens: int | None = Field(default=None, description="The run's cap (--max-tokens).")
    tokens: Usage = Field(
        default_factory=Usage,
        description="Every model call of the run, every attempt and session (what the cap counts).",
    )
    max_cost: float | None = Field(default=None, description="The run's cap in USD (--max-cost).")
    cost_usd: float = Field(
        default=0.0, description="Dollars over every priced call of the run (all attempts)."
    )
    prices: str = Field(default="", description="Where the dollar figures' prices came from.")
    stopped_by: str | None = Field(default=None, description="Why the run was interrupted.")
    revisions: list[PlanRevision] = Field(default_factory=list, description="resume --plan edits.")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def cache_share(self) -> float | None:
        """Share of the run's input tokens read from the provider's cache."""
        return cache_share(self.tokens)


class Journal:
    """Atomic, thread-safe persistence of one run's ``RunState``."""

    def __init__(self, run_dir: Path, state: RunState):
        self.run_dir = run_dir
        self.state = state
        self._lock = threading.RLock()

    @property
    def path(self) -> Path:
        return self.run_dir / "run.json"

    def save(self) -> None:
        with self._lock:
            self.state.updated_at = now()
            atomic_write_text(self.path, self.state.model_dump_json(indent=2) + "\n")

    def update(self, task: TaskResult) -> None:
        with self._lock:
            self.state.tasks[task.task_id] = task
            self.save()

    @classmethod
    def load(cls, repo: Path, run_id: str) -> Journal:
        if not _RUN_ID.match(run_id):
            raise UsageError(f"invalid run id: {run_id!r}")
        run_dir = state_dir(repo) / "runs" / run_id
        path = run_dir / "run.json"
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise UsageError(f"no run {run_id!r} in {repo} (see 'anti-sprawl status')") from None
        try:
            state = RunState.model_validate_json(text)
        except ValidationError as exc:
            raise UsageError(f"run journal {path} is damaged: {exc.errors()[0]['msg']}") from exc
        if state.version > JOURNAL_VERSION:
            raise UsageError(f"run {run_id} was written by a newer anti-sprawl (v{state.version})")
        return cls(run_dir, state)


def list_runs(repo: Path) -> list[RunState]:
    """Every readable run journal under the repo, oldest first."""
    runs_dir = state_dir(repo) / "runs"
    out: list[RunState] = []
    if not runs_dir.is_dir():
        return out
    for entry in sorted(runs_dir.iterdir()):
        try:
            out.append(
                RunState.model_validate_json((entry / "run.json").read_text(encoding="utf-8"))
            )
        except (OSError, ValidationError, ValueError):
            continue
    return sorted(out, key=lambda s: s.created_at)


class RepoLock:
    """An exclusive ``flock`` on ``.anti-sprawl/run.lock``; the kernel frees it if we die."""

    def __init__(self, repo: Path):
        self.path = state_dir(repo) / "run.lock"
        self._fh: IO[str] | None = None

    def acquire(self, run_id: str) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(self.path, "a+", encoding="utf-8")  # noqa: SIM115 - held until release()
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "unknown run"
            fh.close()
            raise UsageError(
                f"another anti-sprawl run is active in this repository ({holder})"
            ) from None
        fh.seek(0)
        fh.truncate()
        fh.write(json.dumps({"run_id": run_id, "pid": os.getpid()}))
        fh.flush()
        self._fh = fh

    def release(self) -> None:
        if self._fh is not None:
            fcntl.flock(self._fh.fileno(), fcntl.LOCK_UN)
            self._fh.close()
            self._fh = None
