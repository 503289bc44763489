"""Ctrl-C during a run: the first stops the run, the second leaves at once.

The first SIGINT only sets the run's ``stop`` event: the scheduler hands out no further node,
running nodes wind down at their next step (a model call in flight has its result discarded),
and after a grace period the ones still stuck (a hung server) are abandoned. A second SIGINT
raises ``KeyboardInterrupt`` where the main thread is, which abandons the running nodes at
once. Either way the journal is written once more (``interrupted``, the unfinished nodes
``pending``), so ``resume`` can finish the run.

Python delivers signals to the main thread only, so the handler is installed only there (a
run started from another thread keeps Python's default behaviour).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType

__all__ = ["CtrlC", "ctrl_c_stops"]


@dataclass
class CtrlC:
    """How many times Ctrl-C was pressed while the handler was installed."""

    presses: int = 0

    @property
    def pressed(self) -> bool:
        return self.presses > 0


@contextmanager
def ctrl_c_stops(stop: threading.Event) -> Iterator[CtrlC]:
    """Within the block, the first Ctrl-C sets ``stop``; the next ones raise KeyboardInterrupt."""
    seen = CtrlC()
    if threading.current_thread() is not threading.main_thread():
        yield seen
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        seen.presses += 1
        if seen.presses > 1:
            raise KeyboardInterrupt
        stop.set()

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield seen
    finally:
        signal.signal(signal.SIGINT, previous)
