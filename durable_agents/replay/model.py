"""``recorded:turns``: a model that answers a replay with its source's recorded turns.

For tests of the replay machinery itself, and for replays that change only tools: each
model turn of a replay session is the source's assistant turn at the same place (its
text and tool calls, which then get the recorded results or, for a tool that changed,
what the replay policy says). Past the source's last turn it says so and stops. It costs
nothing: its usage counts requests only. A replay worker registers it under ``recorded``;
ask for it with ``model=RECORDED_MODEL`` (``--model recorded:turns``).
"""

from __future__ import annotations

from durable_agents.checkpoint.dataset import Recordings
from durable_agents.checkpoint.format import Message, Role, Usage
from durable_agents.checkpoint.replay import source_of
from durable_agents.providers.base import ModelRequest, ModelResponse, TextSink

RECORDED_PROVIDER = "recorded"
RECORDED_MODEL = f"{RECORDED_PROVIDER}:turns"


class RecordedModel:
    def __init__(self, recordings: Recordings) -> None:
        self.recordings = recordings

    async def generate(self, request: ModelRequest) -> ModelResponse:
        source = source_of(request.session_id)
        checkpoint = self.recordings.load(source) if source is not None else None
        turns = [m for m in checkpoint.messages if m.role == Role.ASSISTANT] if checkpoint is not None else []
        played = sum(1 for m in request.messages if m.role == Role.ASSISTANT)
        if played < len(turns):
            turn = turns[played]
            message = Message(role=Role.ASSISTANT, content=turn.content, tool_calls=turn.tool_calls)
        else:
            why = "no recording" if checkpoint is None else f"the recording has {len(turns)} turns"
            message = Message(role=Role.ASSISTANT, content=f"(recorded model: {why})")
        return ModelResponse(
            message=message, usage=Usage(requests=1), stop_reason="tool_use" if message.tool_calls else "end_turn"
        )

    async def generate_stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
        response = await self.generate(request)
        if response.message.content:
            on_text(response.message.content)
        return response


__all__ = ["RECORDED_MODEL", "RECORDED_PROVIDER", "RecordedModel"]
