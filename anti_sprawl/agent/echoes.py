"""Our own instructions copied back into a reply, read as what they are: nothing said.

A small model continues the pattern in front of it. On a retry, the first user message ends
with the failure note (run/failure_note.py), and Qwen2.5-Coder-1.5B began reply after reply
with it, word for word: "This is attempt 2 at this task. Attempt 1 failed; ..." (make
real-model 2026-12-05 run ao, calls 13-18, and run an's test node run again). Each such reply
was answered as prose and kept in the conversation, where the next reply copied it again.
Replayed against the served model (run ao's request 17, 6 times each), the conversation as it
was drew 5 echoes and no call in 6; with the echoes taken out of the model's earlier turns and
the last one answered as an empty reply, 6 calls in 6.

So the lines of a reply that are lines of our own prose in the first user message (the brief
and the note: not the files in its data blocks, which a model rightly writes back) are taken
out where the worker judges a reply and where the conversation keeps it; the transcript keeps
the reply as it came, and writes and calls are read from it whole (agent/file_blocks.py,
providers/text_calls.py). Only lines of 12 characters or more count: a short line (a closing fence,
``Caps:``) says too little to be an echo.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["our_lines", "without_echo"]

MIN_CHARS = 12


def our_lines(texts: Iterable[str]) -> frozenset[str]:
    """The lines of ``texts`` outside our data blocks (trust.py), stripped, of at least
    ``MIN_CHARS`` characters."""
    found: set[str] = set()
    for text in texts:
        inside = False
        for line in text.splitlines():
            stripped = line.strip()
            if inside or stripped.startswith("<data "):
                inside = not stripped.endswith("</data>")
            elif len(stripped) >= MIN_CHARS:
                found.add(stripped)
    return frozenset(found)


def without_echo(reply: str, ours: frozenset[str]) -> str:
    """``reply`` without the lines that are lines of ``ours``."""
    if not ours:
        return reply
    kept = [line for line in reply.splitlines() if line.strip() not in ours]
    return "\n".join(kept) if len(kept) < len(reply.splitlines()) else reply
