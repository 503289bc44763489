"""``inspect RUN [--task ID]``: why a node failed, in one screen, the failing attempt first.

For each node asked about (every node that did not succeed, or the one ``--task`` names): its
status, then the attempt that failed (or was interrupted): reason and message, the test command
and the tail of its output, the last tool results of its transcript, the failure note the next
attempt was told, and the paths of the full logs (transcript, test logs, manifests); then one
line per earlier attempt. The context manifests are behind ``inspect --manifests``
(context/manifest.py). Everything here is text a model or a test command wrote: printed as
plain text (no Rich markup), the caller's console decides the rest.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from pydantic import BaseModel, Field
from rich.console import Console

from ..agent.artifacts import ArtifactStore, read_json_lines
from ..git.layout import RunPaths
from ..hints import command
from ..run.failure_note import AttemptRecord
from ..run.journal import RunState
from ..run.result import TaskResult
from .plain import wrapped

__all__ = ["NodeReport", "node_reports", "render_reports"]

_WRAPPER = re.compile(r"^</?data( [^>]*)?>$")
TOOL_RESULTS = 3
RESULT_LINES = 6
TAIL_LINES = 15


class NodeReport(BaseModel):
    """What ``inspect`` says of one node (also its ``--json``)."""

    task_id: str
    status: str
    summary: str = Field(description="The verdict's words for the node.")
    attempt: AttemptRecord | None = Field(default=None, description="The attempt that failed.")
    test_command: list[str] = Field(default_factory=list)
    test_exit: int | None = None
    test_tail: str = ""
    tool_results: list[str] = Field(default_factory=list, description="The last tool results.")
    note: str = Field(default="", description="What the next attempt was told.")
    logs: dict[str, list[str]] = Field(default_factory=dict)
    earlier: list[AttemptRecord] = Field(default_factory=list)


def _failing(record: TaskResult) -> AttemptRecord | None:
    """The last attempt that did not succeed (the last attempt, if every one did)."""
    for attempt in reversed(record.attempt_log):
        if attempt.outcome != "succeeded":
            return attempt
    return record.attempt_log[-1] if record.attempt_log else None


def _tool_results(path: Path) -> list[str]:
    """The last tool results of a transcript: ``name args: first lines of what came back``."""
    out = []
    for event in read_json_lines(path) if path.is_file() else []:
        if event.get("event") != "tool":
            continue
        call, result = event.get("call") or {}, event.get("result") or {}
        args = call.get("arguments") or {}
        where = args.get("path") or args.get("source") or ""
        lines = [
            line
            for line in str(result.get("content", "")).strip().splitlines()
            if not _WRAPPER.match(line)  # the <data ...> fence the model saw around it
        ][:RESULT_LINES]
        error = " (error)" if result.get("is_error") else ""
        head = " ".join(str(p) for p in (call.get("name", "?"), where) if p)
        out.append(f"{head}{error}:\n" + "\n".join(lines))
    return out[-TOOL_RESULTS:]


def _report(
    state: RunState, paths: RunPaths, record: TaskResult, status: str, text: str
) -> NodeReport:
    store = ArtifactStore(paths.artifacts)
    failing = _failing(record)
    report = NodeReport(task_id=record.task_id, status=status, summary=text, attempt=failing)
    if failing is None:
        return report
    report.earlier = [a for a in record.attempt_log if a is not failing]
    tests = record.tests if failing is record.attempt_log[-1] else None
    if tests is not None:
        report.test_command, report.test_exit = tests.command, tests.exit_code
        report.test_tail = "\n".join(tests.tail.splitlines()[-TAIL_LINES:])
    elif failing.note is not None and failing.note.test_command:
        report.test_command = shlex.split(failing.note.test_command)
        report.test_tail = "\n".join(failing.note.test_tail.splitlines()[-TAIL_LINES:])
    if failing.note is not None:  # its test command and output are shown above already
        note = failing.note.model_dump(exclude_defaults=True, exclude={"test_command", "test_tail"})
        report.note = "\n".join(f"{k}: {v}" for k, v in note.items())
    folder = paths.artifacts / record.task_id
    if failing.transcript:
        transcript = store.path(failing.transcript)
        report.tool_results = _tool_results(transcript)
        report.logs["transcript"] = [str(transcript)]
    logs = sorted(folder.glob(f"tests-{failing.attempt}-*.log"))
    report.logs["tests"] = [str(p) for p in logs]
    report.logs["context manifests"] = [str(paths.manifests / record.task_id)]
    return report


def node_reports(
    state: RunState, paths: RunPaths, task: str | None, words: dict[str, tuple[str, str]]
) -> list[NodeReport]:
    """Reports of ``task``, or of every node that did not succeed (failed ones first);
    ``words`` maps a task to its (status, verdict text) as the views say them."""
    ids = [task] if task is not None else [t.task_id for t in state.plan.tasks]
    chosen = [state.tasks[i] for i in ids if task is not None or words[i][0] != "succeeded"]
    chosen.sort(key=lambda r: words[r.task_id][0] != "failed")
    return [_report(state, paths, r, *words[r.task_id]) for r in chosen]


def _indent(text: str, pad: str = "    ") -> str:
    return "\n".join(pad + line for line in text.splitlines())


def _attempt_line(a: AttemptRecord) -> str:
    return (
        f"  attempt {a.attempt}: {a.outcome}"
        + (f" ({a.reason})" if a.reason else "")
        + f", {a.model or '-'}, {a.tokens.total:,} tokens, {a.calls} calls, "
        f"{a.tool_calls} tool calls"
    )


def _evidence(r: NodeReport) -> list[str]:
    """The failing attempt's test run, last tool results and failure note, as lines."""
    out: list[str] = []
    if r.test_command:
        exit_text = f" (exit {r.test_exit})" if r.test_exit is not None else ""
        out.append(f"  test command{exit_text}: {shlex.join(r.test_command)}")
        if r.test_tail:
            out += ["  test output (last lines):", _indent(r.test_tail)]
    if r.tool_results:
        out.append("  last tool results:")
        out += [_indent(result) for result in r.tool_results]
    if r.note:
        out.append("  failure note (what the next attempt was told):")
        out.append(_indent(r.note))
    return out


