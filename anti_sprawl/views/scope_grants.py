"""What the run's scope requests came to, for the PR body and ``status RUN --plan``.

Each node's ``scope_grants`` (run/scope_grants.py) becomes one line per request: the mode,
the path, granted or refused and why, and the worker's reason, all of it untrusted text made
inert (views/markdown.py) before it reaches a Markdown page.
"""

from __future__ import annotations

from ..run.journal import RunState
from .markdown import code, text

__all__ = ["scope_lines", "scope_section"]


def scope_lines(state: RunState) -> list[str]:
    """One plain line per request of every node, in plan order (``status --plan``)."""
    lines = []
    for task in state.plan.tasks:
        record = state.tasks.get(task.task_id)
        for g in record.scope_grants if record else ():
            verdict = "granted" if g.granted else "refused"
            lines.append(f"{task.task_id}: {verdict} {g.mode} {g.path}: {g.why}")
    return lines


def scope_section(state: RunState) -> list[str]:
    """The PR body's "Scope requests" section; nothing when no node asked."""
    rows = []
    for task in state.plan.tasks:
        record = state.tasks.get(task.task_id)
        for g in record.scope_grants if record else ():
            verdict = "**granted**" if g.granted else "refused"
            reason = f" (asked: {text(g.reason)})" if g.reason else ""
            rows.append(
                f"- {code(task.task_id)}: {verdict} {g.mode} {code(g.path)}: {text(g.why)}{reason}"
            )
    if not rows:
        return []
    head = [
        "## Scope requests",
        "",
        "_Files a node asked for beyond its plan's scopes; its audit kept only the plan's "
        "write scope and the writes granted here._",
        "",
    ]
    return [*head, *rows, ""]
