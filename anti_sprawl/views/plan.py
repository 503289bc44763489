"""Views of plans and runs for people: layered DAG trees, mermaid, dot, validation reports.

Rendering is linear in the plan's size: the tree clips each text it shows (a requirement, a
name, a scope list) to ``CLIP`` characters, because Rich's wrapping of one very long line
grows faster than its length (a 10 MB requirement took minutes). The machine formats
(mermaid, dot, json) are plain string building and keep everything.
"""

from __future__ import annotations

import json
import re

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from ..plan.graph import plan_layers
from ..plan.model import Plan
from ..plan.validate import Report
from .plain import wrapped
from .terminal import inert

__all__ = [
    "plan_dot",
    "plan_json",
    "plan_mermaid",
    "render_plan_tree",
    "render_report",
]


CLIP = 200


# Control characters (a newline in a name, a NUL in a command) would break the tree's lines.
_CONTROLS = {**{i: "?" for i in range(32)}, 9: " ", 10: " ", 13: " ", 127: "?"}


def _clip(text: str, limit: int = CLIP) -> str:
    """At most ``limit`` characters of ``text`` on one line, saying how much was left out."""
    if len(text) <= limit:
        return text.translate(_CONTROLS)
    return f"{text[:limit].translate(_CONTROLS)}… ({len(text) - limit:,} more characters)"


def _scope_text(entries: list[str]) -> str:
    return ", ".join(entries) if entries else "(none)"


def _joined(entries: list[str], sep: str = ", ", limit: int = CLIP) -> str:
    """``sep.join(entries)`` clipped, without joining more entries than can be shown."""
    total = sum(map(len, entries)) + len(sep) * max(0, len(entries) - 1)
    if total <= limit:
        return sep.join(entries).translate(_CONTROLS)
    shown: list[str] = []
    size = 0
    for entry in entries:
        if size > limit:
            break
        shown.append(entry[: limit + 1])
        size += len(entry) + len(sep)
    head = sep.join(shown)[:limit].translate(_CONTROLS)
    return f"{head}… ({len(entries):,} entries, {total:,} characters)"


Segment = tuple[str, str]  # (text, Rich style or "")
# Styled output costs Rich ~0.15 ms a line; past this many nodes (or off a terminal) the tree
# is written as plain text, which is what a pipe or a file gets anyway.
STYLED_NODES = 1000


def render_plan_tree(plan: Plan, console: Console) -> None:
    """The DAG in layers, each node with its scopes and budgets (long texts clipped).

    Drawn line by line with tree guides rather than as a Rich ``Tree``, which costs about
    half a millisecond per line (10,000 nodes took half a minute).
    """
    lines = _tree_lines(plan)
    if console.is_terminal and len(plan.tasks) <= STYLED_NODES:
        text = Text("\n").join(Text.assemble(*line) for line in lines)
        console.print(text, soft_wrap=True)
        return
    plain = "\n".join(_fitted(line, console.width) for line in lines)
    console.file.write(inert(plain) + "\n")
    console.file.flush()


def _fitted(line: list[Segment], width: int) -> str:
    """One tree line in plain text within ``width`` (a pipe has no terminal to wrap it):
    broken at spaces only, the continuations under the item's guide (views/plain.py)."""
    text = "".join(part for part, _ in line)
    if len(text) <= width:
        return text
    guide = line[0][0] if line[0][1] == "dim" else ""
    below = guide.replace("├── ", "│   ").replace("└── ", "    ") + "    "
    return "\n".join(wrapped(text, width, indent=below))


def _tree_lines(plan: Plan) -> list[list[Segment]]:
    first_line = plan.requirement.strip().partition("\n")[0].rstrip("\r")
    lines: list[list[Segment]] = [[(plan.plan_id, "bold"), (f": {_clip(first_line)}", "")]]
    layers = plan_layers(plan)
    if (setup := plan.setup_command) is not None:
        text = _clip(setup) if isinstance(setup, str) else _joined(setup, " ")
        lines.append([_guide("", not layers)[1], (f"setup (each worktree): {text}", "")])
    for i, layer in enumerate(layers):
        outer, guide = _guide("", i == len(layers) - 1)
        note = "parallel" if len(layer) > 1 else "single"
        lines.append([guide, (f"layer {i}", "cyan"), (f" ({len(layer)} {note})", "")])
        for j, t in enumerate(layer):
            inner, guide = _guide(outer, j == len(layer) - 1)
            after = f" after {_joined(t.dependencies)}" if t.dependencies else ""
            lines.append([guide, (t.task_id, "bold"), (f" {_clip(t.name)}", ""), (after, "dim")])
            cmd = t.test_command if t.test_command is not None else plan.test_command
            tests = ""
            if cmd:
                tests = "; tests: " + (_clip(cmd) if isinstance(cmd, str) else _joined(cmd, " "))
            details = (
                f"write: {_joined(t.write_scope) or '(none)'}",
                f"read:  {_joined(t.read_scope) or '(none)'}",
                f"budget: {t.token_budget:,} tokens, {t.max_tool_calls} tool calls{tests}",
            )
            for k, detail in enumerate(details):
                lines.append([_guide(inner, k == len(details) - 1)[1], (detail, "")])
    return lines


