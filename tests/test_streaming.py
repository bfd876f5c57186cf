"""``AgentClient.stream`` and ``watch`` on the scripted model, through a real worker:
the events of a run in order, deltas that add up to each stored turn, a replay
from any offset, approvals in the stream, and a run that does not stream."""

from __future__ import annotations

import asyncio

import pytest

from durable_agents.checkpoint import FinishReason, Role
from durable_agents.errors import ConfigurationError, DurableAgentsError, SessionAwaitingApprovalError
from durable_agents.events import (
    ApprovalDecided,
    ApprovalRequested,
    ModelTurnStarted,
    RunFailed,
    RunFinished,
    RunPaused,
    RunStarted,
    StepRetried,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnStored,
    step_text,
)
from tests import agents
from tests.conftest import session_id


async def collect(events) -> list:
    return [event async for event in events]


def kinds(events: list) -> list[str]:
    return [e.type for e in events]


def assert_deltas_add_up(events: list, messages) -> None:
    """Every stored turn's text is what its step's deltas (without voided attempts) add up to."""
    stored = [e for e in events if isinstance(e, TurnStored)]
    assert stored, kinds(events)
    turns = [m for m in messages if m.role == Role.ASSISTANT]
    assert [e.text for e in stored] == [m.content or "" for m in turns][-len(stored) :]
    for event in stored:
        assert step_text(events, event.step) == event.text, (event.step, event.text)


async def test_a_streamed_run_yields_its_events_in_order_and_its_result(run_worker, store):
    sid = session_id()
    async with run_worker([agents.weather_agent]) as client:
        events = await collect(client.stream("booker", "Book a table where it is sunny", session_id=sid))
        sent = await client.send("booker", "And tomorrow?", session_id=f"{sid}-plain")

    assert [e.offset for e in events] == list(range(1, len(events) + 1))
    assert isinstance(events[0], RunStarted) and events[0].agent == "booker" and events[0].step == 0
    assert isinstance(events[-1], RunFinished)
    result = events[-1].result
    assert result.finish_reason == FinishReason.STOP and result.text == "Booked a table for 2 at Roscioli in Rome."
    assert result.model_dump() == client.run_result(_summary(events[-1])).model_dump()  # what send() returns
    assert sent.finish_reason == FinishReason.STOP and len(sent.messages) == len(result.messages)

    steps = [e for e in events if isinstance(e, ModelTurnStarted)]
    assert [e.step for e in steps] == [1, 2, 3]
    assert_deltas_add_up(events, result.messages)
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert all(d.attempt == 1 for d in deltas) and not any(isinstance(e, StepRetried) for e in events)
    # the step's events come in their order: started, deltas, stored, then its tools
    first = kinds([e for e in events if getattr(e, "step", None) == 1])
    assert first[0] == "model-turn-started" and first.index("turn-stored") > first.index("text-delta")
    assert first[first.index("turn-stored") + 1 :] == [
        "tool-call-started",
        "tool-call-finished",
        "tool-call-started",
        "tool-call-finished",
    ]
    started = [e for e in events if isinstance(e, ToolCallStarted)]
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert [(e.name, e.arguments) for e in started] == [
        ("get_weather", {"city": "Paris"}),
        ("get_weather", {"city": "Rome"}),
        ("book_table", {"restaurant": "Roscioli", "people": 2}),
    ]
    assert [e.tool_call_id for e in finished] == [e.tool_call_id for e in started]
    results = {m.tool_call_id: m.content for m in result.messages if m.role == Role.TOOL}
    assert all(e.result == results[e.tool_call_id] and not e.is_error for e in finished)
    turns = [e for e in events if isinstance(e, TurnStored)]
    assert sum(t.usage.requests for t in turns) == result.usage.requests == 3
    assert turns[-1].total_usage == store.load_header(sid).usage


async def test_watch_after_the_run_ended_replays_every_event_from_any_offset(run_worker, store):
    sid = session_id()
    async with run_worker([agents.weather_agent]) as client:
        live = await collect(client.stream("booker", "Book a table", session_id=sid))
        replayed = await collect(client.watch(sid))
        tail = await collect(client.watch(sid, after=live[4].offset))

    def same(e):
        return e.model_dump(exclude={"result"}), e.offset

    assert [same(e) for e in replayed] == [same(e) for e in live]
    assert replayed[-1].result.model_dump() == live[-1].result.model_dump()
    assert [same(e) for e in tail] == [same(e) for e in live[5:]]


async def test_a_second_run_streams_only_its_own_events_and_watch_follows_both(run_worker):
    sid = session_id()
    async with run_worker([agents.looping_agent]) as client:
        first = await collect(client.stream("looper", "loop", session_id=sid))
        second = await collect(client.stream("looper", "again", session_id=sid))
        everything = await collect(client.watch(sid))
    assert isinstance(first[-1], RunFinished) and first[-1].result.finish_reason == FinishReason.MAX_STEPS
    assert isinstance(second[0], RunStarted) and second[0].offset == first[-1].offset + 1
    assert second[0].step == 4 and [e.step for e in second if isinstance(e, ModelTurnStarted)] == [5, 6, 7, 8]
    assert [e.offset for e in everything] == [e.offset for e in first + second]


