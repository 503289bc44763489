"""Scope requests: whether a worker's ``request_scope`` gets the file it asks for.

Plans are imperfect: a node may need one file its plan did not give it. The firewall stays
absolute (docs/security.md P5); the plan grows under it, on the record. ``--scope-requests``:

- ``never``: every request is refused (the node finishes with what it has, as before);
- ``auto``: a **read** of any file the planner's map could list (fs/repofiles.py: tracked or
  untracked and not ignored, no secret, nothing internal, no symlink on the way); a **write**
  of such a path (or a new one) only when no node the DAG leaves unordered with this one reads
  or writes an overlapping path (``fs.scopes.may_overlap``, the rule of plan/overlap.py), by
  its plan scopes or by what it was granted so far; at most ``MAX_GRANTS`` grants per attempt;
- ``ask``: the same checks, then the user says yes or no on the run's terminal; without one
  (or on a Dask worker) ``ask`` is ``never``.

The DAG is static, so the overlap check needs only the plan (``unordered_with``, computed
where the job is built and sent with it, so it holds on a Dask worker too; ``Neighbours``
computes it only when a write request reads it) plus the grants
of those nodes this process knows (``GrantLedger``: every local node shares one; a remote
node knows its neighbours' grants recorded before it started). The central process
re-checks a remote node's claimed writes against the same rules before it lands anything
(``confirmed_writes``). Every decision is a ``ScopeGrant`` in the node's journal record
(``TaskResult.scope_grants``), its manifests, its commit trailers and the PR body; the audit
keeps exactly the plan's write scope plus the granted writes.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, overload

import pathspec

from ..agent.tools import RequestScopeArgs
from ..fs.firewall import Firewall
from ..fs.repofiles import RepoReader
from ..fs.scope_grant import ScopeGrant, ScopeMode, requested_path
from ..fs.scopes import entry_problem, may_overlap
from ..git.workspace import Workspace
from ..plan.graph import Ordering, dependency_edges
from ..plan.model import Plan, TaskNode

__all__ = [
    "MAX_GRANTS",
    "SCOPE_REQUESTS",
    "GrantLedger",
    "Neighbour",
    "Neighbours",
    "ScopePolicy",
    "ScopeRequests",
    "confirmed",
    "granted_writes",
    "unordered_with",
]

ScopeRequests = Literal["auto", "ask", "never"]
SCOPE_REQUESTS: tuple[ScopeRequests, ...] = ("auto", "ask", "never")
MAX_GRANTS = 3
# ``ask``: (task id, the request) -> the user's yes; None where no terminal can be asked.
Asker = Callable[[str, ScopeGrant], bool]


@dataclass(frozen=True)
class Neighbour:
    """A node the DAG leaves unordered with the requesting one: its scopes (plan and granted)."""

    task_id: str
    read: tuple[str, ...]
    write: tuple[str, ...]


def unordered_with(
    plan: Plan,
    task_id: str,
    granted: Mapping[str, Sequence[ScopeGrant]] | None = None,
    ordering: Ordering | None = None,
) -> tuple[Neighbour, ...]:
    """The nodes that may run before, after or beside ``task_id``, with their plan scopes and
    the grants already recorded for them (``granted``: task id -> its journal's grants)."""
    order = ordering or Ordering(dependency_edges(plan))
    out = []
    for t in plan.tasks:
        if t.task_id == task_id or order.ordered(task_id, t.task_id):
            continue
        extra = [g for g in (granted or {}).get(t.task_id, ()) if g.granted]
        out.append(
            Neighbour(
                t.task_id,
                (*t.read_scope, *(g.path for g in extra if g.mode == "read")),
                (*t.write_scope, *(g.path for g in extra if g.mode == "write")),
            )
        )
    return tuple(out)


class Neighbours(Sequence[Neighbour]):
    """``unordered_with(plan, task_id, granted, ordering)``, computed when first read.

    Every job carries its node's neighbours, but only a write request reads them, and they
    cost a pass over the plan: in a plan of independent nodes each has all the others, so
    building them for every job made a node cost more at node 3,000 than at node 3 (issue 22;
    ``benchmarks/long_run.py``). ``granted`` is taken as the job is built (the grants recorded
    so far); a pickled copy (a Dask job, run/dask_executor.py) is the computed tuple, so a
    remote worker judges what the run's process would.
    """

    def __init__(
        self,
        plan: Plan,
        task_id: str,
        granted: Mapping[str, Sequence[ScopeGrant]],
        ordering: Ordering,
    ):
        self._args = (plan, task_id, dict(granted), ordering)
        self._items: tuple[Neighbour, ...] | None = None
        self._lock = threading.Lock()

    def _all(self) -> tuple[Neighbour, ...]:
        with self._lock:
            if self._items is None:
                self._items = unordered_with(*self._args)
            return self._items

    @overload
    def __getitem__(self, index: int) -> Neighbour: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Neighbour, ...]: ...

    def __getitem__(self, index: int | slice) -> Neighbour | tuple[Neighbour, ...]:
        return self._all()[index]

    def __len__(self) -> int:
        return len(self._all())

    def __iter__(self) -> Iterator[Neighbour]:
        return iter(self._all())

    def __reduce__(self) -> tuple[Any, ...]:
        return tuple, (self._all(),)

    def __repr__(self) -> str:
        return f"Neighbours({self._args[1]!r})"


