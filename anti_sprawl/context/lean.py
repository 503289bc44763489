"""The lean first prompt: the form each scoped file takes, within a target that never grows
just because the node's cap is larger.

The target is ``lean_target``: the smaller of 12k tokens and 40% of the node's per-call cap
(``token_budget``), leaving the rest for the conversation. Claims on it, in order:

1. *fixed*: rules, tool schemas, brief, upstream results; never shrunk.
2. *write-scope files*, the node's essentials: whole when they fit their share (a water-fill
   over what is left, keeping up to half for read-scope outlines), else their outline plus
   the regions most relevant to the goal (``outline.views.region_view``).
3. *memory*: up to a quarter of what is left, packed by utility (``packing.pack_context``).
4. *read-scope files*: every one at least as a names-only outline, or, for a file defining
   what the write files use, just those signatures (``context.used``); when even that does
   not fit, files the write files use nothing of are dropped first (least relevant first),
   the others shrink to their used signatures, then go too. Then names-only outlines (used
   signatures kept in full), outlines up to signatures, whole files (or regions) where the
   goal names them and they are worth their tokens; then, for files the goal points at, full
   outlines (with first docstring lines).

Every file's form and the reason for it is a ``manifest.FileChoice``.

One cohesive module at ~380 lines: the claims above share one running remainder of
the target, and splitting them would pass that remainder between modules.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..agent.limits import WorkerLimits
from ..outline.parsed import file_entries
from ..outline.python import OutlineLine
from ..outline.regions import Terms, line_count
from ..outline.views import Level, region_view, render_outline
from .file_facts import FileFacts, defined_names
from .manifest import ChoiceReason, DroppedItem, FileChoice, FileForm, UsedSignature
from .read_scoped import Part, Section, data_part, drop
from .used import Used, detail_lines, signatures, used_entries

__all__ = [
    "LEAN_CEILING",
    "LEAN_SHARE",
    "RESULT_ROOM",
    "Essentials",
    "Scoped",
    "file_stem",
    "fit_read_files",
    "fit_write_files",
    "lean_target",
    "reserve_for",
]

LEAN_CEILING = (
    12_000  # was 16k: the rest went on outlines the change did not use (docs/context-measures.md)
)
LEAN_SHARE = 0.4
RESULT_ROOM = 1_500  # one tool result at the observation limit (6,000 characters)
READ_SHARE = 0.5  # of the room after fixed parts, kept for read-scope outlines
MEMORY_SHARE = 0.25
SMALL_SLACK = 100  # a file costing at most this much more than its outline goes in whole
SMALL_TOKENS = 200  # a file without an outline this small goes in whole
MIN_RELEVANCE = 0.4
WHOLE_PER_RELEVANCE = 4_000  # a fully relevant file is worth up to this many tokens whole
REGION_UPGRADE = 1_500  # tokens of regions a relevant big read-scope file may get


@lru_cache(maxsize=256)  # a plan's few caps; asked on every fit check of every node
def reserve_for(cap: int) -> int:
    """Room a call needs beyond the first prompt: the output the worker keeps free under
    ``cap`` (a quarter of it, at most 4,096) and one tool result."""
    return WorkerLimits(token_budget=cap, max_tool_calls=1).output_reserve + RESULT_ROOM


def lean_target(token_budget: int, ceiling: int | None = None) -> int:
    """The first prompt's target: min(``ceiling`` (12k), 40% of the per-call cap)."""
    return max(1, min(ceiling or LEAN_CEILING, int(token_budget * LEAN_SHARE)))


