"""Tool handlers that act through a ``Firewall``, and the tool table built from them.

The worker and the planner share the read-only ones (``read_file``, ``list_dir``, ``grep``);
only the worker gets the writing ones. A firewall refusal is raised as ``FirewallError`` and
answered by the loop's one dispatch, so the model sees the same refusal from either.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..fs.firewall import Firewall
from ..outline.views import read_view
from . import change_tools
from .change_tools import refuse_placeholder
from .dispatch import Handler, Tool, ToolOutcome
from .tools import WORKER_TOOLS, tool_args_model

__all__ = ["read_handlers", "tool_table", "write_handlers"]


def read_handlers(fw: Firewall, max_chars: int = 6000) -> dict[str, Handler]:
    """``read_file``, ``list_dir`` and ``grep`` on ``fw``'s readable files.

    ``read_file`` takes a line range and answers within ``max_chars`` (the observation limit):
    a longer file read whole comes back as its outline (``outline.views.read_view``).
    """

    def read_file(args: Any) -> ToolOutcome:
        text = fw.read_text(args.path)
        shown = read_view(args.path, text, args.start_line, args.end_line, max_chars=max_chars)
        lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        summary = f"{lines:,} lines, {len(text):,} chars"
        if shown is not text:
            summary = shown.split("\n", 1)[0][:200]  # the header: which lines, or why an outline
        return ToolOutcome(shown, kind="file", summary=summary)

    def list_dir(args: Any) -> ToolOutcome:
        entries = fw.list_dir(args.path)
        lines = [f"{e.name}/" if e.kind == "dir" else e.name for e in entries]
        text = "\n".join(lines) if lines else "(empty)"
        return ToolOutcome(text, kind="listing", summary=f"{len(lines)} entries")

    def grep(args: Any) -> ToolOutcome:
        matches = fw.grep(args.pattern, args.path)
        text = "\n".join(f"{m.path}:{m.line_no}: {m.line}" for m in matches) or "(no matches)"
        return ToolOutcome(text, kind="search", summary=f"{len(matches)} matches")

    return {"read_file": read_file, "list_dir": list_dir, "grep": grep}


def write_handlers(
    fw: Firewall, from_text: Callable[[], bool] = lambda: False
) -> dict[str, Handler]:
    """``write_file``, ``edit_file``, ``delete_file`` and ``move_file`` in the write scope
    (their logic: ``change_tools``); ``from_text`` tells whether the call being run was read
    from the model's prose."""

    def outcome(done: str) -> ToolOutcome:
        return ToolOutcome(done, summary=done.splitlines()[0])

    def edit_file(args: Any) -> ToolOutcome:
        refuse_placeholder(args.new)
        kept = fw.edit_text(args.path, args.old, args.new)
        return outcome(f"edited {args.path}" + (f" ({kept})" if kept else ""))

    return {
        "write_file": lambda args: outcome(
            change_tools.write_file(fw, args, from_text=from_text())
        ),
        "edit_file": edit_file,
        "delete_file": lambda args: outcome(change_tools.delete_file(fw, args)),
        "move_file": lambda args: outcome(change_tools.move_file(fw, args)),
    }


def tool_table(handlers: Mapping[str, Handler]) -> dict[str, Tool]:
    """One row per handler: the tool's contract schema and argument model (``agent/tools.py``)."""
    specs = {spec.name: spec for spec in WORKER_TOOLS}
    return {
        name: Tool(spec=specs[name], args=tool_args_model(name), run=run)
        for name, run in handlers.items()
    }
