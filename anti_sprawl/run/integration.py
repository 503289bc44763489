"""The integrated branch, verified as a whole; the node that broke it found by bisection.

Every node is tested in its own worktree at its own base. Two nodes the DAG leaves unordered
can each pass there and still break each other (one starts using ``lib.util.helper`` while
the other renames it): the branch the user reviews was never tested. So after the last node
lands, and its commits are put in the plan's fixed order (run/branch_order.py: the blame
must not depend on which of two such nodes finished first), ``integrate`` runs the plan's
``integration_command`` (default: its ``test_command``) once on the run branch's tip, in a
fresh worktree under the run's sandbox, exactly as a baseline runs (run/baseline.py
``run_at``), and judges it against the start commit's baseline: tests that already failed
there do not count (run/test_failures.py).

When it fails, the node commits are bisected (run/bisect.py: ⌈log₂ N⌉ more runs) to the
first commit at which it fails. That node is ``revoke``d with the reason ``integration`` and
the failing output as its failure note (run/failure_note.py); its descendants go back to
pending; the branch is rebuilt without them (run/rebuild.py: one compare-and-swap); then the
culprit is retried with its note within its ``max_attempts`` and the run's caps, and the check
runs again. With no attempt left, the culprit stays failed (the run fails ``integration``),
its descendants are skipped, and the rebuilt branch is checked again: the branch kept is the
last one that passed. Git stays the record: the journal is written before the branch moves,
so a crash in between (``mid_rebuild``, ``after_rebuild``) resumes to the same place (run/
runner.py reconciles the journal with the branch's trailers; a culprit still on the branch
is recovered as landed, and the check finds it again).

A stop (Ctrl-C, a cap) is looked at between runs of the command, not during one.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import AntiSprawlError, RunError
from ..git.replay import NodeCommit, node_commits
from ..sandbox.user_env import user_command_env
from .baseline import baseline_for, run_at, shown
from .bisect import first_failing
from .branch_order import settle_order
from .failure_note import make_note
from .integration_result import IntegrationOutcome, IntegrationRun
from .rebuild import rebuild_without
from .scheduler import run_dag
from .test_failures import PYTEST_TESTS_FAILED, failing_tests, passed_count

if TYPE_CHECKING:
    from .node import NodeRunner

__all__ = ["integrate"]

_NAMED_FAILURES = 3


class _Checker:
    """The integration command at any commit of the run, each commit run once."""

    def __init__(self, run: NodeRunner, argv: list[str], runs: int):
        self.run, self.argv = run, argv
        self.settings = run.settings
        if self.settings.command_env is None:  # nodes ran on Dask workers: the check runs here
            here = user_command_env(os.environ, self.settings.sandbox.env_allow)
            self.settings = dataclasses.replace(self.settings, command_env=here)
        self.runs = runs  # over every session of the run: log names never repeat
        self.results: dict[str, IntegrationRun] = {}
        self.unusable = ""  # why the check cannot judge anything
        self.known, self.baseline = self._baseline()

    def _baseline(self) -> tuple[frozenset[str], str]:
        """The tests excused (failing at the start commit, or marked), and the baseline's words."""
        state, settings = self.run.journal.state, self.settings
        marked = frozenset(state.plan.known_failures)
        if settings.launch.get("no_baseline"):
            return marked, "not run (--no-baseline)"
        found = baseline_for(
            self.argv, state.plan, self.run.repo, state.base, settings, self.run.opts.redactor
        )
        where = f"'{shown(self.argv)}' at the start commit {state.base[:12]}"
        if found.status == "cannot_start":
            self.unusable = f"{where} cannot start: {found.reason}"
            return marked, self.unusable
        if found.status == "fails" and not found.failures:
            # Nothing to tell a node's failure from the start's: bisection would blame the first.
            self.unusable = f"{where} fails (exit code {found.exit_code}) and names no failing test"
            return marked, self.unusable
        if found.status == "passes":
            counted = passed_count(found.tail)
            return marked, f"{where}: {f'{counted:,} passed' if counted is not None else 'passes'}"
        return (
            frozenset(found.failures) | marked,
            f"{where}: fails with {len(found.failures)} failure(s), ignored on the branch",
        )

    def at(self, commit: str) -> IntegrationRun:
        if commit in self.results:
            return self.results[commit]
        run, state = self.run, self.run.journal.state
        self.runs += 1
        log = run.journal.paths.integration / f"{self.runs}-{commit[:12]}.log"
        done = run_at(
            self.argv,
            state.plan,
            run.repo,
            commit,
            self.settings,
            log,
            run.opts.redactor,
            f"{state.run_id}-integration-{self.runs}",
        )
        full = Path(done.log).read_text(encoding="utf-8", errors="replace") if done.log else ""
        failures = failing_tests(full) if done.exit_code != 0 else []
        new = [test for test in failures if test not in self.known]
        ran_tests = done.exit_code == PYTEST_TESTS_FAILED and bool(failures)
        self.results[commit] = result = IntegrationRun(
            commit=commit,
            passed=done.exit_code == 0 or (ran_tests and not new),
            exit_code=done.exit_code,
            tests_passed=passed_count(full),
            new_failures=new,
            known_failures=len(failures) - len(new),
            tail="\n".join(full.splitlines()[-40:]),
            log=done.log,
        )
        return result


