"""What Anthropic's extended thinking demands of the other settings, checked early.

Imports no SDK: ``Agent`` runs this at construction, the provider again per
request (a run's own settings may differ from the agent's).
"""

from __future__ import annotations

from durable_agents.checkpoint.errors import ConfigurationError
from durable_agents.checkpoint.format import ModelSettings

MIN_THINKING_BUDGET = 1024
"""The smallest ``budget_tokens`` the API accepts."""
THINKING_TOOL_CHOICES = (None, "auto", "none")
"""With thinking on, the API refuses a forced tool choice (``any`` or a named tool)."""


def thinking_problem(settings: ModelSettings | None, max_tokens: int) -> str | None:
    """Why ``settings`` cannot be sent with thinking on, with the fix; None when they can."""
    budget = settings.thinking_budget_tokens if settings else None
    if settings is None or budget is None:
        return None
    if budget < MIN_THINKING_BUDGET:
        return f"thinking_budget_tokens={budget} is below Anthropic's minimum of {MIN_THINKING_BUDGET}"
    if max_tokens <= budget:
        return (
            f"max_tokens={max_tokens} must be greater than thinking_budget_tokens={budget} "
            "(thinking tokens count toward max_tokens): raise max_tokens or lower the budget"
        )
    if settings.temperature is not None:
        return (
            f"temperature={settings.temperature} cannot be set with extended thinking: "
            "leave temperature unset (or turn thinking off)"
        )
    if settings.tool_choice not in THINKING_TOOL_CHOICES:
        return (
            f"tool_choice={settings.tool_choice!r} forces a tool, which Anthropic refuses with extended thinking: "
            "use 'auto' or 'none' (or turn thinking off)"
        )
    return None


def check_thinking(agent: str, settings: ModelSettings | None, max_tokens: int) -> None:
    """``thinking_problem`` as the ``ConfigurationError`` an agent's construction raises."""
    problem = thinking_problem(settings, max_tokens)
    if problem:
        raise ConfigurationError(f"agent {agent!r}: {problem}")
