"""Token budgets of the agent loop: fit a request before the call, charge the response after.

Three caps, all checked before a call is made (a call that could break one is not made):

- ``per_call`` (a node's ``token_budget``): no single call carries more than this many tokens,
  its input plus the output it may produce. The number of calls is bounded elsewhere (the
  call cap), so a node spends at most about ``per_call`` times its calls.
- ``total`` (the planner's budget): the sum over all calls of one conversation.
- ``RunBudget`` (``execute --max-tokens``, ``--max-cost``): the sum over every call of every
  node of a run, in tokens and in dollars, shared by the threads of parallel nodes. A call
  reserves its worst case (input estimate + output cap, and what that could cost at its
  model's prices) before it is made, so two nodes cannot both take the last tokens or cents.

A call is charged, per count, the larger of what the provider reported and what we measured
offline, so a server that under-reports (or reports nothing) cannot stretch a budget. The
charged figures are the ones reported per node and per run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from ..providers.base import (
    ModelRequest,
    ModelResponse,
    Usage,
    raw_request_tokens,
    turn_text,
)
from ..providers.prices import Price, call_cost
from ..tokens import TokenCounter, count_tokens
from .run_budget import RefusalReason, RunBudget

__all__ = [
    "Budget",
    "Refusal",
    "RunBudget",
    "Ticket",
    "charged_usage",
    "total_usage",
]


def total_usage(items: Iterable[Usage]) -> Usage:
    """The sum of several calls' (or nodes') usage."""
    total = Usage()
    for item in items:
        total = total.plus(item)
    return total


def charged_usage(measured_input: int, response: ModelResponse) -> Usage:
    """What one call counts against budgets: per count, max(reported, measured offline).

    Cache figures are the provider's (we cannot measure them), kept within the input.
    ``estimated`` marks a call where our count replaced the provider's.
    """
    reported = response.usage
    measured_output = count_tokens(turn_text(response.text, response.tool_calls))
    inp = max(reported.input_tokens, measured_input)
    out = max(reported.output_tokens, measured_output)
    return Usage(
        input_tokens=inp,
        output_tokens=out,
        cache_read_tokens=min(max(reported.cache_read_tokens, 0), inp),
        cache_write_tokens=min(max(reported.cache_write_tokens, 0), inp),
        estimated=reported.estimated or inp > reported.input_tokens or out > reported.output_tokens,
    )


@dataclass(frozen=True)
class Ticket:
    """A request fitted to the budgets, with what it reserved."""

    request: ModelRequest
    measured_input: int  # our unscaled count of its input (cl100k)
    needed: int  # the calibrated estimate the caps were checked against
    reserved: int  # held in the run budget until the call is settled
    reserved_cost: float = 0.0  # dollars held in the run budget until then


@dataclass(frozen=True)
class Refusal:
    """The next call cannot be made without breaking a cap."""

    reason: RefusalReason
    message: str
    needed: int
    room: int


@dataclass
class Budget:
    """One conversation's budgets: fits each request and charges each response."""

    per_call: int | None = None
    total: int | None = None
    max_output: int = 4096  # the most one call may produce
    min_output: int = 64  # less than this is not worth a call
    keep_free: int | None = None  # output room compaction keeps (default: max_output)
    counter: TokenCounter = field(default_factory=TokenCounter)
    run: RunBudget | None = None
    spent: Usage = field(default_factory=Usage)
    price: Price | None = None  # the conversation's model's prices (None: unpriced)
    spent_cost: float = 0.0  # dollars, when priced

    def room(self) -> int | None:
        """Tokens the next call may carry (input + output), or None when nothing caps it."""
        caps = []
        if self.per_call is not None:
            caps.append(self.per_call)
        if self.total is not None:
            caps.append(self.total - self.spent.total)
        return min(caps) if caps else None

    def measure(self, request: ModelRequest) -> tuple[int, int]:
        """(our raw count, the calibrated estimate) of ``request``'s input tokens."""
        raw = raw_request_tokens(request)
        return raw, self.counter.scale(raw)

    def fit(
        self,
        build: Callable[[int], ModelRequest],
        compact: Sequence[Callable[[], bool]] = (),
        explain: Callable[[], str] | None = None,
        early: int | None = None,
    ) -> Ticket | Refusal:
        """The next request, compacted as needed and with output capped to what the caps leave.

        ``build(max_output)`` makes the request from the current conversation; each step of
        ``compact`` shrinks the conversation (True when it changed anything) and is tried in
        order while the request leaves less than ``keep_free`` output tokens under the caps; the
        call then gets all the output room left, up to ``max_output``. The first (mildest) step also
        runs when the input alone needs more than ``early`` tokens. ``explain`` says, for a
        refusal, what the request is made of.
        """
        request = build(self.max_output)
        raw, needed = self.measure(request)
        room = self.room()
        steps = iter(compact)
        if early is not None and needed > early and compact:
            next(steps)
            if compact[0]():
                request = build(self.max_output)
                raw, needed = self.measure(request)
        free = self.max_output if self.keep_free is None else min(self.keep_free, self.max_output)
        while room is not None and needed + free > room:
            step = next(steps, None)
            if step is None:
                break
            if step():
                request = build(self.max_output)
                raw, needed = self.measure(request)
        max_out = self.max_output if room is None else min(self.max_output, room - needed)
        if max_out < self.min_output:
            assert room is not None
            detail = f" ({explain()})" if explain else ""
            message = (
                f"the next call needs {needed:,} input tokens plus at least "
                f"{self.min_output:,} output, but only {room:,} fit{detail}"
            )
            return Refusal("budget", message, needed, room)
        reserved, held = 0, 0.0
        if self.run is not None:
            granted = self.run.reserve(needed, max_out, self.min_output, self.price)
            if granted is None:
                message = self.run.exhausted or "the run's cap is reached"
                return Refusal(
                    self.run.exhausted_reason or "max_tokens", message, needed, room or 0
                )
            (max_out, held), reserved = granted, needed + granted[0]
        return Ticket(build(max_out), raw, needed, reserved, held)

    def release(self, ticket: Ticket) -> None:
        """The call failed before a response: nothing is charged."""
        if self.run is not None:
            self.run.settle(ticket.reserved, Usage(), reserved_cost=ticket.reserved_cost)

    def charge(self, ticket: Ticket, response: ModelResponse) -> tuple[Usage, str | None]:
        """Count one answered call; the second value says which cap it broke, if any.

        A cap can only break here when the provider counted more than we estimated; the
        counter is recalibrated from the report either way.
        """
        usage = charged_usage(ticket.measured_input, response)
        self.spent = self.spent.plus(usage)
        cost = call_cost(usage, self.price) if self.price is not None else 0.0
        self.spent_cost += cost
        if not response.usage.estimated:
            self.counter.observe(ticket.measured_input, response.usage.input_tokens)
        if self.run is not None:
            self.run.settle(ticket.reserved, usage, cost, ticket.reserved_cost)
        if self.per_call is not None and usage.total > self.per_call:
            return usage, (
                f"the provider counted {usage.total:,} tokens for one call, over the per-call "
                f"cap of {self.per_call:,} (estimated {ticket.needed:,} input)"
            )
        if self.total is not None and self.spent.total > self.total:
            return usage, f"{self.spent.total:,} tokens used, over the budget of {self.total:,}"
        return usage, None
