"""Temporal history per step must not grow with the transcript (docs/design.md §2)."""

from __future__ import annotations

import asyncio
import json

import pytest
from temporalio.api.enums.v1 import EventType

from durable_agents import Agent, ScriptedToolCall, ScriptedTurn, register_script
from durable_agents.activities.contracts import EXECUTE_TOOL, MODEL_TURN, ExecuteToolOutput, ModelTurnOutput
from durable_agents.checkpoint import FinishReason, Message
from tests import agents
from tests.conftest import session_id

STEPS = 300
KB = "x" * 1024


def _long_script(messages: list[Message]) -> ScriptedTurn:
    turns = sum(1 for m in messages if m.role == "assistant")
    if turns >= STEPS:
        return ScriptedTurn(text="finished")
    return ScriptedTurn(
        text=f"step {turns} {KB}", tool_calls=[ScriptedToolCall(name="echo_kb", arguments={"city": f"c{turns}"})]
    )


register_script("long-run", _long_script)


@agents.tool(safe_to_retry=True)
async def echo_kb(args: agents.CityArgs, ctx: agents.ToolContext) -> dict:
    return {"city": args.city, "filler": KB}


long_agent = Agent(name="long", model="scripted:long-run", tools=[echo_kb], max_steps=STEPS + 5)


async def _all_events(client, workflow_id: str, first_run_id: str):
    """Events of every run of the chain (the run continues-as-new when Temporal suggests it)."""
    events, run_id, runs = [], first_run_id, 0
    while run_id:
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        events.extend(history.events)
        runs += 1
        run_id = next(
            (
                e.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
                for e in history.events
                if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
            ),
            None,
        )
    return events, runs


async def _step_bytes(env, sid: str, first_run_id: str) -> tuple[int, int]:
    """History bytes of step 30 and of step 300 (from one model turn to the next)."""
    events, _ = await _all_events(env.client, sid, first_run_id)
    starts = [
        i
        for i, e in enumerate(events)
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == MODEL_TURN
    ]
    assert len(starts) == STEPS + 1
    return tuple(sum(e.ByteSize() for e in events[starts[s - 1] : starts[s]]) for s in (30, 300))  # type: ignore[return-value]


@pytest.mark.slow
async def test_history_bytes_per_step_stay_flat_over_300_steps_and_streaming_adds_little(run_worker, store, env):
    """Two 300-step sessions at once, streaming off and on: bytes/step at step 300 within
    10 % of step 30 (each step's pending calls' arguments travel bounded, for queries), no payload carries the transcript, and deltas and step events go to
    the store's event log, never through Temporal history (within 1.5x of streaming off)."""
    plain, streamed = session_id(), session_id()
    async with run_worker([long_agent]) as client:
        plain_handle = await client.start("long", "go", session_id=plain)
        streamed_handle = await client.start("long", "go", session_id=streamed, stream=True)
        plain_result, result = await asyncio.gather(
            client.result(plain, plain_handle), client.result(streamed, streamed_handle)
        )
    for done in (plain_result, result):
        assert done.finish_reason == FinishReason.STOP
        assert done.steps == STEPS + 1
        assert len(done.messages) == 1 + 2 * STEPS + 1  # user, (turn, result) × 300, final turn
        assert done.messages[-3].content.startswith(f"step {STEPS - 1} ")
    events, runs = await _all_events(env.client, plain, plain_handle.first_execution_run_id)
    assert max(e.ByteSize() for e in events) < 16_000  # no payload carries the transcript (~600 KB by the end)
    deltas = [e for e in store.read_events(streamed) if '"type":"text-delta"' in e.body]
    assert len(deltas) >= STEPS  # it did stream: every turn's text, ~1 KB each, went to the store
    before = await _step_bytes(env, plain, plain_handle.first_execution_run_id)
    after = await _step_bytes(env, streamed, streamed_handle.first_execution_run_id)
    print(
        f"\nhistory bytes/step (runs = {runs}): step 30 = {before[0]}, step 300 = {before[1]}; "
        f"streaming on: step 30 = {after[0]}, step 300 = {after[1]}"
    )
    assert before[1] <= 1.1 * before[0] and after[1] <= 1.1 * after[0]  # flat: within 10 %
    assert after[0] <= 1.5 * before[0] and after[1] <= 1.5 * before[1]


short_agent = Agent(name="short-history", model="scripted:long-run", tools=[echo_kb], max_steps=3)


async def test_a_step_keeps_only_what_differs_from_the_defaults_in_history(run_worker, env):
    """A model turn's and a tool call's inputs and results, as history keeps them, leave out every field
    at its default (``replayed: false``, ``text: null``, a usage's unset cache counters …):
    they are read back as those defaults, and the run acts on them as before."""
    sid = session_id()
    async with run_worker([short_agent]) as client:
        result = await client.send("short-history", "go", session_id=sid)
    assert result.finish_reason == FinishReason.MAX_STEPS and result.steps == 3
    events, _ = await _all_events(env.client, sid, (await env.client.get_workflow_handle(sid).describe()).run_id)
    scheduled = {
        e.event_id: e.activity_task_scheduled_event_attributes.activity_type.name
        for e in events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    }
    results = {
        scheduled[e.activity_task_completed_event_attributes.scheduled_event_id]: json.loads(
            e.activity_task_completed_event_attributes.result.payloads[0].data
        )
        for e in events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
        and scheduled[e.activity_task_completed_event_attributes.scheduled_event_id] in (MODEL_TURN, EXECUTE_TOOL)
    }
    inputs = {
        e.activity_task_scheduled_event_attributes.activity_type.name: json.loads(
            e.activity_task_scheduled_event_attributes.input.payloads[0].data
        )
        for e in events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name in (MODEL_TURN, EXECUTE_TOOL)
    }
    assert set(inputs[MODEL_TURN]) == {"sessionId", "position", "step"}, inputs  # outputRetriesUsed 0
    assert inputs[EXECUTE_TOOL]["safeToRetry"] is True  # (a value that is not the default stays)
    turn, call = results[MODEL_TURN], results[EXECUTE_TOOL]
    assert set(turn) == {"toolCalls", "argumentsInStore", "usage", "toolCallArguments"}, turn
    assert None not in turn["usage"].values() and turn["usage"]["requests"] >= 1
    assert set(call) == {"toolCallId", "recordedThrough"}, call  # isError false, kind "result"
    assert ModelTurnOutput.model_validate(turn).replayed is False
    assert ExecuteToolOutput.model_validate(call).kind == "result"
