"""What a plan may cost before it runs: a range per node and in total, in tokens and dollars.

The token range is ``planner.assist.cost_estimate``: from the node's lean first call alone (its
first prompt, built with the real assembler: ``essentials.first_prompts``) to every call it
may make at its per-call cap, for every attempt it may get. In dollars, the low end prices
the first prompt as uncached input; the high end prices each of those calls at its worst: as
much output as one response of its model may have (its output limit, within the per-call
cap), the rest input at the dearer of the input and cache-write rates. A model without a
price has a token range only.

Beside the range, an expected value: most nodes spend far below their high end, and a range
alone does not say how far. With finished nodes of earlier runs in the repository (a real
provider's, ``run.history.used_share``), each node is expected to spend the median share of
its high end that they spent (never below its low end); without them, the prior assumes one
attempt using half its calls, each about its first call's size. The basis is printed with it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from pydantic import BaseModel, Field
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..agent.worker import CALL_SLACK
from ..context.essentials import NodeFirstPrompt, first_prompts
from ..plan.graph import critical_path
from ..plan.model import Plan, TaskNode
from ..providers.base import Usage
from ..providers.prices import PriceTable, call_cost, format_usd, worst_call_cost
from ..tables import print_table
from .assist import TaskCost, cost_estimate

__all__ = [
    "DryRun",
    "Estimate",
    "History",
    "NodeEstimate",
    "dry_run",
    "estimate",
    "plan_estimate",
    "render_dry_run",
    "render_estimate",
]


class History(BaseModel):
    """What earlier runs here spent: the median share of their nodes' high ends."""

    share: float = Field(ge=0.0, le=1.0)
    nodes: int
    runs: int

    @property
    def described(self) -> str:
        return (
            f"the median share of their high end that {self.nodes} finished node(s) of "
            f"{self.runs} earlier run(s) here spent ({self.share:.1%})"
        )


PRIOR = "one attempt using half its calls, each about its first call's size (no earlier runs here)"


class NodeEstimate(TaskCost):
    """One node's range in tokens (``low``, ``high``) and, when its model is priced, dollars;
    ``expected`` within it (the module docstring says how)."""

    model: str
    usd_low: float | None = None
    usd_high: float | None = None
    expected: int = 0
    usd_expected: float | None = None


class Estimate(BaseModel):
    """The plan's range, per node and in total (dollars over the priced nodes)."""

    tasks: list[NodeEstimate]
    low: int
    high: int
    usd_low: float
    usd_high: float
    unpriced: list[str] = Field(default_factory=list, description="Models without a price.")
    prices: str = ""
    critical_path: list[str] = Field(
        default_factory=list,
        description="The chain of dependent tasks with the most model calls: they run one "
        "after another whatever --jobs allows.",
    )
    critical_calls: int = Field(0, description="Model calls on the critical path, at most.")
    expected: int = Field(0, description="The expected tokens, within the range.")
    usd_expected: float = 0.0
    expected_basis: str = Field(PRIOR, description="What the expected value assumes.")


