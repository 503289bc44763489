"""Artifacts: full tool outputs and transcripts kept on disk, referenced as ``artifact://``.

Tool outputs are written whole (temp file + rename, no fsync: fs/files.py); a transcript grows by one JSON line per
event (``append``), read back with ``read_json_lines``.

``Observer`` turns a tool's output into what the model sees (redacted, long output stored
here and shown compact, wrapped as untrusted data) and keeps the full text, so masking and
the conversation digest (``agent/digest.py``) can point at it later.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..fs.files import atomic_write_text
from ..providers.base import ToolCall, ToolResult
from ..trust import wrap_data

__all__ = [
    "ArtifactStore",
    "Kept",
    "Observation",
    "Observer",
    "Rendered",
    "call_source",
    "read_json_lines",
]

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_KEY_LINE = re.compile(r"error|fail|assert|exception|traceback|denied|passed|warning", re.I)


class ArtifactStore:
    """Files under ``<run_dir>/artifacts/<task_id>/``; names are sanitized, never model paths.

    ``written`` lists every reference this store wrote (or was told of with ``ref``): what a
    node's attempt leaves behind. Numbered artifacts go on from the highest number already in
    the task's directory, so a later attempt or session never overwrites an earlier one's.
    """

    def __init__(self, root: Path):
        self.root = root
        self._lock = threading.Lock()
        self._counter: dict[str, int] = {}
        self.written: list[str] = []

    def save(self, task_id: str, kind: str, text: str) -> str:
        """Store ``text`` as a new numbered artifact; returns its ``artifact://`` reference."""
        task = _UNSAFE.sub("_", task_id)
        with self._lock:
            if task not in self._counter:
                self._counter[task] = _highest_number(self.root / task)
            n = self._counter[task] = self._counter[task] + 1
        name = f"{n:04d}-{_UNSAFE.sub('_', kind)}.txt"
        atomic_write_text(self.root / task / name, text, durable=False)
        return self.ref(task, name)

    def put(self, task_id: str, name: str, text: str) -> str:
        """Store (or overwrite) a named artifact, e.g. the transcript."""
        task = _UNSAFE.sub("_", task_id)
        safe = _UNSAFE.sub("_", name)
        atomic_write_text(self.root / task / safe, text, durable=False)
        return self.ref(task, safe)

    def ref(self, task_id: str, name: str) -> str:
        """The reference of ``<task_id>/<name>`` (written here or by a command's log), noted in
        ``written``."""
        ref = f"artifact://{_UNSAFE.sub('_', task_id)}/{name}"
        with self._lock:
            if ref not in self.written:
                self.written.append(ref)
        return ref

    def append(self, task_id: str, name: str, text: str, *, fresh: bool = False) -> str:
        """Append ``text`` to a named artifact (``fresh``: start it over), e.g. a transcript line.

        One ``write`` with ``O_APPEND`` per call: earlier lines are never rewritten, so a
        process killed mid-write leaves them intact and at most the last line cut short.
        """
        task = _UNSAFE.sub("_", task_id)
        safe = _UNSAFE.sub("_", name)
        path = self.root / task / safe
        path.parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(path, flags | (os.O_TRUNC if fresh else 0), 0o600)
        try:
            data = memoryview(text.encode("utf-8"))
            while data:
                data = data[os.write(fd, data) :]
        finally:
            os.close(fd)
        return self.ref(task, safe)

    def path(self, ref: str) -> Path:
        rel = ref.removeprefix("artifact://")
        if ".." in rel.split("/"):
            raise ValueError(f"bad artifact reference {ref!r}")
        return self.root / rel


def _highest_number(task_dir: Path) -> int:
    """The highest ``NNNN-`` prefix among a task's artifacts (0 when there are none)."""
    try:
        names = [entry.name for entry in task_dir.iterdir()]
    except OSError:
        return 0
    return max((int(n[:4]) for n in names if n[:4].isdigit() and n[4:5] == "-"), default=0)


def read_json_lines(path: Path) -> list[dict[str, Any]]:
    """The records of a JSON Lines artifact (a transcript), up to the first line that is not one.

    A process killed while appending leaves its last line cut short: the complete lines
    before it are the readable prefix, and that is what this returns.
    """
    records: list[dict[str, Any]] = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            break
        if not isinstance(record, dict):
            break
        records.append(record)
    return records


class Observation:
    """Truncation of long tool output into a typed summary: status, size, key lines, reference."""

    @staticmethod
    def compact(status: str, text: str, ref: str, *, key_lines: int = 12, tail: int = 15) -> str:
        lines = text.splitlines()
        keys = [ln for ln in lines if _KEY_LINE.search(ln)][:key_lines]
        shown_tail = lines[-tail:]
        parts = [
            f"[{status}; output truncated: {len(text)} chars, {len(lines)} lines; full text: {ref}]",
        ]
        if keys:
            parts += ["key lines:", *(f"  {ln[:300]}" for ln in keys)]
        parts += ["last lines:", *(f"  {ln[:300]}" for ln in shown_tail)]
        return "\n".join(parts)

    @staticmethod
    def masked(status: str, size: int, ref: str) -> str:
        return f"[{status}; earlier output masked to save context: {size} chars; full text: {ref}]"


class Rendered(Protocol):
    """What ``Observer.render`` needs of a tool's outcome (``dispatch.ToolOutcome``)."""

    @property
    def text(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def wrap(self) -> bool: ...


@dataclass
class Kept:
    """A tool result in full, kept so masking and the digest can point at it."""

    status: str
    text: str
    ref: str | None = None


@dataclass
class Observer:
    """Renders tool output for the model: redacted, long output cut, wrapped as data.

    With an artifact store, output over ``limit`` characters is stored in full and shown as
    a compact summary with its reference; without one it is cut with a note.
    """

    task_id: str
    limit: int
    artifacts: ArtifactStore | None = None
    redact: Callable[[str], str] = str
    kept: dict[str, Kept] = field(default_factory=dict)

    def render(self, call: ToolCall, outcome: Rendered) -> str:
        text = self.redact(outcome.text)  # before it is kept, logged, stored or shown
        kept = self.kept[call.id] = Kept(outcome.status, text)
        if not outcome.wrap:
            return text
        if len(text) > self.limit:
            if self.artifacts is not None:
                kept.ref = self.artifacts.save(self.task_id, f"{call.name}-output", text)
                text = Observation.compact(outcome.status, text, kept.ref)
            else:
                cut = len(text) - self.limit
                text = text[: self.limit] + f"\n[... {cut} more characters not shown]"
        # Tool output is data, never instructions: delimited, with delimiter look-alikes escaped.
        return wrap_data(outcome.kind, call_source(call), text or "(empty)")

    def error(self, call: ToolCall, text: str) -> ToolResult:
        self.kept[call.id] = Kept("error", f"error: {text}")
        return ToolResult(call_id=call.id, content=f"error: {text}", is_error=True)


def call_source(call: ToolCall) -> str:
    """How a call's output is labelled: the tool name and its path argument, if any."""
    path = call.arguments.get("path") or call.arguments.get("source")  # move_file: its source
    return f"{call.name} {path}" if isinstance(path, str) and path else call.name
