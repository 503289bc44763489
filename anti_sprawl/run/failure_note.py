"""Retries that learn from the failure, still clean slate: the typed note a retry starts with.

When an attempt of a node fails for a reason another attempt could fix (its tests, its per-call
budget, its tool-call or call cap (where a malformed finish ends), a provider error after the
provider's own retries), the next attempt starts from a fresh worktree at the same base with the same
clean-slate prompt plus one ``FailureNote``: why it failed, the failing test's last lines,
the files the attempt changed and its own summary if it wrote one. Never its transcript or
tool outputs: the note is a few hundred tokens whatever the attempt did, and it is rendered
as an untrusted data block (the test output and the summary are the model's or the tests'
words, not ours).

``AttemptRecord`` is what the journal keeps of every attempt of a node.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

from ..agent.nudges import WHOLE_FILE_HINT
from ..context.manifest import make_item
from ..lifecycle import FailReason
from ..providers.base import Usage
from ..trust import wrap_data

if TYPE_CHECKING:
    from ..context.assemble import AssembledPrompt

__all__ = [
    "FAILURE_NOTE_HEADER",
    "INTERRUPTING_REASONS",
    "RETRY_REASONS",
    "AttemptRecord",
    "FailureNote",
    "make_note",
    "render_note",
    "with_failure_note",
]

# Failures a fresh attempt may fix (a finish with an empty diff, ``no_changes``, among them:
# small models call finish after only running the old tests). A malformed finish is answered with an error and the loop
# goes on, so a model that never gets it right ends at its call or tool-call cap. Not retried:
# the run's caps and stop requests (the run is interrupted and resumable), a secret in the
# change, a failing setup command, an orchestrator or storage error, a landing conflict.
RETRY_REASONS: frozenset[FailReason] = frozenset(
    {"tests", "budget", "tool_calls", "calls", "stalled", "provider", "script", "no_changes"}
)
# Endings that say nothing about the work: the run stopped (Ctrl-C, a signal, a full disk) or
# one of its caps refused the next call. Such an attempt is interrupted and uses up nothing.
INTERRUPTING_REASONS: frozenset[FailReason] = frozenset({"stopped", "max_tokens", "max_cost"})
FAILURE_NOTE_HEADER = "# Previous attempt"
TAIL_LINES = 30
TAIL_CHARS = 3_000
SUMMARY_CHARS = 1_500
MAX_FILES = 50


class FailureNote(BaseModel):
    """Why one attempt failed, in a few lines: what the next attempt of the node is told."""

    attempt: int = Field(ge=1, description="The attempt that failed.")
    reason: FailReason
    message: str = ""
    test_command: str = ""
    test_tail: str = Field(default="", description="The failing test run's last lines.")
    files_changed: list[str] = Field(default_factory=list)
    summary: str = Field(default="", description="The attempt's own summary, if it finished.")


class AttemptRecord(BaseModel):
    """One attempt of a node, as the journal keeps it."""

    attempt: int = Field(ge=1)
    # interrupted: a stop or a run cap ended it before it came to an outcome; not counted
    outcome: Literal["succeeded", "failed", "interrupted"]
    reason: FailReason | None = None
    message: str = ""
    model: str = ""
    tokens: Usage = Field(default_factory=Usage)
    cost_usd: float | None = None
    calls: int = 0
    tool_calls: int = 0
    files_changed: list[str] = Field(default_factory=list)
    transcript: str | None = None
    note: FailureNote | None = Field(
        default=None, description="What the next attempt was told (failed attempts)."
    )
    started_at: str | None = None
    finished_at: str | None = None


# Failures of an attempt that talked instead of calling tools (recorded from a small local
# model: tests/fixtures/real_model/): its retry is told the form it can write files in.
TEXT_TURN_FAILURES = frozenset({"stalled", "calls", "no_changes"})


def _tail(text: str) -> str:
    lines = text.splitlines()[-TAIL_LINES:]
    out = "\n".join(lines)
    return out[-TAIL_CHARS:]


def make_note(
    attempt: int,
    reason: FailReason,
    message: str,
    *,
    test_command: list[str] | None = None,
    test_output: str = "",
    files_changed: list[str] | None = None,
    summary: str = "",
) -> FailureNote:
    """A note with every free-text part cut to its share (the caller redacts it). A summary
    over no change (``no_changes``) is left out: it claims work the diff does not hold, and a
    small model copies it (make real-model 2026-12-05 run m: attempt 3's whole first reply was
    attempt 2's "The files have been written correctly and the tests have passed. No changes
    are needed.", shown to it in this note, and it finished over no change again)."""
    if reason == "no_changes":
        summary = ""
    files = list(files_changed or [])
    if len(files) > MAX_FILES:
        files = [*files[:MAX_FILES], f"... and {len(files) - MAX_FILES} more"]
    return FailureNote(
        attempt=attempt,
        reason=reason,
        message=message[:SUMMARY_CHARS],
        test_command=" ".join(test_command or [])[:300],
        test_tail=_tail(test_output),
        files_changed=files,
        summary=summary[:SUMMARY_CHARS],
    )


# The note's last line: the prompt ends asking for the work, not on the failure. Measured,
# make real-model 2026-12-05 run w's request 6 (attempt 2's first call, whose reply and the
# next three wrote reports mirroring the note's headings), replayed 6 times each, alternated:
# without this line 1 reply was a call (and 1 a call inside text), 4 were reports; with it,
# 6 of 6 were calls.
RETRY_START = "Now do the task again: reply with your first tool call."


def render_note(note: FailureNote, attempt: int) -> str:
    """The text appended to the retry's first user message."""
    lines = [
        "",
        FAILURE_NOTE_HEADER,
        f"This is attempt {attempt} at this task. Attempt {note.attempt} failed; it ran in a "
        "worktree that has been discarded, so you start again from the same files as it did "
        "and none of its changes are kept. Use what it learned below, then do the task again "
        "in full.",
        f"- why it failed: {note.reason}",
    ]
    if note.files_changed:
        lines.append(f"- files it had changed: {', '.join(note.files_changed)}")
    if note.reason in TEXT_TURN_FAILURES:
        lines.append(f"- how to go on: call the tools. {WHOLE_FILE_HINT}")
    body: list[str] = []
    if note.message:
        body += ["failure:", note.message]
    if note.test_tail:
        body += [f"last lines of the failing test run ({note.test_command or 'tests'}):"]
        body += [note.test_tail]
    if note.summary:
        body += ["its own summary when it finished:", note.summary]
    text = "\n".join(lines) + "\n"
    if body:
        text += wrap_data("failure_note", f"attempt {note.attempt}", "\n".join(body))
    return text + "\n" + RETRY_START + "\n"


def with_failure_note(prompt: AssembledPrompt, note: FailureNote, attempt: int) -> AssembledPrompt:
    """``prompt`` with the note appended to its first user message and to its manifest."""
    text = render_note(note, attempt)
    item = make_item(
        f"failure_note:{note.attempt}", "failure_note", f"attempt {note.attempt}", "untrusted", text
    )
    return prompt.model_copy(
        update={
            "first_user_message": prompt.first_user_message + text,
            "manifest_items": [*prompt.manifest_items, item],
            "item_texts": [*prompt.item_texts, text],
            "item_sections": [*prompt.item_sections, "retry"],
        }
    )
