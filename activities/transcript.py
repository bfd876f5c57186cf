"""Pure helpers over a provider-neutral transcript."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from durable_agents.checkpoint.format import Message, Role
from durable_agents.checkpoint.transcript import pending_tool_calls

__all__ = ["new_input_after", "pending_tool_calls", "repair_text", "repaired_turn", "repaired_value", "strip_system"]


def repair_text(text: str) -> str:
    """``text`` as valid Unicode: lone surrogates (an ``os.listdir`` name, a
    model's broken escape) become U+FFFD, so it can be stored and sent anywhere."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def repaired_value(value: Any) -> Any:
    """``value`` (a tool's output, a call's arguments) with every string repaired."""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json", by_alias=True, fallback=str)
    if isinstance(value, str):
        return repair_text(value)
    if isinstance(value, dict):
        return {repair_text(str(k)): repaired_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [repaired_value(v) for v in value]
    return value


def repaired_turn(message: Message) -> Message:
    """A model's turn with its text and tool arguments repaired (see :func:`repair_text`)."""
    calls = [c.model_copy(update={"arguments": repaired_value(c.arguments)}) for c in message.tool_calls or []]
    return message.model_copy(
        update={
            "content": repair_text(message.content) if message.content else message.content,
            "tool_calls": calls or message.tool_calls,
        }
    )


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
