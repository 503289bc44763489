"""The central run's heartbeat, and the watch that stops a remote node when it stops.

A Dask task cannot be killed from outside its worker, and a central process killed with
``kill -9`` cancels nothing. So the central run keeps a counter going in a Dask ``Variable``
(``Heartbeat``), and each remote node watches it from a thread of its own (``Watch``), which
sets the node's stop event (the one the worker loop checks between model calls and tool
calls) when the run says it stopped (Ctrl-C, a run cap, the end of the run) or when the
counter has not moved for ``timeout`` seconds of the worker's own clock: the run is gone, and
its orphaned node winds down instead of spending tokens nobody will land.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from distributed import Client

__all__ = ["STOPPED", "Heartbeat", "Watch"]

STOPPED = "stopped"


def _variable(client: Client, name: str) -> Any:
    from distributed import Variable

    return Variable(name, client=client)


class Heartbeat:
    """Central side: bumps ``name`` every ``interval`` seconds until ``stop``."""

    def __init__(self, client: Client, name: str, interval: float):
        self.name = name
        self.interval = interval
        self._var = _variable(client, name)
        self._done = threading.Event()
        self._beats = 0
        self._var.set(self._beats)
        self._thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.wait(self.interval):
            self._beats += 1
            try:
                self._var.set(self._beats)
            except Exception:  # a lost scheduler: the remote nodes stop by themselves
                return

    def stop(self, *, tell: bool = True) -> None:
        """No more beats; with ``tell``, remote nodes stop at once instead of timing out."""
        self._done.set()
        self._thread.join(timeout=self.interval + 5)
        if tell:
            try:
                self._var.set(STOPPED)
            except Exception:  # nothing to tell: the nodes time out instead
                return


class Watch:
    """Remote side: sets ``stop`` when the heartbeat says stopped or stalls for ``timeout``."""

    def __init__(self, client: Client, name: str, timeout: float, stop: threading.Event):
        self.why: str | None = None
        self._var = _variable(client, name)
        self._timeout = timeout
        self._stop = stop
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="heartbeat-watch", daemon=True)

    def __enter__(self) -> Watch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join(timeout=self._timeout + 5)

    def _run(self) -> None:
        poll = max(0.05, min(1.0, self._timeout / 4))
        last, seen = time.monotonic(), None
        while not self._done.wait(poll):
            try:
                value = self._var.get(timeout=poll)
            except Exception:  # unset, or the scheduler is unreachable: no beat seen
                value = seen
            if value == STOPPED:
                self.why = "the central run stopped"
            elif value != seen:
                last, seen = time.monotonic(), value
                continue
            elif time.monotonic() - last > self._timeout:
                self.why = f"no heartbeat from the central run for {self._timeout:g}s"
            if self.why:
                self._stop.set()
                return
