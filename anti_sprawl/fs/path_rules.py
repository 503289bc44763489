"""What a requested path may look like, and how refusals read.

The lexical gate runs before the filesystem is touched: it refuses absolute, home-relative,
Windows-style, NUL-bearing and ``..`` paths outright and never rewrites a path (no ``~``
expansion, no URL decoding, no Unicode normalization: docs/security.md F10-F15). Which names
are never served is ``deny_rules``.
"""

from __future__ import annotations

import os
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict

from ..errors import ToolError
from .scopes import MAX_COMPONENT, MAX_PATH

__all__ = [
    "DirEntry",
    "EditError",
    "FirewallError",
    "GrepMatch",
    "Op",
    "Reason",
    "Refusal",
    "Violation",
    "display_path",
    "split_request",
]

Op = Literal["read", "write", "delete", "move", "list", "search", "command", "audit"]
Reason = Literal[
    "absolute",
    "escape_root",
    "outside_scope",
    "not_writable_scope",
    "denied_secret",
    "denied_internal",
    "symlink_escape",
    "hardlink",
    "special_file",
    "too_large",
    "binary",
    "not_found",
    "not_a_file",
    "not_a_directory",
    "bad_path",
    "name_too_long",
    "bad_pattern",
    "bad_content",
    "race",
    "io_error",
    "symlink_path",
    "scope_root",
    "exists",
]

_DRIVE = re.compile(r"^[A-Za-z]:")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_DISPLAY_MAX = 300


class DirEntry(BaseModel):
    """One ``list_dir`` entry, described without following symlinks."""

    model_config = ConfigDict(frozen=True)

    name: str
    kind: Literal["file", "dir", "symlink", "other"]
    size: int


class GrepMatch(BaseModel):
    """One matching line: canonical path, 1-based line number, the line (truncated)."""

    model_config = ConfigDict(frozen=True)

    path: str
    line_no: int
    line: str


class Violation(BaseModel):
    """One refused operation: what was asked, and a short reason code for why not."""

    model_config = ConfigDict(frozen=True)

    op: Op
    path: str
    reason: str
    detail: str = ""


class FirewallError(ToolError):
    """An operation the firewall refused; ``violation`` says which and why."""

    def __init__(self, violation: Violation):
        text = f"{violation.op} {violation.path!r} refused: {violation.reason}"
        super().__init__(f"{text} ({violation.detail})" if violation.detail else text)
        self.violation = violation


class EditError(ToolError):
    """``edit_text`` found its old text zero or several times; the file was not changed."""


class Refusal(Exception):
    """Internal: a refusal before the public method knows the operation and the request."""

    def __init__(self, reason: Reason, detail: str = ""):
        super().__init__(f"{reason}: {detail}")
        self.reason: Reason = reason
        self.detail = detail


def display_path(path: object) -> str:
    """A printable, bounded form of a requested path for logs and violations."""
    text = path if isinstance(path, str) else repr(path)
    if not text.isprintable():
        text = repr(text)[1:-1]
    return text if len(text) <= _DISPLAY_MAX else text[:_DISPLAY_MAX] + "..."


def split_request(path: object, *, want_file: bool) -> tuple[str, ...]:
    """The components of a requested repo-relative path, or a ``Refusal``.

    ``want_file`` refuses the root itself and a trailing ``/`` (they name directories).
    """
    if not isinstance(path, str):
        raise Refusal("bad_path", "the path must be a string")
    _refuse_characters(path)
    parts = _bounded_parts(path)
    if ".." in parts:
        raise _dotdot_refusal(parts)
    if want_file and (not parts or path.endswith("/")):
        raise Refusal("not_a_file", "the path names a directory, not a file")
    return parts


def _refuse_characters(path: str) -> None:
    """Refuse the characters and prefixes a repo-relative POSIX path never has."""
    if "\x00" in path:
        raise Refusal("bad_path", "NUL byte in path")
    if _CONTROL.search(path):
        raise Refusal("bad_path", "control character in path")
    if "\\" in path:
        raise Refusal("bad_path", "backslash in path (use POSIX '/' separators)")
    if path.startswith("/"):
        raise Refusal("absolute", "absolute paths are refused; use a repo-relative path")
    if _DRIVE.match(path):
        raise Refusal("bad_path", "drive letter in path")
    if path.startswith("~"):
        raise Refusal("bad_path", "'~' is never expanded; use a repo-relative path")


def _bounded_parts(path: str) -> tuple[str, ...]:
    """The non-empty, non-``.`` components, refused when the path or one is too long."""
    try:
        raw = os.fsencode(path)
    except UnicodeEncodeError:
        raise Refusal("bad_path", "path is not encodable as a file name") from None
    if len(raw) > MAX_PATH:
        raise Refusal("name_too_long", f"path longer than {MAX_PATH} bytes")
    parts = tuple(p for p in path.split("/") if p not in ("", "."))
    if any(len(os.fsencode(p)) > MAX_COMPONENT for p in parts):
        raise Refusal("name_too_long", f"path component longer than {MAX_COMPONENT} bytes")
    return parts


def _dotdot_refusal(parts: tuple[str, ...]) -> Refusal:
    """Why a path with ``..`` is refused: leaving the workspace, or not being canonical."""
    depth = 0
    for part in parts:
        depth += -1 if part == ".." else 1
        if depth < 0:
            return Refusal("escape_root", "'..' leads outside the workspace")
    return Refusal("bad_path", "'..' segments are refused; use the canonical path")
