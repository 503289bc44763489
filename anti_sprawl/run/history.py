"""What earlier runs in a repository spent, for the estimate's expected value.

A range from the first call to every call at its cap is honest but wide: real nodes spend a
small share of their high end. The finished nodes of the repository's recent runs against a
real provider say how small (planner/estimate.py prices it); the scripted provider's runs
(the demo, tests) say nothing about a model and are left out.
"""

from __future__ import annotations

from pathlib import Path
from statistics import median

from ..agent.worker import CALL_SLACK
from ..errors import UsageError
from ..git.layout import StateLayout
from ..planner.estimate import History
from .journal import RunState, read_state

__all__ = ["RECENT_RUNS", "used_share"]

RECENT_RUNS = 10  # the newest runs read: enough nodes, and a 3,000-node run is not read often
MIN_NODES = 3  # fewer finished nodes than this say too little: the prior is used


def used_share(repo: Path) -> History | None:
    """The median share of its high end a finished node of a recent run spent (None: too few
    such nodes, or no readable run)."""
    shares: list[float] = []
    runs = 0
    for state in _recent(repo):
        if state.provider in ("", "scripted"):
            continue
        found = False
        for task in state.tasks.values():
            if task.status not in ("succeeded", "failed") or task.calls == 0:
                continue
            high = (
                task.token_budget * (task.max_tool_calls + CALL_SLACK) * max(task.max_attempts, 1)
            )
            if high <= 0:
                continue
            shares.append(min(1.0, task.total_tokens.total / high))
            found = True
        runs += found
    if len(shares) < MIN_NODES:
        return None
    return History(share=median(shares), nodes=len(shares), runs=runs)


def _recent(repo: Path) -> list[RunState]:
    """The newest ``RECENT_RUNS`` readable runs (by their journal's change time)."""
    try:
        layout = StateLayout.checked(repo)  # a committed .anti-sprawl/ is not our record
        dirs = [d for d in layout.runs.iterdir() if d.is_dir()]
        dated = sorted(((_changed(layout, d.name), d.name) for d in dirs), reverse=True)
    except (UsageError, OSError):
        return []
    out: list[RunState] = []
    for _, run_id in dated[:RECENT_RUNS]:
        try:
            out.append(read_state(layout.run(run_id))[0])
        except (UsageError, OSError):
            continue
    return out


def _changed(layout: StateLayout, run_id: str) -> float:
    paths = layout.run(run_id)
    times = [p.stat().st_mtime for p in (paths.journal, paths.events) if p.exists()]
    return max(times, default=0.0)