def _stopped(run: NodeRunner) -> bool:
    return run.opts.stop.is_set() or run.stop_error is not None or run.journal.closed


def _crash(run: NodeRunner, point: str, task_id: str) -> None:
    """The test launcher's kill point (tests/crash_launcher.py); nothing otherwise."""
    if run.opts.hooks.crash is not None:
        run.opts.hooks.crash(point, task_id)


def _record(run: NodeRunner, outcome: IntegrationOutcome) -> None:
    run.journal.state.integration = run.opts.redactor.model(outcome)
    run.journal.checkpoint()


_NO_COMMAND = "the plan has no integration_command or test_command"


def _skip_reason(run: NodeRunner, argv: list[str] | None) -> str:
    if not argv:
        return _NO_COMMAND
    if not run.settings.integration:
        return "--no-integration"
    if run.settings.ablations.integration:
        return "the integration ablation"
    return ""


def integrate(run: NodeRunner) -> None:
    """Check the run branch's tip once every node has landed; bisect, rebuild and retry when
    it fails (see the module docstring). Problems of git or storage stop the run (resumable)."""
    state = run.journal.state
    argv = state.plan.integration_argv()
    why = _skip_reason(run, argv)
    if why or argv is None:
        _record(run, IntegrationOutcome(status="skipped", command=argv or [], reason=why))
        return
    try:
        _loop(run, argv)
    except AntiSprawlError as exc:
        run.stop_run(RunError(f"the integration check could not finish: {exc}"))


def _loop(run: NodeRunner, argv: list[str]) -> None:
    state = run.journal.state
    earlier = state.integration
    culprits = list(earlier.culprits) if earlier else []
    broke = dict(earlier.broke) if earlier else {}  # culprit -> the tests it broke
    checker: _Checker | None = None
    while not _stopped(run):
        if not culprits and any(r.status != "succeeded" for r in state.tasks.values()):
            reason = "not every node succeeded"
            _record(run, IntegrationOutcome(status="skipped", command=argv, reason=reason))
            return
        settle_order(run)  # bisection blames the same node whatever order nodes landed in
        tip = run.branch.tip()
        done = state.integration
        if done and done.last and done.last.passed and done.last.commit == tip:
            return  # this tip passed already (a resume of a finished run)
        if tip == state.base:
            if not culprits:
                reason = "no node landed"
                _record(run, IntegrationOutcome(status="skipped", command=argv, reason=reason))
            return
        if checker is None:
            checker = _Checker(run, argv, earlier.runs if earlier else 0)
            if checker.unusable:
                _record(
                    run, IntegrationOutcome(status="skipped", command=argv, reason=checker.unusable)
                )
                return
        result = checker.at(tip)
        outcome = _outcome(run, checker, result, culprits, broke)
        if result.passed:
            _record(run, outcome)
            return
        commits = node_commits(run.repo, state.base, tip, state.run_id)
        if not commits or any(not c.task_id for c in commits):
            outcome.reason = (
                f"{_failing(result)} on the branch tip, which holds a commit of no node"
            )
            _record(run, outcome)
            return
        index = _bisect(checker, commits)
        culprit = commits[index].task_id
        culprits.append(culprit)
        broke[culprit] = _failing(checker.at(commits[index].sha))
        _blame(run, checker, commits, index, _outcome(run, checker, result, culprits, broke))


def _bisect(checker: _Checker, commits: list[NodeCommit]) -> int:
    """The index of the first node commit at which the command fails (the tip does)."""
    return first_failing(len(commits), lambda i: not checker.at(commits[i].sha).passed)


def _failing(result: IntegrationRun) -> str:
    named = result.new_failures[:_NAMED_FAILURES]
    more = len(result.new_failures) - len(named)
    if not named:
        return f"exit code {result.exit_code}"
    return ", ".join(named) + (f" and {more} more" if more > 0 else "")