def _expected(cost: TaskCost, node: TaskNode, history: History | None) -> int:
    if history is not None:
        guess = round(history.share * cost.high)
    else:
        guess = cost.low * -(-(node.max_tool_calls + CALL_SLACK) // 2)
    return min(cost.high, max(cost.low, guess))


def estimate(
    plan: Plan,
    first_calls: Mapping[str, int],
    model_of: Callable[[TaskNode], str],
    prices: PriceTable,
    output_limit: Callable[[str], int],
    history: History | None = None,
) -> Estimate:
    """The range of ``plan``; ``first_calls`` maps task ids to their first call's tokens,
    ``output_limit`` a model to the output cap of one of its responses; ``history`` what
    earlier runs spent (None: the prior)."""
    tokens = cost_estimate(plan, first_calls)
    tasks: list[NodeEstimate] = []
    for node, cost in zip(plan.tasks, tokens.tasks, strict=True):
        model = model_of(node)
        price = prices.price_for(model)
        usd_low = usd_high = usd_expected = None
        expected = _expected(cost, node, history)
        if price is not None:
            out = min(output_limit(model), node.token_budget)
            per_call = max(  # all the output a call may have; or all input, if that is dearer
                worst_call_cost(node.token_budget - out, out, price),
                worst_call_cost(node.token_budget, 0, price),
            )
            usd_low = call_cost(Usage(input_tokens=cost.low), price)
            usd_high = per_call * (node.max_tool_calls + CALL_SLACK) * cost.attempts
            # the expected tokens as uncached input, as the low end is priced
            usd_expected = min(usd_high, call_cost(Usage(input_tokens=expected), price))
        tasks.append(
            NodeEstimate(
                **cost.model_dump(),
                model=model,
                usd_low=usd_low,
                usd_high=usd_high,
                expected=expected,
                usd_expected=usd_expected,
            )
        )
    attempts = {t.task_id: t.attempts for t in tasks}
    chain, calls = critical_path(
        plan, lambda n: (n.max_tool_calls + CALL_SLACK) * attempts[n.task_id]
    )
    return Estimate(
        critical_path=chain,
        critical_calls=int(calls),
        tasks=tasks,
        low=tokens.low,
        high=tokens.high,
        usd_low=sum(t.usd_low or 0.0 for t in tasks),
        usd_high=sum(t.usd_high or 0.0 for t in tasks),
        unpriced=sorted({t.model for t in tasks if t.usd_high is None}),
        prices=prices.described,
        expected=sum(t.expected for t in tasks),
        usd_expected=sum(t.usd_expected or 0.0 for t in tasks),
        expected_basis=history.described if history is not None else PRIOR,
    )


def plan_estimate(
    plan: Plan,
    repo: Path,
    commit: str | None,
    model_of: Callable[[TaskNode], str],
    prices: PriceTable,
    output_limit: Callable[[str], int],
    history: History | None = None,
) -> tuple[Estimate, list[NodeFirstPrompt]]:
    """``estimate`` with each node's lean first prompt built from ``commit``'s files (None:
    the directory as it is), and those first prompts (whether each node's essentials fit)."""
    fits = first_prompts(plan, repo, commit)
    first = {f.task_id: f.first_call for f in fits}
    return estimate(plan, first, model_of, prices, output_limit, history), fits


class DryRun(BaseModel):
    """What ``execute --dry-run`` found: the range, the nodes that could not start, and the
    run caps the range's high end could reach (the run would then stop ``interrupted``)."""

    plan_id: str
    base: str
    estimated_cost: Estimate
    cannot_start: list[str] = Field(default_factory=list, description="One message per node.")
    caps_reachable: list[str] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.cannot_start


def dry_run(
    plan: Plan,
    repo: Path,
    base: str,
    model_of: Callable[[TaskNode], str],
    prices: PriceTable,
    output_limit: Callable[[str], int],
    *,
    max_tokens: int | None = None,
    max_cost: float | None = None,
    history: History | None = None,
) -> DryRun:
    """The checks ``execute`` makes before a node starts, and the plan's range at ``base``."""
    est, fits = plan_estimate(plan, repo, base, model_of, prices, output_limit, history)
    caps: list[str] = []
    if max_tokens is not None and est.high > max_tokens:
        caps.append(f"--max-tokens {max_tokens:,} is below the high end ({est.high:,} tokens)")
    if max_cost is not None and est.usd_high > max_cost:
        caps.append(
            f"--max-cost {format_usd(max_cost)} is below the high end ({format_usd(est.usd_high)})"
        )
    return DryRun(
        plan_id=plan.plan_id,
        base=base,
        estimated_cost=est,
        cannot_start=[f.message for f in fits if not f.fits],
        caps_reachable=caps,
    )


def render_dry_run(result: DryRun, console: Console) -> None:
    """The estimate, then what would stop the run: nodes that cannot start, reachable caps."""
    render_estimate(result.estimated_cost, console)
    for message in result.cannot_start:
        console.print(f"[red]cannot start[/]: {escape(message)}")
    for cap in result.caps_reachable:
        console.print(
            f"[yellow]note[/]: {escape(cap)}: the run may stop interrupted before the end "
            "(resume with a higher cap)",
        )
    verdict = (
        "the run would refuse to start"
        if result.cannot_start
        else "no model was called and nothing was committed"
    )
    console.print(f"dry run of {escape(result.plan_id)} at {result.base[:12]}: {verdict}")


def _usd_range(low: float | None, high: float | None) -> str:
    return "-" if high is None else f"{format_usd(low)} to {format_usd(high)}"


def render_estimate(est: Estimate, console: Console) -> None:
    """A table of the ranges, a total line, and what the dollars leave out (prose wraps at
    the terminal's width; model names and paths do not)."""
    table = Table(title="estimated cost", title_justify="left")
    table.add_column("task", overflow="fold")
    table.add_column("model", overflow="fold")
    table.add_column("tokens", no_wrap=True, justify="right")
    table.add_column("dollars", no_wrap=True, justify="right")
    table.add_column("tries", no_wrap=True, justify="right")
    for t in est.tasks:
        table.add_row(
            escape(t.task_id),
            escape(t.model),
            f"{t.low:,}..{t.high:,}",
            "-" if t.usd_high is None else f"{format_usd(t.usd_low)}..{format_usd(t.usd_high)}",
            str(t.attempts),
        )
    print_table(console, table, {"task", "model"})
    console.print(
        f"estimated cost: {est.low:,} to {est.high:,} tokens, "
        f"{_usd_range(est.usd_low, est.usd_high)}: from the lean first calls to every call at "
        "its cap (token_budget × (max_tool_calls + 2) × max_attempts)",
    )
    usd = f" ({format_usd(est.usd_expected)})" if est.usd_high else ""
    console.print(
        f"expected: about {est.expected:,} tokens{usd}, assuming {escape(est.expected_basis)}"
    )
    if est.critical_path:
        console.print(
            f"critical path: {escape(' -> '.join(est.critical_path))}, at most "
            f"{est.critical_calls:,} model calls one after another whatever --jobs allows",
        )
    if est.unpriced:
        console.print(
            f"not in the dollars (no price): {escape(', '.join(est.unpriced))}", soft_wrap=True
        )
    if est.usd_high:
        console.print(f"dollars at {escape(est.prices)}", soft_wrap=True)
