"""Budget packing: the seed's worked example, budgets, drop reasons, redundancy, tenants."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from anti_sprawl.context.packing import (
    ContextCandidate,
    UtilityWeights,
    input_budget,
    pack_context,
    utility,
)


def _seed_candidates() -> list[ContextCandidate]:
    # The worked example from seeds/context-engineering-memory-and-tools.ru.txt.
    def c(item_id: str, tenant: str, tokens: int, rel: float, auth: float, fresh: float, **kw):
        return ContextCandidate(
            item_id=item_id,
            tenant=tenant,
            tokens=tokens,
            relevance=rel,
            authority=auth,
            freshness=fresh,
            **kw,
        )

    return [
        c("policy-v3", "t1", 900, 0.9, 1.0, 1.0),
        c("forum-post", "t1", 400, 0.9, 0.3, 1.0),
        c("other-tenant-doc", "t2", 100, 1.0, 1.0, 1.0),
        c("policy-v2", "t1", 900, 0.9, 1.0, 0.2, redundant=True),
    ]


def test_seed_example_exactly() -> None:
    candidates = _seed_candidates()
    budget = input_budget(window=4000, max_output=1500, overhead=500)
    assert budget == 2000
    result = pack_context(candidates, budget, tenant="t1")
    assert result.selected_ids == ["policy-v3", "forum-post"]
    assert result.dropped_ids == ["policy-v2"]
    assert [reason for _, reason in result.dropped] == ["negative_utility"]
    assert result.used_tokens == 1300
    # Another tenant's item is never considered: neither selected nor dropped.
    assert "other-tenant-doc" not in result.selected_ids + result.dropped_ids
    # policy-v2 scores 0.9*1.0*0.2 - 0.2 = -0.02.
    assert utility(candidates[3]) == pytest.approx(-0.02)
    assert utility(candidates[1]) == pytest.approx(0.27)


def test_seed_example_larger_window_and_negative_only() -> None:
    candidates = _seed_candidates()
    larger = pack_context(candidates, input_budget(5000, 1500, 500), tenant="t1")
    assert larger.selected_ids == ["policy-v3", "forum-post"]
    assert larger.dropped == [(candidates[3], "negative_utility")]
    negative_only = pack_context([candidates[-1]], input_budget(4000, 1500, 500), tenant="t1")
    assert negative_only.selected == []
    assert negative_only.used_tokens == 0


def test_redundancy_group_penalizes_all_but_best() -> None:
    # Same example expressed with a similarity key instead of a hand-set flag.
    cands = [
        ContextCandidate(item_id="policy-v2", tokens=900, relevance=0.9, freshness=0.2,
                         redundancy_group="policy"),
        ContextCandidate(item_id="policy-v3", tokens=900, relevance=0.9, redundancy_group="policy"),
        ContextCandidate(item_id="forum", tokens=400, relevance=0.9, authority=0.3),
    ]  # fmt: skip
    result = pack_context(cands, 2000)
    assert result.selected_ids == ["policy-v3", "forum"]
    assert result.dropped == [(cands[0], "negative_utility")]


def test_over_budget_drops_are_recorded_and_smaller_items_still_fit() -> None:
    cands = [
        ContextCandidate(item_id="big", tokens=1500, relevance=1.0),
        ContextCandidate(item_id="mid", tokens=800, relevance=0.8),
        ContextCandidate(item_id="small", tokens=300, relevance=0.5),
    ]
    result = pack_context(cands, 1900)
    assert result.selected_ids == ["big", "small"]
    assert result.dropped == [(cands[1], "over_budget")]
    assert result.used_tokens == 1800


def test_no_tenant_filter_considers_everything_and_tenant_filter_fails_closed() -> None:
    cands = [
        ContextCandidate(item_id="a", tokens=1, relevance=1.0, tenant="t1"),
        ContextCandidate(item_id="b", tokens=1, relevance=1.0),
    ]
    assert pack_context(cands, 10).selected_ids == ["a", "b"]
    assert pack_context(cands, 10, tenant="t1").selected_ids == ["a"]
    assert pack_context(cands, 10, tenant="t1").dropped == []


def test_weights_are_exponents_and_penalty_is_configurable() -> None:
    c = ContextCandidate(item_id="x", tokens=1, relevance=0.5, authority=0.5, redundant=True)
    assert utility(c) == pytest.approx(0.25 - 0.2)
    w = UtilityWeights(authority=0.0, redundancy_penalty=0.0)
    assert utility(c, weights=w) == pytest.approx(0.5)
    assert pack_context([c], 10, weights=UtilityWeights(redundancy_penalty=0.3)).dropped == [
        (c, "negative_utility")
    ]


@given(
    st.lists(
        st.tuples(st.integers(0, 500), st.floats(0, 1), st.floats(0, 1), st.booleans()),
        max_size=12,
    ),
    st.integers(-10, 2000),
)
def test_budget_respected_and_every_candidate_accounted(
    specs: list[tuple[int, float, float, bool]], budget: int
) -> None:
    cands = [
        ContextCandidate(item_id=f"c{i}", tokens=t, relevance=r, freshness=f, redundant=d)
        for i, (t, r, f, d) in enumerate(specs)
    ]
    result = pack_context(cands, budget)
    assert result.used_tokens == sum(c.tokens for c in result.selected) <= max(budget, 0)
    assert sorted(result.selected_ids + result.dropped_ids) == sorted(c.item_id for c in cands)
    for c, reason in result.dropped:
        if reason == "negative_utility":
            assert utility(c) <= 0
        else:
            assert utility(c) > 0
            assert c.tokens > budget - result.used_tokens
    assert all(utility(c) > 0 for c in result.selected)
