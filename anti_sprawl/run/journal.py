"""The run journal (``run.json`` and ``events.jsonl``) and the repo lock.

Where each file lives is ``git.layout.StateLayout`` (the run's ``RunPaths``). ``run.json`` is
a snapshot of the whole ``RunState``; every change after it is one line appended to
``events.jsonl`` (journal_log.py says how a line stays whole and when the log is folded into a
new snapshot), so recording a node costs the same at node 3,000 as at node 3. ``read_state``
reads both back for ``status``, ``inspect`` and ``resume``; a 0.2 ``run.json`` (no log) is a
snapshot. One module of a little under 400 lines: the state, its writer and its reader share
``SNAPSHOT_ONLY`` and the consistency checks, and the lock is imported from here by callers
other branches are changing.

The journal is a cache of progress; git is the truth: on resume, a node whose commit is on
the run branch counts as succeeded even if the journal missed it. So a journal write that fails
(disk full, quota) keeps the previous journal (a failed append is cut off, a snapshot goes to
a temp file renamed into place) and stops the run; ``resume`` finishes it later. A damaged
journal is one line from every command.

The lock lives in the repository's common git directory, so every checkout of one repository
(the main one and each ``git worktree add``) shares it: one run per repository, since they all
build branches in the same ref store.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import re
import secrets
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, ClassVar, Literal

from pydantic import BaseModel, Field, ValidationError, computed_field, create_model

from ..errors import StorageError, UsageError
from ..fs.files import atomic_write_text
from ..git.layout import RunPaths, StateLayout
from ..plan.graph import find_cycle
from ..plan.model import Plan
from ..providers.base import Usage
from .integration_result import IntegrationOutcome
from .journal_log import LogTail, LogWriter, compaction_due, event_line, fsync_dir, read_log
from .replan import PlanRevision
from .result import TaskResult, cache_share, now

__all__ = ["Journal", "RepoLock", "RunState", "list_runs", "new_run_id", "read_state"]

RunStatus = Literal["running", "succeeded", "failed", "interrupted"]
# 2: changes are logged in events.jsonl beside the run.json snapshot (0.2 wrote 1: run.json
# alone, which 2 reads as a snapshot; a 0.2 anti-sprawl refuses 2 instead of missing the log).
JOURNAL_VERSION = 2
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,100}$")
# What only the snapshot records; a "run" event holds every other field of ``RunState``.
SNAPSHOT_ONLY = frozenset({"plan", "tasks", "revisions", "seq"})


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
    integration: IntegrationOutcome | None = Field(
        default=None, description="The integration command on the branch tip (run/integration.py)."
    )
    branch_order: str = Field(
        default="",
        description="Why the run branch's commits are in the order they landed, not the "
        "plan's fixed order (run/branch_order.py); empty when they are in that order.",
    )
    seq: int = Field(
        default=0, description="The last journal event in this snapshot (journal_log.py)."
    )
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
    """Atomic, thread-safe persistence of one run's ``RunState``: a snapshot (``run.json``)
    and an append-only log of the changes since (``events.jsonl``; journal_log.py).

    ``save`` writes the whole state as the new snapshot (start, end, resume) and raises
    ``StorageError`` when that fails (the previous snapshot and log stay); ``update`` (a task's
    record) and ``checkpoint`` (the run's header) append one line each, called as nodes
    progress, and record the first failure in ``write_error`` and call ``on_write_error`` (the
    run stops) instead. A change costs the size of what changed, not of the plan. After
    ``close`` nothing is written: the process no longer owns the run once it lets go of the lock.
    """

    # Bytes every journal of this process wrote (snapshots and log lines), for benchmarks.
    bytes_written_total: ClassVar[int] = 0
    _count_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, paths: RunPaths, state: RunState, *, log_bytes: int = 0):
        self.paths = paths
        self.state = state
        self._lock = threading.RLock()
        self._closed = False
        self.write_error: StorageError | None = None
        self.on_write_error: Callable[[StorageError], None] | None = None
        self.bytes_written = 0
        self._log = LogWriter(paths.events, log_bytes)
        self._snapshot_bytes = 0
        # A failed write lost a change the log never got: the next write is a whole snapshot.
        self._behind = False
        self._bulky = self._bulky_parts()
        # task -> digest of the record its last event (or the snapshot) holds: an update that
        # changes nothing writes nothing.
        self._written: dict[str, bytes] = {}

    @property
    def path(self) -> Path:
        return self.paths.journal

    def _bulky_parts(self) -> tuple[int, int, int]:
        """What only a snapshot records (the plan, the task table, the revisions), by identity."""
        return id(self.state.plan), id(self.state.tasks), len(self.state.revisions)

    def _count(self, n: int) -> None:
        self.bytes_written += n
        with Journal._count_lock:
            Journal.bytes_written_total += n

    def save(self) -> None:
        """Write the whole state as the snapshot, then empty the log it now holds."""
        with self._lock:
            if self._closed:
                return
            self.state.updated_at, self.state.version = now(), JOURNAL_VERSION
            text = self.state.model_dump_json(indent=2) + "\n"
            size = len(text.encode())
            try:
                atomic_write_text(self.path, text)
                fsync_dir(self.path.parent)
                self._count(size)
                self._log.reset()
            except OSError as exc:
                self._behind = True
                raise StorageError(
                    f"cannot write the run journal {self.path}: {exc.strerror or exc}"
                ) from exc
            self._snapshot_bytes, self._behind = size, False
            self._bulky = self._bulky_parts()

    def update(self, task: TaskResult) -> None:
        with self._lock:
            if self._closed:
                return
            self.state.tasks[task.task_id] = task
            payload = task.model_dump_json()
            digest = hashlib.blake2b(payload.encode(), digest_size=16).digest()
            if self._written.get(task.task_id) == digest and not self._behind:
                return  # the same record as its last event: replaying it would change nothing
            self._record("task", payload)
            self._written[task.task_id] = digest

    def checkpoint(self) -> None:
        """The run's header changed (tokens, cost, status, why it stopped): record it."""
        with self._lock:
            if self._closed:
                return
            self.state.updated_at = now()
            self._record("run", self.state.model_dump_json(exclude=set(SNAPSHOT_ONLY)))

    def _record(self, kind: str, payload: str) -> None:
        """Append one event (a snapshot instead when one is due); failures are reported."""
        try:
            if self._behind or self._bulky != self._bulky_parts():
                self.save()
                return
            line = event_line(self.state.seq + 1, kind, payload)
            try:
                self._log.append(line)
            except OSError as exc:
                self._behind = True
                raise StorageError(
                    f"cannot write the run journal {self._log.path}: {exc.strerror or exc}"
                ) from exc
            self.state.seq += 1
            self._count(len(line))
            if compaction_due(self._log.size, self._snapshot_bytes):
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
            self._log.close()

    @classmethod
    def load(cls, repo: Path, run_id: str) -> Journal:
        """The run's journal; a missing, unreadable or inconsistent one is a UsageError."""
        if not _RUN_ID.match(run_id):
            raise UsageError(f"invalid run id: {run_id!r}")
        paths = StateLayout.checked(repo).run(run_id)
        if not paths.journal.exists():
            raise UsageError(f"no run {run_id!r} in {repo} (see 'anti-sprawl status')")
        state, log_bytes = read_state(paths)
        journal = cls(paths, state, log_bytes=log_bytes)
        journal._snapshot_bytes = paths.journal.stat().st_size
        return journal


def read_state(paths: RunPaths) -> tuple[RunState, int]:
    """A run's state, its snapshot with the log replayed, and the length of the log's whole
    lines; a missing or damaged journal is a UsageError. The log is read first (see
    journal_log.py: a compaction in between then only makes the snapshot newer)."""
    path = paths.journal
    try:
        tail = read_log(paths.events)
    except OSError as exc:
        raise UsageError(
            f"run journal {paths.events} is unreadable: {exc.strerror or exc}"
        ) from exc
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise UsageError(f"no run {paths.root.name!r} (see 'anti-sprawl status')") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"run journal {path} is damaged: not UTF-8 text") from exc
    except OSError as exc:
        raise UsageError(f"run journal {path} is unreadable: {exc.strerror or exc}") from exc
    try:
        state = RunState.model_validate_json(text)
    except ValidationError as exc:
        raise UsageError(f"run journal {path} is damaged: {exc.errors()[0]['msg']}") from exc
    if state.version > JOURNAL_VERSION:
        raise UsageError(
            f"run {state.run_id} was written by a newer anti-sprawl (v{state.version})"
        )
    problem = _inconsistency(state)  # every snapshot written is whole
    if problem:
        raise UsageError(f"run journal {path} is damaged: {problem}")
    problem = tail.problem or _replay(state, tail)
    if problem:
        raise UsageError(f"run journal {paths.events} is damaged: {problem}")
    return state, tail.good_bytes


