"""The journal's append-only event log (``events.jsonl`` beside ``run.json``): one line per change.

Rewriting the whole ``run.json`` (plan and every task record) on each change made a run's
journal I/O grow with the square of its plan (issue 22: 2.7 MB rewritten ~5 times per node at
1,000 nodes). Instead a change appends one line that holds only what changed: a task's whole
record (``{"seq": n, "task": {...}}``) or the run's header, every field but the plan, the
task records and the plan revisions (``{"seq": n, "run": {...}}``). Each line replaces what it
names, so replaying the lines in order over the snapshot gives the state.

``run.json`` is the snapshot: the whole ``RunState`` with ``seq``, the last event folded into
it. It is written (temp file, fsync, rename) at the start and end of a run and when the log
outgrows it (``compaction_due``), then the log is emptied. Crash safety:

- a line is whole or it is ignored: it is written with one ``write`` and fsynced, and a
  ``kill -9`` (or a full disk) can only cut the last one, which has no newline yet;
- a crash between the snapshot's rename and the log's truncation leaves lines the snapshot
  already holds: their ``seq`` is not above the snapshot's, so they are skipped;
- a reader reads the log before the snapshot: a compaction in between only gives it a newer
  snapshot whose ``seq`` covers every line it read.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["LogTail", "LogWriter", "compaction_due", "event_line", "fsync_dir", "read_log"]

# Compact once the log is this many times the last snapshot (and at least COMPACT_MIN bytes):
# each compaction rewrites the snapshot, so journal bytes per change stay a constant factor
# over the change itself, and a read never replays more than a few snapshots' worth.
COMPACT_RATIO = 4
COMPACT_MIN = 256 * 1024


def event_line(seq: int, kind: str, payload_json: str) -> bytes:
    """One log line: ``{"seq": n, "<kind>": <payload>}`` and a newline."""
    return f'{{"seq":{seq},"{kind}":{payload_json}}}\n'.encode()


def compaction_due(log_bytes: int, snapshot_bytes: int) -> bool:
    return log_bytes >= max(COMPACT_MIN, COMPACT_RATIO * snapshot_bytes)


@dataclass
class LogTail:
    """The events of a log after a snapshot, and where its last whole line ends."""

    events: list[tuple[int, str, Any]] = field(default_factory=list)  # (seq, kind, payload)
    good_bytes: int = 0  # the length of the whole lines; a torn tail starts here
    problem: str | None = None  # why the log cannot be used (a damaged line mid-log)


def read_log(path: Path) -> LogTail:
    """Every whole line of the log at ``path`` (missing: none). A cut or unreadable last line
    is a torn write and is left out; a damaged line before the last is a ``problem``."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return LogTail()
    tail = LogTail()
    lines = data.split(b"\n")
    whole = lines[:-1]  # the last piece is "" or a line a crash cut before its newline
    offset = 0
    for i, raw in enumerate(whole):
        try:
            event = json.loads(raw)
            seq = event["seq"]
            (kind,) = (k for k in event if k != "seq")
            if not isinstance(seq, int) or kind not in ("task", "run"):
                raise ValueError(f"unknown event {kind!r}")
        except (ValueError, KeyError, TypeError) as exc:
            if i == len(whole) - 1:
                break  # the last line, garbled by a crash (zeros after a power loss)
            tail.problem = f"line {i + 1} of {path.name} is not a journal event ({exc})"
            return tail
        tail.events.append((seq, kind, event[kind]))
        offset += len(raw) + 1
        tail.good_bytes = offset
    return tail


class LogWriter:
    """Appends whole lines to the log, from where its last whole line ends (``size``).

    Opened on the first write: a reader's journal never opens it. Opening cuts a torn tail an
    earlier process left; a failed write is cut off again, so the next line starts clean.
    """

    def __init__(self, path: Path, size: int = 0):
        self.path = path
        self.size = size
        self._fd: int | None = None

    def _open(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
            os.ftruncate(self._fd, self.size)
        return self._fd

    def append(self, line: bytes) -> None:
        """Write ``line`` durably (fsync) after the last whole line; OSError if it fails."""
        fd = self._open()
        try:
            done = 0
            while done < len(line):  # a short write only happens on a full disk
                done += os.pwrite(fd, line[done:], self.size + done)
            os.fsync(fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, self.size)
            raise
        self.size += len(line)

    def reset(self) -> None:
        """Empty the log: a snapshot now holds all of it."""
        if self._fd is None and not self.path.exists():
            self.size = 0
            return
        self.size = 0
        fd = self._open()
        os.ftruncate(fd, 0)
        os.fsync(fd)

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None


def fsync_dir(path: Path) -> None:
    """Make a rename in ``path`` durable (best effort: some file systems refuse)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)