class GrantLedger:
    """The grants of this process's running nodes, so two unordered local nodes never both
    get one path; shared by every node of a run (``NodeEnv.grants``)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._granted: dict[str, list[tuple[ScopeMode, str]]] = {}

    def add(self, task_id: str, mode: ScopeMode, path: str) -> None:
        self._granted.setdefault(task_id, []).append((mode, path))

    def of(self, task_id: str) -> list[tuple[ScopeMode, str]]:
        return list(self._granted.get(task_id, ()))


def _conflict(
    path: str,
    neighbours: Iterable[Neighbour],
    ledger: GrantLedger | None,
    kinds: tuple[str, ...] = ("writes", "reads"),
) -> str:
    """One line naming an unordered node that reads or writes (``kinds``) an overlapping path,
    or ''."""
    for n in neighbours:
        live = ledger.of(n.task_id) if ledger is not None else []
        for kind, entries in (
            ("writes", (*n.write, *(p for m, p in live if m == "write"))),
            ("reads", (*n.read, *(p for m, p in live if m == "read"))),
        ):
            if kind not in kinds:
                continue
            for entry in entries:
                if not entry_problem(entry) and may_overlap(path, entry):
                    return (
                        f"task '{n.task_id}' {kind} {entry!r} and the plan does not order it "
                        "before or after this task; finish with what you have"
                    )
    return ""


class ScopePolicy:
    """The decisions for one attempt of one node; ``log`` is what the record keeps."""

    def __init__(
        self,
        *,
        mode: ScopeRequests,
        node: TaskNode,
        neighbours: Sequence[Neighbour],
        ws: Workspace,
        firewall: Firewall,
        ledger: GrantLedger | None = None,
        ask: Asker | None = None,
        limit: int = MAX_GRANTS,
    ):
        self.mode, self.node, self.neighbours = mode, node, neighbours  # read on a write request
        self.ws, self.firewall, self.ledger, self.ask, self.limit = ws, firewall, ledger, ask, limit
        self.log: list[ScopeGrant] = []

    def __call__(self, args: RequestScopeArgs) -> list[ScopeGrant]:
        reason = " ".join(args.reason.split())[:500]
        out = []
        for raw in dict.fromkeys(args.paths):
            decided, recorded = self._decide(raw, args.mode, reason)
            out.append(decided)
            if recorded:
                self.log.append(decided)
        return out

    @property
    def granted(self) -> int:
        return sum(g.granted for g in self.log)

    def _decide(self, raw: str, mode: ScopeMode, reason: str) -> tuple[ScopeGrant, bool]:
        """The decision on one path, and whether the record keeps it (a path already in
        scope is answered, not recorded)."""
        path, problem = requested_path(raw)
        shown = path if path.isprintable() else repr(path)[1:-1]  # no control bytes
        shown = shown if len(shown) <= 300 else shown[:300] + "..."

        def answer(granted: bool, why: str, already: bool = False) -> ScopeGrant:
            return ScopeGrant(
                mode=mode, path=shown, reason=reason, granted=granted, why=why, already=already
            )

        fw = self.firewall
        if not problem and (fw.write_scope if mode == "write" else fw.read_scope).matches(path):
            return answer(True, f"already in your {mode} scope", already=True), False
        why = problem or self._refusal(path, mode)
        if why:
            return answer(False, why), True
        lock = self.ledger.lock if self.ledger is not None else threading.Lock()
        with lock:  # the check and the grant are one step for the run's local nodes
            why = _conflict(path, self.neighbours, self.ledger) if mode == "write" else ""
            why = why or self._asked(answer(False, ""))
            if why:
                return answer(False, why), True
            fw.grant(mode, path)
            if self.ledger is not None:
                self.ledger.add(self.node.task_id, mode, path)
        how = "asked and granted" if self.mode == "ask" else "granted"
        if mode == "write":
            return answer(True, f"{how}: no task unordered with this one reads or writes it"), True
        stale = _conflict(path, self.neighbours, self.ledger, kinds=("writes",))
        note = f" ({stale.split(' and the plan')[0]} unordered: it may change)" if stale else ""
        return answer(True, f"{how}: a file of the repository map{note}"), True

    def _refusal(self, path: str, mode: ScopeMode) -> str:
        """Why the policy refuses ``path`` before any overlap check, or ''."""
        if self.mode == "never":
            return "scope requests are off for this run (--scope-requests never)"
        if self.granted >= self.limit:
            return f"the limit of {self.limit} grants per node is reached"
        return self._path_problem(path, mode)

    def _asked(self, request: ScopeGrant) -> str:
        """``ask``: '' when the user said yes (or the mode is not ask), else why not."""
        if self.mode != "ask":
            return ""
        if self.ask is None:
            return "no terminal to ask on (--scope-requests ask): refused"
        return "" if self.ask(self.node.task_id, request) else "the user refused it"

    def _missing(self) -> str:
        if self.ws.sparse is not None:
            return "not checked out in this sparse worktree (--sparse)"
        return "no such file at this task's base"

    def _path_problem(self, path: str, mode: ScopeMode) -> str:
        """Why ``path`` is no file the repository map could list (a write may be new)."""
        if _ignored(self.ws, path):
            return "an ignored file (.gitignore) is never in scope"
        root = self.ws.path
        parts = path.split("/")
        for i in range(1, len(parts) + 1):
            try:
                st = os.lstat(root.joinpath(*parts[:i]))
            except FileNotFoundError:
                if mode == "read":
                    return self._missing()
                break
            except OSError as exc:
                return f"cannot be checked: {exc.strerror}"
            if stat.S_ISLNK(st.st_mode):
                return "a symlink is never granted; name the file it leads to"
            if i < len(parts) and not stat.S_ISDIR(st.st_mode):
                return "a parent of it is not a directory"
            if i == len(parts) and not stat.S_ISREG(st.st_mode):
                return "not a regular file (directories are never granted; name each file)"
        if mode == "read" and RepoReader(root).real_file(path) is None:
            return "not a file the repository map lists"
        return ""


def _ignored(ws: Workspace, path: str) -> bool:
    """An untracked path the worktree's ``.gitignore`` files (root to parent) or the
    repository's ``info/exclude`` ignore: what ``git ls-files --exclude-standard`` (the map's
    listing, fs/repofiles.py) leaves out. Tracked files are listed whatever the patterns say."""
    if ws.git(["ls-files", "-z", "--", path]).stdout:
        return False
    parts = path.split("/")
    common = ws.git(["rev-parse", "--git-common-dir"]).stdout.decode().strip()
    exclude = (ws.path / common) / "info" / "exclude"  # an absolute one replaces ws.path
    layers = [("", exclude)]
    layers += [
        ("/".join(parts[:i]), ws.path.joinpath(*parts[:i], ".gitignore")) for i in range(len(parts))
    ]
    ignored = False
    for base, source in layers:
        try:
            if not stat.S_ISREG(os.lstat(source).st_mode):
                continue
            lines = source.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        rel = path[len(base) + 1 :] if base else path
        spec = pathspec.GitIgnoreSpec.from_lines(lines)
        result = spec.check_file(rel)
        if result.include is not None:
            ignored = result.include  # a deeper file's pattern overrides a shallower one
    return ignored


def granted_writes(grants: Iterable[ScopeGrant]) -> list[str]:
    """The paths a node was granted to write: what its audit keeps beyond the plan's scope."""
    return [g.path for g in grants if g.granted and g.mode == "write"]


def confirmed(
    neighbours: Sequence[Neighbour], grants: Iterable[ScopeGrant], limit: int = MAX_GRANTS
) -> list[ScopeGrant]:
    """A remote worker's claimed grants as the run's process judges them: a claimed write is
    kept only when it is a plain path, no secret or internal file, overlaps no unordered
    node and is within the limit; any other is turned into a refusal, so the central re-audit
    (git/landing_audit.py) keeps nothing it would not have granted itself."""
    out: list[ScopeGrant] = []
    kept = 0
    for g in grants:
        if g.granted:
            canonical, problem = requested_path(g.path)
            conflict = _conflict(canonical, neighbours, None) if g.mode == "write" else ""
            why = problem or conflict or ("" if canonical == g.path else "not a canonical path")
            if not why and kept >= limit:
                why = f"the limit of {limit} grants per node is reached"
            if why:
                g = g.model_copy(
                    update={"granted": False, "why": f"not confirmed by the run: {why}"}
                )
            else:
                kept += 1
        out.append(g)
    return out
