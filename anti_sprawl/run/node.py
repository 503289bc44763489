"""The central side of a node's life: its attempts, its journal record, landing on the run branch.

A node has up to ``max_attempts`` attempts (the plan's default is 2). Each attempt is a
``NodeJob`` (node_job.py: a fresh worktree at the run branch's tip,
firewall, clean-slate prompt, worker, audit, final tests, secret scan, one commit), run by
``run_job``: ``run_node_job`` in the scheduler's thread for this process, or whatever an
executor supplies. What comes back is turned into the node's journal record here, and a
committed node is landed on the run branch as soon as it finishes (its dependencies landed
before it started; run/branch_order.py puts the branch in the plan's fixed order before the
integration check and at the end of the run). An attempt that fails for
a reason another could fix (``failure_note.RETRY_REASONS``) is followed by a fresh one at the
same base, with the same clean-slate prompt plus a typed failure note, never the failed
attempt's transcript; the journal records every attempt, and one commit lands whatever the
attempt. Every status change goes
through the record's transitions (``TaskResult.start``/``fail``/``skip``/``interrupt``/``land``;
lifecycle.py draws them).

``NodeRunner`` holds what the nodes of one run share (journal, branch, settings, hooks,
artifacts, memory, the run budget) and is what the scheduler calls for each ready node.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .. import tracing
from ..agent.artifacts import ArtifactStore
from ..agent.budget import RunBudget
from ..context.memory import load_memory
from ..errors import AntiSprawlError, ExecutorLost, RunError, at_boundary
from ..git.branch import BranchCheckedOut, LandingConflict, RunBranch
from ..git.cmd import user_identity
from ..git.layout import StateLayout
from ..git.worktree_pool import WorktreePool
from ..lifecycle import NodeVerdict
from ..plan.graph import Ordering, dependency_edges
from ..plan.model import TaskNode
from ..providers.base import Provider, Usage
from ..redact import Redactor
from ..tokens import TokenCounter
from .attempts import Attempted, log_attempt
from .failure_note import INTERRUPTING_REASONS, FailureNote
from .journal import Journal
from .node_job import NodeEnv, NodeJob, NodeOutcome, NodePaths
from .node_work import record_failure, run_node_job
from .result import TaskResult, now, upstream_summary
from .revised_plan import write_revised_plan
from .scope_grants import GrantLedger, Neighbours
from .settings import RunHooks, RunSettings
from .span_attributes import attempt_ended, attempt_started

__all__ = ["ExecuteOptions", "NodeRunner"]


@dataclass(frozen=True)
class ExecuteOptions:
    """Everything one execute/resume is given: the provider, frozen settings, the caller's
    hooks, the redactor (this process's secret values), the stop event (Ctrl-C, a cap or a full
    disk set it) and ``run_job``, which runs one attempt of a node: ``run_node_job`` in the
    calling thread (the scheduler gives each running node its own), or an executor's."""

    provider: Provider
    settings: RunSettings = field(default_factory=RunSettings)
    hooks: RunHooks = field(default_factory=RunHooks)
    redactor: Redactor = field(default_factory=Redactor)
    stop: threading.Event = field(default_factory=threading.Event)
    run_job: Callable[[NodeJob, NodeEnv], NodeOutcome] = run_node_job


