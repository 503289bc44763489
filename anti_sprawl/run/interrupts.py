"""Ctrl-C, SIGTERM and SIGHUP during a run: the first stops the run, the second leaves at once.

``timeout``, ``kill``, a CI cancellation (SIGTERM) and a closed terminal (SIGHUP) are the same
request as Ctrl-C (SIGINT): stop. The first of them only sets the run's ``stop`` event: the
scheduler hands out no further node, running nodes wind down at their next step (a model call
in flight has its result discarded), and after a grace period the ones still stuck (a hung
server) are abandoned. A second one raises ``KeyboardInterrupt`` where the main thread is,
which abandons the running nodes at once. Either way the worktrees are removed and the journal
is written once more (``interrupted``, the unfinished nodes ``pending``), so ``resume`` can
finish the run; the process exits with 128 + the first signal's number.

Python delivers signals to the main thread only, so the handlers are installed only there (a
run started from another thread keeps Python's default behaviour).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType

__all__ = ["STOP_SIGNALS", "Stops", "stop_signals"]

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@dataclass
class Stops:
    """The stop signals received while the handlers were installed; the first one's number."""

    presses: int = 0
    first: int | None = None

    @property
    def pressed(self) -> bool:
        return self.presses > 0

    @property
    def name(self) -> str:
        """``SIGTERM``, ``SIGHUP``; Ctrl-C for SIGINT (what the user did)."""
        if self.first is None or self.first == signal.SIGINT:
            return "Ctrl-C"
        return signal.Signals(self.first).name

    @property
    def exit_code(self) -> int:
        return 128 + (self.first or signal.SIGINT)


@contextmanager
def stop_signals(stop: threading.Event) -> Iterator[Stops]:
    """Within the block, the first stop signal sets ``stop``; the next raise KeyboardInterrupt."""
    seen = Stops()
    if threading.current_thread() is not threading.main_thread():
        yield seen
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        seen.presses += 1
        if seen.presses > 1:
            raise KeyboardInterrupt
        seen.first = signum
        stop.set()

    previous = {signum: signal.signal(signum, handler) for signum in STOP_SIGNALS}
    try:
        yield seen
    finally:
        for signum, before in previous.items():
            signal.signal(signum, before)
