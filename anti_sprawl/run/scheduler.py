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
        # Nodes whose dependencies have all succeeded, by plan position: a finish pushes its
        # newly ready dependents, so handing out nodes never scans the whole plan (a scan per
        # finish made a run's scheduling grow with the square of its nodes).
        self._ready = [(self._rank[t], t) for t, ds in self._waiting.items() if not ds]
        heapq.heapify(self._ready)

    def rank(self, task: str) -> int:
        """``task``'s position in the plan order."""
        return self._rank[task]

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
        wanted = len(self._order) if limit is None else max(0, limit)
        while self._ready and len(ready) < wanted:
            _, t = heapq.heappop(self._ready)
            if self.status[t] == "pending" and not self._waiting[t] and t not in self._handed_out:
                ready.append(t)
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

    With ``land``, a node that ``run_node`` reports "succeeded" is landed by ``land``, on this
    thread, as soon as it finishes (nodes finished together: in plan order), and only what
    lands releases its dependents, which can start at once. A node starts only once its
    dependencies landed, so they always precede it; nodes the DAG leaves unordered land in
    the order they finished, which the run puts back in a fixed order before anything judges
    the branch (run/branch_order.py). (Landing in a fixed order instead held every finished
    node, and its dependents, behind the slowest node before it: about twice the makespan of
    a 100-node plan at 8 parallel, docs/development.md.)
    """
    sched = DagScheduler(deps, order)
    for task in already_succeeded:
        sched.mark(task, "succeeded")
    stop = stop or threading.Event()
    errors: list[BaseException] = []
    driver = _Driver(sched, run_node, max(1, jobs), stop, on_skip, land, errors)
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
    """The loop of ``run_dag``: start nodes into free slots, collect and land them."""

    def __init__(
        self,
        sched: DagScheduler,
        run_node: Callable[[str], NodeVerdict],
        jobs: int,
        stop: threading.Event,
        on_skip: Callable[[str, str], None] | None,
        land: Callable[[str], NodeVerdict] | None,
        errors: list[BaseException],
    ):
        self.sched = sched
        self.run_node = run_node
        self.jobs = jobs
        self.stop = stop
        self.on_skip = on_skip
        self.land = land
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
        rank = self.sched.rank
        for task, _, _ in done:
            self.running.discard(task)
        if not self.stop.is_set() and not self.errors:
            # Their slots are free now: nodes already ready start before these land (a landing
            # releases only their dependents), so no slot idles through the landings.
            self._start_ready()
        for task, outcome, exc in sorted(done, key=lambda d: rank(d[0])):
            if exc is not None:
                self.errors.append(exc)
                outcome = "failed"
            if self.land is not None and outcome == "succeeded":
                try:
                    outcome = self.land(task)
                except Exception as error:  # a landing bug fails the node; re-raised at the end
                    self.errors.append(error)
                    outcome = "failed"
            self._finish(task, outcome)
            if not self.stop.is_set() and not self.errors:
                self._start_ready()  # its dependents start while the next one lands


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
