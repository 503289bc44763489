"""Context manifests: a typed record of every item that went into one model call.

Saved per call as ``runs/<run_id>/manifests/<task_id>/<n>.json`` so ``anti-sprawl inspect``
can show exactly what a worker saw, with token counts, trust labels and what the budget left
out and why.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..agent.digest import DIGEST_HEADER, RESTART_HEADER
from ..errors import UsageError
from ..fs.files import atomic_write_text
from ..fs.scope_grant import ScopeGrant
from ..ids import TaskId
from ..providers.base import AssistantMessage, Message, ToolSpec, UserMessage, turn_text
from ..tables import print_table
from ..tokens import count_joined, count_tokens
from ..trust import count_hidden_chars

__all__ = [
    "ChoiceReason",
    "ContextItem",
    "ContextManifest",
    "DropReason",
    "DroppedItem",
    "FileChoice",
    "FileForm",
    "ItemKind",
    "Trust",
    "UsedSignature",
    "load_manifests",
    "manifest_path",
    "render_manifests",
    "save_manifest",
]

ItemKind = Literal[
    "instruction",
    "task",
    "upstream_summary",
    "stub",
    "region",  # a big file as its outline plus the regions relevant to the goal
    "file",
    "memory",
    "tool_schema",
    "observation",
    "failure_note",  # why the node's previous attempt failed (retries; see run/failure_note.py)
    "guidance",  # the repository's AGENTS.md / CLAUDE.md / CONVENTIONS.md (context/guidance.py)
]
Trust = Literal["trusted", "untrusted"]
DropReason = Literal[
    "negative_utility",  # packing scored it at or below zero
    "over_budget",  # it did not fit in what was left of the context budget
    "denied",  # the firewall refused to read it (secret, symlink out, not a regular file...)
    "unreadable",  # not text (binary, bad encoding) or too large to read
    "expired",  # a memory past its expiry
    "out_of_scope",  # a memory whose scope globs miss the node's scopes
    "unknown_source",  # a memory without an accepted provenance label
    "no_outline",  # a read-scope file we cannot outline, not worth its tokens whole
]
FileForm = Literal["whole", "outline", "region", "dropped"]
ChoiceReason = Literal[
    "fits",  # whole: within its share of the first prompt
    "small",  # whole: costs about what its outline would
    "relevant",  # whole (or with regions): the goal names it, and it is worth its tokens
    "interface",  # outline: read-only context the goal does not single out
    "too_large",  # outline + regions: larger than its share of the first prompt
    "over_budget",  # not shown: even its smallest outline did not fit
    "denied",  # not shown: the firewall refused it
    "unreadable",  # not shown: binary or too large to read
    "no_outline",  # not shown: no outline for this kind of file, not worth it whole
    "used",  # outline of the signatures the write files use (``signatures`` says which)
]


class ContextItem(BaseModel):
    """One item of one model call: where it came from, whether it is trusted, what it cost."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    item_id: str
    kind: ItemKind
    source: str
    trust: Trust
    tokens: int = Field(ge=0)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    hidden_chars: int = Field(default=0, ge=0, description="Zero-width/bidi/tag characters seen.")


class DroppedItem(BaseModel):
    """A candidate that was left out of the call, and why."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    item_id: str
    kind: ItemKind
    source: str
    tokens: int = Field(ge=0)
    reason: DropReason


class UsedSignature(BaseModel):
    """A definition in a read-scope file whose signature the prompt shows, and why."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="Qualified name: `func`, `Class`, `Class.method`.")
    line: int = Field(ge=1)
    reason: str = Field(pattern=r"^used_by:", description="`used_by:<write-scope file>`.")


