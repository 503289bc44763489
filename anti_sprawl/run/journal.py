"""The run journal (``run.json``, written atomically after every change) and the repo lock.

Where each file lives is ``git.layout.StateLayout`` (the run's ``RunPaths``).

The journal is a cache of progress; git is the truth: on resume, a node whose commit is on
the run branch counts as succeeded even if the journal missed it. So a journal write that fails
(disk full, quota) keeps the previous journal (writes go to a temp file renamed into place) and
stops the run; ``resume`` finishes it later. A damaged journal is one line from every command.

The lock lives in the repository's common git directory, so every checkout of one repository
(the main one and each ``git worktree add``) shares it: one run per repository, since they all
build branches in the same ref store.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import secrets
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Literal

from pydantic import BaseModel, Field, ValidationError, computed_field

from ..errors import StorageError, UsageError
from ..fs.files import atomic_write_text
from ..git.layout import RunPaths, StateLayout
from ..plan.graph import find_cycle
from ..plan.model import Plan
from ..providers.base import Usage
from .replan import PlanRevision
from .result import TaskResult, cache_share, now

__all__ = ["Journal", "RepoLock", "RunState", "list_runs", "new_run_id"]

RunStatus = Literal["running", "succeeded", "failed", "interrupted"]
JOURNAL_VERSION = 1
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,100}$")


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
    launch: dict[str, Any] = Field(
        default_factory=dict,
        description="The options of the last execute/resume (cli/launch.py): what a bare "
        "'resume RUN' reuses. Never a key.",
    )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def cache_share(self) -> float | None:
        """Share of the run's input tokens read from the provider's cache."""
        return cache_share(self.tokens)


class Journal:
    """Atomic, thread-safe persistence of one run's ``RunState``.

    ``save`` raises ``StorageError`` when the write fails (the previous journal stays);
    ``update`` and ``checkpoint``, called as nodes progress, record the first such error in
    ``write_error`` and call ``on_write_error`` (the run stops) instead. After ``close`` nothing is written: the
    process no longer owns the run once it lets go of the lock.
    """

    def __init__(self, paths: RunPaths, state: RunState):
        self.paths = paths
        self.state = state
        self._lock = threading.RLock()
        self._closed = False
        self.write_error: StorageError | None = None
        self.on_write_error: Callable[[StorageError], None] | None = None

    @property
    def path(self) -> Path:
        return self.paths.journal

    def save(self) -> None:
        with self._lock:
            if self._closed:
                return
            self.state.updated_at = now()
            try:
                atomic_write_text(self.path, self.state.model_dump_json(indent=2) + "\n")
            except OSError as exc:
                raise StorageError(
                    f"cannot write the run journal {self.path}: {exc.strerror or exc}"
                ) from exc

    def update(self, task: TaskResult) -> None:
        with self._lock:
            if self._closed:
                return
            self.state.tasks[task.task_id] = task
            self.checkpoint()

    def checkpoint(self) -> None:
        """``save`` during a run: a failure is recorded and reported, not raised."""
        with self._lock:
            try:
                self.save()
            except StorageError as exc:
                if self.write_error is None:
                    self.write_error = exc
                    if self.on_write_error is not None:
                        self.on_write_error(exc)

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """No more writes from this object, whatever a straggling thread asks for."""
        with self._lock:
            self._closed = True

    @classmethod
    def load(cls, repo: Path, run_id: str) -> Journal:
        """The run's journal; a missing, unreadable or inconsistent one is a UsageError."""
        if not _RUN_ID.match(run_id):
            raise UsageError(f"invalid run id: {run_id!r}")
        paths = StateLayout.checked(repo).run(run_id)
        path = paths.journal
        try:
            text = path.read_bytes().decode("utf-8")
        except FileNotFoundError:
            raise UsageError(f"no run {run_id!r} in {repo} (see 'anti-sprawl status')") from None
        except UnicodeDecodeError as exc:
            raise UsageError(f"run journal {path} is damaged: not UTF-8 text") from exc
        except OSError as exc:
            raise UsageError(f"run journal {path} is unreadable: {exc.strerror or exc}") from exc
        try:
            state = RunState.model_validate_json(text)
        except ValidationError as exc:
            raise UsageError(f"run journal {path} is damaged: {exc.errors()[0]['msg']}") from exc
        if state.version > JOURNAL_VERSION:
            raise UsageError(f"run {run_id} was written by a newer anti-sprawl (v{state.version})")
        problem = _inconsistency(state)
        if problem:
            raise UsageError(f"run journal {path} is damaged: {problem}")
        return cls(paths, state)


