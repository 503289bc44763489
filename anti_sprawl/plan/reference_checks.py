"""Checks of what a task's Python write files use against the plan (warnings, with a repo).

Scope entries say what a node may read; references say what its code uses
(``outline.references``: names traced to their defining modules through re-exports). Two
warnings follow: ``stale_reference``, a module defining a name the task's files use is
written by a task the DAG leaves unordered against it (the worker may see it before or after
that change, like a stale read, but found through the code rather than the read scope), and
``read_coverage``, used definitions in files outside the task's scopes (the worker cannot
read them; the planner adds them to its own plans, ``planner/assist.py``
``with_used_definitions``, and a plan the user wrote keeps the warning).

Which files each task writes, and who writes each file, come from one ``FileIndex`` of the
listing (by prefix, not every file against every task): at 1,000 nodes the all-pairs loops
were two million scope tests (issue 29, item 3).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from ..fs.file_index import FileIndex
from ..fs.scopes import Scope
from ..outline.references import References
from .graph import Ordering
from .model import Plan, TaskNode
from .report import Problem, problem

__all__ = ["MAX_SHOWN", "reference_warnings"]

MAX_SHOWN = 3  # files named in one warning
_MAX_BYTES = 2 * 1024 * 1024  # a larger Python file is not parsed for references


def reference_warnings(
    plan: Plan, repo: Path, files: list[str], edges: dict[str, list[str]]
) -> list[Problem]:
    """``stale_reference`` and ``read_coverage`` warnings for ``plan`` on ``repo``'s files."""
    refs = References(files, lambda p: _read(repo, p))
    ordering = Ordering(edges)
    index = FileIndex(files)
    written = {t.task_id: index.matching(Scope(t.write_scope)) for t in plan.tasks}
    writers: dict[str, list[str]] = {}  # file -> the tasks writing it, in plan order
    for task in plan.tasks:
        for path in written[task.task_id]:
            writers.setdefault(path, []).append(task.task_id)
    order = {path: i for i, path in enumerate(files)}
    out: list[Problem] = []
    for task in plan.tasks:
        mine = sorted(
            (p for p in written[task.task_id] if p.endswith(".py")), key=order.__getitem__
        )
        out.extend(_task_warnings(task, refs, mine, writers, ordering))
    return out


def _task_warnings(
    task: TaskNode,
    refs: References,
    mine: list[str],
    writers: dict[str, list[str]],
    ordering: Ordering,
) -> Iterator[Problem]:
    """``task``'s warnings; ``mine``: the Python files it writes, in listing order."""
    own = Scope([*task.read_scope, *task.write_scope])
    defining: dict[str, None] = {}
    for path in mine:
        defining.update(dict.fromkeys(u.definition.path for u in refs.uses(path)))
    stale: set[str] = set()
    for d in defining:
        for other in writers.get(d, ()):
            if other != task.task_id and not ordering.ordered(task.task_id, other):
                stale.add(d)
                msg = (
                    f"task '{task.task_id}' uses names defined in {d}, which task '{other}' "
                    f"writes, but neither depends on the other: it may see either version; "
                    f"add a dependency"
                )
                yield problem("stale_reference", msg, [task.task_id, other], [d])
    uncovered = [d for d in defining if not own.matches(d) and d not in stale]
    if uncovered:
        shown = ", ".join(uncovered[:MAX_SHOWN])
        more = f" and {len(uncovered) - MAX_SHOWN} more" if len(uncovered) > MAX_SHOWN else ""
        msg = (
            f"task '{task.task_id}' uses names defined in {shown}{more}, outside its scopes: "
            f"its worker cannot read them (add them to read_scope)"
        )
        yield problem("read_coverage", msg, [task.task_id], uncovered)


def _read(repo: Path, path: str) -> str | None:
    """The file's text as ``Path.read_text(encoding="utf-8")`` gives it (line breaks made
    ``\n``), or None for a symlink, a file over ``_MAX_BYTES`` or one that cannot be read.
    One ``open`` that refuses a symlink (``O_NOFOLLOW``, as an ``lstat`` did) and plain reads
    of the descriptor, the bytes decoded at once: a text wrapper per file was a tenth of the
    reference checks of a 1,000-module plan, and a ``Path`` and a buffered file object per
    file still half of what is left (issue 29, item 3)."""
    try:
        fd = os.open(f"{repo}/{path}", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        size = os.fstat(fd).st_size
        if size > _MAX_BYTES:
            return None
        chunks = [os.read(fd, size + 1)]
        while chunks[-1]:  # to the end, as a read of the whole file goes
            chunks.append(os.read(fd, 1 << 16))
        text = b"".join(chunks).decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    finally:
        os.close(fd)
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text
