"""The journal's record of one attempt of a node, and the note a retry would start with.

``NodeRunner`` (node.py) runs the attempts; this is what it writes down after each one: an
``AttemptRecord`` (outcome, reason, model, tokens, dollars, files it changed, its transcript)
on the node's ``TaskResult``, the node's totals over every attempt, and, when the failure is
one another attempt could fix, the ``FailureNote`` for the next (failure_note.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from ..agent.worker import WorkerResult
from ..providers.base import Usage
from .failure_note import RETRY_REASONS, AttemptRecord, FailureNote, make_note
from .result import TaskResult

__all__ = ["Attempted", "log_attempt"]


@dataclass
class Attempted:
    """What an attempt produced, filled as it goes (an error part-way keeps what it had)."""

    worker: WorkerResult | None = None
    changed: list[str] = field(default_factory=list)  # in-scope files it changed


def log_attempt(
    record: TaskResult,
    outcome: Literal["succeeded", "failed", "interrupted"],
    done: Attempted,
    *,
    priced: bool,
    redact_note: Callable[[FailureNote], FailureNote],
) -> None:
    """Append the attempt that just ended to ``record`` and add it to the node's totals."""
    w = done.worker
    tokens = w.usage if w else Usage()
    cost = w.cost_usd if w else (0.0 if priced else None)
    note = None
    if outcome == "failed" and record.reason in RETRY_REASONS:
        failing = record.tests if record.tests and not record.tests.passed else None
        note = redact_note(
            make_note(
                record.attempts,
                record.reason,
                record.message,
                test_command=failing.command if failing else None,
                test_output=failing.tail if failing else "",
                files_changed=done.changed,
                summary=record.summary.summary if record.summary else "",
            )
        )
    record.attempt_log.append(
        AttemptRecord(
            attempt=record.attempts,
            outcome=outcome,
            reason=record.reason,
            message=record.message,
            model=record.model,
            tokens=tokens,
            cost_usd=cost,
            calls=w.calls if w else 0,
            tool_calls=w.tool_calls if w else 0,
            files_changed=done.changed,
            transcript=w.transcript if w else None,
            note=note,
            started_at=record.started_at,
            finished_at=record.finished_at,
        )
    )
    record.total_tokens = record.total_tokens.plus(tokens)
    if cost is not None:
        record.cost_usd = (record.cost_usd or 0.0) + cost
