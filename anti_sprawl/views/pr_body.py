"""The pull request a reviewer merges: what changed and how it was tested first, bookkeeping
folded away; every text from a model, a plan or a repository made inert (views/markdown.py) and
the whole body passed through the run's redactor, like the commits.

Layout: a title from the requirement; the requirement; a partial-run note (the PR then opens as
a draft); "How it was tested" (the integration command on the final branch with its pass
counts and the start commit's baseline, views/integration.py; each node's test command, its
result and pass counts); a compact
nodes table; the scope requests, if any (views/scope_grants.py); each node's summary, marked as the worker's claim, with its interfaces and blocked
writes; then a ``<details>`` block with tokens, dollars, cache shares, attempts, the sandbox and
the DAG.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from ..fs.files import atomic_write_text
from ..plan.intent_checks import goal_files
from ..plan.model import TaskNode
from ..providers.prices import format_usd
from ..redact import Redactor
from ..run.commit_text import unclaimed_text
from ..run.journal import RunState
from ..run.result import TaskResult
from .integration import integration_lines
from .markdown import block, code, fence_for, text
from .plan import plan_mermaid
from .run import status_of, totals_line, verdict_words
from .scope_grants import scope_section

__all__ = ["TITLE_MAX", "pr_body", "pr_title", "write_pr_body"]

TITLE_MAX = 72
FILES_SHOWN = 6
_COUNTS = re.compile(r"\b(\d+) (passed|failed|errors?|skipped)\b")


def pr_title(requirement: str, fallback: str) -> str:
    """The requirement's first non-empty line, cut at a word boundary to fit 72 characters."""
    line = " ".join(next((ln for ln in requirement.splitlines() if ln.strip()), fallback).split())
    if len(line) <= TITLE_MAX:
        return line
    head = line[: TITLE_MAX - 1]
    cut = head.rfind(" ")
    # A single 40+ character "word" (a URL, a path) is cut where it must be.
    head = head[:cut] if cut >= TITLE_MAX // 2 else head
    return head.rstrip(" ,;:-") + "…"


def _tests(r: TaskResult) -> str:
    if r.tests is None:
        return "-"
    if r.tests.passed:
        return "passed"
    return "timed out" if r.tests.timed_out else f"failed (exit {r.tests.exit_code})"


def _counts(r: TaskResult) -> str:
    """Pass counts a test runner printed in its last lines (pytest's ``3 passed, 1 failed``)."""
    found = _COUNTS.findall(r.tests.tail if r.tests else "")
    return ", ".join(f"{n} {word}" for n, word in found[-3:])


def _partial(state: RunState) -> list[str]:
    if state.status == "succeeded":
        return []
    lines = [
        f"> **Partial run ({text(state.status)})**: not every node succeeded; this branch holds "
        "only the nodes that did.",
    ]
    for task in state.plan.tasks:
        r = state.tasks[task.task_id]
        if r.status == "failed":
            lines.append(f"> - failed: {code(r.task_id)} ({text(f'{r.reason}: {r.message}')})")
        elif r.status == "skipped":
            because = code(r.skipped_because or "")
            lines.append(f"> - skipped: {code(r.task_id)} (because {because} failed)")
        elif r.status != "succeeded":
            lines.append(f"> - not run: {code(r.task_id)} ({status_of(r)})")
    return [*lines, ""]


def _how_tested(state: RunState) -> list[str]:
    lines = ["## How it was tested", ""]
    checked = integration_lines(state.integration)  # the final branch as a whole, first
    lines += [*checked, ""] if checked else []
    ran = [(t, state.tasks[t.task_id]) for t in state.plan.tasks if state.tasks[t.task_id].tests]
    if not ran:
        return [*lines, "No node's test command ran.", ""]
    lines.append("Each node's tests ran in its own worktree, on the run branch as it was then:")
    lines.append("")
    for task, r in ran:
        assert r.tests is not None
        counts = f", {_counts(r)}" if _counts(r) else ""
        cmd = code(shlex.join(r.tests.command))
        lines.append(f"- {code(task.task_id)}: {cmd}: **{_tests(r)}**{counts}")
    return [*lines, ""]


def _files(r: TaskResult) -> str:
    shown = ", ".join(code(f) for f in r.files_changed[:FILES_SHOWN])
    more = len(r.files_changed) - FILES_SHOWN
    return (shown + (f" and {more} more" if more > 0 else "")) or "-"


def _nodes(state: RunState) -> list[str]:
    words = verdict_words(state)
    lines = [
        "## Nodes",
        "",
        "| node | status | files changed | tests |",
        "| --- | --- | --- | --- |",
    ]
    for task in state.plan.tasks:
        r = state.tasks[task.task_id]
        status = text(words[task.task_id][1])
        lines.append(f"| {code(task.task_id)} | {status} | {_files(r)} | {_tests(r)} |")
    return [*lines, ""]