def render_reports(reports: list[NodeReport], state: RunState, console: Console) -> None:
    """Plain lines: the failing attempt first, then the earlier ones, then where to look.
    Prose is broken at spaces within the width (views/plain.py); commands, paths and test
    output are printed verbatim, whole."""
    out: list[tuple[str, bool]] = []  # (text, prose)
    if not reports:
        out.append((f"run {state.run_id}: {state.status}; every node succeeded", True))
    for r in reports:
        out += _report_lines(r, state)
    for text, is_prose in out:
        for line in wrapped(text, console.width, indent="    ") if is_prose else [text]:
            console.print(line, markup=False, highlight=False, soft_wrap=True)


def _report_lines(r: NodeReport, state: RunState) -> list[tuple[str, bool]]:
    out = [(f"{r.task_id}: {r.summary}", True)]
    a = r.attempt
    if a is None:
        return [*out, ("  never started", False)]
    out.append((_attempt_line(a), False))
    if a.message:
        out.append((f"  why: {a.message}", True))
    out += [(line, False) for line in _evidence(r)]
    out += [(f"  {name}: {path}", False) for name, files in r.logs.items() for path in files]
    for e in r.earlier:
        reason = f" ({e.reason})" if e.reason else ""
        out.append((f"  earlier: attempt {e.attempt}: {e.outcome}{reason}: {e.message}", True))
    out.append(("  the context of each model call:", False))
    why = command("inspect", state.run_id, "--task", r.task_id, "--manifests", repo=state.repo)
    out.append(("    " + why, False))
    return out
