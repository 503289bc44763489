"""Live spend while nodes run: per model call and tool call (run/node_job.py's ``LiveStep``),
each running node's tokens against its per-call cap, calls against ``max_tool_calls``, elapsed
time, dollars and current step, and the run's total against ``--max-tokens`` in the title. On a
terminal it is the live table; elsewhere one plain line per step (views/run.py's ``Progress``).
"""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from ..providers.prices import format_usd
from ..run.journal import RunState
from ..run.result import TaskResult
from ..run.settings import LiveStep

__all__ = ["live_line", "live_table", "run_title"]


def run_title(state: RunState) -> str:
    """``anti-sprawl: N tokens of --max-tokens M, $X``: the run's spend so far."""
    cap = f" of --max-tokens {state.max_tokens:,}" if state.max_tokens else ""
    return f"anti-sprawl: {state.tokens.total:,} tokens{cap}, {format_usd(state.cost_usd)}"


def _tokens(record: TaskResult, step: LiveStep) -> int:
    """Earlier attempts' tokens, then this attempt's so far."""
    return record.total_tokens.total + step.tokens


def live_line(record: TaskResult, step: LiveStep, elapsed: float) -> str:
    """One plain line per step (no terminal): where the node is and what it spent."""
    return (
        f"{record.task_id}: {step.step}; {_tokens(record, step):,} tokens "
        f"({record.token_budget:,}/call), call {step.calls}, {step.tool_calls}/"
        f"{record.max_tool_calls} tool calls, {format_usd(step.cost_usd)}, {elapsed:.0f}s"
    )


def live_table(state: RunState, steps: dict[str, tuple[LiveStep, float]]) -> Table:
    """The nodes, with a running node's live spend and step (``steps``: task -> (step, elapsed))."""
    table = Table(title=run_title(state), expand=False)
    for name in ("task", "status", "tokens (cap/call)", "tool calls", "now"):
        table.add_column(name, no_wrap=name != "task", overflow="fold")
    for task in state.plan.tasks:
        r = state.tasks[task.task_id]
        live = steps.get(task.task_id) if r.status == "running" else None
        if live is None:
            tokens, calls, now = r.total_tokens.total or r.tokens.total, r.tool_calls, ""
        else:
            step, elapsed = live
            tokens, calls = _tokens(r, step), step.tool_calls
            now = f"{step.step}, {elapsed:.0f}s, {format_usd(step.cost_usd)}"
        table.add_row(
            escape(r.task_id),
            str(r.status),
            f"{tokens:,} ({r.token_budget:,}/call)",
            f"{calls}/{r.max_tool_calls}",
            escape(now),
        )
    return table
