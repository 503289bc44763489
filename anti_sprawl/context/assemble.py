"""Clean-slate prompt assembly for one worker, in named sections, stable first.

Section order is fixed: ``stable`` (rules, data policy, tool schemas: identical bytes for every
worker, so providers can cache them), ``brief``, ``upstream`` (dependency summaries, never
transcripts), ``stubs`` (read-scope files: numbered outlines, whole only where the goal points
at them), ``files`` (write-scope files, whole or outline + regions) and ``memory``; ``lean``
decides each file's form within the lean target. Repository files are read only through
the node's ``Firewall`` (docs/security.md P11). Every item is recorded with its exact text's
token count and SHA-256, so the manifest accounts for the whole prompt.

One cohesive module at ~300 lines: the section order is the design, and splitting the
assembly would spread that one order over several modules.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import UTC, datetime
from functools import lru_cache

from pydantic import BaseModel, ConfigDict

from ..agent.tools import WORKER_TOOLS
from ..errors import RunError
from ..fs.firewall import Firewall
from ..outline.references import module_index
from ..outline.regions import goal_terms
from ..plan.model import Plan, TaskNode
from ..providers.base import (
    ModelRequest,
    SystemBlock,
    ToolSpec,
    UserMessage,
)
from .lean import (
    MEMORY_SHARE,
    READ_SHARE,
    Essentials,
    Scoped,
    fit_read_files,
    fit_write_files,
    lean_target,
)
from .manifest import (
    ContextItem,
    ContextManifest,
    DroppedItem,
    FileChoice,
    conversation_items,
    tool_json,
)
from .memory import MEMORY_TRUST, MemoryFact, screen_memory
from .packing import ContextCandidate, pack_context
from .read_scoped import (
    SECTIONS,
    Part,
    Section,
    drop,
    header,
    memory_id,
    part,
    pieces_part,
    read_scoped_files,
)
from .sections import (
    DATA_POLICY,
    RULES,
    UpstreamSummary,
    brief_pieces,
    render_memory,
    render_upstream,
)
from .start_view import StartView
from .used import imported_by, uses_by_file

__all__ = [
    "SECTIONS",
    "AssembledPrompt",
    "Essentials",
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
    choices: list[FileChoice]
    essentials: Essentials
    stable_prefix: str

    @property
    def total_tokens(self) -> int:
        return sum(i.tokens for i in self.manifest_items)


_MEMORY_AUTHORITY = {"system_record": 1.0, "user_stated": 0.9, "model_inferred": 0.5}


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


@lru_cache(maxsize=1)
def _stable_prefix() -> str:
    """The stable parts' texts joined as ``request_text`` joins system and tools: one string
    for every node (joined again per node, 1,000 copies of it were hashed again as the key of
    the first call's head, context/essentials.py; issue 29, item 3)."""
    return "\n".join(p.text for p in _stable_parts())


@lru_cache(maxsize=1)
def _system_and_tools() -> tuple[tuple[SystemBlock, ...], tuple[ToolSpec, ...]]:
    """The system blocks and the sorted tools, the same frozen records for every node (built
    again for each of a plan's nodes in its pre-flight: issue 29, item 3)."""
    system = (
        SystemBlock(name="rules", text=RULES),
        SystemBlock(name="data_policy", text=DATA_POLICY, cache=True),
    )
    return system, tuple(sorted(WORKER_TOOLS, key=lambda s: s.name))


def assemble_worker_prompt(
    *,
    plan: Plan,
    node: TaskNode,
    upstream: Sequence[UpstreamSummary],
    firewall: Firewall | None = None,
    view: StartView | None = None,
    context_budget: int | None = None,
    memory: Sequence[MemoryFact] = (),
    now: datetime | None = None,
    upstream_allowance: int = 0,
    check_fit: bool = True,
    eager_reads: bool = False,
) -> AssembledPrompt:
    """System blocks and the lean first user message for ``node``'s worker.

    ``context_budget`` is the lean target (default ``lean.lean_target`` of the node's cap);
    ``lean`` decides each file's form. The essentials (stable prefix, brief, upstream
    results, write-scope files in their smallest forms) plus room for the conversation must
    fit the node's ``token_budget``: RunError saying what did not fit and the smallest budget
    that would, unless ``check_fit`` is off (then ``essentials`` tells). ``upstream`` may hold
    only ``node``'s dependencies (ValueError otherwise); ``upstream_allowance`` counts tokens
    for results not known yet (a plan checked before it runs). ``eager_reads`` is for the
    evaluation's scoping ablation only: read-scope files whole wherever they fit.

    Files are read through ``firewall``, or from ``view``: the start commit shared by every
    node of a plan's pre-flight (context/start_view.py), with the same result.
    """
    strangers = [u.task_id for u in upstream if u.task_id not in node.dependencies]
    if strangers:
        raise ValueError(f"upstream summaries of non-dependencies of {node.task_id}: {strangers}")
    target = context_budget if context_budget is not None else lean_target(node.token_budget)
    stable = list(_stable_parts())
    pieces = brief_pieces(plan, node)
    brief = pieces_part("brief", "brief", "task", node.task_id, "trusted", pieces)
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
    choices: list[FileChoice] = []
    if view is not None:
        write_texts, read_texts = view.read_scoped(node, dropped, choices)
        facts = view.facts
    elif firewall is not None:
        write_texts, read_texts = read_scoped_files(firewall, node, dropped, choices)
        facts = None
    else:
        raise ValueError("assemble_worker_prompt needs a firewall or a view to read files")
    # the signatures the change will use, and the files it imports: one index of the modules
    index = module_index([*read_texts, *write_texts])
    used = uses_by_file(write_texts, read_texts, facts.refs if facts is not None else None, index)
    imported = imported_by(write_texts, read_texts, index)
    writes = [Scoped(p, t, write=True, facts=facts) for p, t in sorted(write_texts.items())]
    reads = [
        Scoped(p, t, write=False, used=used.get(p, {}), imported=p in imported, facts=facts)
        for p, t in sorted(read_texts.items())
    ]
    goal = "\n".join([node.goal, *(f"{u.summary}\n{u.interfaces}" for u in upstream)])
    terms = goal_terms([node.name, goal, plan.requirement])
    fixed = sum(p.item.tokens for p in (*stable, brief, *up_parts)) + upstream_allowance
    fixed += _header_tokens("files") if writes else 0
    fixed += _header_tokens("stubs") if reads else 0
    room = target - fixed
    # Every read-scope file's smallest outline is worth more than a whole write file.
    outline_need = sum(
        (f.outline("names") or f.whole).item.tokens for f in reads if f.entries is not None
    )
    write_share = room - min(outline_need, int(max(0, room) * READ_SHARE))
    fitted = fit_write_files(writes, write_share, terms)
    essentials = _essentials(node, fixed, fitted)
    if not essentials.fits:
        fitted = fit_write_files(writes, 0, terms)  # the smallest form of each
        essentials = _essentials(node, fixed, fitted)
        if check_fit and not essentials.fits:
            raise RunError(essentials.message())
    write_parts = [p for p, _ in fitted]
    if write_parts:
        write_parts.insert(0, header("files"))
    left = target - essentials.tokens
    mem_parts, mem_used = _pack_memory(node, memory, int(max(0, left) * MEMORY_SHARE), now, dropped)
    stub_parts, read_choices = fit_read_files(
        reads, left - mem_used, terms, goal, dropped, eager=eager_reads
    )
    if stub_parts:
        stub_parts.insert(0, header("stubs"))
    parts = [brief, *up_parts, *stub_parts, *write_parts, *mem_parts]
    every = [*stable, *parts]
    system, tools = _system_and_tools()
    return AssembledPrompt(
        system=list(system),
        tools=list(tools),
        first_user_message="".join(p.text for p in parts),
        manifest_items=[p.item for p in every],
        item_texts=[p.text for p in every],
        item_sections=[p.section for p in every],
        dropped=dropped,
        choices=sorted([*choices, *(c for _, c in fitted), *read_choices], key=lambda c: c.path),
        essentials=essentials,
        stable_prefix=_stable_prefix(),
    )


def _header_tokens(section: Section) -> int:
    return header(section).item.tokens


def _essentials(
    node: TaskNode, fixed: int, fitted: Sequence[tuple[Part, FileChoice]]
) -> Essentials:
    return Essentials(
        task_id=node.task_id,
        cap=node.token_budget,
        fixed=fixed,
        write=sum(p.item.tokens for p, _ in fitted),
        files=[c for _, c in fitted],
    )


def _pack_memory(
    node: TaskNode,
    memory: Sequence[MemoryFact],
    budget: int,
    now: datetime | None,
    dropped: list[DroppedItem],
) -> tuple[list[Part], int]:
    """Screened memory packed by utility into ``budget``: its parts and the tokens used."""
    if not memory:  # nothing to screen (every node of a plan's pre-flight)
        return [], 0
    screen = screen_memory(
        memory, node_scope=[*node.read_scope, *node.write_scope], now=now or datetime.now(UTC)
    )
    for fact, reason in screen.dropped:
        dropped.append(drop(memory_id(fact), "memory", fact.source, 0, reason))
    mem: dict[str, Part] = {}
    candidates: list[ContextCandidate] = []
    for f in [*screen.facts, *screen.hypotheses]:
        p = part("memory", memory_id(f), "memory", f.source, MEMORY_TRUST, render_memory(f))
        if p.item.item_id in mem:
            continue  # the same text twice is one item
        mem[p.item.item_id] = p
        candidates.append(
            ContextCandidate(
                item_id=p.item.item_id,
                kind="memory",
                source=f.source,
                trust=MEMORY_TRUST,
                tokens=p.item.tokens,
                relevance=1.0,
                authority=_MEMORY_AUTHORITY[f.source],
            )
        )
    if not candidates:
        return [], 0
    result = pack_context(candidates, budget - _header_tokens("memory"))
    for c, why in result.dropped:
        dropped.append(drop(c.item_id, "memory", c.source, c.tokens, why))
    chosen = set(result.selected_ids)
    kept = [p for item_id, p in mem.items() if item_id in chosen]
    if not kept:
        return [], 0
    parts = [header("memory"), *kept]
    return parts, sum(p.item.tokens for p in parts)


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
        choices=list(prompt.choices),
        total_tokens=sum(i.tokens for i in items),
        stable_prefix_bytes=len(stable),
        stable_prefix_sha256=hashlib.sha256(stable).hexdigest(),
        created_at=created_at or datetime.now(UTC),
    )