@dataclass
class Scoped:
    """One scoped file: its text, its whole form, its outline (rendered lazily per level)."""

    path: str
    text: str
    write: bool
    whole: Part = field(init=False)
    entries: list[OutlineLine] | None = field(init=False)
    n_lines: int = field(init=False)
    relevance: float = 0.0
    used: Used = field(default_factory=dict)  # definitions here the write files use
    imported: bool = False  # a write file imports this one
    detailed: frozenset[int] = field(init=False)  # outline lines shown in full at any level
    facts: FileFacts | None = None  # shared per-file results (a plan's pre-flight), or none
    _outlines: dict[Level, Part] = field(default_factory=dict)
    _signatures: list[UsedSignature] | None = None  # of ``used``, made once for every choice

    def __post_init__(self) -> None:
        section: Section = "files" if self.write else "stubs"
        if self.facts is not None:
            self.whole = self.facts.whole(section, self.path, self.text)
            self.entries = self.facts.entries(self.path, self.text)
            self.n_lines = self.facts.n_lines(self.path, self.text)
            self.detailed = self.facts.detailed(self.path, self.text, self.entries, self.used)
        else:
            item_id = f"file:{self.path}"
            self.whole = data_part(section, item_id, "file", self.path, "file", self.text)
            self.entries = file_entries(self.path, self.text)
            self.n_lines = line_count(self.text)
            self.detailed = detail_lines(self.entries, self.used)

    @property
    def tokens(self) -> int:
        return self.whole.item.tokens

    def outline(self, level: Level) -> Part | None:
        if self.entries is None:
            return None
        if level not in self._outlines and self.facts is not None:
            self._outlines[level] = self.facts.outline(
                self.path, self.text, level, self.entries, self.detailed
            )
        if level not in self._outlines:
            text = render_outline(self.entries, level, self.n_lines, self.detailed)
            self._outlines[level] = data_part(
                "stubs", f"stub:{self.path}", "stub", self.path, "stub", text
            )
        return self._outlines[level]

    def defined(self) -> frozenset[str]:
        """The classes, functions and names its outline defines (``relevance``)."""
        if self.facts is not None:
            return self.facts.defined(self.path, self.text)
        return defined_names(self.entries)

    def used_view(self) -> Part | None:
        """Only the signatures the write files use (``context.used``), or None."""
        if self.entries is None or not self.detailed:
            return None
        if self.facts is not None:
            return self.facts.outline(self.path, self.text, "used", self.entries, self.detailed)
        entries = used_entries(self.entries, self.detailed)
        text = render_outline(entries, "names", self.n_lines, self.detailed)
        return data_part("stubs", f"used:{self.path}", "stub", self.path, "stub", text)

    def signatures(self) -> list[UsedSignature]:
        """The manifest's record of ``used`` (``used.signatures``): each of a file's choices
        names them, and a read-scope file's form is chosen several times over."""
        if self._signatures is None:
            self._signatures = signatures(self.used)
        return self._signatures

    def view(self, budget: int, terms: Terms) -> tuple[Part, FileChoice]:
        """Outline plus regions in about ``budget`` tokens."""
        v = region_view(self.path, self.text, self.entries, terms, budget, head=self.write)
        section: Section = "files" if self.write else "stubs"
        p = data_part(section, f"region:{self.path}", "region", self.path, "region", v.text)
        regions = [(r.start, r.end) for r in v.regions]
        return p, self.choice("region", "too_large", p, level=v.level, regions=regions)

    def choice(
        self,
        form: FileForm,
        reason: ChoiceReason,
        shown: Part | None,
        *,
        level: Level | None = None,
        regions: list[tuple[int, int]] | None = None,
    ) -> FileChoice:
        return FileChoice(
            path=self.path,
            scope="write" if self.write else "read",
            form=form,
            reason=reason,
            tokens=shown.item.tokens if shown is not None else 0,
            whole_tokens=self.tokens,
            outline=level,
            regions=regions or [],
            signatures=self.signatures() if shown is not None else [],
        )


def file_stem(path: str) -> str:
    """``PurePosixPath(path).stem`` of a canonical repo-relative path, without building one
    (asked for every read-scope file of every node: issue 29, item 3)."""
    name = path.rpartition("/")[2]
    dot = name.rfind(".")
    return name[:dot] if 0 < dot < len(name) - 1 else name


def fit_file(f: Scoped, share: int, terms: Terms) -> tuple[Part, FileChoice]:
    """``f`` whole when it fits ``share``, else outline plus regions (whole if no cheaper)."""
    if f.tokens <= share:
        return f.whole, f.choice("whole", "fits", f.whole)
    p, c = f.view(share, terms)
    if p.item.tokens >= f.tokens:
        return f.whole, f.choice("whole", "small", f.whole)
    return p, c


