"""Clean-slate prompt assembly for one worker, in named sections, stable first.

Section order is fixed: ``stable`` (rules, data policy, tool schemas: identical bytes for every
worker, so providers can cache them), ``brief``, ``upstream`` (dependency summaries, never
transcripts), ``stubs`` (read-scope files as outlines, or whole where the budget allows),
``files`` (write-scope files in full) and ``memory``. Repository files are read only through
the node's ``Firewall`` (docs/security.md P11). Every item is recorded with its exact text's token
count and SHA-256, so the manifest accounts for the whole prompt.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import UTC, datetime
from functools import lru_cache

from pydantic import BaseModel, ConfigDict

from .errors import RunError
from .firewall import Firewall
from .manifest import ContextItem, ContextManifest, DroppedItem, conversation_items, tool_json
from .memory import MemoryFact, screen_memory
from .plan import Plan, TaskNode
from .providers.base import (
    ModelRequest,
    SystemBlock,
    ToolSpec,
    UserMessage,
)
from .scoped_context import (
    SECTIONS,
    Part,
    Section,
    drop,
    header,
    memory_id,
    pack_optional,
    part,
    read_scoped_files,
)
from .sections import DATA_POLICY, RULES, UpstreamSummary, render_brief, render_upstream
from .tools import WORKER_TOOLS

__all__ = [
    "SECTIONS",
    "AssembledPrompt",
    "Section",
    "UpstreamSummary",
    "assemble_worker_prompt",
    "manifest_for_request",
    "tool_json",
]


class AssembledPrompt(BaseModel):
    """A worker's first request, and the record of every item in it.

    ``item_texts[i]`` is the exact text of ``manifest_items[i]``, which sits in section
    ``item_sections[i]``: the stable items are the system blocks and the canonical tool JSON,
    the others concatenate to ``first_user_message``. ``stable_prefix`` is the system text and
    tool JSON joined the way ``providers.base.request_text`` serializes a request.
    """

    model_config = ConfigDict(frozen=True)

    system: list[SystemBlock]
    tools: list[ToolSpec]
    first_user_message: str
    manifest_items: list[ContextItem]
    item_texts: list[str]
    item_sections: list[Section]
    dropped: list[DroppedItem]
    stable_prefix: str

    @property
    def total_tokens(self) -> int:
        return sum(i.tokens for i in self.manifest_items)


@lru_cache(maxsize=1)
def _stable_parts() -> tuple[Part, ...]:
    parts = [
        part("stable", "rules", "instruction", "anti-sprawl", "trusted", RULES),
        part("stable", "data_policy", "instruction", "anti-sprawl", "trusted", DATA_POLICY),
    ]
    for spec in sorted(WORKER_TOOLS, key=lambda s: s.name):
        text = tool_json(spec)
        parts.append(part("stable", f"tool:{spec.name}", "tool_schema", spec.name, "trusted", text))
    return tuple(parts)


def assemble_worker_prompt(
    *,
    plan: Plan,
    node: TaskNode,
    upstream: Sequence[UpstreamSummary],
    firewall: Firewall,
    context_budget: int,
    memory: Sequence[MemoryFact] = (),
    now: datetime | None = None,
) -> AssembledPrompt:
    """System blocks and first user message for ``node``'s worker, within ``context_budget``.

    The stable prefix, brief, upstream summaries and write-scope files are essential: when they
    alone exceed the budget, RunError. Read-scope files and memory are packed by utility into
    what is left. ``upstream`` may hold only ``node``'s dependencies (ValueError otherwise).
    """
    strangers = [u.task_id for u in upstream if u.task_id not in node.dependencies]
    if strangers:
        raise ValueError(f"upstream summaries of non-dependencies of {node.task_id}: {strangers}")
    stable = list(_stable_parts())
    brief = part("brief", "brief", "task", node.task_id, "trusted", render_brief(plan, node))
    up_parts: list[Part] = []
    for up in sorted(upstream, key=lambda u: node.dependencies.index(u.task_id)):
        text = render_upstream(up)
        item_id = f"upstream:{up.task_id}"
        up_parts.append(
            part("upstream", item_id, "upstream_summary", up.task_id, "untrusted", text)
        )
    if up_parts:
        up_parts.insert(0, header("upstream"))

    dropped: list[DroppedItem] = []
    write_parts, read_texts = read_scoped_files(firewall, node, dropped)
    if write_parts:
        write_parts.insert(0, header("files"))
    fixed = sum(p.item.tokens for p in (*stable, brief, *up_parts, *write_parts))
    if fixed > context_budget:
        raise RunError(
            f"node {node.task_id}: its essential context (rules, brief, upstream results, "
            f"write-scope files) needs {fixed:,} tokens, over the context budget of "
            f"{context_budget:,}; narrow the write scope or raise the budget"
        )
    screen = screen_memory(
        memory, node_scope=[*node.read_scope, *node.write_scope], now=now or datetime.now(UTC)
    )
    for fact, reason in screen.dropped:
        dropped.append(drop(memory_id(fact), "memory", fact.source, 0, reason))
    facts = [*screen.facts, *screen.hypotheses]
    stub_parts, mem_parts = pack_optional(node, read_texts, facts, context_budget - fixed, dropped)
    parts = [brief, *up_parts, *stub_parts, *write_parts, *mem_parts]
    every = [*stable, *parts]
    return AssembledPrompt(
        system=[
            SystemBlock(name="rules", text=RULES),
            SystemBlock(name="data_policy", text=DATA_POLICY, cache=True),
        ],
        tools=sorted(WORKER_TOOLS, key=lambda s: s.name),
        first_user_message="".join(p.text for p in parts),
        manifest_items=[p.item for p in every],
        item_texts=[p.text for p in every],
        item_sections=[p.section for p in every],
        dropped=dropped,
        stable_prefix="\n".join(p.text for p in stable),
    )


def manifest_for_request(
    prompt: AssembledPrompt,
    request: ModelRequest,
    *,
    n: int,
    attempt: int = 1,
    created_at: datetime | None = None,
) -> ContextManifest:
    """The manifest of one model call of a worker started from ``prompt``.

    Items are the assembled ones followed by what the conversation added since: the model's
    own turns and tool results as untrusted ``observation`` items, later orchestrator
    messages as trusted ``instruction`` items. ``request`` must carry task and call ids and
    start with ``prompt``'s first user message.
    """
    if request.task_id is None or request.call_id is None:
        raise ValueError("the request has no task_id/call_id to file its manifest under")
    first = request.messages[0] if request.messages else None
    if not isinstance(first, UserMessage) or first.content != prompt.first_user_message:
        raise ValueError(f"request {request.call_id} does not start with the assembled prompt")
    items = [*prompt.manifest_items, *conversation_items(request.messages)]
    stable = prompt.stable_prefix.encode("utf-8")
    return ContextManifest(
        call_id=request.call_id,
        task_id=request.task_id,
        n=n,
        attempt=attempt,
        model=request.model,
        items=items,
        dropped=list(prompt.dropped),
        total_tokens=sum(i.tokens for i in items),
        stable_prefix_bytes=len(stable),
        stable_prefix_sha256=hashlib.sha256(stable).hexdigest(),
        created_at=created_at or datetime.now(UTC),
    )
