"""Artifacts: full tool outputs and transcripts kept on disk, referenced as ``artifact://``."""

from __future__ import annotations

import re
import threading
from pathlib import Path

from .plan import atomic_write_text

__all__ = ["ArtifactStore", "Observation"]

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_KEY_LINE = re.compile(r"error|fail|assert|exception|traceback|denied|passed|warning", re.I)


class ArtifactStore:
    """Files under ``<run_dir>/artifacts/<task_id>/``; names are sanitized, never model paths."""

    def __init__(self, root: Path):
        self.root = root
        self._lock = threading.Lock()
        self._counter: dict[str, int] = {}

    def save(self, task_id: str, kind: str, text: str) -> str:
        """Store ``text`` as a new numbered artifact; returns its ``artifact://`` reference."""
        task = _UNSAFE.sub("_", task_id)
        with self._lock:
            n = self._counter.get(task, 0) + 1
            self._counter[task] = n
        name = f"{n:04d}-{_UNSAFE.sub('_', kind)}.txt"
        atomic_write_text(self.root / task / name, text)
        return f"artifact://{task}/{name}"

    def put(self, task_id: str, name: str, text: str) -> str:
        """Store (or overwrite) a named artifact, e.g. the transcript."""
        task = _UNSAFE.sub("_", task_id)
        safe = _UNSAFE.sub("_", name)
        atomic_write_text(self.root / task / safe, text)
        return f"artifact://{task}/{safe}"

    def path(self, ref: str) -> Path:
        rel = ref.removeprefix("artifact://")
        if ".." in rel.split("/"):
            raise ValueError(f"bad artifact reference {ref!r}")
        return self.root / rel


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
