"""Resume rules by stored status (docs/design.md §5), on a real dev server."""

from __future__ import annotations

import asyncio
import dataclasses
import json

import pytest

from durable_agents import (
    Agent,
    AgentDriftError,
    ResumeToolMissingError,
    SessionAwaitingApprovalError,
    SessionBusyError,
)
from durable_agents.checkpoint import Checkpoint, CheckpointStatus, FinishReason, Message, Role, ToolCall
from durable_agents.providers import scripted
from tests import agents
from tests.conftest import session_id

PARIS = ToolCall(id="call_2_0", name="get_weather", arguments={"city": "Paris"})
ROME = ToolCall(id="call_2_1", name="get_weather", arguments={"city": "Rome"})


def model_calls(sid: str) -> list[int]:
    """Positions at which the scripted model generated a turn for this session."""
    return [pos for _, s, pos in scripted.calls if s == sid]


def crashed_checkpoint(sid: str, agent: Agent = agents.weather_agent, **changes) -> Checkpoint:
    """What a crash leaves: the model's turn stored, one of its two calls recorded."""
    paris = Message.tool_result(PARIS, json.dumps({"city": "Paris", "sky": "rain", "high_c": 18}))
    cp = Checkpoint(
        session_id=sid,
        agent=agent.name,
        step_index=1,
        run_start_index=1,
        run_start_step=0,
        messages=[
            Message.system(agent.instructions),
            Message.user("Book a table for 2 tonight"),
            Message(role=Role.ASSISTANT, content="Checking.", tool_calls=[PARIS, ROME]),
            paris,
        ],
        run_config=agent.run_config(),
        fingerprint=agent.fingerprint(),
    )
    return cp.model_copy(update=changes)


async def test_in_progress_runs_pending_calls_without_calling_the_model_again(run_worker, store):
    sid = session_id()
    store.save(crashed_checkpoint(sid))
    agents.CALL_LOG.clear()
    async with run_worker([agents.weather_agent]) as client:
        result = await client.send("booker", [], session_id=sid)
    assert result.finish_reason == FinishReason.STOP
    assert 2 not in model_calls(sid)  # the stored turn was not generated again
    assert next((n, cid) for n, cid, _ in agents.CALL_LOG) == ("get_weather", "call_2_1")  # only the pending one
    assert [m.tool_call_id for m in result.messages[3:5]] == ["call_2_0", "call_2_1"]
    assert result.steps == 3  # the budget counts from the run's start, across the crash


async def test_new_input_goes_after_the_pending_results(run_worker, store):
    sid = session_id()
    store.save(crashed_checkpoint(sid))
    async with run_worker([agents.weather_agent]) as client:
        result = await client.send("booker", "Vegetarian, please.", session_id=sid)
    roles = [m.role for m in result.messages[2:6]]
    assert roles == [Role.ASSISTANT, Role.TOOL, Role.TOOL, Role.USER]
    assert result.messages[5].content == "Vegetarian, please."


async def test_the_same_request_sent_again_is_a_retry_not_new_input(run_worker, store):
    sid = session_id()
    store.save(crashed_checkpoint(sid))
    async with run_worker([agents.weather_agent]) as client:
        result = await client.send("booker", "Book a table for 2 tonight", session_id=sid)
    assert [m.content for m in result.messages if m.role == Role.USER] == ["Book a table for 2 tonight"]


async def test_finished_session_continues_the_conversation(run_worker, store):
    sid = session_id()
    async with run_worker([agents.weather_agent]) as client:
        first = await client.send("booker", "Book a table for 2 tonight", session_id=sid)
        # re-sending the stored history followed by a new message, with a system message
        resent = [*first.messages, Message.system("ignored"), Message.user("Thanks! And tomorrow?")]
        second = await client.send("booker", resent, session_id=sid)
    assert second.messages[: len(first.messages)] == first.messages
    assert second.messages[len(first.messages)] == Message.user("Thanks! And tomorrow?")
    assert sum(1 for m in second.messages if m.role == Role.SYSTEM) == 1
    assert second.steps == 1 and second.tool_calls == [] and second.usage.requests == 1
    assert store.load(sid).status == CheckpointStatus.FINISHED


async def test_awaiting_approval_refuses_new_input_and_calls_nothing(run_worker, store):
    sid = session_id()
    store.save(crashed_checkpoint(sid, status=CheckpointStatus.AWAITING_APPROVAL, approval_id="ap-7"))
    agents.CALL_LOG.clear()
    async with run_worker([agents.weather_agent]) as client:
        with pytest.raises(SessionAwaitingApprovalError) as raised:
            await client.send("booker", "hello?", session_id=sid)
    assert raised.value.approval_id == "ap-7" and raised.value.session_id == sid
    assert raised.value.code == "SESSION_AWAITING_APPROVAL"
    assert model_calls(sid) == [] and agents.CALL_LOG == []


