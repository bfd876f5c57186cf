"""Nothing of the transcript rides in Temporal payloads (docs/design.md §2): a 3 MB user
message and 3 MB tool arguments run, and history stays small."""

from __future__ import annotations

import asyncio
import json

import pytest
from pydantic import BaseModel

from durable_agents import (
    Agent,
    ConfigurationError,
    FinishReason,
    ScriptedToolCall,
    ScriptedTurn,
    ToolContext,
    register_script,
    tool,
)
from tests.conftest import session_id

BIG = 3 * 1024 * 1024


class Blob(BaseModel):
    data: str


@tool
async def measure(args: Blob, ctx: ToolContext) -> dict:
    return {"length": len(args.data)}


register_script(
    "big-arguments",
    [
        ScriptedTurn(tool_calls=[ScriptedToolCall(name="measure", arguments={"data": "y" * BIG})]),
        ScriptedTurn(text="Measured."),
    ],
)
big_agent = Agent(name="big", model="scripted:big-arguments", tools=[measure])


async def _history(client, sid: str) -> list[int]:
    history = await client.temporal.get_workflow_handle(sid).fetch_history()
    return [len(e.SerializeToString()) for e in history.events]


async def test_a_3_mb_input_and_3_mb_arguments_leave_history_small(run_worker):
    sid = session_id()
    async with run_worker([big_agent]) as client:
        result = await asyncio.wait_for(client.send("big", "x" * BIG, session_id=sid), 120)
        sizes = await _history(client, sid)
    assert result.finish_reason == FinishReason.STOP
    assert json.loads(result.messages[-2].content) == {"length": BIG}
    assert result.messages[0].role == "user" and len(result.messages[0].content) == BIG
    print(f"history: {sum(sizes):,} bytes in {len(sizes)} events, largest {max(sizes):,}")
    assert max(sizes) < 64 * 1024 and sum(sizes) < 256 * 1024


async def test_an_agent_definition_too_big_for_temporal_fails_at_once_saying_so(run_worker):
    huge = Agent(name="huge", model="scripted:big-arguments", instructions="z" * BIG, tools=[measure])
    async with run_worker([huge]) as client:
        with pytest.raises(ConfigurationError, match="2 MB"):
            await asyncio.wait_for(client.send("huge", "hi", session_id=session_id()), 60)
