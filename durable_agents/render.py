"""Human-readable rendering of transcripts for the CLI."""

from __future__ import annotations

import json

from checkpoint.format import Message, Role

_WIDTH = 100


def _short(text: str, width: int = _WIDTH) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def render_message(message: Message) -> list[str]:
    if message.role == Role.SYSTEM:
        return [f"  system     {_short(message.content or '')}"]
    if message.role == Role.USER:
        return [f"  user       {_short(message.content or '')}"]
    if message.role == Role.TOOL:
        mark = "✗" if message.is_error else "→"
        return [f"  {mark} result   {message.tool_name} [{message.tool_call_id}] {_short(message.content or '', 70)}"]
    lines = []
    if message.content:
        lines.append(f"  assistant  {_short(message.content)}")
    for call in message.tool_calls or []:
        args = json.dumps(call.arguments, separators=(",", ":"))
        lines.append(f"  ⚙ tool     {call.name}({_short(args, 60)}) [{call.id}]")
    return lines or ["  assistant  (empty)"]


def render_transcript(messages: list[Message]) -> str:
    return "\n".join(line for m in messages for line in render_message(m))
