"""Pure helpers over a provider-neutral transcript."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from durable_agents.checkpoint.format import Message, Role
from durable_agents.checkpoint.parts import OpaquePart, TextPart
from durable_agents.checkpoint.transcript import pending_tool_calls

__all__ = [
    "input_key",
    "new_input_after",
    "pending_tool_calls",
    "repair_text",
    "repaired_turn",
    "repaired_value",
    "strip_system",
]


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
    """A model's turn with its text, parts and tool arguments repaired (see :func:`repair_text`).

    Valid text is left exactly as it is, so a provider's opaque blocks (signed thinking)
    go back byte-for-byte."""
    calls = [c.model_copy(update={"arguments": repaired_value(c.arguments)}) for c in message.tool_calls or []]
    parts = [_repaired_part(p) for p in message.parts] if message.parts is not None else None
    return message.model_copy(
        update={
            "content": repair_text(message.content) if message.content else message.content,
            "tool_calls": calls or message.tool_calls,
            "parts": parts,
        }
    )


def _repaired_part(part: Any) -> Any:
    if isinstance(part, TextPart):
        return part.model_copy(update={"text": repair_text(part.text)})
    if isinstance(part, OpaquePart):
        return part.model_copy(update={"data": repaired_value(part.data)})
    return part


def strip_system(messages: list[Message]) -> list[Message]:
    """System messages in input are ignored: the session has its instructions."""
    return [m for m in messages if m.role != Role.SYSTEM]


def input_key(message: Message) -> tuple[Any, ...]:
    """What makes two input messages the same one (a re-sent history, a retried send):
    role, text and parts (the same words with another image are new input)."""
    return (message.role, message.content, message.parts)


def new_input_after(stored: list[Message], incoming: list[Message]) -> list[Message]:
    """The part of ``incoming`` that is new, recognising a re-sent stored history."""
    incoming = strip_system(incoming)
    if len(incoming) <= 1:
        return incoming  # one message is new input (no need to go through the whole history)
    history = [input_key(m) for m in strip_system(stored)]
    keys = [input_key(m) for m in incoming]
    if keys[: len(history)] == history:
        return incoming[len(history) :]
    return incoming