def _replay(state: RunState, tail: LogTail) -> str | None:
    """Apply the log's events after the snapshot to ``state``; what is wrong, if anything."""
    header = _header_model()
    for seq, kind, payload in tail.events:
        if seq <= state.seq:
            continue  # already in the snapshot (a crash between its rename and the truncation)
        if seq != state.seq + 1:
            return f"event {state.seq + 1} is missing (found {seq})"
        try:
            if kind == "task":
                task = TaskResult.model_validate(payload)
                if task.task_id not in state.tasks:
                    return f"event {seq}: task {task.task_id!r} is not in the plan"
                state.tasks[task.task_id] = task
            else:
                fields = header.model_validate(payload)
                for name in type(fields).model_fields:
                    setattr(state, name, getattr(fields, name))
        except ValidationError as exc:
            return f"event {seq}: {exc.errors()[0]['msg']}"
        state.seq = seq
    return None


@functools.cache
def _header_model() -> type[BaseModel]:
    """``RunState`` without its bulky parts: what a ``run`` event holds (any field added to
    ``RunState`` is in it)."""
    fields: dict[str, Any] = {
        name: (info.annotation, info)
        for name, info in RunState.model_fields.items()
        if name not in SNAPSHOT_ONLY
    }
    return create_model("RunHeader", **fields)


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
            out.append(read_state(layout.run(entry.name))[0])
        except UsageError:
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