def _guide(indent: str, last: bool) -> tuple[str, Segment]:
    """The indent for an item's children, and the guide that starts the item's line."""
    return indent + ("    " if last else "│   "), (indent + ("└── " if last else "├── "), "dim")


_MERMAID_ID = re.compile(r"[^A-Za-z0-9_]")


def _mermaid_id(task_id: str) -> str:
    return "n_" + _MERMAID_ID.sub("_", task_id)


def _mermaid_label(text: str) -> str:
    # GitHub's mermaid: quotes and angle brackets must be entities inside "..." labels.
    return (
        text.replace("&", "#amp;").replace('"', "#quot;").replace("<", "#lt;").replace(">", "#gt;")
    )


def plan_mermaid(plan: Plan, statuses: dict[str, str] | None = None) -> str:
    """A ``flowchart TD`` that renders on GitHub; optional per-node status styling."""
    lines = ["flowchart TD"]
    for t in plan.tasks:
        write = _mermaid_label(_scope_text(t.write_scope))
        label = (
            f"<b>{_mermaid_label(t.task_id)}</b><br/>{_mermaid_label(t.name)}<br/>write: {write}"
        )
        if statuses and t.task_id in statuses:
            label += f"<br/>{_mermaid_label(statuses[t.task_id])}"
        lines.append(f'  {_mermaid_id(t.task_id)}["{label}"]')
    for t in plan.tasks:
        for dep in t.dependencies:
            lines.append(f"  {_mermaid_id(dep)} --> {_mermaid_id(t.task_id)}")
    if statuses:
        colours = {"succeeded": "#d4f7d4", "failed": "#f7d4d4", "skipped": "#eeeeee"}
        for status, colour in colours.items():
            lines.append(f"  classDef {status} fill:{colour}")
        for tid, status in statuses.items():
            if status in colours:
                lines.append(f"  class {_mermaid_id(tid)} {status}")
    return "\n".join(lines) + "\n"


def _dot_quote(*lines: str) -> str:
    return '"' + "\\n".join(x.replace("\\", "\\\\").replace('"', '\\"') for x in lines) + '"'


def plan_dot(plan: Plan) -> str:
    """Graphviz dot, one box per node labelled with id, name and write scope."""
    lines = ["digraph plan {", "  rankdir=TB;", "  node [shape=box];"]
    for t in plan.tasks:
        label = _dot_quote(t.task_id, t.name, f"write: {_scope_text(t.write_scope)}")
        lines.append(f"  {_dot_quote(t.task_id)} [label={label}];")
    for t in plan.tasks:
        for dep in t.dependencies:
            lines.append(f"  {_dot_quote(dep)} -> {_dot_quote(t.task_id)};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def plan_json(plan: Plan) -> str:
    """The plan plus its layers, as one JSON document."""
    data = plan.model_dump(mode="json")
    data["layers"] = [[t.task_id for t in layer] for layer in plan_layers(plan)]
    return json.dumps(data, indent=2) + "\n"


def render_report(report: Report, console: Console, *, source: str) -> None:
    """Human view of a validation report."""
    if report.valid:
        n = len(report.plan.tasks) if report.plan else 0
        layers = len(plan_layers(report.plan)) if report.plan else 0
        console.print(f"[green]valid[/]: {escape(source)}: {n} tasks in {layers} layers")
    else:
        console.print(f"[red]invalid[/]: {escape(source)}: {len(report.errors)} error(s)")
    for p in report.errors:
        console.print(f"  [red]error[/] \\[{escape(p.code)}] {escape(p.message)}")
    for p in report.warnings:
        console.print(f"  [yellow]warning[/] \\[{escape(p.code)}] {escape(p.message)}")
