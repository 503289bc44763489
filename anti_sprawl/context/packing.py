"""Budget packing: choose the context items worth their tokens.

Each candidate gets a utility score, ``relevance × authority × freshness − redundancy_penalty``
(weights are exponents on the three factors, so the default reproduces the plain product).
Candidates of another tenant or scope are filtered out *before* scoring and never appear in
the result, not even as drops: scope is a filter, not a score. Candidates with non-positive
utility are dropped as ``negative_utility``; the rest are taken in descending utility while
they fit, and those that do not fit are dropped as ``over_budget``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ContextCandidate",
    "PackDropReason",
    "PackResult",
    "UtilityWeights",
    "input_budget",
    "pack_context",
    "utility",
]

PackDropReason = Literal["negative_utility", "over_budget"]


class ContextCandidate(BaseModel):
    """One item that may go into a model call, with the features packing scores it by."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    item_id: str
    kind: str = "file"
    source: str = ""
    trust: Literal["trusted", "untrusted"] = "untrusted"
    text: str = ""
    tokens: int = Field(ge=0)
    relevance: float = Field(ge=0.0, le=1.0)
    authority: float = Field(default=1.0, ge=0.0, le=1.0)
    freshness: float = Field(default=1.0, ge=0.0, le=1.0)
    tenant: str | None = Field(default=None, description="Tenant or scope the item belongs to.")
    redundant: bool = Field(default=False, description="Known near-duplicate of another item.")
    redundancy_group: str | None = Field(
        default=None,
        description="Items sharing a group are near-duplicates; all but the best are penalized.",
    )


class UtilityWeights(BaseModel):
    """Exponents on the utility factors and the penalty for a near-duplicate."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    relevance: float = Field(default=1.0, ge=0.0)
    authority: float = Field(default=1.0, ge=0.0)
    freshness: float = Field(default=1.0, ge=0.0)
    redundancy_penalty: float = Field(default=0.2, ge=0.0)


DEFAULT_WEIGHTS = UtilityWeights()


class PackResult(BaseModel):
    """What packing chose (in selection order), what it left out and why, and the tokens used."""

    model_config = ConfigDict(frozen=True)

    selected: list[ContextCandidate]
    dropped: list[tuple[ContextCandidate, PackDropReason]]
    used_tokens: int
    budget_tokens: int

    @property
    def selected_ids(self) -> list[str]:
        return [c.item_id for c in self.selected]

    @property
    def dropped_ids(self) -> list[str]:
        return [c.item_id for c, _ in self.dropped]


def input_budget(window: int, max_output: int, overhead: int) -> int:
    """Tokens left for context: the window minus the reserved answer and protocol overhead."""
    return window - max_output - overhead


def _base_score(c: ContextCandidate, w: UtilityWeights) -> float:
    return float(c.relevance**w.relevance * c.authority**w.authority * c.freshness**w.freshness)


def _penalized(candidates: Sequence[ContextCandidate], w: UtilityWeights) -> set[int]:
    """Indices of near-duplicates: flagged items, and every group member but the best-scoring."""
    best: dict[str, int] = {}
    for i, c in enumerate(candidates):
        if c.redundancy_group is None:
            continue
        j = best.get(c.redundancy_group)
        # Ties keep the earlier item, so the choice does not depend on anything but input order.
        if j is None or _base_score(c, w) > _base_score(candidates[j], w):
            best[c.redundancy_group] = i
    keep = set(best.values())
    return {
        i
        for i, c in enumerate(candidates)
        if c.redundant or (c.redundancy_group is not None and i not in keep)
    }


def utility(
    c: ContextCandidate, *, redundant: bool | None = None, weights: UtilityWeights = DEFAULT_WEIGHTS
) -> float:
    """One candidate's utility; ``redundant`` overrides the candidate's own flag."""
    dup = c.redundant if redundant is None else redundant
    return _base_score(c, weights) - (weights.redundancy_penalty if dup else 0.0)


def pack_context(
    candidates: Iterable[ContextCandidate],
    budget_tokens: int,
    *,
    weights: UtilityWeights = DEFAULT_WEIGHTS,
    tenant: str | None = None,
) -> PackResult:
    """Select the candidates with positive utility, best first, that fit in ``budget_tokens``.

    With ``tenant`` set, only candidates of exactly that tenant are considered (an item with
    no tenant is excluded too: fail closed); the others are not reported anywhere.
    """
    in_scope = [c for c in candidates if tenant is None or c.tenant == tenant]
    dups = _penalized(in_scope, weights)
    scored = [
        (utility(c, redundant=i in dups, weights=weights), i, c) for i, c in enumerate(in_scope)
    ]
    # Stable order: utility descending, then input order.
    scored.sort(key=lambda t: (-t[0], t[1]))
    selected: list[ContextCandidate] = []
    dropped: list[tuple[ContextCandidate, PackDropReason]] = []
    used = 0
    for score, _, c in scored:
        if score <= 0:
            dropped.append((c, "negative_utility"))
        elif used + c.tokens <= budget_tokens:
            selected.append(c)
            used += c.tokens
        else:
            dropped.append((c, "over_budget"))
    return PackResult(
        selected=selected, dropped=dropped, used_tokens=used, budget_tokens=budget_tokens
    )
