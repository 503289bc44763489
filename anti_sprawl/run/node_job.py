"""One attempt of one node as plain data: a ``NodeJob`` in, a ``NodeOutcome`` out.

``node_work.run_node_job(job, env)`` does the node's work in four phases:

    prepare   a fresh worktree at ``job.base``, the firewall, the plan's setup command, the
              clean-slate prompt (plus the failure note of the attempt before, if any)
    work      the worker loop under the node's caps (agent/worker.py)
    verify    the audit (nothing outside the write scope survives), the final test run, the
              secret scan of what would be committed
    commit    one commit with the run's trailers, authored by the user

The job is frozen, picklable data, so an executor may run it in another process or on another
machine (issue 17); what the work needs live comes in a ``NodeEnv`` built where it runs: the
provider, the redactor (it holds this process's secret values: they never travel), the stop
event, the run-wide budget, the token counter and the crash hook. Manifests and logs are
written under ``job.paths`` as the work goes (the run's own directories when the work runs in
the run's process, so nothing needs copying; a remote executor points them at a staging
directory) and listed in the outcome. The journal, the result kept beside the commit, the lock
and the run branch belong to the central process: ``node.NodeRunner`` turns outcomes into
journal records and lands committed nodes as they finish.

A job never raises for a failure of its node: a ``RunError`` or a bug fails the attempt
(``verdict == "failed"``, the record says why, a traceback is kept as ``error.txt``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..agent.budget import RunBudget
from ..agent.worker import WorkerResult
from ..context.memory import MemoryFact
from ..context.sections import UpstreamSummary
from ..fs.scope_grant import ScopeGrant
from ..git.worktree_pool import WorktreePool
from ..lifecycle import NodeVerdict
from ..plan.model import Plan, TaskNode
from ..providers.base import Provider
from ..providers.prices import Price
from ..redact import Redactor
from ..tokens import TokenCounter
from .failure_note import FailureNote
from .result import TaskResult
from .scope_grants import GrantLedger, Neighbour
from .settings import LiveStep, RunSettings

__all__ = ["NodeEnv", "NodeJob", "NodeOutcome", "NodePaths"]


@dataclass(frozen=True)
class NodePaths:
    """Where a job reads and writes outside its worktree."""

    repo: Path  # the user's checkout: worktrees are made from it; ``{checkout}`` binds it
    worktrees: Path  # the attempt's worktree goes under it (removed at the end)
    artifacts: Path  # an ArtifactStore root: transcript, test and setup logs, full tool output
    manifests: Path  # one ContextManifest per model call, ``<task_id>/<n>.json``


@dataclass(frozen=True)
class NodeJob:
    """Everything one attempt of one node needs, as plain data (picklable)."""

    run_id: str
    plan: Plan  # the run's plan cut to this node: the requirement and plan-wide commands
    record: TaskResult  # the node's journal record as the attempt starts (status running)
    base: str  # the commit the worktree starts from (the run branch's tip)
    model: str  # the model of its calls
    price: Price | None  # its prices (None: unpriced, tokens only)
    settings: RunSettings
    paths: NodePaths
    author: tuple[str, str]  # (name, email) of the commit's author: the user
    upstream: tuple[UpstreamSummary, ...] = ()  # its dependencies' results: never transcripts
    memory: tuple[MemoryFact, ...] = ()
    note: FailureNote | None = None  # why the attempt before failed (a retry)
    history: str = ""  # the clean-slate ablation only: earlier nodes' transcripts
    first_call: int = 0  # calls of earlier attempts: manifest numbers go on from here
    # The nodes the DAG leaves unordered with this one, with their scopes and recorded grants:
    # what a write request is judged against wherever the job runs (run/scope_grants.py).
    neighbours: Sequence[Neighbour] = ()  # scope_grants.Neighbours: computed when read
    # Its dependencies' commits on the run branch: an executor may start the node from an
    # earlier tip of the branch that holds them all (dask_executor.py: one already bundled)
    # instead of ``base``. None: from ``base`` only.
    needs: tuple[str, ...] | None = None

    @property
    def node(self) -> TaskNode:
        return self.plan.tasks[0]

    @property
    def task_id(self) -> str:
        return self.record.task_id

    @property
    def attempt(self) -> int:
        return self.record.attempts


@dataclass(frozen=True)
class NodeOutcome:
    """What one attempt came to; plain data like the job."""

    verdict: NodeVerdict  # "succeeded": committed and ready to land; else the record says why
    record: TaskResult  # the node's record after the attempt (not yet redacted or journaled)
    commit: str | None  # the attempt's commit (succeeded), in the repository's object store
    worker: WorkerResult | None = None  # the worker loop's result, if it ran
    changed: tuple[str, ...] = ()  # in-scope files the attempt changed (the audit kept them)
    manifests: tuple[Path, ...] = ()  # written under ``job.paths.manifests``
    logs: tuple[str, ...] = ()  # ``artifact://`` references written under ``job.paths.artifacts``
    test_runs: int = 0  # test logs it wrote (``tests-<attempt>-<n>.log``)
    # The commit ``commit`` was made on when the executor started the node from another tip
    # than ``job.base`` (``NodeJob.needs``); landing replays it from there.
    base: str | None = None


@dataclass(frozen=True)
class NodeEnv:
    """What a job uses live where it runs; never sent anywhere."""

    provider: Provider
    redactor: Redactor = field(default_factory=Redactor)
    stop: threading.Event = field(default_factory=threading.Event)
    counter: TokenCounter = field(default_factory=TokenCounter)
    run_budget: RunBudget | None = None
    # The test launcher's (point, task_id); the one part a remote executor sends along (on a
    # Dask worker it kills the worker process, as a crash mid-node would).
    crash: Callable[[str, str], None] | None = None
    # Live progress of a running attempt (local nodes only): the CLI's live view.
    on_live: Callable[[LiveStep], None] | None = None
    # The grants of this process's running nodes (run/scope_grants.py), shared by them all.
    grants: GrantLedger | None = None
    # ``--scope-requests ask``: asks the user on the run's terminal (None: no terminal here).
    ask_scope: Callable[[str, ScopeGrant], bool] | None = None
    # The run's worktrees, handed from node to node (git/worktree_pool.py); None: each attempt
    # makes its own and deletes it (a Dask worker's nodes).
    worktrees: WorktreePool | None = None
