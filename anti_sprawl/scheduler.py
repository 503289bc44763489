"""The scheduler: a ready/done loop over the DAG that runs up to ``jobs`` nodes at once.

``DagScheduler`` follows graphlib's protocol (``get_ready`` / ``done`` / ``is_active``) and
adds failure propagation: when a node fails, all its descendants are ``skipped`` with the
failed dependency named, while independent branches go on. ``run_dag`` drives it with a thread
pool (workers spend their time waiting on models and subprocesses, not on the GIL).
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Literal

__all__ = ["DagScheduler", "NodeOutcome", "run_dag", "topological_order"]

NodeOutcome = Literal["succeeded", "failed"]


class DagScheduler:
    """Ready/done bookkeeping for a validated (acyclic) DAG given as ``task -> dependencies``."""

    def __init__(self, deps: Mapping[str, Sequence[str]], order: Sequence[str] | None = None):
        self._order = list(order) if order is not None else list(deps)
        self._rank = {t: i for i, t in enumerate(self._order)}
        self._waiting = {t: set(ds) for t, ds in deps.items()}
        self._dependents: dict[str, list[str]] = {t: [] for t in deps}
        for t, ds in deps.items():
            for d in ds:
                self._dependents[d].append(t)
        self.status: dict[str, str] = dict.fromkeys(deps, "pending")
        self.skipped_because: dict[str, str] = {}
        self._handed_out: set[str] = set()

    def mark(self, task: str, outcome: str) -> None:
        """Record an outcome known before running (e.g. from a resumed journal)."""
        if outcome == "succeeded":
            self._handed_out.add(task)
            self.done(task, "succeeded")

    def get_ready(self) -> list[str]:
        """Pending nodes whose dependencies all succeeded, in plan order; each returned once."""
        ready = [
            t
            for t in self._order
            if self.status[t] == "pending" and not self._waiting[t] and t not in self._handed_out
        ]
        for t in ready:
            self._handed_out.add(t)
            self.status[t] = "running"
        return ready

    def done(self, task: str, outcome: NodeOutcome) -> list[str]:
        """Mark ``task`` finished; returns the nodes newly skipped because it failed."""
        self.status[task] = outcome
        if outcome == "succeeded":
            for child in self._dependents[task]:
                self._waiting[child].discard(task)
            return []
        skipped: list[str] = []
        stack = list(self._dependents[task])
        while stack:
            child = stack.pop()
            if self.status[child] in ("pending",):
                self.status[child] = "skipped"
                self.skipped_because[child] = task
                skipped.append(child)
                stack.extend(self._dependents[child])
        return sorted(skipped, key=self._rank.__getitem__)

    def is_active(self) -> bool:
        """True while some node is running or could still become ready."""
        return any(s in ("pending", "running") for s in self.status.values())


def run_dag(
    deps: Mapping[str, Sequence[str]],
    run_node: Callable[[str], NodeOutcome],
    *,
    jobs: int = 1,
    order: Sequence[str] | None = None,
    already_succeeded: Sequence[str] = (),
    on_skip: Callable[[str, str], None] | None = None,
    stop: threading.Event | None = None,
    land: Callable[[str], NodeOutcome] | None = None,
) -> DagScheduler:
    """Run every node through ``run_node`` respecting dependencies, ``jobs`` at a time.

    ``run_node`` must not raise for an ordinary failure (return "failed"); an exception is
    treated as a failure of that node and re-raised after the running nodes have finished.
    When ``stop`` is set, no new node starts; running ones are left to finish (they watch the
    same event) and the remaining nodes stay ``pending``.

    With ``land``, a node that ``run_node`` reports "succeeded" is only ready to land: ``land``
    is called for it on this thread, strictly in topological order (ties by ``order``), and
    only what lands releases its dependents. The result's order is then the same however the
    threads interleave; a node's dependencies always precede it, so the order never waits on
    a node that cannot start.
    """
    sched = DagScheduler(deps, order)
    for task in already_succeeded:
        sched.mark(task, "succeeded")
    stop = stop or threading.Event()
    errors: list[BaseException] = []
    lander = _Lander(topological_order(deps, order), land) if land else None
    with ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="node") as pool:
        running: dict[Future[NodeOutcome], str] = {}
        try:
            _loop(sched, pool, running, run_node, stop, errors, on_skip, lander)
        except BaseException:
            # Ctrl-C: running nodes watch ``stop`` and wind down; the pool waits for them.
            stop.set()
            raise
    if errors:
        raise errors[0]
    return sched


def _loop(
    sched: DagScheduler,
    pool: ThreadPoolExecutor,
    running: dict[Future[NodeOutcome], str],
    run_node: Callable[[str], NodeOutcome],
    stop: threading.Event,
    errors: list[BaseException],
    on_skip: Callable[[str, str], None] | None,
    lander: _Lander | None,
) -> None:
    def finish(task: str, outcome: NodeOutcome) -> None:
        for child in sched.done(task, outcome):
            if on_skip:
                on_skip(child, task)

    while True:
        if not stop.is_set() and not errors:
            for task in sched.get_ready():
                running[pool.submit(run_node, task)] = task
        if not running:
            return
        finished, _ = wait(running, return_when=FIRST_COMPLETED)
        for fut in finished:
            task = running.pop(fut)
            exc = fut.exception()
            if exc is not None:
                errors.append(exc)
            outcome: NodeOutcome = "failed" if exc is not None else fut.result()
            if lander is not None and outcome == "succeeded":
                lander.ready.add(task)
            else:
                finish(task, outcome)
        if lander is not None:
            lander.land_in_order(sched, finish, errors)


def topological_order(
    deps: Mapping[str, Sequence[str]], order: Sequence[str] | None = None
) -> list[str]:
    """Kahn's order of an acyclic graph, ties broken by position in ``order``."""
    rank = {t: i for i, t in enumerate(order if order is not None else list(deps))}
    waiting = {t: len(ds) for t, ds in deps.items()}
    dependents: dict[str, list[str]] = {t: [] for t in deps}
    for t, ds in deps.items():
        for d in ds:
            dependents[d].append(t)
    heap = [(rank[t], t) for t, n in waiting.items() if n == 0]
    heapq.heapify(heap)
    out: list[str] = []
    while heap:
        _, t = heapq.heappop(heap)
        out.append(t)
        for child in dependents[t]:
            waiting[child] -= 1
            if waiting[child] == 0:
                heapq.heappush(heap, (rank[child], child))
    return out


class _Lander:
    """Lands finished nodes one at a time, in a fixed topological order."""

    def __init__(self, order: list[str], land: Callable[[str], NodeOutcome]):
        self.order = order
        self.land = land
        self.ready: set[str] = set()
        self.position = 0

    def land_in_order(
        self,
        sched: DagScheduler,
        finish: Callable[[str, NodeOutcome], None],
        errors: list[BaseException],
    ) -> None:
        while self.position < len(self.order):
            task = self.order[self.position]
            if sched.status[task] in ("succeeded", "failed", "skipped"):
                self.position += 1
            elif task in self.ready:
                self.ready.discard(task)
                try:
                    outcome = self.land(task)
                except Exception as exc:  # a landing bug fails the node; re-raised at the end
                    errors.append(exc)
                    outcome = "failed"
                finish(task, outcome)
                self.position += 1
            else:
                return  # the next node in the order is still running or waiting to start
