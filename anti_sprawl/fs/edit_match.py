"""Where ``edit_file``'s old text is in a file: exactly once, or else once up to whitespace.

A small model quotes the code it edits with its own spacing: ``def add(a, b): return a + b``
for a file that has the body on the next line, indented (make real-model 2026-12-03 run 5,
call 6), and the edit failed "old text not found". Aider's editor falls back the same way.
When the exact text is not in the file, the text whose words are the old text's words in the
same order, with any run of whitespace between them, counts if it occurs exactly once; the
words themselves (every character that is not whitespace) must match exactly.
"""

from __future__ import annotations

import re

__all__ = ["find_edit"]


def find_edit(text: str, old: str) -> tuple[int, int, bool] | int:
    """``(start, end, loose)`` of the one place ``old`` is in ``text`` (``loose``: found only
    up to whitespace), or how many places match when that is not exactly one."""
    count = text.count(old)
    if count == 1:
        start = text.index(old)
        return start, start + len(old), False
    if count > 1:
        return count
    words = old.split()
    if not words:
        return 0
    pattern = re.compile(r"\s+".join(re.escape(word) for word in words))
    found = [m.span() for m in pattern.finditer(text)]
    if len(found) != 1:
        return len(found)
    return found[0][0], found[0][1], True