def _summaries(state: RunState) -> list[str]:
    lines = ["## What each node says it did", ""]
    lines.append("_The workers' own words, not checked by anti-sprawl; the diff is the truth._")
    lines.append("")
    for task in state.plan.tasks:
        r = state.tasks[task.task_id]
        lines += [f"### {code(task.task_id)}: {text(task.name)}", ""]
        if r.diffstat is not None:  # what git says changed, beside what the worker claims
            lines += [f"Changed (git): {text(r.diffstat.summary)}", ""]
        if r.summary:
            lines += [block(r.summary.summary), ""]
            if r.summary.interfaces.strip():
                lines += ["Interfaces:", "", block(r.summary.interfaces.strip()), ""]
        elif r.unclaimed:
            lines += [f"_{text(unclaimed_text(r.unclaimed))}_", ""]
        else:
            lines += [f"_{text(verdict_words(state)[task.task_id][1])}_", ""]
        if unchanged := _named_unchanged(task, r):
            named = ", ".join(map(code, unchanged))
            lines += [f"_Its goal names {named}, which it did not change._", ""]
        if r.violations:
            lines += ["Blocked:", ""]
            lines += [f"- {code(v.op)} {code(v.path)}: {text(v.reason)}" for v in r.violations]
            lines.append("")
        lines += _node_notes(r)
    return lines


def _named_unchanged(task: TaskNode, r: TaskResult) -> list[str]:
    """Files a landed node's goal names, in its write scope, that its commit leaves as they
    were: a node can land on passing tests with half its goal (make real-model 2026-12-04,
    run h: calc.py changed, test_calc.py, named by the goal, not)."""
    if r.status != "succeeded":
        return []
    changed = set(r.files_changed)
    return [p for p in goal_files(task) if p not in changed]


def _node_notes(r: TaskResult) -> list[str]:
    """Attempts, hidden characters and cut responses of one node, when there are any."""
    lines: list[str] = []
    if len(r.attempt_log) > 1:
        lines += ["Attempts:", ""]
        lines += [
            f"- {a.attempt}: {a.outcome}"
            + (f" ({text(a.reason or '')})" if a.outcome != "succeeded" else "")
            + f", {code(a.model)}, {a.tokens.total:,} tokens, {format_usd(a.cost_usd)}"
            for a in r.attempt_log
        ]
        lines.append("")
    if r.hidden_chars:
        lines += ["Hidden characters (zero-width, bidi or tag) in inputs:", ""]
        lines += [f"- {code(src)}: {n}" for src, n in sorted(r.hidden_chars.items())]
        lines.append("")
    if r.truncated_responses:
        lines.append(
            f"Responses cut at the output limit: {r.truncated_responses} (their tool calls "
            "were lost; the worker was told to write large files in parts)."
        )
        lines.append("")
    return lines


def _bookkeeping(state: RunState) -> list[str]:
    lines = ["<details>", "<summary>Run bookkeeping: tokens, dollars, sandbox, DAG</summary>", ""]
    lines.append(
        f"Run {code(state.run_id)} on {code(state.branch)} (base {code(state.base[:12])})."
    )
    lines += ["", text(totals_line(state)) + ".", ""]
    lines.append(f"Sandbox: {text(state.sandbox or 'n/a')}.")
    if state.prices and state.cost_usd:
        lines.append(f"Dollars at {text(state.prices)}.")
    lines += [
        "",
        "| node | model | tokens | cost | cache | tool calls | attempts |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for task in state.plan.tasks:
        r = state.tasks[task.task_id]
        tokens = f"{r.total_tokens.total or r.tokens.total:,} ({r.token_budget:,}/call)"
        share = "-" if r.cache_share is None else f"{r.cache_share:.0%}"
        attempts = f"{r.counted + r.earlier_attempts} of {r.max_attempts}"
        cells = [code(task.task_id), code(r.model), tokens, format_usd(r.cost_usd), share]
        cells += [f"{r.tool_calls} / {r.max_tool_calls}", attempts]
        lines.append("| " + " | ".join(cells) + " |")
    statuses = {tid: status_of(r) for tid, r in state.tasks.items()}
    dag = plan_mermaid(state.plan, statuses).rstrip()
    fence = fence_for(dag)
    lines += ["", f"{fence}mermaid", dag, fence, "", "</details>"]
    return lines


def pr_body(state: RunState, redactor: Redactor, report: str | None = None) -> str:
    """The PR body of ``state``, redacted whole (headings, labels, the DAG included);
    ``report``: where the HTML run report is (views/html_report.py), said before the details."""
    title = pr_title(state.plan.requirement, state.plan_id)
    lines = [f"# {text(title)}", ""]
    if " ".join(state.plan.requirement.split()) != title:  # more than the title says
        lines += [block(state.plan.requirement.strip()), ""]
    lines += _partial(state)
    lines += _how_tested(state)
    lines += _nodes(state)
    lines += scope_section(state)
    lines += _summaries(state)
    lines += (
        [f"Full run report (one self-contained HTML file): {code(report)}", ""] if report else []
    )
    lines += _bookkeeping(state)
    return redactor("\n".join(lines) + "\n")


def write_pr_body(state: RunState, path: Path, redactor: Redactor) -> None:
    atomic_write_text(path, pr_body(state, redactor))
