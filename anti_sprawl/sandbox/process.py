"""Running one process group with a deadline, a bounded output capture and no survivors.

The command is started in its own session (``start_new_session``), so on timeout, on a
normal exit with stray children, and on KeyboardInterrupt the whole group gets SIGKILL.
Combined stdout+stderr is kept as head + tail in memory and copied to a log file up to
``max_total`` bytes; a command that writes more is ended (``Ended`` says why it stopped).
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Literal

from ..errors import RunError

__all__ = ["Ended", "OutputCapture", "execute"]

Ended = Literal["exited", "timeout", "output"]


class OutputCapture:
    """Keeps the first and last ``limit/2`` bytes of a stream and tees it to a log file."""

    def __init__(self, limit: int, log: IO[bytes] | None, max_total: int | None = None):
        self.half = limit // 2
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self.log = log
        self.max_total = max_total

    @property
    def exceeded(self) -> bool:
        """More output than ``max_total``: the command is ended, the log stops there."""
        return self.max_total is not None and self.total > self.max_total

    def feed(self, chunk: bytes) -> None:
        logged = self.total
        self.total += len(chunk)
        if self.log is not None:
            room = len(chunk) if self.max_total is None else max(0, self.max_total - logged)
            self.log.write(chunk[:room])
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk
        if len(self.tail) > self.half:
            del self.tail[: len(self.tail) - self.half]

    def text(self, log_path: Path | None) -> str:
        omitted = self.total - len(self.head) - len(self.tail)
        if omitted <= 0:
            return (bytes(self.head) + bytes(self.tail)).decode("utf-8", "replace")
        where = f"; full output in {log_path}" if log_path else ""
        marker = f"\n[... {omitted} bytes omitted{where} ...]\n"
        return self.head.decode("utf-8", "replace") + marker + self.tail.decode("utf-8", "replace")


_EXIT_GRACE = 0.5  # after the command exits, how long leftover children may hold the pipe
_DRAIN_LIMIT = 2.0


def _pump(proc: subprocess.Popen[bytes], cap: OutputCapture, deadline: float) -> Ended:
    """Copy output into ``cap`` until the command is done, its deadline or its output cap."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    exited_at: float | None = None
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while True:
            now = time.monotonic()
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at >= _EXIT_GRACE:
                return "exited"
            if now >= deadline:
                return "exited" if exited_at is not None else "timeout"
            if not sel.select(timeout=min(deadline - now, 0.1)):
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                try:
                    proc.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    return "timeout"
                return "exited"
            cap.feed(chunk)
            if cap.exceeded:
                return "output"


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    # start_new_session made the command a group leader: its pid is the group id.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _drain(proc: subprocess.Popen[bytes], cap: OutputCapture) -> None:
    """Read what is left after the kill, bounded in time (a stray holder may keep the pipe)."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    end = time.monotonic() + _DRAIN_LIMIT
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while (left := end - time.monotonic()) > 0 and sel.select(timeout=left):
            chunk = os.read(fd, 1 << 16)
            if not chunk or cap.exceeded:
                return
            cap.feed(chunk)


def execute(
    full: list[str], cwd: Path, env: Mapping[str, str], timeout: float, cap: OutputCapture
) -> tuple[int, Ended]:
    """Run ``full`` to completion, ``timeout`` seconds or its output cap: (exit code, why)."""
    try:
        proc = subprocess.Popen(
            full,
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as exc:
        raise RunError(f"cannot start {full[0]!r}: {exc}") from exc
    try:
        ended = _pump(proc, cap, time.monotonic() + timeout)
    finally:
        # Always: on timeout, on success (stray children) and on KeyboardInterrupt.
        _kill_group(proc)
        _drain(proc, cap)
        proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()
    return proc.returncode, ended
