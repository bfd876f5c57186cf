"""The agent loop on a real Temporal dev server with the scripted model."""

from __future__ import annotations

import json

from durable_agents.checkpoint import CheckpointStatus, FinishReason, Role
from tests import agents
from tests.conftest import session_id


async def test_multi_step_run_calls_tools_in_order_with_call_ids(run_worker, store):
    agents.CALL_LOG.clear()
    sid = session_id()
    async with run_worker([agents.weather_agent]) as client:
        result = await client.send("booker", "Book a table for 2 tonight", session_id=sid)

    assert result.finish_reason == FinishReason.STOP
    assert result.steps == 3
    assert [c.name for c in result.tool_calls] == ["get_weather", "get_weather", "book_table"]
    # each tool received the model's id for its call
    assert [(n, cid) for n, cid, _ in agents.CALL_LOG] == [(c.name, c.id) for c in result.tool_calls]
    assert agents.CALL_LOG[2][2] == {"restaurant": "Roscioli", "people": 2}
    # transcript: system, user, then assistant turns each followed by its results in call order
    roles = [m.role for m in result.messages]
    assert roles == [
        Role.SYSTEM,
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
        Role.TOOL,
        Role.ASSISTANT,
        Role.TOOL,
        Role.ASSISTANT,
    ]
    first_turn = result.messages[2]
    assert [m.tool_call_id for m in result.messages[3:5]] == [c.id for c in first_turn.tool_calls]
    assert json.loads(result.messages[3].content)["sky"] == "rain"
    assert result.text == "Booked a table for 2 at Roscioli in Rome."
    # usage is the sum over the three model turns
    assert result.usage.requests == 3 and result.usage.input_tokens > 0
    saved = store.load(sid)
    assert saved.status == CheckpointStatus.FINISHED and saved.finish_reason == FinishReason.STOP
    assert saved.usage == result.usage
    assert saved.messages == result.messages


async def test_max_steps_stops_a_looping_model(run_worker, store):
    sid = session_id()
    async with run_worker([agents.looping_agent]) as client:
        result = await client.send("looper", "loop", session_id=sid)
    assert result.finish_reason == FinishReason.MAX_STEPS
    assert result.steps == 4
    assert len(result.tool_calls) == 4
    # the last turn's tool call still got its result: the transcript stays valid
    assert result.messages[-1].role == Role.TOOL
    assert store.load(sid).status == CheckpointStatus.FINISHED


async def test_bad_tool_calls_become_error_results_and_the_run_continues(run_worker):
    agents.CALL_LOG.clear()
    sid = session_id()
    async with run_worker([agents.bad_agent]) as client:
        result = await client.send("bad", "go", session_id=sid)
    assert result.finish_reason == FinishReason.STOP
    results = [m for m in result.messages if m.role == Role.TOOL]
    assert [m.is_error for m in results] == [True, True, True]
    unknown, invalid, raised = (json.loads(m.content) for m in results)
    assert "unknown tool 'no_such_tool'" in unknown["error"]
    assert "book_table" in unknown["error"]  # lists what exists
    assert invalid["error"] == "invalid arguments for book_table"
    assert invalid["details"][0]["loc"] == ["people"]
    assert raised["error"] == "RuntimeError: no data for Oslo"
    # invalid arguments never reached the tool; the raising tool ran once
    assert [n for n, _, _ in agents.CALL_LOG] == ["flaky"]
    assert result.text == "Recovered from the errors."


async def test_local_activity_fast_path_gives_the_same_run(run_worker, store):
    """Agent(local_activities=True): same transcript, approvals still pause and resume."""
    import dataclasses

    fast_booker = dataclasses.replace(agents.weather_agent, name="fast-booker", local_activities=True)
    fast_payments = dataclasses.replace(agents.payments_agent, name="fast-payments", local_activities=True)
    slow_sid, fast_sid, pay_sid = session_id(), session_id(), session_id()
    async with run_worker([agents.weather_agent, fast_booker, fast_payments]) as client:
        regular = await client.send("booker", "Book a table for 2 tonight", session_id=slow_sid)
        fast = await client.send("fast-booker", "Book a table for 2 tonight", session_id=fast_sid)
        paused = await client.send("fast-payments", "Charge me", session_id=pay_sid)
        assert paused.finish_reason == FinishReason.AWAITING_APPROVAL
        again = await client.approve(pay_sid, paused.approval_id)
        done = await client.reject(pay_sid, again.approval_id)
    assert [(m.role, m.content) for m in fast.messages] == [(m.role, m.content) for m in regular.messages]
    assert fast.usage == regular.usage and fast.steps == regular.steps
    assert done.finish_reason == FinishReason.STOP and len(done.tool_calls) == 3
    assert store.load(fast_sid).run_config.local_activities
