"""What model calls cost, estimated from the org chart's prices (`llm.prices`).

Prices are US dollars per million tokens, per model name. An estimate is only ever as good as
the prices the chart gives: a model without a price has no estimate (None), never zero, so the
office never shows a free run that was not free. Cached input is priced at `cached_input`
wherever the usage records cached tokens; elsewhere every prompt token is priced as input.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

# A price above this per million tokens is a typo (a total, or cents), not a model's price.
MAX_PRICE = 10_000.0
MAX_PRICED_MODELS = 1000
PER = 1_000_000

Price = Annotated[float, Field(ge=0, le=MAX_PRICE)]


class ModelPrice(BaseModel):
    """One model's prices, USD per million tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    input: Price
    output: Price
    cached_input: Price | None = None  # defaults to `input` when not given


Prices = Mapping[str, ModelPrice]


def estimate(
    prices: Prices | None,
    model: str | None,
    prompt_tokens: int,
    completion_tokens: int,
    cached_tokens: int = 0,
) -> float | None:
    """The cost in USD of this usage on `model`, or None when the model has no price."""
    if not prices or not model:
        return None
    price = prices.get(model)
    if price is None:
        return None
    cached = max(0, min(cached_tokens, prompt_tokens))
    cached_rate = price.input if price.cached_input is None else price.cached_input
    return (
        (prompt_tokens - cached) * price.input
        + cached * cached_rate
        + completion_tokens * price.output
    ) / PER


def total(costs: list[float | None]) -> float | None:
    """The sum of some estimates; None when any is None (a partial total would mislead)."""
    if any(c is None for c in costs):
        return None
    return sum(c for c in costs if c is not None)


def prices_view(prices: Prices | None) -> dict[str, dict[str, Any]]:
    """The prices as the page and API clients read them."""
    return {name: p.model_dump() for name, p in (prices or {}).items()}


def format_cost(usd: float) -> str:
    """A cost as people read it: cents below a dollar keep two significant figures."""
    if usd == 0:
        return "$0"
    if usd < 0.01:
        return f"${usd:.4f}"
    if usd < 100:
        return f"${usd:.2f}"
    return f"${usd:,.0f}"
