"""``tokens.fill_budget``: the greedy fill the guidance cut, the reference scope and the map's
outline cut share."""

from __future__ import annotations

from anti_sprawl.tokens import count_tokens, fill_budget


def test_the_first_item_over_the_budget_ends_the_fill() -> None:
    lines = ["a\n", "a much longer line of many words\n", "b\n"]
    kept, used = fill_budget(lines, count_tokens, count_tokens("a\n") + 1)
    assert kept == ["a\n"]
    assert used == count_tokens("a\n")


def test_with_skip_a_cheaper_later_item_still_fits() -> None:
    costs = {"big": 10, "small": 2, "mid": 5}
    kept, used = fill_budget(["small", "big", "mid"], costs.__getitem__, 8, skip=True)
    assert kept == ["small", "mid"]
    assert used == 7
    assert fill_budget(["big"], costs.__getitem__, 0) == ([], 0)
