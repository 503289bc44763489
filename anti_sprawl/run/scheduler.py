"""The scheduler: a ready/done loop over the DAG that runs up to ``jobs`` nodes at once.

``DagScheduler`` follows graphlib's protocol (``get_ready`` / ``done`` / ``is_active``) and
adds failure propagation: when a node fails, all its descendants are ``skipped`` with the
failed dependency named, while independent branches go on. ``run_dag`` drives it with one
thread per running node (workers spend their time waiting on models and subprocesses, not on
the GIL), handing out a node only when a slot is free, so a stop takes effect at once: nothing
is queued behind the running nodes.

The threads are daemons: a node stuck in a model call that a stop cannot interrupt is
abandoned after the grace period instead of holding the process (see ``runner._drive`` for
what the run does about it: it keeps its lock until the process is gone).
"""

from __future__ import annotations

import heapq
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence

from ..lifecycle import NodeStatus, NodeVerdict

__all__ = ["DagScheduler", "run_dag", "topological_order"]


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
        self.status: dict[str, NodeStatus] = dict.fromkeys(deps, "pending")
        self.skipped_because: dict[str, str] = {}
        self.abandoned: set[str] = set()  # still running when run_dag gave up waiting
        self._handed_out: set[str] = set()
        # (plan position, task) of every node whose dependencies all succeeded and that was not
        # handed out yet: get_ready takes from it, never scanning the plan (called after every
        # node and 10 times a second, a scan made a 3,000-node run's bookkeeping quadratic).
        self._ready = [(self._rank[t], t) for t in self._order if not self._waiting[t]]
        heapq.heapify(self._ready)

    def mark(self, task: str, outcome: NodeVerdict) -> None:
        """Record an outcome known before running (e.g. from a resumed journal)."""
        if outcome == "succeeded":
            self._handed_out.add(task)
            self.done(task, "succeeded")

    def get_ready(self, limit: int | None = None) -> list[str]:
        """Pending nodes whose dependencies all succeeded, in plan order; each returned once.

        With ``limit``, at most that many (the rest stay pending for a later call).
        """
        ready: list[str] = []
        while self._ready and (limit is None or len(ready) < limit):
            _, t = heapq.heappop(self._ready)
            if self.status[t] == "pending" and t not in self._handed_out:
                ready.append(t)  # else skipped or marked meanwhile: never handed out
        for t in ready:
            self._handed_out.add(t)
            self.status[t] = "running"
        return ready

    def done(self, task: str, outcome: NodeVerdict) -> list[str]:
        """Mark ``task`` finished; returns the nodes newly skipped because it failed."""
        self.status[task] = outcome
        if outcome == "succeeded":
            for child in self._dependents[task]:
                waiting = self._waiting[child]
                if task in waiting:
                    waiting.discard(task)
                    if not waiting:
                        heapq.heappush(self._ready, (self._rank[child], child))
            return []
        skipped: list[str] = []
        stack = list(self._dependents[task])
        while stack:
            child = stack.pop()
            if self.status[child] == "pending":
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
    run_node: Callable[[str], NodeVerdict],
    *,
    jobs: int = 1,
    order: Sequence[str] | None = None,
    already_succeeded: Sequence[str] = (),
    on_skip: Callable[[str, str], None] | None = None,
    stop: threading.Event | None = None,
    land: Callable[[str], NodeVerdict] | None = None,
    grace: float | None = None,
) -> DagScheduler:
    """Run every node through ``run_node`` respecting dependencies, ``jobs`` at a time.

    ``run_node`` must not raise for an ordinary failure (return "failed"); an exception is
    treated as a failure of that node and re-raised after the running nodes have finished.
    When ``stop`` is set, no new node starts; running ones are left to finish (they watch the
    same event) and the remaining nodes stay ``pending``. With ``grace``, nodes still running
    that many seconds after the stop are abandoned: ``run_dag`` returns, and they are listed
    in the result's ``abandoned``. An exception in this thread (a second Ctrl-C) abandons them
    at once.

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
    driver = _Driver(sched, run_node, max(1, jobs), stop, on_skip, lander, errors)
    try:
        driver.loop(grace)
    except BaseException:
        stop.set()  # running nodes watch it; this thread does not wait for them
        raise
    finally:
        sched.abandoned = set(driver.running)
    if errors:
        raise errors[0]
    return sched


_Done = tuple[str, NodeVerdict, BaseException | None]


class _Driver:
    """The loop of ``run_dag``: start nodes into free slots, collect them, land them in order."""

    def __init__(
        self,
        sched: DagScheduler,
        run_node: Callable[[str], NodeVerdict],
        jobs: int,
        stop: threading.Event,
        on_skip: Callable[[str, str], None] | None,
        lander: _Lander | None,
        errors: list[BaseException],
    ):
        self.sched = sched
        self.run_node = run_node
        self.jobs = jobs
        self.stop = stop
        self.on_skip = on_skip
        self.lander = lander
        self.errors = errors
        self.running: set[str] = set()
        self.results: queue.Queue[_Done] = queue.Queue()

    def _work(self, task: str) -> None:
        try:
            self.results.put((task, self.run_node(task), None))
        except BaseException as exc:  # reported to the loop, which fails the node
            self.results.put((task, "failed", exc))

    def _finish(self, task: str, outcome: NodeVerdict) -> None:
        for child in self.sched.done(task, outcome):
            if self.on_skip:
                self.on_skip(child, task)

    def loop(self, grace: float | None) -> None:
        stopped_at: float | None = None
        while True:
            if not self.stop.is_set() and not self.errors:
                self._start_ready()
            if not self.running:
                return
            if self.stop.is_set():
                stopped_at = time.monotonic() if stopped_at is None else stopped_at
                if grace is not None and time.monotonic() - stopped_at >= grace:
                    return  # the nodes still running are abandoned
            done = self._wait()
            if done:
                self._record(done)

    def _start_ready(self) -> None:
        for task in self.sched.get_ready(limit=self.jobs - len(self.running)):
            self.running.add(task)
            threading.Thread(
                target=self._work, args=(task,), name=f"node-{task}", daemon=True
            ).start()

    def _wait(self) -> list[_Done]:
        """What finished: waits a short time, so a stop (Ctrl-C) is noticed even while nothing
        finishes; then takes everything else already done."""
        try:
            done = [self.results.get(timeout=0.1)]
        except queue.Empty:
            return []
        while not self.results.empty():
            done.append(self.results.get_nowait())
        return done

    def _record(self, done: list[_Done]) -> None:
        for task, outcome, exc in done:
            self.running.discard(task)
            if exc is not None:
                self.errors.append(exc)
                outcome = "failed"
            if self.lander is not None and outcome == "succeeded":
                self.lander.ready.add(task)
            else:
                self._finish(task, outcome)
        if self.lander is not None:
            self.lander.land_in_order(self.sched, self._finish, self.errors)


def topological_order(
    deps: Mapping[str, Sequence[str]], order: Sequence[str] | None = None
) -> list[str]:
    """Kahn's order of an acyclic graph, ties broken by position in ``order``.

    Hand-written: ``networkx.lexicographical_topological_sort`` is several times slower on a
    10k-node plan (``benchmarks/validate_scale.py``).
    """
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

    def __init__(self, order: list[str], land: Callable[[str], NodeVerdict]):
        self.order = order
        self.land = land
        self.ready: set[str] = set()
        self.position = 0

    def land_in_order(
        self,
        sched: DagScheduler,
        finish: Callable[[str, NodeVerdict], None],
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
