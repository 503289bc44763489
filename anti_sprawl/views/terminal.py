"""The boundary where text reaches a terminal: whatever it says, it arrives inert.

Task names, goals, summaries, file names, test output and validation messages come from a
model, a repository, a test command or a plan file. Printed raw, an ``ESC ] 52`` (OSC 52) writes
the user's clipboard, a CSI moves the cursor over the verdict, a C1 ``0x9b`` does the same on
8-bit terminals, and a BEL or CR rewrites what a line seems to say. Rich's markup escape keeps
ESC, so it is not enough (issue 25, docs/security.md P18).

One function, :func:`inert`, makes every C0 and C1 control character (and DEL, and the Unicode
bidirectional overrides) visible as a ``\\xNN`` / ``\\uNNNN`` escape; a newline and a tab stay,
a carriage return goes. :class:`InertConsole` applies it to every text segment a Rich console
writes, after markup and layout and before its own styles become escape sequences, so the
console's colours, tables and live display still work while nothing inside a text can act.
Every console the command line prints to people on is one (cli/output.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.segment import Segment

__all__ = ["InertConsole", "inert", "inert_console"]

_KEEP = {"\n", "\t"}
_BIDI = [*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x2028, 0x2029]
_TABLE: dict[int, str] = {
    **{c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F, *range(0x80, 0xA0)) if chr(c) not in _KEEP},
    **{c: f"\\u{c:04x}" for c in _BIDI},
    0x0D: "",
}


def inert(text: str) -> str:
    """``text`` with every control character made visible (a carriage return removed)."""
    return text.translate(_TABLE)


class InertConsole(Console):
    """A Rich console whose texts cannot carry terminal controls (its own styles still can)."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        # Control segments are Rich's own cursor moves (the live display); every other
        # segment's text may hold what a model or a repository wrote.
        clean = (seg if seg.control else Segment(inert(seg.text), seg.style) for seg in buffer)
        return super()._render_buffer(clean)


def inert_console(*, stderr: bool = False, **options: Any) -> Console:
    """A console for people (stdout, or stderr), without Rich's highlighter."""
    return InertConsole(stderr=stderr, highlight=False, **options)