class NodeRunner:
    """The shared state of one execute/resume while nodes run."""

    def __init__(self, repo: Path, journal: Journal, branch: RunBranch, opts: ExecuteOptions):
        self.repo = repo
        self.journal = journal
        self.branch = branch
        self.opts = opts
        self.settings = opts.settings
        self.plan = journal.state.plan
        layout = StateLayout.checked(repo)
        self.paths = NodePaths(
            repo=repo,
            worktrees=layout.worktrees,
            artifacts=journal.paths.artifacts,
            manifests=journal.paths.manifests,
        )
        self.worktrees = layout.worktrees
        self.artifacts = ArtifactStore(journal.paths.artifacts)
        self.memory = load_memory(layout.memory)
        self.author = user_identity(repo)  # commits are the user's; trailers name the tool
        self._committed: dict[str, str] = {}  # task -> its commit, waiting to land
        self._bases: dict[str, str] = {}  # task -> the commit its landing commit was made on
        # Why the run stopped early, when not by Ctrl-C (a full disk, a checked-out branch).
        self.stop_error: AntiSprawlError | None = None
        self._active = 0
        self._active_lock = threading.Lock()
        journal.on_write_error = self.stop_run
        self._tokens_lock = threading.Lock()
        state = journal.state
        self.run_budget = RunBudget(
            state.max_tokens,
            state.tokens,
            max_cost=state.max_cost,
            spent_cost=state.cost_usd,
            on_charge=self._charged,
            on_exhausted=self._exhausted,
        )
        # Until the first reported usage calibrates it, assume a real model's tokenizer counts
        # a quarter more than ours: budget checks stop early rather than overrun.
        exact = opts.provider.name == "scripted"
        self.env = NodeEnv(
            provider=opts.provider,
            redactor=opts.redactor,
            stop=opts.stop,
            counter=TokenCounter(ratio=1.0 if exact else 1.25),
            run_budget=self.run_budget,
            crash=opts.hooks.crash,
            on_live=opts.hooks.on_live,
            grants=GrantLedger(),
            ask_scope=opts.hooks.ask_scope,
            worktrees=WorktreePool(repo, layout.worktrees, state.run_id),
        )
        self._ordering: Ordering | None = None  # built once, for the first job that needs it
        # task -> its recorded scope grants, kept as records are journaled (``_emit``): a job
        # takes them without a pass over every task (issue 22: a cost that grew with the plan).
        self._granted = {t: r.scope_grants for t, r in state.tasks.items() if r.scope_grants}
        self._granted_lock = threading.Lock()  # node threads journal while others take a copy
        self._nodes = {node.task_id: node for node in self.plan.tasks}

    def _charged(self, spent: Usage) -> None:
        """After every model call: the run's totals are on disk before the next one."""
        with self._tokens_lock:
            self.journal.state.tokens = self.run_budget.spent
            self.journal.state.cost_usd = self.run_budget.spent_cost
            self.journal.checkpoint()

    def model_of(self, node: TaskNode) -> str:
        """The model of ``node``'s calls: its own, --model, the plan's default, the provider's."""
        return self.plan.model_for(node, self.settings.model) or self.opts.provider.model

    def _exhausted(self, why: str) -> None:
        """The run cap refused a call: start nothing more; the run ends interrupted."""
        self.journal.state.stopped_by = why
        self.opts.stop.set()

    def stop_run(self, error: AntiSprawlError) -> None:
        """Stop handing out nodes (running ones wind down); the first reason is reported."""
        if self.stop_error is None:
            self.stop_error = error
        self.opts.stop.set()

    def _crash(self, point: str, task_id: str) -> None:
        if self.opts.hooks.crash is not None:
            self.opts.hooks.crash(point, task_id)

    def _emit(self, record: TaskResult) -> None:
        """Journal ``record`` as the node's and report it (``on_event``)."""
        if self.journal.closed:
            return  # the run is over: an abandoned node thread neither writes nor reports
        # Every way out (run.json, result.json, PR.md, the verdict, --json, downstream
        # prompts) reads this record: redact it in place, once, before anything sees it.
        clean = self.opts.redactor.model(record)
        for name in type(record).model_fields:
            setattr(record, name, getattr(clean, name))
        self.journal.update(record)
        with self._granted_lock:
            if record.scope_grants:
                self._granted[record.task_id] = list(record.scope_grants)
            else:
                self._granted.pop(record.task_id, None)
        if self.opts.hooks.on_event:
            self.opts.hooks.on_event(record)

    def report(self, record: TaskResult) -> None:
        """Journal and report a record changed after its attempts (run/integration.py)."""
        self._emit(record)

    def skip(self, task_id: str, because: str) -> None:
        record = self.journal.state.tasks[task_id]
        record.skip(because)
        self._emit(record)

    @property
    def active_nodes(self) -> int:
        """Node threads inside ``run_node`` right now (after a stop: ones stuck in a call)."""
        with self._active_lock:
            return self._active

    def run_node(self, task_id: str) -> NodeVerdict:
        # Counted before the stop check: once the run sees no active node after a stop, any
        # thread that enters later sees the stop and returns without touching anything.
        with self._active_lock:
            self._active += 1
        try:
            if self.opts.stop.is_set():
                return "failed"  # handed out just before a stop: never started, stays pending
            return self._attempts(self._nodes[task_id])
        finally:
            with self._active_lock:
                self._active -= 1

    def _attempts(self, node: TaskNode) -> NodeVerdict:
        """Run ``node``'s attempts until one succeeds, one fails for good, or they run out."""
        record = self.journal.state.tasks[node.task_id]
        record.max_attempts = self.plan.attempts_for(node)
        if record.counted >= record.max_attempts:
            # resume of a node that used its attempts: a fresh allowance (the views say so)
            record.earlier_attempts += record.counted
            record.counted = 0
        # A resumed node starts from the note its last failed attempt left, if any.
        note = _last_note(record)
        base: str | None = None  # every attempt of this session starts from the same commit
        first = True
        while self.journal.state.tasks[node.task_id].counted < record.max_attempts:
            if not first:
                self._crash("between_attempts", node.task_id)
            first = False
            started = attempt_started(node, record, self.journal.state.run_id, self.model_of(node))
            with tracing.agent(node.task_id, started) as span:
                verdict, base = self._attempt(node, base, note)
                span.set(attempt_ended(self.journal.state.tasks[node.task_id]))
            done = self.journal.state.tasks[node.task_id]
            last = done.attempt_log[-1] if done.attempt_log else None  # none: a lost executor
            note = last.note if last is not None else None
            if verdict == "succeeded" or last is None or last.outcome != "failed" or note is None:
                return verdict
            if self.opts.stop.is_set():
                return verdict
        return "failed"

    def _attempt(
        self, node: TaskNode, base: str | None, note: FailureNote | None
    ) -> tuple[NodeVerdict, str | None]:
        """One attempt of ``node``: start its record, run its job, journal what came back."""
        record = self.journal.state.tasks[node.task_id]
        record.start(self.model_of(node))
        earlier, record.violations = record.violations, []
        self._emit(record)
        try:
            base = base or self.branch.tip()
            outcome = self.opts.run_job(self._job(node, record, base, note), self.env)
        except ExecutorLost as exc:  # not this node's doing: the run stops, the node waits
            self.stop_run(exc)
            record.interrupt(str(exc))
            return "failed", base
        except Exception as exc:  # building the job failed (git), or an executor did
            failed = record.model_copy(deep=True)
            record_failure(failed, exc, self.artifacts)
            outcome = NodeOutcome(verdict="failed", record=failed, commit=None)
        result = outcome.record
        result.finished_at = now()
        result.violations = [*earlier, *result.violations]
        interrupted = outcome.verdict == "failed" and result.reason in INTERRUPTING_REASONS
        if not interrupted:
            result.counted += 1
        log_attempt(
            result,
            "interrupted" if interrupted else outcome.verdict,
            Attempted(worker=outcome.worker, changed=list(outcome.changed)),
            priced=self.settings.prices.price_for(result.model) is not None,
            redact_note=self.opts.redactor.model,
        )
        if outcome.verdict == "succeeded" and outcome.commit is not None:
            # The commit outlives the worktree; `land` puts it on the run branch.
            self._committed[node.task_id] = outcome.commit
            made_on = outcome.base or base
            if made_on is not None:
                self._bases[node.task_id] = made_on
        if interrupted:  # not the node's failure: it is left for resume, its attempt unused
            result.interrupt(f"interrupted: {result.message}")
        self._emit(result)
        if result.scope_grants:
            state = self.journal.state
            grants = {t: r.scope_grants for t, r in state.tasks.items()}
            write_revised_plan(self.journal.paths.revised_plan, self.plan, state.run_id, grants)
        return outcome.verdict, base

    def _job(
        self, node: TaskNode, record: TaskResult, base: str, note: FailureNote | None
    ) -> NodeJob:
        """The attempt as plain data: the node's slice of the plan, its base and inputs."""
        tasks = self.journal.state.tasks
        return NodeJob(
            run_id=self.journal.state.run_id,
            plan=self.plan.model_copy(update={"tasks": [node]}),
            record=record.model_copy(deep=True),
            base=base,
            model=record.model,
            price=self.settings.prices.price_for(record.model),
            settings=self.settings,
            paths=self.paths,
            author=self.author,
            upstream=tuple(
                upstream_summary(tasks[d], self.plan.task(d)) for d in node.dependencies
            ),
            memory=tuple(self.memory),
            note=note,
            history=self._foreign_transcripts(node.task_id),
            # Call indexes go on across attempts, so a retry never overwrites a manifest.
            first_call=sum(a.calls for a in record.attempt_log),
            neighbours=self._neighbours(node.task_id),
            needs=self._needs(node),
        )

    def _needs(self, node: TaskNode) -> tuple[str, ...] | None:
        """The commits of ``node``'s dependencies on the branch; None if one is not known."""
        tasks = self.journal.state.tasks
        commits = tuple(tasks[d].commit or "" for d in node.dependencies)
        return None if not all(commits) else commits

    def _neighbours(self, task_id: str) -> Neighbours:
        """The nodes unordered with ``task_id``, their scopes and grants recorded so far
        (computed only if a write request needs them: scope_grants.py)."""
        if self._ordering is None:
            self._ordering = Ordering(dependency_edges(self.plan))
        with self._granted_lock:
            return Neighbours(self.plan, task_id, self._granted, self._ordering)

    def _foreign_transcripts(self, task_id: str) -> str:
        """The clean-slate ablation only: the polluted context a shared chat history would give
        this worker (every finished node's transcript); "" otherwise."""
        if not self.settings.ablations.clean_slate:
            return ""
        texts = []
        for other, record in self.journal.state.tasks.items():
            if other != task_id and record.transcript and record.status in ("succeeded", "failed"):
                path = self.artifacts.path(record.transcript)
                if path.exists():
                    texts.append(f"## transcript of {other}\n{path.read_text(encoding='utf-8')}")
        return "Earlier work in this session:\n" + "\n\n".join(texts) + "\n\n" if texts else ""

    def land(self, task_id: str) -> NodeVerdict:
        """Replay the node's commit onto the run branch (called by the scheduler's thread,
        one node at a time, as each finishes)."""
        record = self.journal.state.tasks[task_id]
        sha = self._committed.pop(task_id)
        # Kept beside the commit so a crash between landing and the journal loses nothing.
        landed = record.model_copy(deep=True)
        landed.land(sha)
        try:
            self.artifacts.put(
                task_id, "result.json", self.opts.redactor.model(landed).model_dump_json(indent=1)
            )
        except OSError as exc:
            record.fail("storage", f"not landed: cannot keep its result ({at_boundary(exc)})")
            self._emit(record)
            return "failed"
        try:
            commit = self.branch.land(sha, task_id, self._bases.pop(task_id, None))
        except BranchCheckedOut as exc:
            # Not this node's fault: the run stops; the node is left for `resume` to redo.
            self.stop_run(exc)
            record.interrupt(str(exc))
            return "failed"
        except LandingConflict as exc:
            record.fail("landing", str(exc))
            self._emit(record)
            return "failed"
        except RunError as exc:
            # git itself failed (not a conflict): the work is fine, so the run stops and the
            # node is left for `resume`, instead of failing it and skipping its dependents.
            self.stop_run(RunError(f"task {task_id} could not land: {exc}"))
            record.interrupt(f"not landed: {exc}")
            return "failed"
        record.land(commit)
        self._crash("after_commit_before_journal", task_id)
        self._emit(record)
        return "succeeded"


def _last_note(record: TaskResult) -> FailureNote | None:
    """The note of the node's last attempt that failed for good (interrupted ones leave none)."""
    for attempt in reversed(record.attempt_log):
        if attempt.outcome != "interrupted":
            return attempt.note
    return None
