"""What the journal keeps of the integration check (run/integration.py), and its one line.

Every node is tested in its own worktree at its own base; the integration check runs the
plan's ``integration_command`` once on the branch the user reviews. Its outcome is part of
``RunState`` (run/journal.py), so the verdict, ``--json`` and the PR body (views/pr_body.py)
all say the same thing: "integration: 1,297 passed on the branch tip".
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

__all__ = ["IntegrationOutcome", "IntegrationRun"]

IntegrationStatus = Literal["passed", "failed", "skipped"]


class IntegrationRun(BaseModel):
    """One run of the integration command at one commit, judged against the baseline."""

    commit: str
    passed: bool
    exit_code: int | None = None
    tests_passed: int | None = Field(default=None, description="pytest's 'N passed', if shown.")
    new_failures: list[str] = Field(
        default_factory=list, description="Failing tests that do not fail at the start commit."
    )
    known_failures: int = Field(default=0, description="Failing tests the baseline excuses.")
    tail: str = ""
    log: str = ""


class IntegrationOutcome(BaseModel):
    """The integration check of a run: skipped (and why), passed on a commit, or failed."""

    status: IntegrationStatus
    command: list[str] = Field(default_factory=list)
    reason: str = Field(default="", description="Why it was skipped, or what it blamed.")
    last: IntegrationRun | None = Field(default=None, description="The check of the final tip.")
    runs: int = Field(default=0, description="Runs of the command, bisection's included.")
    culprits: list[str] = Field(
        default_factory=list, description="Nodes bisection found breaking the branch, in order."
    )
    broke: dict[str, str] = Field(
        default_factory=dict, description="Per culprit: the tests that failed from its commit on."
    )
    baseline: str = Field(default="", description="The start commit's outcome, in a few words.")

    @property
    def has_command(self) -> bool:
        """Whether there was anything to run (a plan without any test command has not)."""
        return bool(self.command)

    def line(self) -> str:
        """``integration: 1,297 passed on the branch tip`` (or why not)."""
        if self.status == "skipped":
            return f"integration: not run ({self.reason})"
        last = self.last
        counted = f"{last.tests_passed:,} passed" if last and last.tests_passed is not None else ""
        if self.status == "passed":
            where = f"on the branch tip {last.commit[:12]}" if last else "on the branch tip"
            known = (
                f", {last.known_failures} known failure(s) ignored"
                if last and last.known_failures
                else ""
            )
            return f"integration: {counted or 'passed'} {where}{known}"
        return f"integration: failed: {self.reason}"
