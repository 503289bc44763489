"""Does a node's change add anything? A diff can be non-empty and still hold no work.

A real model (make real-model, run 5: tests/fixtures/real_model/subtract_run10.json) was asked
to add ``subtract()``; it rewrote ``calc.py`` as its old ``add()`` without the docstring and
blank lines, reflowed the old test, and called ``finish`` claiming "Added the subtract
function". The old tests passed and the diff was not empty, so the empty-diff rule
(run/node_work.py, ``no_changes``) let it succeed. This module tells such a change apart: one
that only *removes* text from files that already existed, or changes their whitespace.

The test is on the text, not on git's line diff: with all whitespace taken out, every
non-blank line of the new file must appear in the old file's text, in order and without
overlapping (a reflowed line is pieces of an old one; a deleted line is simply skipped). A
single line that is new, or text put in another order, is an addition. Added, deleted,
renamed and retyped files, mode changes and binary files are always changes of substance:
the rule only judges text files edited in place, and a node whose goal asks for removal or
reformatting (:func:`goal_allows_removal`) is not judged at all.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .audit import Change
from .secret_scan import parse_batch

if TYPE_CHECKING:
    from .workspace import Workspace

__all__ = ["edited_texts", "goal_allows_removal", "only_removes", "text_only_removes"]

# Goals whose honest result may be a diff that only deletes text or changes whitespace.
_REMOVAL_WORDS = re.compile(
    r"\b(remov\w*|delet\w*|drop\w*|strip\w*|prun\w*|trim\w*|get rid|clean\w*\s*up|unused|"
    r"dead code|deprecat\w*|dedup\w*|duplicat\w*|simplif\w*|shorten\w*|reformat\w*|format\w*|"
    r"whitespace|indent\w*|re-?wrap\w*|reflow\w*|lint\w*|tidy\w*|revert\w*|undo\w*)",
    re.IGNORECASE,
)
# A file this large is judged a change of substance unread: the check is for small edits.
_MAX_BYTES = 2_000_000


def goal_allows_removal(goal: str) -> bool:
    """True when ``goal`` asks for something a deletion or a reformat can honestly do."""
    return _REMOVAL_WORDS.search(goal) is not None


def _squeezed_lines(text: str) -> list[str]:
    return [line for line in ("".join(raw.split()) for raw in text.splitlines()) if line]


def text_only_removes(old: str, new: str) -> bool:
    """True when ``new`` is ``old`` with text deleted and whitespace changed, nothing else."""
    haystack = "".join(old.split())
    pos = 0
    for line in _squeezed_lines(new):
        found = haystack.find(line, pos)
        if found < 0:
            return False
        pos = found + len(line)
    return True


def only_removes(ws: Workspace, kept: Sequence[Change]) -> bool:
    """True when every kept change is an in-place edit of a text file that only removes text
    or changes whitespace (not judged, so False, when any change is of another kind)."""
    if not kept or any(c.kind != "modified" for c in kept):
        return False
    texts = edited_texts(ws, kept)
    return texts is not None and all(text_only_removes(*pair) for pair in texts.values())


def edited_texts(ws: Workspace, kept: Sequence[Change]) -> dict[str, tuple[str, str]] | None:
    """``path -> (old text, new text)`` of each kept change, when every one edits a text file
    in place or adds one (old text ""): one ``git cat-file --batch`` reads the ``HEAD`` side of
    the edits. None when any change is of another kind (deleted, renamed, a mode change), a
    symlink, binary, too large or unreadable: such a change is not judged here."""
    if not kept or any(c.kind not in ("modified", "added") or c.mode_changed for c in kept):
        return None
    new: dict[str, bytes] = {}
    for change in kept:
        path = ws.path / change.path
        try:
            if path.is_symlink() or path.stat().st_size > _MAX_BYTES:
                return None
            new[change.path] = path.read_bytes()
        except OSError:
            return None
    edited = [c.path for c in kept if c.kind == "modified"]
    old: dict[str, bytes] = dict.fromkeys(new, b"")
    if edited:
        query = "".join(f"HEAD:{p}\n" for p in edited).encode("utf-8", "surrogateescape")
        out = ws.git(["cat-file", "--batch"], input_bytes=query).stdout
        blobs = [blob for _, blob in parse_batch(out)]
        if len(blobs) != len(edited):
            return None  # a path git could not read: judge nothing
        old.update(zip(edited, blobs, strict=True))
    if any(b"\0" in old[p] or b"\0" in new[p] for p in new):
        return None  # binary: not ours to judge
    return {p: (old[p].decode("utf-8", "replace"), new[p].decode("utf-8", "replace")) for p in new}