def fit_write_files(
    files: Sequence[Scoped], share: int, terms: Terms
) -> list[tuple[Part, FileChoice]]:
    """Water-fill ``share`` over the write-scope files, smallest first: each takes what it
    needs up to an equal split of what is left; one too large becomes outline + regions."""
    remaining = max(0, share)
    fitted: dict[str, tuple[Part, FileChoice]] = {}
    order = sorted(files, key=lambda f: (f.tokens, f.path))
    for k, f in enumerate(order):
        fitted[f.path] = fit_file(f, remaining // (len(order) - k), terms)
        remaining = max(0, remaining - fitted[f.path][0].item.tokens)
    return [fitted[f.path] for f in sorted(files, key=lambda f: f.path)]


def relevance(f: Scoped, terms: Terms, goal: str) -> float:
    """How strongly the goal points at ``f``: its path named (1.0), its module name used as
    code (0.7), the symbols it defines named (0.4 + 0.2 each); plain words do not count."""
    if f.path in goal:
        return 1.0
    score = 0.7 if file_stem(f.path) in terms.strong else 0.0
    named = len(f.defined() & terms.strong)
    if named:
        score = max(score, min(1.0, 0.4 + 0.2 * named))
    return score


@dataclass
class _Read:
    f: Scoped
    shown: Part | None
    choice: FileChoice
    level: Level | Literal["used"] | None = None


def fit_read_files(
    files: Sequence[Scoped],
    room: int,
    terms: Terms,
    goal: str,
    dropped: list[DroppedItem],
    *,
    eager: bool = False,
) -> tuple[list[Part], list[FileChoice]]:
    """The read-scope files' parts in ``room`` tokens (see the module docstring), by path.

    ``eager`` (the evaluation's scoping ablation only) treats every file as relevant and
    worth any size, the way an agent without scopes reads whole files until its window fills.
    """
    reads: list[_Read] = []
    for f in files:
        f.relevance = 1.0 if eager else relevance(f, terms, goal)
        names, full = f.outline("names"), f.outline("full")
        used = f.used_view()
        if (full is not None and f.tokens <= full.item.tokens + SMALL_SLACK) or (
            full is None and f.tokens <= SMALL_TOKENS
        ):
            reads.append(_Read(f, f.whole, f.choice("whole", "small", f.whole)))
        elif used is not None:
            reads.append(_Read(f, used, f.choice("outline", "used", used), "used"))
        elif names is not None:
            reads.append(
                _Read(f, names, f.choice("outline", "interface", names, level="names"), "names")
            )
        else:
            reads.append(_Read(f, None, f.choice("dropped", "no_outline", None)))
    left = room - sum(r.shown.item.tokens for r in reads if r.shown is not None)
    left = _make_room(reads, left)
    # The signatures the change uses come first; then every name, then every signature.
    left = _raise_levels(reads, "names", left)
    left = _raise_levels(reads, "signatures", left)
    left = _relevant_upgrades(reads, terms, left, eager)
    # Docstring lines only where the goal points: the signatures are the interface.
    _raise_levels([r for r in reads if r.f.relevance > 0], "full", left)
    parts: list[Part] = []
    for r in sorted(reads, key=lambda r: r.f.path):
        if r.shown is not None:
            parts.append(r.shown)
        else:
            reason = "no_outline" if r.choice.reason == "no_outline" else "over_budget"
            smallest = r.f.outline("names") or r.f.whole
            dropped.append(
                drop(
                    smallest.item.item_id,
                    smallest.item.kind,
                    r.f.path,
                    smallest.item.tokens,
                    reason,
                )
            )
    return parts, [r.choice for r in reads]


def _make_room(reads: list[_Read], left: int) -> int:
    """While over the room: drop files the write files neither use nor import (least
    relevant first) and shrink the used ones to their used signatures; then drop the rest,
    imported before used."""
    order = sorted(
        reads,
        key=lambda r: (bool(r.f.used), r.f.imported, r.f.relevance, -r.f.tokens, r.f.path),
    )
    for r in order:
        if left >= 0:
            return left
        if r.shown is None:
            continue
        smaller = r.f.used_view() if r.f.used and r.level != "used" else None
        if not r.f.used and not r.f.imported:
            left += _drop(r)
        elif smaller is not None and smaller.item.tokens < r.shown.item.tokens:
            left += r.shown.item.tokens - smaller.item.tokens
            r.shown, r.level = smaller, "used"
            r.choice = r.f.choice("outline", "used", smaller)
    for r in order:
        if left >= 0:
            break
        if r.shown is not None:
            left += _drop(r)
    return left


def _drop(r: _Read) -> int:
    """Leave ``r`` out; the tokens that frees."""
    freed = r.shown.item.tokens if r.shown is not None else 0
    r.shown, r.level = None, None
    r.choice = r.f.choice("dropped", "over_budget", None)
    return freed


def _raise_levels(reads: list[_Read], level: Level, left: int) -> int:
    """Upgrade outlines to ``level``, cheapest upgrade first, each within an equal split."""
    rank = {"used": -1, "names": 0, "signatures": 1, "full": 2}
    todo = []
    for r in reads:
        if r.level is None or rank[r.level] >= rank[level] or r.shown is None:
            continue
        target = r.f.outline(level)
        assert target is not None  # r.level is set only for files with an outline
        todo.append((target.item.tokens - r.shown.item.tokens, r, target))
    todo.sort(key=lambda t: (t[0], t[1].f.path))
    for k, (cost, r, target) in enumerate(todo):
        if cost <= max(0, left) // (len(todo) - k):
            r.shown, r.level = target, level
            r.choice = r.f.choice("outline", r.choice.reason, target, level=level)
            left -= cost
    return left


def _relevant_upgrades(reads: list[_Read], terms: Terms, left: int, eager: bool) -> int:
    """Whole files (or regions of big ones) the goal points at, best utility per token first."""
    todo = [r for r in reads if r.f.relevance >= MIN_RELEVANCE and r.choice.form != "whole"]
    todo.sort(key=lambda r: (-r.f.relevance / max(1, r.f.tokens), r.f.path))
    for r in todo:
        current = r.shown.item.tokens if r.shown is not None else 0
        cost = r.f.tokens - current
        if cost <= left and (eager or r.f.tokens <= r.f.relevance * WHOLE_PER_RELEVANCE):
            r.shown, r.level = r.f.whole, None
            r.choice = r.f.choice("whole", "relevant", r.f.whole)
            left -= cost
        elif r.f.entries is not None and r.shown is not None and left > 0:
            p, c = r.f.view(current + min(left, REGION_UPGRADE), terms)
            if c.regions and p.item.tokens - current <= left:
                left -= p.item.tokens - current
                r.shown, r.level = p, None
                r.choice = c.model_copy(update={"reason": "relevant"})
    return left


class Essentials(BaseModel):
    """What a node's first call cannot do without, against its per-call cap.

    ``fixed`` is the rules, tool schemas, brief and upstream results; ``write`` the write-scope
    files as shown; ``reserve`` the room one more turn needs (``reserve_for`` the cap).
    """

    model_config = ConfigDict(frozen=True)

    task_id: str
    cap: int
    fixed: int
    write: int
    files: list[FileChoice] = Field(default_factory=list, description="The write-scope files.")

    @property
    def tokens(self) -> int:
        return self.fixed + self.write

    @property
    def reserve(self) -> int:
        return reserve_for(self.cap)

    @property
    def fits(self) -> bool:
        return self.tokens + self.reserve <= self.cap

    @property
    def smallest_budget(self) -> int:
        """The smallest cap, in thousands, these essentials fit (the reserve grows with it)."""
        cap = -(-self.tokens // 1000) * 1000
        while self.tokens + reserve_for(cap) > cap:
            cap += 1000
        return cap

    def message(self) -> str:
        """One line: what does not fit, and the budget that would."""
        big = sorted(self.files, key=lambda c: -c.tokens)[:3]
        shown = ", ".join(
            f"{c.path} {c.tokens:,}" + (" as outline + regions" if c.form == "region" else "")
            for c in big
        )
        return (
            f"node {self.task_id}: its essential first prompt needs {self.tokens:,} tokens "
            f"(rules, tools, brief and upstream results {self.fixed:,}; write-scope files "
            f"{self.write:,}{': ' + shown if shown else ''}) plus {self.reserve:,} for the "
            f"conversation, over its token_budget of {self.cap:,}; the smallest budget that "
            f"fits is {self.smallest_budget:,} (or narrow its write scope)"
        )