def _outcome(
    run: NodeRunner,
    checker: _Checker,
    result: IntegrationRun,
    culprits: list[str],
    broke: dict[str, str],
) -> IntegrationOutcome:
    """The outcome as it stands: passed only when no culprit is left failed for it."""
    state = run.journal.state
    given_up = [
        c
        for c in dict.fromkeys(culprits)
        if state.tasks[c].status == "failed" and state.tasks[c].reason == "integration"
    ]
    status = "passed" if result.passed and not given_up else "failed"
    reason = ""
    if given_up:
        named = "; ".join(
            f"{c} broke the integrated branch ({broke.get(c, '?')})" for c in given_up
        )
        reason = f"{named}, no attempt left"
        if result.passed:
            reason += f"; the branch kept ({result.commit[:12]}) is the last that passed"
    elif not result.passed:
        reason = f"{_failing(result)} on the branch tip {result.commit[:12]}"
    return IntegrationOutcome(
        status=status,
        command=checker.argv,
        reason=reason,
        last=result,
        runs=checker.runs,
        culprits=list(culprits),
        broke=dict(broke),
        baseline=checker.baseline,
    )


def _descendants(run: NodeRunner, task_id: str) -> list[str]:
    """Nodes that depend on ``task_id``, directly or not, in plan order."""
    plan = run.journal.state.plan
    found = {task_id}
    changed = True
    while changed:
        changed = False
        for node in plan.tasks:
            if node.task_id not in found and found.intersection(node.dependencies):
                found.add(node.task_id)
                changed = True
    return [t.task_id for t in plan.tasks if t.task_id in found and t.task_id != task_id]


def _blame(
    run: NodeRunner,
    checker: _Checker,
    commits: list[NodeCommit],
    index: int,
    outcome: IntegrationOutcome,
) -> None:
    """``commits[index]``'s node broke the branch: journal it, rebuild the branch without it
    and its descendants, then retry it (or, with no attempt left, skip its descendants)."""
    state = run.journal.state
    culprit = commits[index].task_id
    at = checker.at(commits[index].sha)
    landed = {c.task_id for c in commits}
    dropped = [culprit, *(d for d in _descendants(run, culprit) if d in landed)]
    record = state.tasks[culprit]
    message = (
        f"the integrated branch fails from this node's commit {commits[index].sha[:12]} on "
        f"(found by bisection, {checker.runs} run(s) of '{shown(checker.argv)}'): {_failing(at)}"
    )
    note = make_note(
        max(1, record.attempts),
        "integration",
        message,
        test_command=checker.argv,
        test_output=at.tail,
        files_changed=record.files_changed,
        summary=record.summary.summary if record.summary else "",
    )
    record.revoke("integration", message)
    if record.attempt_log:  # the attempt that landed is the one the check failed
        last = record.attempt_log[-1]
        last.outcome, last.reason, last.message = "failed", "integration", message
        last.note = run.opts.redactor.model(note)
    run.report(record)
    for task_id in dropped[1:]:  # not their fault: they run again with a fresh allowance
        again = state.tasks[task_id]
        again.interrupt(f"{culprit} broke the integrated branch: run again")
        again.earlier_attempts, again.counted = again.earlier_attempts + again.counted, 0
        run.report(again)
    outcome.reason = f"{culprit} broke the integrated branch: {_failing(at)}"
    if record.counted >= record.max_attempts:
        outcome.reason += "; no attempt left"
    _record(run, outcome)
    run.journal.save()  # the journal first: a crash before the branch moves finds it again
    _crash(run, "mid_rebuild", culprit)
    kept = rebuild_without(run.branch, state.base, commits, dropped)
    _crash(run, "after_rebuild", culprit)
    for task_id, sha in kept.items():
        if state.tasks[task_id].commit != sha:
            state.tasks[task_id].commit = sha
            run.report(state.tasks[task_id])
    if record.counted < record.max_attempts:
        _run_again(run, dropped)
    else:
        for task_id in dropped[1:]:
            run.skip(task_id, culprit)


def _run_again(run: NodeRunner, tasks: list[str]) -> None:
    """The culprit and its descendants through the scheduler again, on the rebuilt branch."""
    plan = run.journal.state.plan
    chosen = set(tasks)
    deps = {t: [d for d in plan.task(t).dependencies if d in chosen] for t in tasks}
    run_dag(
        deps,
        run.run_node,
        jobs=run.settings.jobs,
        order=[t.task_id for t in plan.tasks if t.task_id in chosen],
        on_skip=run.skip,
        stop=run.opts.stop,
        land=run.land,
        grace=run.settings.stop_grace,
    )
