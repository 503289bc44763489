"""The run-wide caps (``execute --max-tokens``, ``--max-cost``), shared by every node of a run.

A call reserves its worst case before it is made: its input estimate plus the output it may
produce, and what that could cost at its model's prices (input at the dearer of the input and
cache-write rates, every output token produced). Two nodes running at once therefore cannot
both take the last tokens or cents; the call that could cross a cap is not made, and the run
ends interrupted (resumable with a higher cap). See ``agent/budget.py`` for the per-conversation
side.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Literal

from ..providers.base import Usage
from ..providers.prices import Price, format_usd, worst_call_cost

__all__ = ["RefusalReason", "RunBudget"]

RefusalReason = Literal["budget", "max_tokens", "max_cost"]


class RunBudget:
    """The run-wide caps (``--max-tokens``, ``--max-cost``), shared by every node; thread-safe.

    ``spent`` and ``spent_cost`` start from what earlier sessions of the run spent (a resumed
    run keeps its totals). ``on_exhausted`` is called once, with the reason, when a call is
    refused; ``exhausted_reason`` says which cap refused it.
    """

    def __init__(
        self,
        limit: int | None,
        spent: Usage | None = None,
        *,
        max_cost: float | None = None,
        spent_cost: float = 0.0,
        on_charge: Callable[[Usage], None] | None = None,
        on_exhausted: Callable[[str], None] | None = None,
    ):
        self.limit = limit
        self.max_cost = max_cost
        self._spent = spent or Usage()
        self._spent_cost = spent_cost
        self._reserved = 0
        self._reserved_cost = 0.0
        self._lock = threading.Lock()
        self._on_charge = on_charge
        self._on_exhausted = on_exhausted
        self.exhausted: str | None = None
        self.exhausted_reason: RefusalReason | None = None

    @property
    def spent(self) -> Usage:
        with self._lock:
            return self._spent

    @property
    def spent_cost(self) -> float:
        """Dollars spent by priced calls (unpriced calls add nothing)."""
        with self._lock:
            return self._spent_cost

    def _cost_room(self, needed: int, max_out: int, price: Price | None) -> int | None:
        """The output the cost cap leaves a call of ``needed`` input (None: no cost cap)."""
        if self.max_cost is None:
            return None
        if price is None:
            return -1  # a cost cap cannot vouch for a call it cannot price
        left = self.max_cost - self._spent_cost - self._reserved_cost
        if worst_call_cost(needed, 0, price) > left:
            return -1
        per_output = worst_call_cost(needed, 1, price) - worst_call_cost(needed, 0, price)
        if per_output <= 0:
            return max_out
        return int((left - worst_call_cost(needed, 0, price)) / per_output)

    def reserve(
        self, needed: int, max_out: int, min_out: int, price: Price | None = None
    ) -> tuple[int, float] | None:
        """Grant an output cap for a call of ``needed`` input tokens at ``price``, with the
        dollars it holds, or None to refuse it."""
        with self._lock:
            grant = max_out
            reason: RefusalReason | None = None
            if self.limit is not None:
                left = self.limit - self._spent.total - self._reserved
                grant = min(grant, left - needed)
                if grant < min_out:
                    reason = "max_tokens"
            cost_room = self._cost_room(needed, max_out, price)
            if reason is None and cost_room is not None:
                grant = min(grant, cost_room)
                if grant < min_out:
                    reason = "max_cost"
            if reason is None:
                held = worst_call_cost(needed, grant, price) if price is not None else 0.0
                self._reserved += needed + grant
                self._reserved_cost += held
                return grant, held
            first = self.exhausted is None
            if first:
                self.exhausted_reason = reason
                self.exhausted = self._exhausted_message(reason, price)
            message = self.exhausted
        if first and self._on_exhausted and message:
            self._on_exhausted(message)
        return None

    def exhaust(self, reason: RefusalReason, message: str) -> None:
        """A cap refused a call elsewhere (a remote node's share of it ran out): the run is
        told as if a call here had been refused (``on_exhausted``, once)."""
        with self._lock:
            first = self.exhausted is None
            if first:
                self.exhausted_reason, self.exhausted = reason, message
        if first and self._on_exhausted:
            self._on_exhausted(message)

    def _exhausted_message(self, reason: RefusalReason, price: Price | None) -> str:
        if reason == "max_tokens":
            return (
                f"the run's token cap (--max-tokens {self.limit:,}) is reached: "
                f"{self._spent.total:,} tokens spent"
            )
        if price is None:
            return (
                f"the run's cost cap (--max-cost {format_usd(self.max_cost)}) cannot bound a "
                "model without a price (add it to a prices file)"
            )
        return (
            f"the run's cost cap (--max-cost {format_usd(self.max_cost)}) is reached: "
            f"{format_usd(self._spent_cost)} spent"
        )

    def settle(
        self, reserved: int, charged: Usage, cost: float = 0.0, reserved_cost: float = 0.0
    ) -> None:
        """A call ended: drop its reservation, add what it cost (nothing if it failed)."""
        with self._lock:
            self._reserved -= reserved
            self._reserved_cost -= reserved_cost
            self._spent = self._spent.plus(charged)
            self._spent_cost += cost
            spent = self._spent
        if self._on_charge and charged.total:
            self._on_charge(spent)