class FileChoice(BaseModel):
    """How one scoped file went into a node's first prompt, and why."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str
    scope: Literal["read", "write"]
    form: FileForm
    reason: ChoiceReason
    tokens: int = Field(ge=0, description="What it costs in the prompt (0 when not shown).")
    whole_tokens: int = Field(ge=0, description="What the whole file would cost.")
    outline: Literal["full", "signatures", "names"] | None = None
    regions: list[tuple[int, int]] = Field(default_factory=list, description="Line ranges.")
    signatures: list[UsedSignature] = Field(
        default_factory=list, description="Definitions the write files use, shown in full."
    )


class ContextManifest(BaseModel):
    """Everything one model call saw: its items in prompt order, the drops, and the totals."""

    model_config = ConfigDict(extra="forbid")

    call_id: str
    task_id: TaskId | Literal["__planner__"]  # the planner's calls are filed under __planner__
    n: int = Field(ge=0, description="Index of this call within the task (0 = first).")
    attempt: int = Field(default=1, ge=1, description="The node's attempt this call belongs to.")
    model: str | None = Field(default=None, description="The model the call asked for.")
    items: list[ContextItem]
    dropped: list[DroppedItem] = Field(default_factory=list)
    choices: list[FileChoice] = Field(
        default_factory=list, description="How each scoped file went into the first prompt."
    )
    scope_grants: list[ScopeGrant] = Field(
        default_factory=list,
        description="The attempt's scope requests before this call, granted or refused.",
    )
    total_tokens: int = Field(ge=0, description="Sum of the items' tokens.")
    stable_prefix_bytes: int = Field(ge=0)
    stable_prefix_sha256: str
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))


def manifest_path(manifests: Path, task_id: str, n: int) -> Path:
    """Where the manifest of call ``n`` of ``task_id`` lives in a ``manifests`` directory
    (a run's ``RunPaths.manifests``, or the planner's)."""
    return manifests / task_id / f"{n}.json"


def save_manifest(manifests: Path, manifest: ContextManifest) -> Path:
    """Write ``manifest`` atomically to ``<manifests>/<task_id>/<n>.json``; returns the path."""
    path = manifest_path(manifests, manifest.task_id, manifest.n)
    # No fsync (fs/files.py): two a node, and the journal, not a manifest, is what a resume
    # reads; a power loss may lose the newest, which `inspect` then names.
    atomic_write_text(path, manifest.model_dump_json(indent=2) + "\n", durable=False)
    return path


def _entries(folder: Path) -> list[os.DirEntry[str]]:
    try:
        return list(os.scandir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return []


def load_manifests(manifests: Path, task_id: str | None = None) -> list[ContextManifest]:
    """All saved manifests (of one task if given), ordered by task id then call index.
    Listed with ``os.scandir``: pathlib's globbing and stats were half the time of
    ``inspect`` on a run of thousands of calls."""
    if task_id is not None:
        task_dirs = [str(manifests / task_id)]
    else:
        task_dirs = sorted(e.path for e in _entries(manifests) if e.is_dir())
    out: list[ContextManifest] = []
    for task_dir in task_dirs:
        calls = sorted(
            (int(e.name[:-5]), e.path)
            for e in _entries(Path(task_dir))
            if e.name.endswith(".json") and e.name[:-5].isdigit()
        )
        for _, path in calls:
            try:
                out.append(ContextManifest.model_validate_json(Path(path).read_bytes()))
            except (OSError, ValidationError) as exc:
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise UsageError(f"cannot read manifest {path}: {first}") from exc
    return out


def _item_table(m: ContextManifest) -> Table:
    attempt = f" · attempt {m.attempt}" if m.attempt > 1 else ""
    model = f" · {m.model}" if m.model else ""
    title = f"{m.task_id} · call {m.n}{attempt} · {m.call_id}{model}"
    table = Table(title=title, title_justify="left", show_lines=False)
    table.add_column("#", justify="right")
    table.add_column("kind")
    table.add_column("source", overflow="fold")
    table.add_column("trust")
    table.add_column("tokens", justify="right")
    table.add_column("note")
    why = {c.path: _choice_note(c) for c in m.choices if c.form != "dropped"}
    for i, item in enumerate(m.items):
        note = f"{item.hidden_chars} hidden chars" if item.hidden_chars else ""
        if item.kind in ("file", "stub", "region") and item.source in why:
            note = ", ".join(filter(None, [why[item.source], note]))
        trust = Text(item.trust, style="yellow" if item.trust == "untrusted" else "green")
        table.add_row(
            str(i),
            item.kind,
            item.source,
            trust,
            f"{item.tokens:,}",
            Text(note, style="red" if item.hidden_chars else ""),
        )
    for d in m.dropped:
        table.add_row(
            "-", d.kind, d.source, "", f"{d.tokens:,}", f"dropped: {d.reason}", style="dim"
        )
    return table


def _choice_note(c: FileChoice) -> str:
    shape = f"{c.form} ({c.outline} outline)" if c.outline else c.form
    lines = sum(b - a + 1 for a, b in c.regions)
    extra = f", {len(c.regions)} regions, {lines} lines" if c.regions else ""
    return f"{shape}: {c.reason}{extra}"


def render_manifests(manifests: Sequence[ContextManifest], console: Console) -> None:
    """Print one table per call (items, tokens, drops) and a per-task token summary."""
    if not manifests:
        console.print("no manifests recorded")
        return
    for m in manifests:
        print_table(console, _item_table(m), {"source"})
        console.print(
            f"{len(m.items)} items · {m.total_tokens:,} tokens · {len(m.dropped)} dropped · "
            f"stable prefix {m.stable_prefix_bytes:,} bytes sha256 {m.stable_prefix_sha256[:12]}",
        )
    summary = Table(title="tokens per task", title_justify="left")
    summary.add_column("task")
    summary.add_column("calls", justify="right")
    summary.add_column("input tokens", justify="right")
    summary.add_column("untrusted", justify="right")
    summary.add_column("hidden chars", justify="right")
    by_task: dict[str, list[ContextManifest]] = {}
    for m in manifests:
        by_task.setdefault(m.task_id, []).append(m)
    for task_id, ms in by_task.items():
        untrusted = sum(i.tokens for m in ms for i in m.items if i.trust == "untrusted")
        hidden = sum(i.hidden_chars for m in ms for i in m.items)
        total = sum(m.total_tokens for m in ms)
        summary.add_row(task_id, str(len(ms)), f"{total:,}", f"{untrusted:,}", str(hidden))
    print_table(console, summary, {"task"})


def make_item(
    item_id: str,
    kind: ItemKind,
    source: str,
    trust: Trust,
    text: str,
    pieces: Sequence[str] | None = None,
) -> ContextItem:
    """The manifest record of ``text``: exact token count, SHA-256, hidden characters;
    ``pieces``, when given, join to ``text`` and are counted apart where that is exact
    (``tokens.count_joined``)."""
    return ContextItem(
        item_id=item_id,
        kind=kind,
        source=source,
        trust=trust,
        tokens=count_tokens(text) if pieces is None else count_joined(pieces),
        sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(),
        hidden_chars=count_hidden_chars(text),
    )


def tool_json(spec: ToolSpec) -> str:
    """Canonical JSON of a tool schema, the form ``providers.base.request_text`` counts."""
    return json.dumps(spec.model_dump(), sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def conversation_items(messages: Sequence[Message]) -> list[ContextItem]:
    """Items for what a conversation added after its first message.

    The model's own turns and tool results are untrusted ``observation`` items (a result's
    source is the tool name plus its path argument), and so are a digest of earlier turns
    (it names paths the model chose) and a restart's state (the files as the model wrote
    them); other orchestrator messages are trusted ``instruction`` items.
    """

    items: list[ContextItem] = []
    names: dict[str, str] = {}
    for i, message in enumerate(messages[1:], 1):
        if isinstance(message, UserMessage) and message.content.startswith(
            (DIGEST_HEADER, RESTART_HEADER)
        ):
            what = "digest" if message.content.startswith(DIGEST_HEADER) else "restart"
            items.append(
                make_item(f"{what}:{i}", "observation", what, "untrusted", message.content)
            )
        elif isinstance(message, UserMessage):
            items.append(
                make_item(f"message:{i}", "instruction", "anti-sprawl", "trusted", message.content)
            )
        elif isinstance(message, AssistantMessage):
            text = turn_text(message.text, message.tool_calls)
            # a call the provider recovered from the reply's text (providers/text_calls.py)
            recovered = any(call.from_text for call in message.tool_calls)
            source = "assistant (tool call recovered from text)" if recovered else "assistant"
            items.append(make_item(f"turn:{i}", "observation", source, "untrusted", text))
            for call in message.tool_calls:
                path = call.arguments.get("path")
                names[call.id] = f"{call.name} {path}" if isinstance(path, str) else call.name
        else:
            for r in message.results:
                source = names.get(r.call_id, "tool")
                items.append(
                    make_item(f"obs:{r.call_id}", "observation", source, "untrusted", r.content)
                )
    return items
