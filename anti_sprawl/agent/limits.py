"""A node's caps (``WorkerLimits``) and the model calls allowed beyond its tool calls, apart
from the worker that enforces them (agent/worker.py re-exports both).

The plan's pre-flight (``validate --repo``, context/lean.py) needs a node's output reserve to
size its first prompt, and the planner's estimates need ``CALL_SLACK``; importing the worker
for them loaded the agent loop, its tools and handlers (0.02-0.03 s of ``validate --repo``'s
start-up, issue 29, item 3).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

__all__ = ["CALL_SLACK", "WorkerLimits"]

CALL_SLACK = 2  # model calls beyond max_tool_calls: a text-only turn or two, and the last call


class WorkerLimits(BaseModel):
    """A node's caps; ``token_budget`` is per call (input + the output it may produce)."""

    token_budget: int = Field(gt=0)
    max_tool_calls: int = Field(gt=0)
    max_output_tokens: int = 4096
    min_output_tokens: int = 64
    observation_chars: int = 6000
    mask_ratio: float = 0.5  # mask old observations once a request's input needs this share

    @property
    def output_reserve(self) -> int:
        """Output room compaction keeps free: a quarter of the cap, at most max_output_tokens."""
        return max(self.min_output_tokens, min(self.max_output_tokens, self.token_budget // 4))

    @property
    def max_calls(self) -> int:
        """Model calls allowed, text-only turns included."""
        return self.max_tool_calls + CALL_SLACK
