"""The integration check in words: the lines "How it was tested" opens with (views/pr_body.py).

A reviewer wants the command, what it counted on the branch they are about to merge, and
what the same command said at the start commit (the baseline: failures already there are not
the run's), then, if bisection blamed a node, which one and what became of it. Everything from
the repository (test ids, commands) goes out through views/markdown.py, inert.
"""

from __future__ import annotations

import shlex

from ..run.integration_result import IntegrationOutcome
from .markdown import code, text

__all__ = ["integration_lines"]


def integration_lines(outcome: IntegrationOutcome | None) -> list[str]:
    """Markdown bullet lines for the PR body; none for a run from before the check existed."""
    if outcome is None:
        return []
    command = code(shlex.join(outcome.command)) if outcome.command else "-"
    if outcome.status == "skipped":
        return [f"- Integration on the final branch: not run ({text(outcome.reason)})."]
    last = outcome.last
    counted = f"{last.tests_passed:,} passed" if last and last.tests_passed is not None else ""
    known = (
        f", {last.known_failures} known failure(s) ignored" if last and last.known_failures else ""
    )
    verdict = "passed" if last and last.passed else "failed"
    where = f" at {code(last.commit[:12])}" if last else ""
    lines = [
        f"- Integration on the final branch{where}: {command}: **{verdict}**"
        + (f", {counted}" if counted else "")
        + known
    ]
    if outcome.baseline:
        lines.append(f"- Baseline: {text(outcome.baseline)}")
    if outcome.culprits:
        named = ", ".join(code(c) for c in dict.fromkeys(outcome.culprits))
        lines.append(
            f"- Bisection ({outcome.runs} run(s) of the command in all) found {named} breaking "
            "the integrated branch; it was taken off and retried"
            + (f": {text(outcome.reason)}" if outcome.status == "failed" else "")
        )
    elif outcome.status == "failed":
        lines.append(f"- {text(outcome.reason)}")
    return lines
