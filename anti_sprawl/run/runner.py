"""``execute`` and ``resume``: the run branch and journal, the scheduler (the checks before
either writes anything are in run/preflight.py).

Each node's life is in ``node.py``. The journal is written after every state change; git
decides what is done: on resume, a node whose commit is on the run branch is never redone.

A run can stop early: Ctrl-C, SIGTERM or SIGHUP (``interrupts.py``), a journal write that
fails (disk full), or its branch checked out somewhere. Then no further node starts, the
journal is written one last time as ``interrupted`` with the unfinished nodes ``pending``, the
run's worktrees and temp branches are removed, and one line says how to resume. A process that
lets go of the lock writes nothing more: when nodes are still stuck in model calls after the
grace period (or at a second signal), they are abandoned, the journal is closed to them, and
the lock is held until the process exits (the kernel frees it), so a ``resume`` can never
overlap them. ``status`` never calls a run whose lock is free ``running`` (``liveness.py``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
from pathlib import Path

from .. import tracing
from ..context.essentials import check_first_prompts
from ..errors import ExecutorLost, Interrupted, RunError, StorageError
from ..git.branch import RunBranch, check_branch_name, refuse_checked_out
from ..git.cmd import run_git
from ..git.layout import StateLayout
from ..git.locks import clean_stale_locks
from ..git.workspace import ensure_excluded, remove_stale_worktrees
from ..hints import command
from ..plan.model import Plan
from ..redact import Redactor
from .ablations import ABLATIONS
from .branch_order import settle_order
from .integration import integrate
from .interrupts import Stops, stop_signals
from .journal import Journal, RepoLock, RunState, new_run_id
from .node import ExecuteOptions, NodeRunner
from .preflight import (
    base_branch_of,
    check_cost_cap,
    check_plan,
    check_repo,
    ready_sandbox,
    resolve_base,
)
from .replan import check_revision
from .result import TaskResult
from .revised_plan import revised_plan
from .scheduler import run_dag
from .settings import CRASH_POINTS, RunHooks, RunSettings
from .span_attributes import run_attributes

__all__ = [
    "ABLATIONS",
    "CRASH_POINTS",
    "ExecuteOptions",
    "RunHooks",
    "RunSettings",
    "execute",
    "resume",
]


def _recover(saved: Path, record: TaskResult, commit: str) -> TaskResult:
    """A node whose commit landed but whose journal entry was lost: rebuild its record."""
    try:
        recovered = TaskResult.model_validate_json(saved.read_text(encoding="utf-8"))
        recovered.recover(commit, recovered.message)
    except (OSError, ValueError):
        recovered = record.model_copy()
        recovered.recover(commit, "recovered from the run branch (details lost)")
    return recovered


def _reconcile(journal: Journal, branch: RunBranch) -> list[str]:
    """The journal brought in line with the run branch (git is the truth): a node whose commit
    landed is succeeded (its record rebuilt if a crash lost it), any other unfinished node is
    pending again. Returns the landed nodes, which never run again."""
    state = journal.state
    landed = branch.task_commits()
    already: list[str] = []
    for tid, record in state.tasks.items():
        if tid in landed:
            if record.status != "succeeded":
                saved = journal.paths.artifacts / tid / "result.json"
                state.tasks[tid] = _recover(saved, record, landed[tid])
            # A rebuilt branch (run/rebuild.py) gave the node a new commit.
            state.tasks[tid].commit = landed[tid]
            already.append(tid)
        elif record.status != "pending":
            record.interrupt(record.message)
    return already


def _finish(run: NodeRunner) -> RunState:
    state = run.journal.state
    statuses = {t.status for t in state.tasks.values()}
    if run.opts.stop.is_set() and statuses != {"succeeded"}:
        # Stopped: whatever did not land is left for `resume`, not reported as failed.
        state.status = "interrupted"
        why = f"interrupted: {state.stopped_by}" if state.stopped_by else "interrupted"
        for record in state.tasks.values():
            if record.status != "succeeded":
                record.interrupt(why)
    else:
        state.status = "succeeded" if statuses == {"succeeded"} else "failed"
    state.tokens = run.run_budget.spent
    state.cost_usd = run.run_budget.spent_cost
    try:
        run.journal.save()
    except StorageError as exc:  # the previous journal stays; resume reconciles with git
        run.stop_run(exc)
    run.journal.close()  # from here on, a straggling node thread writes nothing
    finished = state.status not in ("interrupted", "running") and run.stop_error is None
    if finished and run.opts.hooks.on_finish:  # the views write PR.md, while the lock is held
        run.opts.hooks.on_finish(state, run.journal.paths)
    return state


# Locks of runs that abandoned node threads: held until the process exits, never released.
_HELD_UNTIL_EXIT: list[RepoLock] = []


def _drive(run: NodeRunner, lock: RepoLock, already: list[str]) -> RunState:
    state = run.journal.state
    with tracing.workflow(state.plan_id, run_attributes(state)) as span:
        span.set({"anti_sprawl.status": _drive_dag(run, lock, already).status})
    return run.journal.state


def _drive_dag(run: NodeRunner, lock: RepoLock, already: list[str]) -> RunState:
    plan = run.plan
    deps = {t.task_id: list(t.dependencies) for t in plan.tasks}
    if run.opts.hooks.on_start:
        run.opts.hooks.on_start(run.journal.state)
    hint = f"to finish the run: {command('resume', run.journal.state.run_id, repo=run.repo)}"
    try:
        with stop_signals(run.opts.stop) as stops:
            try:
                run_dag(
                    deps,
                    run.run_node,
                    jobs=run.settings.jobs,
                    already_succeeded=already,
                    order=[t.task_id for t in plan.tasks],
                    on_skip=run.skip,
                    stop=run.opts.stop,
                    land=run.land,
                    grace=run.settings.stop_grace,
                )
                integrate(run)  # the branch tip as a whole; bisects and retries on failure
            finally:
                _wind_up(run, lock, stops)
    except KeyboardInterrupt:  # a second signal: the journal is written, nothing waited for
        raise _interrupted(stops, hint) from None
    if run.stop_error is not None:
        error = run.stop_error
        if isinstance(error, ExecutorLost):  # the recorded cluster is gone: finish here
            run_id = run.journal.state.run_id
            again = command("resume", run_id, "--executor", "local", repo=run.repo)
            hint = f"to finish the run: {again} (or --dask-scheduler with a running one)"
        raise type(error)(f"{error}; {hint}") from error
    if stops.pressed and run.journal.state.status != "succeeded":
        raise _interrupted(stops, hint)
    return run.journal.state


def _interrupted(stops: Stops, hint: str) -> Interrupted:
    """The one line (and exit code, 128 + the signal) of a run a stop signal ended."""
    by = "" if stops.name == "Ctrl-C" else f" by {stops.name}"
    return Interrupted(f"interrupted{by}: {hint}", exit_code=stops.exit_code)


def _wind_up(run: NodeRunner, lock: RepoLock, stops: Stops) -> None:
    """Put the branch's commits in the plan's order, write the journal one last time, clean
    up, then let go of the run.

    With node threads still running (abandoned after a stop: stuck in a model call, or left
    by a second signal), the journal is closed to them first and nothing of theirs lands, so
    their worktrees are removed all the same; the lock is kept until the process exits, so
    nothing they still do can overlap a ``resume``.
    """
    abandoned = run.active_nodes > 0
    if stops.pressed and stops.name != "Ctrl-C" and run.journal.state.stopped_by is None:
        run.journal.state.stopped_by = f"{stops.name} received"
    if abandoned:
        _HELD_UNTIL_EXIT.append(lock)
    try:
        if not abandoned:  # the branch as the user gets it: in the plan's fixed order
            settle_order(run)
        _finish(run)
        if run.env.worktrees is not None:
            run.env.worktrees.close()  # the idle ones; a running node's goes when it ends
        # Leftovers (a failed removal) are removed by the next resume, before anything runs.
        with contextlib.suppress(RunError, OSError):
            remove_stale_worktrees(run.repo, run.worktrees, run.journal.state.run_id)
    finally:
        if not abandoned:
            lock.release()


def execute(plan: Plan, repo: Path, opts: ExecuteOptions) -> RunState:
    """Run ``plan`` against ``repo``; returns the final run state (see ``state.status``)."""
    repo = check_repo(repo)
    check_plan(plan, repo)
    settings = opts.settings
    check_cost_cap(plan, opts, settings.max_cost)
    base_ref = settings.base or "HEAD"
    base = resolve_base(repo, base_ref)
    check_first_prompts(plan, repo, base)  # before any node spends a token
    sandbox = ready_sandbox(settings.sandbox)
    base_branch = base_branch_of(repo, base_ref)
    branch_name = settings.branch or f"anti-sprawl/{plan.plan_id}"
    check_branch_name(repo, branch_name)
    refuse_checked_out(repo, branch_name, "pass --branch NAME")
    # Before anything is written: the state directory must be ours, not repository content.
    layout = StateLayout.ensured(repo)
    run_id = new_run_id(plan.plan_id)
    lock = RepoLock(repo)
    lock.acquire(run_id)
    try:
        ensure_excluded(repo)
        branch = RunBranch(repo, branch_name, run_id)
        created = not branch.exists()
        branch.create(base)
        # The journal's copy of the plan is read by every view and by pr (PR.md, run.json):
        # a secret a planner or a plan file carried in a name or goal is redacted once, here.
        plan = opts.redactor.model(plan)
        state = RunState(
            run_id=run_id,
            plan_id=plan.plan_id,
            repo=str(repo),
            base=base,
            base_branch=base_branch,
            branch=branch.name,
            jobs=settings.jobs,
            sparse=settings.sparse,
            provider=opts.provider.name,
            model=opts.provider.model,
            sandbox=sandbox.policy,
            plan=plan,
            max_tokens=settings.max_tokens,
            max_cost=settings.max_cost,
            prices=settings.prices.described,
            launch=dict(settings.launch),
            tasks={
                t.task_id: TaskResult(
                    task_id=t.task_id,
                    name=t.name,
                    token_budget=t.token_budget,
                    max_tool_calls=t.max_tool_calls,
                    max_attempts=plan.attempts_for(t),
                    model=plan.model_for(t, opts.settings.model) or opts.provider.model,
                )
                for t in plan.tasks
            },
        )
        journal = Journal(layout.run(run_id), state)
        try:
            journal.save()
        except StorageError as exc:
            # Nothing ran: leave nothing behind, so the same execute works once there is room.
            shutil.rmtree(journal.paths.root, ignore_errors=True)
            if created:
                run_git(["update-ref", "-d", branch.ref, base], repo, check=False)
            raise StorageError(f"{exc}; nothing was started") from exc
    except BaseException:
        lock.release()
        raise
    return _drive(NodeRunner(repo, journal, branch, opts), lock, [])


def resume(
    run_id: str, repo: Path, opts: ExecuteOptions, plan: Plan | None = None, source: str = ""
) -> RunState:
    """Continue an interrupted or failed run: git first, then only what is left.

    With ``plan`` (``resume --plan``), the run goes on with that plan: nodes already on the
    run branch must keep their id, scopes and dependencies (UsageError naming the node),
    the others take the new budgets, goals and scopes. ``settings.max_tokens`` replaces the run's
    cap when given.
    """
    repo = check_repo(repo)
    layout = StateLayout.ensured(repo)
    journal = Journal.load(repo, run_id)
    refuse_checked_out(
        repo, journal.state.branch, "check out another branch there, then resume again"
    )
    if plan is not None:
        check_plan(plan, repo)
    sandbox = ready_sandbox(opts.settings.sandbox)
    lock = RepoLock(repo)
    lock.acquire(run_id)
    try:
        clean_stale_locks(repo)
        state = journal.state
        branch = RunBranch(repo, state.branch, run_id)
        if not branch.exists():
            branch.create(state.base)
        remove_stale_worktrees(repo, layout.worktrees, run_id)
        already = _reconcile(journal, branch)
        if plan is not None:
            _revise(state, plan, already, source or "the new plan", opts.redactor)
        if opts.settings.max_tokens is not None:
            state.max_tokens = opts.settings.max_tokens
        if opts.settings.max_cost is not None:
            state.max_cost = opts.settings.max_cost
        check_cost_cap(state.plan, opts, state.max_cost)
        state.prices = opts.settings.prices.described
        state.status, state.stopped_by = "running", None
        state.sandbox = sandbox.policy
        if opts.settings.launch:
            state.launch = dict(opts.settings.launch)
        journal.save()
    except BaseException:
        lock.release()
        raise
    # The journal fills what the caller left unset; the caller's settings stay as they were.
    settings = dataclasses.replace(
        opts.settings,
        jobs=opts.settings.jobs or state.jobs,
        sparse=opts.settings.sparse or state.sparse,
    )
    resumed = dataclasses.replace(opts, settings=settings)
    return _drive(NodeRunner(repo, journal, branch, resumed), lock, already)


def _revise(
    state: RunState, plan: Plan, succeeded: list[str], source: str, redactor: Redactor
) -> None:
    """Put ``plan`` in the journal in place of the run's plan, if the edit is allowed."""
    grants = {t: r.scope_grants for t, r in state.tasks.items()}
    granted, _ = revised_plan(state.plan, grants)  # run/revised_plan.py: the plan it grew to
    revision = check_revision(state.plan, plan, succeeded, source, granted)
    state.revisions.append(revision)
    state.plan = redactor.model(plan)
    plan = state.plan
    tasks: dict[str, TaskResult] = {}
    for node in plan.tasks:
        record = state.tasks.get(node.task_id) or TaskResult(task_id=node.task_id)
        if node.task_id not in succeeded:
            record.name, record.token_budget = node.name, node.token_budget
            record.max_tool_calls = node.max_tool_calls
        tasks[node.task_id] = record
    state.tasks = tasks
