"""Prices: the bundled dated table, user overrides, what a call costs, the run's dollar cap."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from anti_sprawl.agent.run_budget import RunBudget
from anti_sprawl.errors import UsageError
from anti_sprawl.providers.base import Usage
from anti_sprawl.providers.prices import (
    FREE,
    Price,
    call_cost,
    format_usd,
    load_prices,
    worst_call_cost,
)

BUNDLED = Path(__file__).parent.parent / "anti_sprawl" / "data" / "prices.yaml"


def test_the_bundled_table_is_dated_sourced_and_prices_the_default_models() -> None:
    data = yaml.safe_load(BUNDLED.read_text())
    assert data["date"] == "2026-11-30"
    assert any("claude.com" in s for s in data["source"])
    assert any("openai.com" in s for s in data["source"])
    table = load_prices()
    assert "2026-11-30" in table.described
    from anti_sprawl.providers import DEFAULT_ANTHROPIC_MODEL, DEFAULT_OPENAI_MODEL

    for model in (DEFAULT_ANTHROPIC_MODEL, DEFAULT_OPENAI_MODEL):
        price = table.price_for(model)
        assert price is not None
        assert price.input > 0
        assert price.output > price.input
    for name, entry in data["models"].items():  # every entry is complete and sane
        price = Price.model_validate(entry)
        assert price.cache_read is not None, name
        assert price.cache_write is not None, name
        assert price.read_rate <= price.input <= price.write_rate, name


def test_snapshots_price_as_their_alias_and_unknown_models_are_unpriced() -> None:
    table = load_prices()
    assert table.price_for("claude-sonnet-4-5-20250929") == table.price_for("claude-sonnet-4-5")
    assert table.price_for("gpt-5.4-2026-03-05") == table.price_for("gpt-5.4")
    assert table.price_for("my-local-llama") is None
    assert table.unpriced(["my-local-llama", "gpt-5.5", "my-local-llama"]) == ["my-local-llama"]
    local = load_prices(local=True)
    assert local.price_for("my-local-llama") == FREE  # a local server: zero unless priced
    assert local.price_for("gpt-5.5") == table.price_for("gpt-5.5")


def test_a_call_costs_input_cache_and_output_at_their_rates() -> None:
    price = Price(input=2.0, output=10.0, cache_read=0.2, cache_write=2.5)
    usage = Usage(
        input_tokens=1_000_000,
        output_tokens=100_000,
        cache_read_tokens=600_000,
        cache_write_tokens=100_000,
    )
    # 300k fresh at $2, 600k read at $0.20, 100k written at $2.50, 100k out at $10
    assert call_cost(usage, price) == pytest.approx(0.6 + 0.12 + 0.25 + 1.0)
    # the worst case of a call prices every input token at the dearer of input and write
    assert worst_call_cost(1_000_000, 100_000, price) == pytest.approx(2.5 + 1.0)


def test_long_context_rates_apply_to_the_whole_call() -> None:
    table = load_prices()
    price = table.price_for("gpt-5.5")
    assert price is not None
    assert price.long_context is not None
    short = call_cost(Usage(input_tokens=272_000, output_tokens=1_000), price)
    long = call_cost(Usage(input_tokens=272_001, output_tokens=1_000), price)
    assert short == pytest.approx(272_000 * 5 / 1e6 + 1_000 * 30 / 1e6)
    assert long == pytest.approx(272_001 * 10 / 1e6 + 1_000 * 45 / 1e6)


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_a_user_file_overrides_and_extends_the_bundled_table(tmp_path: Path, suffix: str) -> None:
    entries = {
        "claude-sonnet-5-5": {"input": 7, "output": 70},
        "my-local-llama": {"input": 0.5, "output": 1, "cache_read": 0.1, "cache_write": 0.5},
    }
    path = tmp_path / f"prices{suffix}"
    path.write_text(json.dumps(entries) if suffix == ".json" else yaml.safe_dump(entries))
    table = load_prices(path)
    sonnet = table.price_for("claude-sonnet-5-5")
    assert sonnet == Price(input=7, output=70)
    assert sonnet is not None
    assert sonnet.read_rate == 7  # cache rates default to input
    assert table.price_for("my-local-llama") is not None
    assert table.price_for("gpt-5.5") is not None  # the rest of the bundled table stays
    assert str(path) in table.described
    # the bundled file's own layout works as a user file too
    structured = tmp_path / "structured.yaml"
    structured.write_text(yaml.safe_dump({"date": "2027-01-01", "models": entries}))
    assert load_prices(structured).price_for("claude-sonnet-5-5") == Price(input=7, output=70)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("claude-x: {input: -1, output: 2}", "claude-x.input"),
        ("claude-x: {input: 1}", "claude-x.output"),
        ("claude-x: {input: 1, output: 2, typo: 3}", "claude-x.typo"),
        ("claude-x: {input: .nan, output: 2}", "claude-x.input"),
        ("[1, 2]", "mapping"),
        ("claude-x: {input: [", "cannot parse"),
    ],
)
def test_a_bad_prices_file_is_one_clear_line(tmp_path: Path, text: str, words: str) -> None:
    path = tmp_path / "prices.yaml"
    path.write_text(text)
    with pytest.raises(UsageError) as err:
        load_prices(path)
    assert words in str(err.value)
    assert "\n" not in str(err.value)
    with pytest.raises(UsageError, match="not found"):
        load_prices(tmp_path / "missing.yaml")


def test_format_usd() -> None:
    assert format_usd(None) == "-"
    assert format_usd(0.01234) == "$0.0123"
    assert format_usd(1234.5) == "$1,234.50"


def test_the_run_budget_refuses_the_call_that_could_cross_the_dollar_cap() -> None:
    price = Price(input=10.0, output=50.0)
    refusals: list[str] = []
    run = RunBudget(None, max_cost=1.0, on_exhausted=refusals.append)
    # 50k input ($0.50) + up to 4,096 output ($0.2048): fits, the whole output room granted
    granted = run.reserve(50_000, 4_096, 64, price)
    assert granted is not None
    assert granted[0] == 4_096
    assert granted[1] == pytest.approx(0.7048)
    run.settle(50_000 + 4_096, Usage(input_tokens=50_000, output_tokens=1_000), 0.55, granted[1])
    assert run.spent_cost == pytest.approx(0.55)
    # $0.45 left: 40k input is $0.40, which leaves room for 1,000 output tokens only
    smaller = run.reserve(40_000, 4_096, 64, price)
    assert smaller is not None
    assert smaller[0] == 1_000
    run.settle(40_000 + 1_000, Usage(), 0.0, smaller[1])
    # 44k input ($0.44) leaves $0.01: 200 output tokens, still over the 64 minimum
    assert run.reserve(44_000, 4_096, 64, price) is not None
    # and now nothing is left: refused, once, with the cap in the message
    assert run.reserve(1_000, 4_096, 64, price) is None
    assert run.exhausted_reason == "max_cost"
    assert refusals == [run.exhausted]
    assert "--max-cost $1.00" in refusals[0]


def test_a_dollar_cap_refuses_a_model_it_cannot_price() -> None:
    run = RunBudget(None, max_cost=5.0)
    assert run.reserve(10, 100, 10, None) is None
    assert run.exhausted is not None
    assert "without a price" in run.exhausted
    assert RunBudget(None).reserve(10, 100, 10, None) == (100, 0.0)  # no cap: no question
