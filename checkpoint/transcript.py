"""Pure helpers over a provider-neutral transcript."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from durable_agents.checkpoint.format import Message, Role, ToolCall


def pending_tool_calls(messages: list[Message]) -> tuple[list[ToolCall], int]:
    """Calls of the last assistant turn without a result (call order), and that turn's position.

    Results follow their turn as the in-order prefix of its calls (call ``i``
    of a turn at ``p`` has its result at ``p + 1 + i``), so the pending calls
    are those after the results: decided by position, never by call id, which
    models reuse (``call_0`` in every turn, or twice in one turn).
    """
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.role == Role.ASSISTANT:
            answered = 0
            while index + 1 + answered < len(messages) and messages[index + 1 + answered].role == Role.TOOL:
                answered += 1
            return list((message.tool_calls or [])[answered:]), index
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


def durability_error(call: ToolCall) -> dict[str, Any]:
    """The error result recorded for a call that started and never recorded a result: it may
    or may not have taken effect, and it is not run again (docs/design.md §5)."""
    return {
        "error": (
            f"Tool '{call.name}' (call {call.id}) was requested but its execution did not "
            "complete durably: it may or may not have taken effect. It was not run again. "
            "Check its effect before deciding to call it again."
        ),
        "kind": "tool-durability-error",
        "toolName": call.name,
        "toolCallId": call.id,
    }
