"""An attempt Temporal gave up on, still running, must not replace the turn its retry stored
(on a real dev server). The model activity's first attempt outlives its start-to-close timeout
(a provider call that does not stop when cancelled); Temporal retries it, the retry stores its
turn and the run goes on from it. When the first attempt's provider answers at last, its write
at the same position is refused (``CheckpointStore.append_new``): the stored turn, which the run
acted on, stays the only one."""

from __future__ import annotations

import asyncio
import time

import pytest
from pydantic import BaseModel

from durable_agents import Agent, ToolContext, register_provider, tool
from durable_agents.checkpoint import FinishReason, Role
from durable_agents.checkpoint.format import Message, ToolCall, Usage
from durable_agents.providers import registry
from durable_agents.providers.base import ModelRequest, ModelResponse
from tests.conftest import session_id

LATE_SECONDS = 3.0


class LaggardProvider:
    """Its first call ignores cancellation and answers after ``LATE_SECONDS``; later calls answer at once."""

    calls = 0
    late_done = asyncio.Event

    async def generate(self, request: ModelRequest) -> ModelResponse:
        LaggardProvider.calls += 1
        if LaggardProvider.calls == 1:
            deadline = time.monotonic() + LATE_SECONDS
            while time.monotonic() < deadline:  # like an SDK call that does not honour cancellation
                try:
                    await asyncio.sleep(deadline - time.monotonic())
                except asyncio.CancelledError:
                    continue
            text = "the late answer"
        else:
            text = "the answer on time"
        return ModelResponse(
            message=Message(role=Role.ASSISTANT, content=text), usage=Usage(input_tokens=1, output_tokens=1, requests=1)
        )


@pytest.fixture
def laggard():
    LaggardProvider.calls = 0
    register_provider("laggard", LaggardProvider)
    yield
    registry._registered.pop("laggard", None)


async def test_a_given_up_attempt_cannot_replace_the_turn_its_retry_stored(laggard, run_worker, store):
    agent = Agent(name="laggard-agent", model="laggard:m", model_timeout=1, model_heartbeat_timeout=1)
    sid = session_id()
    async with run_worker([agent]) as client:
        result = await asyncio.wait_for(client.send("laggard-agent", "hi", session_id=sid), 60)
        assert result.finish_reason == FinishReason.STOP and result.text == "the answer on time"
        assert LaggardProvider.calls == 2  # the retry called the model: the first attempt had stored nothing
        await asyncio.sleep(LATE_SECONDS + 1)  # the first attempt answers and tries to store its turn
    turns = [m.content for m in store.load(sid).messages if m.role == Role.ASSISTANT]
    assert turns == ["the answer on time"]  # the turn the run acted on, and no other
    assert all(
        [m.content for m in e.checkpoint.messages if m.role == Role.ASSISTANT] in ([], ["the answer on time"])
        for e in store.history(sid)
    )


class HungOnceProvider:
    """Its first call never answers (until cancelled); later calls ask for a tool, then answer."""

    calls = 0

    async def generate(self, request: ModelRequest) -> ModelResponse:
        HungOnceProvider.calls += 1
        if HungOnceProvider.calls == 1:
            await asyncio.Event().wait()
        done = any(m.role == Role.TOOL for m in request.messages)
        message = (
            Message(role=Role.ASSISTANT, content="done")
            if done
            else Message(role=Role.ASSISTANT, tool_calls=[ToolCall(id="c1", name="note", arguments={})])
        )
        return ModelResponse(message=message, usage=Usage(input_tokens=1, output_tokens=1, requests=1))


class NoteArgs(BaseModel):
    pass


@tool(timeout=300)
async def note(args: NoteArgs, ctx: ToolContext) -> str:
    return "noted"


async def test_a_local_steps_model_call_keeps_its_own_timeout(run_worker, store):
    """A local step's attempt also holds its calls' time (the longest tool's 300 s and a margin):
    a model call that hangs is still given up at the model's own timeout, and retried."""
    register_provider("hung-once", HungOnceProvider)
    HungOnceProvider.calls = 0
    agent = Agent(name="hung-local", model="hung-once:m", model_timeout=2, activities="local", tools=[note])
    sid = session_id()
    try:
        async with run_worker([agent]) as client:
            result = await asyncio.wait_for(client.send("hung-local", "hi", session_id=sid), 60)
    finally:
        registry._registered.pop("hung-once", None)
    assert result.finish_reason == FinishReason.STOP and result.text == "done"
    assert HungOnceProvider.calls == 3  # the hung call, its retry (a tool call), the answer
    assert [m.role for m in store.load(sid).messages][-3:] == [Role.ASSISTANT, Role.TOOL, Role.ASSISTANT]
