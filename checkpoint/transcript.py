"""Pure helpers over a provider-neutral transcript."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from durable_agents.checkpoint.format import Message, Role, ToolCall


def pending_tool_calls(messages: list[Message]) -> tuple[list[ToolCall], int]:
    """Calls of the last assistant turn without a result (call order), and that turn's position.

    Results are recorded as the in-order prefix of a turn's calls, so the
    pending ones are exactly the calls after the last recorded result.
    """
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.role == Role.ASSISTANT:
            answered = {m.tool_call_id for m in messages[index + 1 :] if m.role == Role.TOOL}
            return [c for c in message.tool_calls or [] if c.id not in answered], index
        if message.role == Role.USER:
            break
    return [], -1


def result_content(value: Any) -> str:
    """A tool's return value as transcript text: strings verbatim, models and data as JSON."""
    if isinstance(value, BaseModel):
        return value.model_dump_json(by_alias=True)
    if isinstance(value, str):
        return value
    return json.dumps(value, default=str)
