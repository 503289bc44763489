"""What a node attempt's span says about the node (``anti_sprawl.*`` beside the GenAI names).

Kept apart from ``node.py`` so its hook stays one line, and from ``otel_export.py`` (where spans
go): this is only which fields of the plan and the journal record a span shows. Ids, scopes,
caps, counts and paths: never a goal, a summary or a message (model- or user-written text).
"""

from __future__ import annotations

from ..plan.model import TaskNode
from ..tracing import Attributes
from .journal import RunState
from .result import TaskResult

__all__ = ["attempt_ended", "attempt_started", "run_attributes"]


def run_attributes(state: RunState) -> Attributes:
    """The run: its ids, branch, base commit, provider and caps."""
    return {
        "anti_sprawl.run.id": state.run_id,
        "anti_sprawl.plan.id": state.plan_id,
        "anti_sprawl.branch": state.branch,
        "anti_sprawl.base": state.base,
        "anti_sprawl.nodes": len(state.tasks),
        "gen_ai.provider.name": state.provider,
        "anti_sprawl.max_tokens": state.max_tokens,
    }


def attempt_started(node: TaskNode, record: TaskResult, run_id: str, model: str) -> Attributes:
    """The attempt's node: its scopes and caps, before it runs."""
    return {
        "gen_ai.agent.id": f"{run_id}/{node.task_id}",
        "gen_ai.request.model": model,
        "anti_sprawl.run.id": run_id,
        "anti_sprawl.attempt": record.attempts + 1,
        "anti_sprawl.scope.read": list(node.read_scope),
        "anti_sprawl.scope.write": list(node.write_scope),
        "anti_sprawl.token_budget.per_call": node.token_budget,
        "anti_sprawl.max_tool_calls": node.max_tool_calls,
        "anti_sprawl.dependencies": list(node.dependencies),
    }


def attempt_ended(record: TaskResult) -> Attributes:
    """What the journal recorded of the attempt: its outcome, tokens and blocked paths (the
    node lands later, in the run's order: the run's span says how the run ended)."""
    last = record.attempt_log[-1] if record.attempt_log else None
    reverted = sorted({v.path for v in record.violations if v.op == "audit"})
    blocked = sorted({v.path for v in record.violations if v.op != "audit"})
    attributes: dict[str, str | int | list[str] | None] = {
        "anti_sprawl.reason": record.reason,
        "anti_sprawl.reverted_paths": reverted,
        "anti_sprawl.blocked_paths": blocked,
    }
    if last is not None:
        attributes.update(
            {
                "anti_sprawl.outcome": last.outcome,
                "anti_sprawl.files_changed": list(last.files_changed),
                "anti_sprawl.calls": last.calls,
                "anti_sprawl.tool_calls": last.tool_calls,
                "gen_ai.usage.input_tokens": last.tokens.input_tokens,
                "gen_ai.usage.output_tokens": last.tokens.output_tokens,
            }
        )
        if last.outcome == "failed":
            attributes["error.type"] = record.reason or "failed"
    return attributes
