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

from durable_agents import Agent, register_provider
from durable_agents.checkpoint import FinishReason, Role
from durable_agents.checkpoint.format import Message, Usage
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
