"""Token budgets of the agent loop: fit a request before the call, charge the response after.

Three caps, all checked before a call is made (a call that could break one is not made):

- ``per_call`` (a node's ``token_budget``): no single call carries more than this many tokens,
  its input plus the output it may produce. The number of calls is bounded elsewhere (the
  call cap), so a node spends at most about ``per_call`` times its calls.
- ``total`` (the planner's budget): the sum over all calls of one conversation.
- ``RunBudget`` (``execute --max-tokens``): the sum over every call of every node of a run,
  shared by the threads of parallel nodes. A call reserves its worst case (input estimate +
  output cap) before it is made, so two nodes cannot both take the last tokens.

A call is charged, per count, the larger of what the provider reported and what we measured
offline, so a server that under-reports (or reports nothing) cannot stretch a budget. The
charged figures are the ones reported per node and per run.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from .providers.base import (
    ModelRequest,
    ModelResponse,
    Usage,
    request_text,
    turn_text,
)
from .tokens import TokenCounter, count_tokens

__all__ = [
    "Budget",
    "Refusal",
    "RunBudget",
    "Ticket",
    "charged_usage",
    "total_usage",
]

RefusalReason = Literal["budget", "max_tokens"]


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


class RunBudget:
    """The run-wide cap (``--max-tokens``), shared by every node of a run; thread-safe.

    ``spent`` starts from what earlier sessions of the run spent (a resumed run keeps its
    total). ``on_exhausted`` is called once, with the reason, when a call is refused.
    """

    def __init__(
        self,
        limit: int | None,
        spent: Usage | None = None,
        *,
        on_charge: Callable[[Usage], None] | None = None,
        on_exhausted: Callable[[str], None] | None = None,
    ):
        self.limit = limit
        self._spent = spent or Usage()
        self._reserved = 0
        self._lock = threading.Lock()
        self._on_charge = on_charge
        self._on_exhausted = on_exhausted
        self.exhausted: str | None = None

    @property
    def spent(self) -> Usage:
        with self._lock:
            return self._spent

    def reserve(self, needed: int, max_out: int, min_out: int) -> int | None:
        """Grant an output cap for a call of ``needed`` input tokens, or None to refuse it."""
        with self._lock:
            if self.limit is None:
                self._reserved += needed + max_out
                return max_out
            left = self.limit - self._spent.total - self._reserved
            grant = min(max_out, left - needed)
            if grant >= min_out:
                self._reserved += needed + grant
                return grant
            first = self.exhausted is None
            if first:
                self.exhausted = (
                    f"the run's token cap (--max-tokens {self.limit:,}) is reached: "
                    f"{self._spent.total:,} tokens spent"
                )
            message = self.exhausted
        if first and self._on_exhausted and message:
            self._on_exhausted(message)
        return None

    def settle(self, reserved: int, charged: Usage) -> None:
        """A call ended: drop its reservation, add what it cost (nothing if it failed)."""
        with self._lock:
            self._reserved -= reserved
            self._spent = self._spent.plus(charged)
            spent = self._spent
        if self._on_charge and charged.total:
            self._on_charge(spent)


@dataclass(frozen=True)
class Ticket:
    """A request fitted to the budgets, with what it reserved."""

    request: ModelRequest
    measured_input: int  # our unscaled count of its input (cl100k)
    needed: int  # the calibrated estimate the caps were checked against
    reserved: int  # held in the run budget until the call is settled


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
        raw = count_tokens(request_text(request))
        return raw, int(raw * self.counter.ratio + 0.999) if raw else 0

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
        reserved = 0
        if self.run is not None:
            granted = self.run.reserve(needed, max_out, self.min_output)
            if granted is None:
                message = self.run.exhausted or "the run's token cap is reached"
                return Refusal("max_tokens", message, needed, room or 0)
            max_out, reserved = granted, needed + granted
        return Ticket(build(max_out), raw, needed, reserved)

    def release(self, ticket: Ticket) -> None:
        """The call failed before a response: nothing is charged."""
        if self.run is not None:
            self.run.settle(ticket.reserved, Usage())

    def charge(self, ticket: Ticket, response: ModelResponse) -> tuple[Usage, str | None]:
        """Count one answered call; the second value says which cap it broke, if any.

        A cap can only break here when the provider counted more than we estimated; the
        counter is recalibrated from the report either way.
        """
        usage = charged_usage(ticket.measured_input, response)
        self.spent = self.spent.plus(usage)
        if not response.usage.estimated:
            self.counter.observe(ticket.measured_input, response.usage.input_tokens)
        if self.run is not None:
            self.run.settle(ticket.reserved, usage)
        if self.per_call is not None and usage.total > self.per_call:
            return usage, (
                f"the provider counted {usage.total:,} tokens for one call, over the per-call "
                f"cap of {self.per_call:,} (estimated {ticket.needed:,} input)"
            )
        if self.total is not None and self.spent.total > self.total:
            return usage, f"{self.spent.total:,} tokens used, over the budget of {self.total:,}"
        return usage, None