def _inconsistency(state: RunState) -> str | None:
    """What makes a schema-valid journal unusable: its plan and its task records disagree,
    or the plan is not a DAG of known ids (linear: never the full validation of a big plan)."""
    ids = [t.task_id for t in state.plan.tasks]
    known = set(ids)
    if len(known) != len(ids):
        return "its plan has duplicate task ids"
    missing = [tid for tid in ids if tid not in state.tasks]
    if missing:
        return f"task {missing[0]!r} of the plan has no record"
    extra = sorted(set(state.tasks) - known)
    if extra:
        return f"task {extra[0]!r} is not in the plan"
    for t in state.plan.tasks:
        for dep in t.dependencies:
            if dep == t.task_id:
                return f"task {dep!r} depends on itself"
            if dep not in known:
                return f"task {t.task_id!r} depends on unknown task {dep!r}"
    cycle = find_cycle({t.task_id: list(t.dependencies) for t in state.plan.tasks})
    if cycle:
        return f"dependency cycle: {' -> '.join([*cycle, cycle[0]])}"
    return None


def list_runs(repo: Path) -> list[RunState]:
    """Every readable run journal under the repo, oldest first."""
    layout = StateLayout.checked(repo)
    out: list[RunState] = []
    if not layout.runs.is_dir():
        return out
    for entry in sorted(layout.runs.iterdir()):
        try:
            text = layout.run(entry.name).journal.read_text(encoding="utf-8")
            out.append(RunState.model_validate_json(text))
        except (OSError, ValidationError, ValueError):
            continue
    return sorted(out, key=lambda s: s.created_at)


class RepoLock:
    """An exclusive ``flock`` in the common git directory; the kernel frees it if we die.

    Shared by every checkout of the repository (linked worktrees included). It holds the
    run id, pid and checkout of its holder, for the refusal message.
    """

    def __init__(self, repo: Path):
        self.repo = repo
        self.path = StateLayout(repo).lock()
        self._fh: IO[str] | None = None

    def acquire(self, run_id: str) -> None:
        try:
            fh = self.path.open("a+", encoding="utf-8")  # held until release()
        except OSError as exc:
            raise UsageError(f"cannot open the run lock {self.path}: {exc.strerror}") from exc
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = _holder(fh.read())
            fh.close()
            raise UsageError(
                f"another anti-sprawl run is active in this repository ({holder})"
            ) from None
        try:
            fh.seek(0)
            fh.truncate()
            fh.write(json.dumps({"run_id": run_id, "pid": os.getpid(), "checkout": str(self.repo)}))
            fh.flush()
        except OSError:
            pass  # the holder note is for messages only; the flock is what excludes
        self._fh = fh

    @property
    def held(self) -> bool:
        return self._fh is not None

    def release(self) -> None:
        if self._fh is not None:
            fcntl.flock(self._fh.fileno(), fcntl.LOCK_UN)
            self._fh.close()
            self._fh = None


def _holder(text: str) -> str:
    try:
        data = json.loads(text)
        return f"run {data['run_id']}, pid {data['pid']}, in {data['checkout']}"
    except (ValueError, TypeError, KeyError):
        return text.strip()[:200] or "unknown run"
