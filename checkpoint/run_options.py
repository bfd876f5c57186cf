"""What a run records about how it asks the model and what it may spend (``runConfig``),
and why it failed (``lastError``): parts of the checkpoint format."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from durable_agents.checkpoint._format_model import FormatModel

ToolChoice = str
"""``auto`` (the model decides), ``required`` (it must call a tool), ``none`` (it may not), or a tool's name."""

MaxTokensParam = Literal["max_tokens", "max_completion_tokens"]


class ModelSettings(FormatModel):
    """How the model is asked: sampling, tool choice and provider extras.

    Recorded in ``runConfig.modelSettings`` when a run starts, so a resumed run
    asks the model the same way. Unset fields are not sent (the provider's
    default applies). ``extra`` is merged into the request body as is
    (provider-specific parameters, e.g. ``{"top_k": 40}``).
    """

    temperature: float | None = None
    top_p: float | None = None
    stop: list[str] | None = None
    seed: int | None = None
    reasoning_effort: str | None = None
    """OpenAI reasoning models: ``minimal``, ``low``, ``medium`` or ``high``."""
    tool_choice: ToolChoice | None = None
    """None: ``auto`` whenever tools are offered (sent explicitly: some compatible servers
    read a missing value as ``none``)."""
    max_tokens_param: MaxTokensParam | None = None
    """OpenAI Chat Completions only: the request field that carries ``max_tokens``. None:
    ``max_completion_tokens`` for OpenAI's reasoning models (o1, o3, o4, gpt-5…), which
    refuse ``max_tokens``, and ``max_tokens`` for every other model name, which compatible
    servers (llama.cpp, vLLM, Ollama) read."""
    extra: dict[str, Any] | None = None

    # -- Anthropic: prompt caching and extended thinking (see docs/how-to/multimodal.md) --
    anthropic_cache: bool | None = None
    """Anthropic prompt caching: ``cache_control`` breakpoints on the tools, the system prompt
    and the moving end of the transcript. None: on; False: no breakpoints are sent."""
    thinking_budget_tokens: int | None = None
    """Anthropic extended thinking: the tokens the model may think with (at least 1024 and
    below ``max_tokens``; ``temperature`` must be unset). None: off. Its thinking blocks are
    kept in the transcript as opaque parts and sent back verbatim."""

    def merged(self, override: ModelSettings | None) -> ModelSettings:
        """These settings with ``override``'s set fields on top."""
        if override is None:
            return self
        return self.model_copy(update=override.model_dump(exclude_unset=True, exclude_none=True))


class ModelPrice(FormatModel):
    """US dollars per million tokens."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None


class UsageLimits(FormatModel):
    """Limits on one run's usage; the run ends with finish reason ``usage-limit`` when one is reached.

    Checked before each model request: a request is not made once ``maxRequests``
    requests were made in this run or a token or cost limit was reached (the turn
    that crossed it is kept: it was paid for). A new run of the session has a new budget.
    """

    max_requests: int | None = None
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    max_total_tokens: int | None = None
    max_cost_usd: float | None = None
    """Needs a price for the run's model: the shipped table (``durable_agents.pricing``) or ``price``."""
    price: ModelPrice | None = None


class RunError(FormatModel):
    """Why the session's last run failed (``lastError``): one line, the provider's own text kept."""

    message: str
    type: str | None = None
    step: int = 0
    at: datetime | None = None
