"""Prices per model, for ``UsageLimits(max_cost_usd=…)`` and reported costs.

US dollars per million tokens, as the providers published them for their
current models (list prices, no batch or regional discounts). Model names
match by their longest listed prefix, so dated names
(``claude-sonnet-4-5-20250929``) find their family. Your contract may differ:
give ``UsageLimits(price=ModelPrice(...))`` to use your own.

Pure data and arithmetic: the workflow checks cost limits with it.
"""

from __future__ import annotations

from durable_agents.checkpoint.format import ModelPrice, Usage, UsageLimits

PRICES: dict[str, ModelPrice] = {
    # Anthropic (cache writes: 5-minute cache)
    "anthropic:claude-opus-4-5": ModelPrice(input=5, output=25, cache_read=0.5, cache_write=6.25),
    "anthropic:claude-opus-4-1": ModelPrice(input=15, output=75, cache_read=1.5, cache_write=18.75),
    "anthropic:claude-opus-4": ModelPrice(input=15, output=75, cache_read=1.5, cache_write=18.75),
    "anthropic:claude-sonnet-4-5": ModelPrice(input=3, output=15, cache_read=0.3, cache_write=3.75),
    "anthropic:claude-sonnet-4": ModelPrice(input=3, output=15, cache_read=0.3, cache_write=3.75),
    "anthropic:claude-haiku-4-5": ModelPrice(input=1, output=5, cache_read=0.1, cache_write=1.25),
    "anthropic:claude-3-5-haiku": ModelPrice(input=0.8, output=4, cache_read=0.08, cache_write=1),
    # OpenAI (cache_read: cached input)
    "openai:gpt-5-nano": ModelPrice(input=0.05, output=0.4, cache_read=0.005),
    "openai:gpt-5-mini": ModelPrice(input=0.25, output=2, cache_read=0.025),
    "openai:gpt-5": ModelPrice(input=1.25, output=10, cache_read=0.125),
    "openai:gpt-4.1-nano": ModelPrice(input=0.1, output=0.4, cache_read=0.025),
    "openai:gpt-4.1-mini": ModelPrice(input=0.4, output=1.6, cache_read=0.1),
    "openai:gpt-4.1": ModelPrice(input=2, output=8, cache_read=0.5),
    "openai:gpt-4o-mini": ModelPrice(input=0.15, output=0.6, cache_read=0.075),
    "openai:gpt-4o": ModelPrice(input=2.5, output=10, cache_read=1.25),
    "openai:o4-mini": ModelPrice(input=1.1, output=4.4, cache_read=0.275),
    "openai:o3": ModelPrice(input=2, output=8, cache_read=0.5),
}


def price_of(model: str) -> ModelPrice | None:
    """The listed price of ``provider:model`` by its longest matching prefix (None: not listed)."""
    if model.startswith("openai-responses:"):  # one price list for both OpenAI APIs
        model = "openai:" + model.partition(":")[2]
    matches = [name for name in PRICES if model == name or model.startswith(name + "-")]
    return PRICES[max(matches, key=len)] if matches else None


def cost_usd(usage: Usage, price: ModelPrice) -> float:
    """What ``usage`` costs. ``inputTokens`` counts every input token; those it reports as cache
    reads and writes are charged at the cache prices (the input price where none is listed)."""
    cache_read = usage.cache_read_tokens or 0
    cache_write = usage.cache_write_tokens or 0
    uncached = max(usage.input_tokens - cache_read - cache_write, 0)
    total = uncached * price.input + usage.output_tokens * price.output
    total += cache_read * (price.cache_read if price.cache_read is not None else price.input)
    total += cache_write * (price.cache_write if price.cache_write is not None else price.input)
    return total / 1_000_000


def limit_reached(limits: UsageLimits | None, used: Usage, model: str) -> str | None:
    """Why the next model request must not be made (the run's usage so far), or None."""
    if limits is None:
        return None
    total = used.input_tokens + used.output_tokens
    checks = [
        (limits.max_requests, used.requests, "requests"),
        (limits.max_input_tokens, used.input_tokens, "input tokens"),
        (limits.max_output_tokens, used.output_tokens, "output tokens"),
        (limits.max_total_tokens, total, "total tokens"),
    ]
    for limit, value, what in checks:
        if limit is not None and value >= limit:
            return f"usage limit reached: {value} {what} in this run (limit {limit})"
    if limits.max_cost_usd is not None:
        price = limits.price or price_of(model)
        if price is not None:
            spent = cost_usd(used, price)
            if spent >= limits.max_cost_usd:
                return f"usage limit reached: ${spent:.4f} spent in this run (limit ${limits.max_cost_usd:.4f})"
    return None
