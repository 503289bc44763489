"""Model prices: the bundled, dated table (``data/prices.yaml``) and the user's overrides.

Prices are US dollars per million tokens for uncached input, output, cache reads and cache
writes, with an optional ``long_context`` set for calls above an input size. A user file
(``--prices FILE``, or ``$XDG_CONFIG_HOME/anti-sprawl/prices.yaml``, found once by the CLI)
replaces the bundled entry of every model it names; YAML or JSON, either a plain mapping
``{model: {input, output, cache_read, cache_write}}`` or the bundled file's layout.

A model the table does not know costs nothing we can say: its calls are reported in tokens
only (the CLI warns once). Behind a local server (``--base-url``, or the scripted provider) an
unpriced model is free: ``local`` tables price it at zero.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..errors import UsageError
from ..fs.userdata import read_user_file
from .base import Usage

__all__ = [
    "LongContext",
    "Price",
    "PriceTable",
    "call_cost",
    "format_usd",
    "load_prices",
    "worst_call_cost",
]

MILLION = 1_000_000
MAX_RATE = 100_000.0  # dollars per million tokens: anything above is a typo
_META_KEYS = {"date", "source", "notes"}
_DATED = re.compile(r"(-\d{8}|-\d{4}-\d{2}-\d{2}|-latest|\[1m\])$")


class _Rates(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0, le=MAX_RATE)
    output: float = Field(ge=0, le=MAX_RATE)
    cache_read: float | None = Field(default=None, ge=0, le=MAX_RATE)
    cache_write: float | None = Field(default=None, ge=0, le=MAX_RATE)

    @field_validator("input", "output", "cache_read", "cache_write")
    @classmethod
    def _finite(cls, value: float | None) -> float | None:
        if value is not None and not math.isfinite(value):
            raise ValueError("must be a finite number")
        return value

    @property
    def read_rate(self) -> float:
        return self.input if self.cache_read is None else self.cache_read

    @property
    def write_rate(self) -> float:
        return self.input if self.cache_write is None else self.cache_write


class LongContext(_Rates):
    """The rates of a whole call whose input is above ``above_input_tokens``."""

    above_input_tokens: int = Field(gt=0)


class Price(_Rates):
    """One model's prices, dollars per million tokens (cache rates default to ``input``)."""

    long_context: LongContext | None = None

    def rates(self, input_tokens: int) -> _Rates:
        """The rates a call of ``input_tokens`` input is billed at."""
        tier = self.long_context
        return tier if tier is not None and input_tokens > tier.above_input_tokens else self


FREE = Price(input=0.0, output=0.0)


def call_cost(usage: Usage, price: Price) -> float:
    """Dollars for one call (``usage.input_tokens`` includes cached tokens)."""
    r = price.rates(usage.input_tokens)
    cached = usage.cache_read_tokens + usage.cache_write_tokens
    fresh = max(0, usage.input_tokens - cached)
    return (
        fresh * r.input
        + usage.cache_read_tokens * r.read_rate
        + usage.cache_write_tokens * r.write_rate
        + usage.output_tokens * r.output
    ) / MILLION


def worst_call_cost(input_tokens: int, output_tokens: int, price: Price) -> float:
    """The most a call of this size can cost: every input token at the dearer of input and
    cache write, every output token produced."""
    r = price.rates(input_tokens)
    return (input_tokens * max(r.input, r.write_rate) + output_tokens * r.output) / MILLION


def format_usd(value: float | None) -> str:
    """``$0.0123`` below a dollar, ``$12.34`` above; ``-`` for unpriced."""
    if value is None:
        return "-"
    return f"${value:,.2f}" if value >= 1 else f"${value:.4f}"


def _base_name(model: str) -> str:
    """``claude-sonnet-4-5-20250929`` -> ``claude-sonnet-4-5``: snapshots price as their alias."""
    name = model.strip().lower()
    while (stripped := _DATED.sub("", name)) != name:
        name = stripped
    return name


class PriceTable:
    """Prices by model name; ``local`` prices unknown models at zero (a local server)."""

    def __init__(
        self, models: Mapping[str, Price], *, described: str = "", local: bool = False
    ) -> None:
        self.models = {_base_name(name): price for name, price in models.items()}
        self.described = described
        self.local = local

    def price_for(self, model: str | None) -> Price | None:
        """The model's prices; None when unknown (tokens only), zero when local and unknown."""
        if model:
            for name in (model.strip().lower(), _base_name(model)):
                if name in self.models:
                    return self.models[name]
        return FREE if self.local else None

    def unpriced(self, models: Iterable[str | None]) -> list[str]:
        """The models in ``models`` this table cannot price, sorted, each once."""
        return sorted({m or "(provider default)" for m in models if self.price_for(m) is None})


def _models_of(data: Any, source: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise UsageError(f"prices file {source} must be a mapping of model names to prices")
    models = data.get("models")
    if isinstance(models, dict) and set(data) - {"models"} <= _META_KEYS:
        return models
    return data


def parse_prices(data: Any, source: str) -> dict[str, Price]:
    """Validate a prices document; any problem is one UsageError naming the model."""
    out: dict[str, Price] = {}
    for name, entry in _models_of(data, source).items():
        if not isinstance(name, str) or not name.strip():
            raise UsageError(f"prices file {source}: model names must be non-empty strings")
        try:
            out[name] = Price.model_validate(entry)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(x) for x in err["loc"]) or "prices"
            raise UsageError(f"prices file {source}: {name}.{where}: {err['msg']}") from None
    return out


def _bundled() -> tuple[dict[str, Price], str]:
    text = resources.files("anti_sprawl").joinpath("data", "prices.yaml").read_text("utf-8")
    data = yaml.safe_load(text)
    return parse_prices(data, "(bundled)"), str(data.get("date", ""))


def load_prices(user_file: Path | None = None, *, local: bool = False) -> PriceTable:
    """The bundled table with ``user_file``'s models on top."""
    models, date = _bundled()
    described = f"list prices of {date} (bundled)"
    if user_file is not None:
        text = read_user_file(user_file, "prices")
        try:
            data = json.loads(text) if user_file.suffix.lower() == ".json" else yaml.safe_load(text)
        except (json.JSONDecodeError, yaml.YAMLError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise UsageError(f"cannot parse prices file {user_file}: {first}") from exc
        models.update(parse_prices(data, str(user_file)))
        described += f" and {user_file}"
    return PriceTable(models, described=described, local=local)
