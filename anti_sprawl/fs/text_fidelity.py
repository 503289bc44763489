"""A file's line endings and final newline survive a model that thinks in ``\\n``.

Models read and write text with ``\\n`` line breaks. A file whose every line break is CRLF is
shown to the model with ``\\n`` and written back with CRLF; a whole-file rewrite of a file that
had no final newline drops the one the model (almost always) adds. Mixed line endings are
shown and written exactly as they are. Content that already carries ``\\r`` is written verbatim,
and a new file is written exactly as given: deleting a file and writing it again is how a node
changes these conventions on purpose. Permission bits are kept by ``scoped_write``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TextShape", "for_model", "from_model"]


@dataclass(frozen=True)
class TextShape:
    """The conventions of an existing text file that a rewrite keeps."""

    crlf: bool
    final_newline: bool

    @classmethod
    def of(cls, text: str) -> TextShape:
        """The shape of ``text`` as stored (before ``for_model``)."""
        lf = text.count("\n")
        # An empty file has no convention to keep.
        final = text.endswith("\n") or not text
        return cls(crlf=lf > 0 and text.count("\r\n") == lf, final_newline=final)

    def kept(self, *, whole: bool) -> str:
        """What a write over a file of this shape kept, for the model ('' when nothing)."""
        parts = ["CRLF line endings"] if self.crlf else []
        if whole and not self.final_newline:
            parts.append("no newline at end of file")
        return f"kept the file's {' and '.join(parts)}" if parts else ""


def for_model(text: str) -> str:
    """The text a model sees: CRLF turned into ``\\n`` when every line break is CRLF."""
    if "\r" not in text:  # no CRLF to turn (most files: no shape to build for them)
        return text
    return text.replace("\r\n", "\n") if TextShape.of(text).crlf else text


def from_model(new: str, old: TextShape | None, *, whole: bool) -> str:
    """The text to store for ``new`` written over a file of shape ``old`` (None: new file).

    ``whole`` is a full rewrite (``write_file``); edits and appends keep the end as written.
    """
    if old is None:
        return new
    if whole and not old.final_newline and new.endswith("\n"):
        new = new[:-1]
    if old.crlf and "\r" not in new:
        new = new.replace("\n", "\r\n")
    return new
