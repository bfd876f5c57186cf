"""A replay against the real model server: a run recorded on it is replayed by the same
agent, live model, tools answered from the recording (the tool does not run again)."""

from __future__ import annotations

import asyncio

import pytest

from durable_agents import ToolContext, tool
from durable_agents.checkpoint import FinishReason, Role
from durable_agents.replay import replay
from tests.conftest import session_id
from tests.real_model.agents import TOOL_DESCRIPTION, CityArgs, forced_tool_agent

pytestmark = pytest.mark.integration

RUN_TIMEOUT = 180.0
runs: list[str] = []


@tool(safe_to_retry=True, name="lookup_city", description=TOOL_DESCRIPTION)
async def counted_lookup(args: CityArgs, ctx: ToolContext) -> dict:
    runs.append(ctx.session_id)
    return {"city": args.city, "weather": "rain"}


async def test_a_recorded_run_replays_end_to_end_on_the_real_model(wire, run_worker):
    agent = forced_tool_agent("real-replay", "lookup_city", [counted_lookup], max_steps=2)
    source = session_id()
    async with run_worker([agent]) as client:
        recorded = await asyncio.wait_for(client.send(agent.name, "Which city?", session_id=source), RUN_TIMEOUT)
        assert recorded.finish_reason == FinishReason.MAX_STEPS and runs == [source, source]
        before = len(wire.chat())
        report = await asyncio.wait_for(replay(client, [source], against=agent, tag="real"), RUN_TIMEOUT)

    (row,) = report.sessions
    assert row.status in ("identical", "diverged") and row.error is None
    assert runs == [source, source]  # the replay's calls were answered from the recording
    assert len(wire.chat()) == before + 2  # the model itself ran again, live
    replayed = client.store.load(f"{source}.replay-real")
    assert replayed is not None and replayed.finish_reason == FinishReason.MAX_STEPS
    results = [m for m in replayed.messages if m.role == Role.TOOL]
    assert len(results) == 2
    # each call got the recorded result (same city) or, with other arguments, the replay's error
    for message in results:
        assert '"weather": "rain"' in (message.content or "") or "replay-unrecorded" in (message.content or "")