async def test_a_paused_run_streams_the_approval_and_watch_goes_on_after_the_decision(run_worker):
    sid = session_id()
    async with run_worker([agents.payments_agent]) as client:
        paused = await collect(client.stream("payments", "Charge the customer", session_id=sid))
        assert isinstance(paused[-1], RunPaused)
        result = paused[-1].result
        assert result.finish_reason == FinishReason.AWAITING_APPROVAL and result.approval_id
        [requested] = [e for e in paused if isinstance(e, ApprovalRequested)]
        assert requested.approval_id == result.approval_id and requested.tool_name == "charge_card"
        assert requested.arguments == {"amount": 10} and [c.name for c in requested.remaining_tool_calls] == [
            "charge_card"
        ]
        with pytest.raises(SessionAwaitingApprovalError):
            await collect(client.stream("payments", "more", session_id=sid))

        watching = asyncio.create_task(collect(client.watch(sid, after=paused[-1].offset)))
        await asyncio.sleep(0.3)
        await client.approve(sid, result.approval_id, note="ok", decided_by="ann")
        after = await asyncio.wait_for(watching, 30)
    decided = [e for e in after if isinstance(e, ApprovalDecided)]
    assert decided[0].approval_id == result.approval_id and decided[0].approved and decided[0].decided_by == "ann"
    assert isinstance(after[-1], RunPaused | RunFinished)
    assert after[0].offset == paused[-1].offset + 1


async def test_a_run_started_without_streaming_is_watched_to_its_outcome(run_worker):
    sid = session_id()
    async with run_worker([agents.weather_agent]) as client:
        await client.start("booker", "Book a table", session_id=sid)
        events = await asyncio.wait_for(collect(client.watch(sid)), 60)
    assert kinds(events) == ["run-finished"] and events[0].offset is None
    assert events[0].result.finish_reason == FinishReason.STOP


async def test_a_failed_streamed_run_ends_with_run_failed_then_raises_as_send_does(run_worker, store):
    sid = session_id()
    broken = agents.Agent(name="broken", model="scripted:no-such-script", tools=[])
    async with run_worker([broken]) as client:
        with pytest.raises(DurableAgentsError) as sent:
            await client.send("broken", "hi", session_id=f"{sid}-sent")
        seen = []
        with pytest.raises(type(sent.value)) as streamed:
            async for event in client.stream("broken", "hi", session_id=sid):
                seen.append(event)
        replayed = []
        with pytest.raises(type(sent.value)):
            async for event in client.watch(sid):
                replayed.append(event)
    assert type(sent.value) is ConfigurationError and "no script named" in str(streamed.value)
    assert kinds(seen) == ["run-started", "model-turn-started", "run-failed"]
    assert isinstance(seen[-1], RunFailed) and "no script named" in seen[-1].message
    assert seen[-1].error_type == "ConfigurationError" and seen[-1].message == store.load_header(sid).last_error.message
    assert [e.offset for e in replayed] == [e.offset for e in seen]


def _summary(event):
    from durable_agents.workflows.contracts import RunSummary

    return RunSummary(session_id=event.session_id, **event.outcome.model_dump())


async def test_a_sub_agents_events_arrive_nested_in_the_parents_stream(env, store):
    """The reader's half of the sub-agent contract (checkpoint/events.py), on logs written as
    a parent and its child would: the child's events come wrapped, tagged with its session."""
    from durable_agents import AgentClient
    from durable_agents.activities.step_events import subagent_started
    from durable_agents.events import RunOutcome, SubAgentEvent

    parent, child, grandchild = session_id(), "p/child", "p/child/grand"
    outcome = RunOutcome(finish_reason="stop", steps=1, usage={}, tool_calls=0, message_count=0, run_start_index=0)

    def log(sid: str, *events) -> None:
        store.append_events(sid, [(key, e.to_json()) for key, e in events])

    log(parent, (None, RunStarted(session_id=parent, agent="planner", model="m", step=0)))
    log(parent, subagent_started(parent, child, "call_1", "scout", 3))
    log(child, (None, RunStarted(session_id=child, agent="scout", model="m", step=0)))
    log(child, subagent_started(child, grandchild, "call_9", "deep", 2))
    log(grandchild, (None, TextDelta(session_id=grandchild, step=1, text="deep down")))
    log(grandchild, (None, RunFinished(session_id=grandchild, outcome=outcome)))
    log(child, (None, TextDelta(session_id=child, step=1, text="Clear skies.")))
    log(child, (None, RunFinished(session_id=child, outcome=outcome)))
    log(parent, (None, RunFinished(session_id=parent, outcome=outcome)))

    events = await asyncio.wait_for(collect(AgentClient(env.client, store).watch(parent)), 30)
    top = [e for e in events if not isinstance(e, SubAgentEvent)]
    assert kinds(top) == ["run-started", "subagent-started", "run-finished"]
    assert top[-1] is events[-1]  # the parent's end comes after its children's events
    nested = [e for e in events if isinstance(e, SubAgentEvent)]
    assert {(e.child_session_id, e.tool_call_id) for e in nested} == {(child, "call_1")}
    inner = [e.event for e in nested]
    assert [e.type for e in inner if not isinstance(e, SubAgentEvent)] == [
        "run-started",
        "subagent-started",
        "text-delta",
        "run-finished",
    ]
    deep = [e.event for e in inner if isinstance(e, SubAgentEvent)]
    assert [(e.session_id, e.type) for e in deep] == [(grandchild, "text-delta"), (grandchild, "run-finished")]
    assert [e.offset for e in deep] == [1, 2]  # each event keeps its offset in its own session's log


async def test_streaming_on_the_local_activity_fast_path(run_worker, store):
    fast = agents.Agent(
        name="booker-fast",
        model="scripted:weather-then-book",
        tools=[agents.get_weather, agents.book_table],
        local_activities=True,
    )
    sid = session_id()
    async with run_worker([fast]) as client:
        events = await collect(client.stream("booker-fast", "Book a table", session_id=sid))
    assert isinstance(events[-1], RunFinished) and events[-1].result.finish_reason == FinishReason.STOP
    assert_deltas_add_up(events, store.load(sid).messages)
    assert kinds(events).count("tool-call-finished") == 3
