"""Keeping a worker's conversation under its per-call cap: masking, then a typed digest.

Two steps, mildest first, each applied only when the next request does not fit:

1. **Mask**: every tool result but the latest turn's becomes a one-line reference to the full
   output, stored as an artifact (already-masked results stay byte-identical, so a provider's
   prompt cache keeps the unchanged prefix).
2. **Digest**: everything between the first prompt and the latest turn is replaced by one
   message listing, per tool call, what was read, edited or tested, its status, a few words
   of essentials and the artifact reference, never the raw output. The latest turn (the
   model's last message and its results) stays whole: it is what the model acts on next.

Apart from the budget, ``restart`` drops everything after the first prompt, for a worker
whose model has stopped answering (agent/worker.py: empty replies); the worker then sends
where the attempt stands, a message that starts with ``RESTART_HEADER``.

What is left (system prompt, tools, first prompt, digest, latest turn) is the essential part;
when even that does not fit, ``explain`` says how big each piece is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel

from ..providers.base import (
    AssistantMessage,
    ToolCall,
    ToolResult,
    ToolResultMessage,
    UserMessage,
    request_text,
    turn_text,
)
from ..trust import wrap_data
from .artifacts import ArtifactStore, Kept, Observation
from .dispatch import ToolOutcome
from .loop import Loop

__all__ = ["DIGEST_HEADER", "RESTART_HEADER", "Compactor", "Digest", "DigestEntry"]

DIGEST_HEADER = "Digest of your earlier calls"
RESTART_HEADER = "# Where you are"
_NOTE_CHARS = 160
_TARGET_CHARS = 120


class DigestEntry(BaseModel):
    """One earlier tool call, reduced to its essentials."""

    call: int  # the model call (turn) that made it
    tool: str
    target: str = ""  # the path or pattern it was about
    status: Literal["ok", "failed", "error"]
    note: str = ""  # first line of the outcome, never the raw output
    ref: str | None = None  # the full output, when it was stored


class Digest(BaseModel):
    """Every tool call before the latest turn, plus how many turns had no tool call."""

    entries: list[DigestEntry]
    text_turns: int = 0

    def render(self, task_id: str) -> str:
        lines = []
        for group in _runs(self.entries):
            e, n = group[-1], len(group)
            calls = f"call {e.call}" if n == 1 else f"calls {group[0].call}-{e.call} ({n} times)"
            target = f" {e.target}" if e.target else ""
            ref = f" (full output: {e.ref})" if e.ref else ""
            note = f": {e.note}" if e.note else ""
            lines.append(f"- {calls}, by you: {e.tool}{target} -> {e.status}{note}{ref}")
        if self.text_turns:
            lines.append(f"- {self.text_turns} turn(s) without a tool call")
        body = "\n".join(lines) or "(no tool calls yet)"
        head = (
            f"{DIGEST_HEADER} (older turns were removed to stay under the per-call token cap; "
            "files you changed are changed on disk, read them again if you need their text):\n"
        )
        return head + wrap_data("digest", task_id, body)


def _runs(entries: list[DigestEntry]) -> list[list[DigestEntry]]:
    """Consecutive entries that say the same thing (a file re-read five times) grouped."""
    groups: list[list[DigestEntry]] = []
    for e in entries:
        last = groups[-1][-1] if groups else None
        if last is not None and (last.tool, last.target, last.status, last.note) == (
            e.tool,
            e.target,
            e.status,
            e.note,
        ):
            groups[-1].append(e)
        else:
            groups.append([e])
    return groups


def _target(call: ToolCall) -> str:
    """What a call was about: its path and, for a search, the pattern."""
    found = [call.arguments.get(key) for key in ("path", "source", "pattern")]
    words = [repr(v) if key == 2 else v for key, v in enumerate(found) if isinstance(v, str) and v]
    return " ".join(words)[:_TARGET_CHARS]


def _first_line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")


@dataclass
class Compactor:
    """Masking and digesting for one worker ``Loop``; records a digest entry per tool call."""

    loop: Loop
    artifacts: ArtifactStore
    entries: list[DigestEntry] = field(default_factory=list)
    text_turns: list[int] = field(default_factory=list)  # calls that made no tool call
    masked: set[str] = field(default_factory=set)
    digests: int = 0

    @property
    def first(self) -> UserMessage:
        first = self.loop.messages[0]
        assert isinstance(first, UserMessage)
        return first

    def record(self, call: ToolCall, outcome: ToolOutcome | None) -> None:
        """Note one dispatched call (after the observer kept its full result)."""
        kept = self.loop.observer.kept.get(call.id) or Kept("error", "")
        status: Literal["ok", "failed", "error"] = "error"
        if outcome is not None and kept.status in ("ok", "failed"):
            status = "ok" if kept.status == "ok" else "failed"
        if outcome is None:
            note = _first_line(kept.text)  # our own error message, never tool output
        else:
            note = outcome.summary or f"{len(kept.text):,} chars of output"
        self.entries.append(
            DigestEntry(
                call=self.loop.calls,
                tool=call.name,
                target=_target(call),
                status=status,
                note=self.loop.observer.redact(note)[:_NOTE_CHARS],
                ref=kept.ref,
            )
        )

    def text_turn(self) -> None:
        self.text_turns.append(self.loop.calls)

    def mask(self) -> bool:
        """Replace every tool result but the latest turn's with a masked reference."""
        messages = self.loop.messages
        changed = False
        last = max(
            (i for i, m in enumerate(messages) if isinstance(m, ToolResultMessage)), default=-1
        )
        for i, message in enumerate(messages):
            if i == last or not isinstance(message, ToolResultMessage):
                continue
            new: list[ToolResult] = []
            for r in message.results:
                if r.call_id in self.masked:
                    new.append(r)
                    continue
                self.masked.add(r.call_id)
                kept = self.loop.observer.kept.get(r.call_id) or Kept(
                    "error" if r.is_error else "ok", r.content
                )
                if kept.ref is None:
                    kept.ref = self.artifacts.save(self.loop.task_id, "observation", kept.text)
                content = Observation.masked(kept.status, len(kept.text), kept.ref)
                new.append(ToolResult(call_id=r.call_id, content=content, is_error=r.is_error))
                changed = True
            messages[i] = ToolResultMessage(results=new)
        return changed

    def _latest(self) -> int:
        """Index of the latest turn: the last assistant message."""
        return max(i for i, m in enumerate(self.loop.messages) if isinstance(m, AssistantMessage))

    def digest(self) -> bool:
        """Replace everything between the first prompt and the latest turn with a digest."""
        messages = self.loop.messages
        if not any(isinstance(m, AssistantMessage) for m in messages):
            return False
        latest = self._latest()
        if latest <= 1:
            return False  # nothing between the first prompt and the latest turn
        current = self.loop.calls
        done = Digest(
            entries=[e for e in self.entries if e.call < current],
            text_turns=sum(1 for c in self.text_turns if c < current),
        )
        new = [self.first, UserMessage(content=done.render(self.loop.task_id))]
        if messages[:latest] == new:
            return False
        self.loop.messages[:] = [*new, *messages[latest:]]
        self.digests += 1
        return True

    def restart(self) -> None:
        """Drop every turn after the first prompt (the worker says next where things stand)."""
        self.loop.messages[:] = [self.first]

    def compactions(self) -> list[Callable[[], bool]]:
        return [self.mask, self.digest]

    def explain(self) -> str:
        """Sizes of the pieces of the next request (estimated tokens)."""
        loop = self.loop
        est = loop.budget.counter.estimate
        prefix = request_text(loop.build(1).model_copy(update={"messages": [self.first]}))
        parts = [f"system, tools and first prompt {est(prefix):,}"]
        messages = loop.messages
        latest = self._latest() if any(isinstance(m, AssistantMessage) for m in messages) else 0
        middle = messages[1:latest] if latest else messages[1:]
        if middle:
            text = "\n".join(_message_text(m) for m in middle)
            parts.append(f"earlier turns or their digest {est(text):,}")
        if latest:
            text = "\n".join(_message_text(m) for m in messages[latest:])
            parts.append(f"latest turn {est(text):,}")
        cap = loop.budget.per_call
        return "; ".join(parts) + (f"; per-call cap {cap:,}" if cap is not None else "")


def _message_text(message: object) -> str:
    if isinstance(message, UserMessage):
        return message.content
    if isinstance(message, AssistantMessage):
        return turn_text(message.text, message.tool_calls)
    if isinstance(message, ToolResultMessage):
        return "\n".join(r.content for r in message.results)
    return ""
