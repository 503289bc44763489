"""What the HTML run report (views/html_report.py) shows of each node, gathered from the same
records ``status``, ``inspect`` and ``pr`` read: the journal (run/journal.py), the failure
reports (views/failure.py), the context manifests (context/manifest.py), the transcripts'
per-call usage (agent/loop.py logs a ``response`` event per call) and the node's commit on the
run branch (git). Nothing here formats; nothing here writes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ..agent.artifacts import ArtifactStore, read_json_lines
from ..context.manifest import ContextManifest, load_manifests
from ..context.requests import load_request
from ..git.cmd import run_git
from ..git.layout import RunPaths
from ..plan.model import TaskNode
from ..run.journal import RunState
from ..run.result import MAX_DIFF_CHARS, TaskResult
from .failure import NodeReport, node_reports
from .run import verdict_words

__all__ = ["CallUse", "NodeData", "collect", "request_of"]

# Where a per-task scope grant may be recorded (issue 28 adds them; read whichever is there).
GRANT_FIELDS = ("scope_grants", "scope_requests", "grants")


@dataclass(frozen=True)
class CallUse:
    """One model call's tokens, from its attempt's transcript."""

    attempt: int
    call: int
    input_tokens: int
    output_tokens: int

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass
class NodeData:
    """Everything the report says of one node."""

    node: TaskNode
    record: TaskResult
    status: str
    verdict: str
    report: NodeReport
    calls: list[CallUse] = field(default_factory=list)
    manifests: list[ContextManifest] = field(default_factory=list)
    grants: list[Any] = field(default_factory=list)
    diff: str = ""
    diff_source: str = ""


def _calls(store: ArtifactStore, record: TaskResult) -> list[CallUse]:
    """Per-call usage of every attempt whose transcript is kept, oldest attempt first."""
    refs = [(a.attempt, a.transcript) for a in record.attempt_log if a.transcript]
    if record.transcript and record.transcript not in {ref for _, ref in refs}:
        refs.append((record.attempts or len(refs) + 1, record.transcript))
    out: list[CallUse] = []
    for attempt, ref in refs:
        try:
            path = store.path(ref)
        except ValueError:
            continue
        events = read_json_lines(path) if path.is_file() else []
        for event in events:
            usage = event.get("usage") if event.get("event") == "response" else None
            if not isinstance(usage, dict):
                continue
            out.append(
                CallUse(
                    attempt=attempt,
                    call=int(event.get("call") or 0),
                    input_tokens=int(usage.get("input_tokens") or 0),
                    output_tokens=int(usage.get("output_tokens") or 0),
                )
            )
    return out


def _grants(node: TaskNode, record: TaskResult) -> list[Any]:
    """Scope grants and refusals, wherever this journal keeps them (none in older ones)."""
    for holder in (record, node):
        for name in GRANT_FIELDS:
            value = getattr(holder, name, None)
            if value is None:
                value = (holder.model_extra or {}).get(name)
            if isinstance(value, list | tuple) and value:
                return list(value)
    return []


def _diff(repo: Path, record: TaskResult) -> tuple[str, str]:
    """The node's change: its commit as git shows it, else what the journal kept."""
    if record.commit:
        shown = run_git(
            ["show", "--no-color", "--no-ext-diff", "--format=commit %H%n%n%B", record.commit],
            repo,
            check=False,
        )
        if shown.returncode == 0:
            text = shown.stdout.decode("utf-8", "replace")
            if len(text) > MAX_DIFF_CHARS:
                text = text[:MAX_DIFF_CHARS] + "\n[diff truncated]\n"
            return text, f"git show {record.commit[:12]}"
    if record.diff:
        return record.diff, "the run journal"
    return "", ""


def collect(state: RunState, paths: RunPaths, repo: Path) -> list[NodeData]:
    """One ``NodeData`` per node, in plan order."""
    words = verdict_words(state)
    store = ArtifactStore(paths.artifacts)
    by_task: dict[str, list[ContextManifest]] = {}
    for m in load_manifests(paths.manifests):
        by_task.setdefault(m.task_id, []).append(m)
    out: list[NodeData] = []
    for node in state.plan.tasks:
        record = state.tasks[node.task_id]
        status, verdict = words[node.task_id]
        (report,) = node_reports(state, paths, node.task_id, words)
        diff, source = _diff(repo, record)
        out.append(
            NodeData(
                node=node,
                record=record,
                status=status,
                verdict=verdict,
                report=report,
                calls=_calls(store, record),
                manifests=by_task.get(node.task_id, []),
                grants=_grants(node, record),
                diff=diff,
                diff_source=source,
            )
        )
    return out


def request_of(paths: RunPaths, m: ContextManifest) -> str | None:
    """The exact request of a call as JSON, when the run kept it (context/requests.py)."""
    found = load_request(paths.artifacts, m.task_id, m.n)
    return None if found is None else json.dumps(found, indent=2, ensure_ascii=False)


def as_text(value: Any) -> str:
    """A grant (a model, a dict or a string) as one line of ``key: value`` pairs."""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    if isinstance(value, dict):
        return "; ".join(f"{k}: {v}" for k, v in value.items())
    return str(value)
