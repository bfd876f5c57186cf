"""Context policies: how much of a session's transcript a model request carries.

A policy is pure data, recorded in ``runConfig.context`` when a run starts (a
resumed run keeps its own), so every worker cuts the transcript the same way.
The store always keeps every message; only what is *sent* is bounded:

- :class:`KeepLastTurns` — the last ``turns`` model turns (each with its tool results).
- :class:`TokenBudget` — as many of the newest turns as fit ``max_tokens`` (estimated).
- :class:`SummarizeOlder` — everything since the last summary; when that grows past
  ``max_turns`` (or ``max_tokens``), the older part is summarised by a model call whose
  result is stored in the transcript as a durable message (never generated again).

Every policy always sends the system prompt (the transcript's leading system
messages) and the current run's first user message, and never separates an
assistant turn from its tool results. Each assistant turn made under a policy
records the window it was sent (``context``: transcript ranges), so the request
is reconstructible from the checkpoint (``durable-agents show --as-sent STEP``).
The cutting itself is :mod:`durable_agents.checkpoint.context`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field

from durable_agents.checkpoint._format_model import FormatModel
from durable_agents.checkpoint.errors import ConfigurationError

__all__ = [
    "ContextPolicy",
    "ContextSummary",
    "ContextWindow",
    "KeepLastTurns",
    "SummarizeOlder",
    "TokenBudget",
]


class _Policy(FormatModel):
    model_config = ConfigDict(frozen=True)


class KeepLastTurns(_Policy):
    """Send the last ``turns`` model turns (an assistant message with its tool results, and
    the input between turns), plus the system prompt and the run's first user message."""

    kind: Literal["keep-last-turns"] = "keep-last-turns"
    turns: int

    def __init__(self, turns: int | None = None, /, **data: Any) -> None:
        if turns is not None:
            data["turns"] = turns
        super().__init__(**data)
        if self.turns < 1:
            raise ConfigurationError(f"KeepLastTurns needs at least 1 turn, got {self.turns}")


class TokenBudget(_Policy):
    """Send the newest whole turns whose messages fit ``max_tokens`` together with the system
    prompt and the run's first user message (estimated: about 4 characters a token; the newest
    turn is sent even when it alone is over)."""

    kind: Literal["token-budget"] = "token-budget"
    max_tokens: int

    def __init__(self, max_tokens: int | None = None, /, **data: Any) -> None:
        if max_tokens is not None:
            data["max_tokens"] = max_tokens
        super().__init__(**data)
        if self.max_tokens < 1:
            raise ConfigurationError(f"TokenBudget needs a positive max_tokens, got {self.max_tokens}")


DEFAULT_SUMMARY_INSTRUCTIONS = (
    "You summarise the earlier part of a conversation between a user and an AI agent that uses "
    "tools, so that the agent can go on without it. Keep the user's goals and constraints, the "
    "decisions made, the facts learned from tool results (names, numbers, ids), what was done and "
    "what is left to do. Update the previous summary, if there is one, with the new messages. "
    "Write plain, concise text."
)


class SummarizeOlder(_Policy):
    """Send the system prompt, the run's first user message, the newest summary and every
    turn after it. When those turns exceed ``max_turns`` (or their messages ``max_tokens``),
    the older ones, down to the newest ``keep_turns`` (``keep_tokens``), are summarised
    first, together with the previous summary: one model call (``model``, default the run's
    own) whose answer is stored in the transcript as a ``system`` message marked ``summary``.
    A stored summary is reused on every retry and resume, never generated again.

    Give either ``max_turns`` (``keep_turns`` defaults to half of it) or ``max_tokens``
    (``keep_tokens`` defaults to half)."""

    kind: Literal["summarize-older"] = "summarize-older"
    max_turns: int | None = None
    keep_turns: int | None = None
    max_tokens: int | None = None
    keep_tokens: int | None = None
    model: str | None = None
    """The summarising model (``provider:model``); None: the run's model."""
    instructions: str | None = None
    """The summariser's system prompt; None: a built-in one (``DEFAULT_SUMMARY_INSTRUCTIONS``)."""
    summary_max_tokens: int = 1024
    """``max_tokens`` of the summary request."""

    def __init__(self, **data: Any) -> None:
        if data.get("max_turns") is not None and data.get("keep_turns") is None:
            data["keep_turns"] = max(1, data["max_turns"] // 2)
        if data.get("max_tokens") is not None and data.get("keep_tokens") is None:
            data["keep_tokens"] = max(1, data["max_tokens"] // 2)
        super().__init__(**data)
        by_turns, by_tokens = self.max_turns is not None, self.max_tokens is not None
        if by_turns == by_tokens:
            raise ConfigurationError("SummarizeOlder needs exactly one of max_turns and max_tokens")
        limit, keep = (self.max_turns, self.keep_turns) if by_turns else (self.max_tokens, self.keep_tokens)
        assert limit is not None and keep is not None
        if not 1 <= keep < limit:
            unit = "turns" if by_turns else "tokens"
            raise ConfigurationError(
                f"SummarizeOlder: keep_{unit} ({keep}) must be at least 1 and below max_{unit} ({limit})"
            )
        if self.summary_max_tokens < 1:
            raise ConfigurationError("SummarizeOlder: summary_max_tokens must be positive")


ContextPolicy = Annotated[KeepLastTurns | TokenBudget | SummarizeOlder, Field(discriminator="kind")]
"""One of the policies, as ``runConfig.context`` records it (told apart by ``kind``)."""


class ContextWindow(FormatModel):
    """What a model request was made of, recorded on the assistant turn it produced
    (``context``): transcript positions as ``[start, end)`` ranges in the order they were
    sent. A range holding a context summary sends that summary; other summaries are never sent.
    """

    ranges: list[tuple[int, int]] = Field(default_factory=list)


class ContextSummary(FormatModel):
    """The marker of a context summary (a ``system`` message's ``summary``): it stands for the
    transcript's messages from ``start`` to ``end`` (exclusive), those it does not send."""

    start: int
    end: int
    """The first position after the summarised messages: the turns after it are sent as they are."""
    previous: int | None = None
    """Where the summary it extends is (its text was part of this summary's input)."""
    model: str | None = None
    """The model that wrote it (``provider:model``)."""
