"""A node's commands in its worktree: the plan's setup command and the node's test runner.

Both run sandboxed (sandbox/sandbox.py) with the job's policy, timeout and environment,
``{checkout}`` bound to the user's checkout read-only (sandbox/command_template.py); their
output goes, redacted, to the job's artifacts: ``setup-<attempt>.log`` and ``tests-<attempt>-<n>.log``:
attempt numbers never repeat (interrupted attempts and resumed sessions included), so no log of
an earlier attempt is ever overwritten.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from ..agent.artifacts import ArtifactStore
from ..agent.worker import TestOutcome
from ..errors import RunError
from ..fs.path_rules import Violation
from ..git.workspace import Workspace
from ..plan.model import command_argv
from ..sandbox.command_template import bind_command
from ..sandbox.sandbox import run_command
from .baseline import command_key
from .node_job import NodeJob
from .result import TaskResult
from .setup_step import failure_message, run_setup
from .test_failures import failing_tests, only_known_failures

__all__ = ["TestRunner", "run_setup_command"]


def run_setup_command(
    job: NodeJob,
    ws: Workspace,
    record: TaskResult,
    artifacts: ArtifactStore,
    redact: Callable[[str], str],
) -> list[Violation] | None:
    """The plan's setup_command in the fresh worktree (run/setup_step.py): the violations it
    caused, or None when it failed (``record`` then says why; no model call is made)."""
    argv = command_argv(job.plan.setup_command)
    if not argv:
        return []
    log = artifacts.root / job.task_id / f"setup-{job.attempt}.log"
    try:
        done = run_setup(
            ws,
            argv,
            checkout=job.paths.repo,
            policy=job.settings.sandbox,
            timeout=job.settings.test_timeout,
            log=log,
            env=job.settings.command_env,
            redact=redact,
        )
    except RunError as exc:
        record.fail("setup", str(exc))
        return None
    artifacts.ref(job.task_id, log.name)
    record.setup = done.outcome
    if not done.outcome.passed:
        record.violations = done.violations
        record.fail("setup", failure_message(done.outcome))
        return None
    return done.violations


class TestRunner:
    """The node's test command in its worktree; the worker may append arguments."""

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        job: NodeJob,
        ws: Workspace,
        argv: list[str],
        artifacts: ArtifactStore,
        redact: Callable[[str], str],
    ):
        self.job, self.ws, self.artifacts, self.redact = job, ws, artifacts, redact
        self.template = list(argv)
        self.bound = bind_command(argv, job.paths.repo, ws.path)
        self.runs = 0  # logs numbered so far in this attempt

    def __call__(self, extra: Sequence[str] = ()) -> TestOutcome:
        """The test command, plus the worker's extra arguments (the final check has none).

        Arguments that spell the test command itself are dropped: the whole command runs
        (recorded, make real-model 2026-12-04 run c, call 9: ``run_tests`` with ``args:
        ["python -m pytest -q"]``, which ran ``python -m pytest -q python -m pytest -q``)."""
        job, bound = self.job, self.bound
        words = [word for arg in extra for word in arg.split()]
        restated = bool(extra) and words in (self.template, bound.argv)
        if restated:
            extra = ()
        command = [*bound.argv, *extra]
        self.runs += 1
        log = self.artifacts.root / job.task_id / f"tests-{job.attempt}-{self.runs}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        res = run_command(
            command,
            self.ws.path,
            timeout=job.settings.test_timeout,
            readable=bound.readable,
            unscanned=bound.unscanned,
            policy=job.settings.sandbox,
            log_path=log,
            env=job.settings.command_env,
            redact=self.redact,
        )
        self.artifacts.ref(job.task_id, log.name)
        return TestOutcome(
            command=command,
            exit_code=res.exit_code,
            timed_out=res.timed_out,
            limit=res.limit_detail,
            tail="\n".join(res.output.splitlines()[-40:]),
            log=str(log),
            layer=res.layer,
            known_failures=self._only_known(res.exit_code, log, res.output),
            restated=restated,
        )

    def _only_known(self, exit_code: int | None, log: Path, output: str) -> list[str]:
        """The failing tests, when every one of them also fails at the start commit (or the
        plan marks it): the node did not cause them (run/baseline.py). Else []."""
        known = self.job.settings.known_failures.get(command_key(self.template), frozenset())
        known = known | frozenset(self.job.plan.known_failures)
        full = log.read_text(encoding="utf-8", errors="replace") if log.is_file() else output
        return failing_tests(full) if only_known_failures(exit_code, full, known) else []
