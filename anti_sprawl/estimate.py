"""What a plan may cost before it runs: a range per node and in total, in tokens and dollars.

The low end is the node's lean first call alone (its first prompt, measured with the real
assembler); the high end is every call the node may make at its per-call cap, for every
attempt it may get: ``token_budget × (max_tool_calls + CALL_SLACK) × max_attempts``. In
dollars, the low end prices the first prompt as uncached input; the high end prices each call
at its worst (as much output as one call may produce, the rest input at the dearer of the
input and cache-write rates). A model without a price has a token range only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from pydantic import BaseModel, Field
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .plan import Plan, TaskNode
from .prices import PriceTable, call_cost, format_usd, worst_call_cost
from .providers.base import Usage
from .worker import CALL_SLACK

__all__ = ["Estimate", "NodeEstimate", "estimate", "render_estimate"]

DEFAULT_MAX_OUTPUT = 4096  # what one worker call may produce (WorkerLimits.max_output_tokens)


class NodeEstimate(BaseModel):
    """One node's range: ``low`` its lean first call, ``high`` every call at its cap."""

    task_id: str
    model: str
    max_attempts: int
    max_calls: int = Field(description="Model calls per attempt at most.")
    tokens_low: int
    tokens_high: int
    usd_low: float | None = None
    usd_high: float | None = None


class Estimate(BaseModel):
    """The plan's range, per node and in total (dollars over the priced nodes)."""

    nodes: list[NodeEstimate]
    tokens_low: int
    tokens_high: int
    usd_low: float
    usd_high: float
    unpriced: list[str] = Field(default_factory=list, description="Models without a price.")
    prices: str = ""


def estimate(
    plan: Plan,
    first_calls: Mapping[str, int],
    model_of: Callable[[TaskNode], str],
    prices: PriceTable,
    *,
    max_output: int = DEFAULT_MAX_OUTPUT,
) -> Estimate:
    """The range of ``plan``; ``first_calls`` maps task ids to their first call's tokens."""
    nodes: list[NodeEstimate] = []
    for node in plan.tasks:
        model = model_of(node)
        attempts = plan.attempts_for(node)
        calls = node.max_tool_calls + CALL_SLACK
        low = first_calls.get(node.task_id, 0)
        high = node.token_budget * calls * attempts
        price = prices.price_for(model)
        usd_low = usd_high = None
        if price is not None:
            out = min(max_output, node.token_budget)
            per_call = worst_call_cost(node.token_budget - out, out, price)
            usd_low = call_cost(Usage(input_tokens=low), price)
            usd_high = per_call * calls * attempts
        nodes.append(
            NodeEstimate(
                task_id=node.task_id,
                model=model,
                max_attempts=attempts,
                max_calls=calls,
                tokens_low=low,
                tokens_high=high,
                usd_low=usd_low,
                usd_high=usd_high,
            )
        )
    return Estimate(
        nodes=nodes,
        tokens_low=sum(n.tokens_low for n in nodes),
        tokens_high=sum(n.tokens_high for n in nodes),
        usd_low=sum(n.usd_low or 0.0 for n in nodes),
        usd_high=sum(n.usd_high or 0.0 for n in nodes),
        unpriced=sorted({n.model for n in nodes if n.usd_high is None}),
        prices=prices.described,
    )


def _usd_range(low: float | None, high: float | None) -> str:
    return "-" if high is None else f"{format_usd(low)} to {format_usd(high)}"


def render_estimate(est: Estimate, console: Console) -> None:
    """A table of the ranges, a total line, and what the dollars leave out."""
    table = Table(title="estimated cost", title_justify="left")
    for col in ("task", "model", "tokens", "dollars", "attempts"):
        table.add_column(col, overflow="fold")
    for n in est.nodes:
        table.add_row(
            escape(n.task_id),
            escape(n.model),
            f"{n.tokens_low:,} to {n.tokens_high:,}",
            _usd_range(n.usd_low, n.usd_high),
            str(n.max_attempts),
        )
    console.print(table)
    console.print(
        f"total: {est.tokens_low:,} to {est.tokens_high:,} tokens, "
        f"{_usd_range(est.usd_low, est.usd_high)}: from the lean first calls to every call at "
        "its cap (token_budget × call limit × attempts)",
        soft_wrap=True,
    )
    if est.unpriced:
        console.print(
            f"not in the dollars (no price): {escape(', '.join(est.unpriced))}", soft_wrap=True
        )
    if est.usd_high:
        console.print(f"dollars at {escape(est.prices)}", soft_wrap=True)
