"""Pure helpers over a provider-neutral transcript."""

from __future__ import annotations

from durable_agents.checkpoint.format import Message, Role
from durable_agents.checkpoint.transcript import pending_tool_calls

__all__ = ["new_input_after", "pending_tool_calls", "strip_system"]


def strip_system(messages: list[Message]) -> list[Message]:
    """System messages in input are ignored: the session has its instructions."""
    return [m for m in messages if m.role != Role.SYSTEM]


def new_input_after(stored: list[Message], incoming: list[Message]) -> list[Message]:
    """The part of ``incoming`` that is new, recognising a re-sent stored history."""
    incoming = strip_system(incoming)
    history = [(m.role, m.content) for m in strip_system(stored)]
    keys = [(m.role, m.content) for m in incoming]
    if len(keys) > 1 and keys[: len(history)] == history:
        return incoming[len(history) :]
    return incoming