SLOW_LOCAL = dataclasses.replace(agents.slow_agent, name="slow-local", activities="local")
"""The same agent on local activities: its calls run in the model turn (a local step)."""


@pytest.mark.parametrize("agent", [agents.slow_agent, SLOW_LOCAL], ids=["regular", "local"])
async def test_busy_session_and_interrupt(agent, run_worker, store):
    sid = session_id()
    agents.CALL_LOG.clear()
    async with run_worker([agent]) as client:
        handle = await client.start(agent.name, "Do the slow thing", session_id=sid)
        while not any(n == "slow_tool" for n, _, _ in agents.CALL_LOG):
            await asyncio.sleep(0.05)
        with pytest.raises(SessionBusyError):
            await client.send(agent.name, "Are you done?", session_id=sid)
        result = await client.send(agent.name, "Stop, do something else.", session_id=sid, interrupt=True)
        aborted = await handle.result()
    assert aborted.finish_reason == FinishReason.ABORTED
    assert [m.role for m in result.messages] == [
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
        Role.TOOL,
        Role.USER,
        Role.ASSISTANT,
    ]
    weather, slow = result.messages[1].tool_calls
    assert [m.tool_call_id for m in result.messages[2:4]] == [weather.id, slow.id]
    assert json.loads(result.messages[2].content)["city"] == "Rome"  # finished before the abort: kept
    assert json.loads(result.messages[3].content) == {"error": "cancelled"}
    assert [m.content for m in result.messages[4:]] == ["Stop, do something else.", "Understood, changing course."]


async def test_delete_lets_a_session_start_over(run_worker, store):
    sid = session_id()
    async with run_worker([agents.weather_agent]) as client:
        await client.send("booker", "Book a table for 2 tonight", session_id=sid)
        store.delete(sid, keep_history=True)
        assert store.load(sid) is None and store.history(sid)
        again = await client.send("booker", "Book a table for 3 tonight", session_id=sid)
    assert [m.content for m in again.messages if m.role == Role.USER] == ["Book a table for 3 tonight"]
    assert again.steps == 3


def _changed(**kwargs) -> Agent:
    base = dict(
        name="booker",
        model="scripted:weather-then-book",
        instructions="You book tables where the weather is good.",
        tools=[agents.get_weather, agents.book_table, agents.flaky],
    )
    return Agent(**{**base, **kwargs})


async def test_drift_warn_continues_and_names_what_changed(run_worker, store):
    sid = session_id()
    store.save(crashed_checkpoint(sid))
    drifted = _changed(instructions="You book tables anywhere.", tools=[agents.get_weather, agents.book_table])
    async with run_worker([drifted]) as client:
        result = await client.send("booker", [], session_id=sid)
    assert result.finish_reason == FinishReason.STOP
    assert result.drift.instructions and result.drift.tools_removed == ["flaky"]
    assert store.load(sid).fingerprint == drifted.fingerprint()


async def test_drift_error_leaves_the_checkpoint_untouched(run_worker, store):
    sid = session_id()
    store.save(crashed_checkpoint(sid))
    before = store.load(sid)
    drifted = _changed(model="scripted:loop-forever", on_agent_drift="error")
    async with run_worker([drifted]) as client:
        with pytest.raises(AgentDriftError, match="model scripted:weather-then-book → scripted:loop-forever"):
            await client.send("booker", [], session_id=sid)
    assert store.load(sid) == before
    assert model_calls(sid) == []


async def test_drift_ignore_and_missing_fingerprint_are_silent(run_worker, store):
    sid, old = session_id(), session_id()
    store.save(crashed_checkpoint(sid))
    store.save(crashed_checkpoint(old, fingerprint=None))  # written before fingerprints existed
    async with run_worker([_changed(instructions="changed", on_agent_drift="ignore")]) as client:
        assert (await client.send("booker", [], session_id=sid)).drift is None
        assert (await client.send("booker", [], session_id=old)).drift is None


async def test_a_pending_call_to_a_removed_tool_always_raises(run_worker, store):
    sid = session_id()
    store.save(crashed_checkpoint(sid))
    no_weather = _changed(tools=[agents.book_table], on_agent_drift="ignore")
    async with run_worker([no_weather]) as client:
        with pytest.raises(ResumeToolMissingError, match=r"get_weather \(call_2_1\)"):
            await client.send("booker", [], session_id=sid)
    assert store.load(sid).messages[-1].tool_call_id == "call_2_0"
