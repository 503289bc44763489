"""The run's DAG as inline SVG for the HTML report (views/html_report.py): drawn here, in
Python, so the report needs no script and no network to show it.

Layout is layered by depth (``plan.graph.plan_layers``: a node's layer is one past its
deepest dependency), one column per layer, nodes in plan order within it; edges are straight
lines from a dependency's right side to its dependent's left side. Each node is a link to its
section of the report, coloured by status; the critical path (``plan.graph.critical_path``
weighed by each node's wall time, so the chain that bounded the run) has a thick outline and
its edges are drawn bold. Every id and name is escaped with ``html.escape`` (the caller passes
text already redacted).
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from itertools import pairwise

from ..plan.graph import critical_path, dependency_edges, plan_layers
from ..plan.model import Plan, TaskNode
from ..run.result import TaskResult

__all__ = ["STATUS_COLOURS", "dag_svg", "run_critical_path"]

# Fill colours by status (views/run.py's words); text is dark on every one of them.
STATUS_COLOURS = {
    "succeeded": "#8fd19e",
    "failed": "#f19c9c",
    "skipped": "#f5d77a",
    "interrupted": "#f5b971",
    "running": "#8ecae6",
    "pending": "#d9d9d9",
}
BOX_W, BOX_H = 170, 46
GAP_X, GAP_Y, PAD = 60, 18, 12
LABEL = 22  # characters of an id or name that fit in a box


def _seconds(r: TaskResult) -> float:
    """How long the node ran, from its journal's timestamps (0 when it never ran)."""
    if not r.started_at or not r.finished_at:
        return 0.0
    try:
        delta = datetime.fromisoformat(r.finished_at) - datetime.fromisoformat(r.started_at)
    except ValueError:
        return 0.0
    return max(0.0, delta.total_seconds())


def run_critical_path(plan: Plan, tasks: Mapping[str, TaskResult]) -> list[str]:
    """The chain of dependent nodes that took longest (wall time; every node weighs at least
    a little, so a run without timestamps marks its longest chain by count)."""

    def weight(node: TaskNode) -> float:
        record = tasks.get(node.task_id)
        return 1e-3 + (_seconds(record) if record is not None else 0.0)

    return critical_path(plan, weight)[0]


def _clip(text: str) -> str:
    return text if len(text) <= LABEL else text[: LABEL - 1] + "…"


def _node(
    node: TaskNode, x: int, y: int, status: str, critical: bool, anchor: Callable[[str], str]
) -> str:
    fill = STATUS_COLOURS.get(status, STATUS_COLOURS["pending"])
    cls = "node critical" if critical else "node"
    tid, name = html.escape(node.task_id), html.escape(_clip(node.name))
    title = html.escape(f"{node.task_id}: {status}" + (" (critical path)" if critical else ""))
    return (
        f'<a href="#{html.escape(anchor(node.task_id))}" class="{cls}" data-task="{tid}" '
        f'data-status="{html.escape(status)}"><title>{title}</title>'
        f'<rect x="{x}" y="{y}" width="{BOX_W}" height="{BOX_H}" rx="6" fill="{fill}"/>'
        f'<text x="{x + 8}" y="{y + 19}" class="tid">{html.escape(_clip(node.task_id))}</text>'
        f'<text x="{x + 8}" y="{y + 36}" class="tname">{name}</text></a>'
    )


def dag_svg(
    plan: Plan,
    statuses: Mapping[str, str],
    critical: Sequence[str],
    anchor: Callable[[str], str],
) -> str:
    """The plan's DAG as one ``<svg id="dag">`` element; ``anchor(task_id)`` is the id of the
    node's section (its box links there)."""
    layers = plan_layers(plan)
    where: dict[str, tuple[int, int]] = {}
    for col, layer in enumerate(layers):
        for row, node in enumerate(layer):
            where[node.task_id] = (PAD + col * (BOX_W + GAP_X), PAD + row * (BOX_H + GAP_Y))
    width = PAD * 2 + max(1, len(layers)) * (BOX_W + GAP_X) - GAP_X
    height = PAD * 2 + max((len(layer) for layer in layers), default=1) * (BOX_H + GAP_Y) - GAP_Y
    on_path = set(critical)
    path_edges = set(pairwise(critical))
    edges: list[str] = []
    for tid, deps in dependency_edges(plan).items():
        x2, y2 = where[tid]
        for dep in deps:
            x1, y1 = where[dep]
            cls = "edge critical" if (dep, tid) in path_edges else "edge"
            edges.append(
                f'<line class="{cls}" x1="{x1 + BOX_W}" y1="{y1 + BOX_H // 2}" '
                f'x2="{x2}" y2="{y2 + BOX_H // 2}" marker-end="url(#arrow)"/>'
            )
    nodes = [
        _node(
            node,
            *where[node.task_id],
            statuses.get(node.task_id, "pending"),
            node.task_id in on_path,
            anchor,
        )
        for layer in layers
        for node in layer
    ]
    marker = (
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" '
        'markerHeight="8" markerUnits="userSpaceOnUse" orient="auto-start-reverse">'
        '<path d="M0,0 L10,5 L0,10 z" '
        'fill="#555"/></marker></defs>'
    )
    return (
        f'<svg id="dag" xmlns="http://www.w3.org/2000/svg" role="img" '
        f'aria-label="the run\'s task graph" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}">{marker}{"".join(edges)}{"".join(nodes)}</svg>'
    )
