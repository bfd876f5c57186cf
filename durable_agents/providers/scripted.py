"""``scripted:<name>``: a deterministic offline model.

A script is a list of turns (played in order, one per assistant turn of the
session) or a function of the transcript returning the next turn. Scripts are
registered by name in the worker process, usually in the module that defines
the agent. Tool call ids are derived from the turn's position in the
transcript, so they are stable and unique within a session.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, Field

from durable_agents.checkpoint.errors import FailureType
from durable_agents.checkpoint.format import Message, Role, ToolCall, Usage
from durable_agents.providers.base import ModelRequest, ModelResponse, TextSink, non_retryable_error


class ScriptedToolCall(BaseModel):
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None


class ScriptedTurn(BaseModel):
    text: str | None = None
    tool_calls: list[ScriptedToolCall] = Field(default_factory=list)


Script = Sequence[ScriptedTurn] | Callable[[list[Message]], ScriptedTurn]

_scripts: dict[str, Script] = {}
_lock = threading.Lock()
calls: list[tuple[str, str, int]] = []
"""Every generated turn as (script, session_id, position): a provider call log."""


def register_script(name: str, script: Script) -> None:
    """Make ``scripted:<name>`` play ``script`` in this process."""
    with _lock:
        _scripts[name] = script


def _estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4)


STREAM_CHUNK = 12
"""Characters per streamed piece of a scripted turn's text (cut after a space where one is near)."""


def text_chunks(text: str, size: int = STREAM_CHUNK) -> list[str]:
    """``text`` in pieces of about ``size`` characters, cut after spaces where possible."""
    chunks, start = [], 0
    while start < len(text):
        end = min(start + size, len(text))
        space = text.rfind(" ", start + 1, end)
        if end < len(text) and space > start:
            end = space + 1
        chunks.append(text[start:end])
        start = end
    return chunks


class ScriptedProvider:
    async def generate_stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
        """The same turn as ``generate``, its text streamed in pieces (yielding to the loop between)."""
        response = await self.generate(request)
        for chunk in text_chunks(response.message.content or ""):
            on_text(chunk)
            await asyncio.sleep(0)
        return response

    async def generate(self, request: ModelRequest) -> ModelResponse:
        script = _scripts.get(request.model)
        if script is None:
            raise non_retryable_error(
                f"no script named {request.model!r} is registered in this worker: call "
                f"register_script({request.model!r}, turns) in the module that defines the agent",
                kind=FailureType.CONFIGURATION,
            )
        position = len(request.messages) if request.position is None else request.position
        if callable(script):
            turn = script(request.messages)
        elif position != len(request.messages):  # a context policy cut the transcript: count by step
            played = max(request.step - 1, 0)
            turn = script[played] if played < len(script) else ScriptedTurn(text="Done.")
        else:
            played = sum(1 for m in request.messages if m.role == Role.ASSISTANT)
            turn = script[played] if played < len(script) else ScriptedTurn(text="Done.")
        tool_calls = [
            ToolCall(id=c.id or f"call_{position}_{i}", name=c.name, arguments=c.arguments)
            for i, c in enumerate(turn.tool_calls)
        ]
        with _lock:
            calls.append((request.model, request.session_id, position))
        prompt = sum(len(m.content or "") for m in request.messages)
        return ModelResponse(
            message=Message(role=Role.ASSISTANT, content=turn.text, tool_calls=tool_calls or None),
            usage=Usage(
                input_tokens=_estimate_tokens("x" * prompt),
                output_tokens=_estimate_tokens(turn.text or "") + 10 * len(tool_calls),
                requests=1,
            ),
            stop_reason="tool_use" if tool_calls else "end_turn",
        )
