"""Pure helpers over a provider-neutral transcript."""

from __future__ import annotations

from checkpoint.format import Message, Role, ToolCall


def strip_system(messages: list[Message]) -> list[Message]:
    """System messages in input are ignored: the session has its instructions."""
    return [m for m in messages if m.role != Role.SYSTEM]


def new_input_after(stored: list[Message], incoming: list[Message]) -> list[Message]:
    """The part of ``incoming`` that is new, recognising a re-sent stored history."""
    incoming = strip_system(incoming)
    history = [(m.role, m.content) for m in strip_system(stored)]
    keys = [(m.role, m.content) for m in incoming]
    if len(keys) > 1 and keys[: len(history)] == history:
        return incoming[len(history):]
    return incoming


def pending_tool_calls(messages: list[Message]) -> tuple[list[ToolCall], int]:
    """Calls of the last assistant turn without a result, and that turn's position."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.role == Role.ASSISTANT:
            calls = message.tool_calls or []
            answered = {m.tool_call_id for m in messages[index + 1:] if m.role == Role.TOOL}
            return [c for c in calls if c.id not in answered], index
        if message.role == Role.USER:
            break
    return [], -1
