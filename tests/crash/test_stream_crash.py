"""A worker SIGKILLed while a streamed run's model call streams, and right after its turn
was stored: the stream says the step was retried (or replays the stored turn), its deltas
still add up to the stored turn, and a stored turn is never generated again."""

from __future__ import annotations

import asyncio
import signal
import time
import uuid

import pytest

from durable_agents import AgentClient
from durable_agents.checkpoint import FinishReason, Role, SqliteStore
from durable_agents.events import StepRetried, TextDelta, TurnStored, parse_event, step_text
from durable_agents.testing import PROVIDER_CALLS, CrashWindow, WorkerProcess, read_records
from tests.conftest import session_id
from tests.crash.conftest import ROOT
from tests.fakes.llm_server import FakeLLMServer
from tests.test_streaming import assert_deltas_add_up, collect

PATHS = {"anthropic": "/v1/messages", "openai": "/v1/chat/completions"}
LONG = " ".join(f"word{i}" for i in range(60))  # 60 deltas of 6 characters, 50 ms apart: 3 s of streaming


@pytest.fixture
def llm():
    with FakeLLMServer() as server:
        server.stream_chunk = 6
        server.stream_delay = 0.05
        yield server


def _worker(env, llm, tmp_path, name: str, window: CrashWindow | None = None) -> WorkerProcess:
    return WorkerProcess(
        ["tests.stream_agents:ALL"],
        address=env.client.service_client.config.target_host,
        store_url=f"sqlite:///{tmp_path / 'store.db'}",
        task_queue=f"stream-{name}-{uuid.uuid4().hex[:8]}",
        log_dir=tmp_path / "logs",
        crash_window=window,
        cwd=ROOT,
        env={
            "ANTHROPIC_BASE_URL": llm.anthropic_base_url,
            "ANTHROPIC_API_KEY": "test",
            "OPENAI_BASE_URL": llm.openai_base_url,
            "OPENAI_API_KEY": "test",
        },
    )


def _step_calls(tmp_path, sid: str, position: int) -> list[dict]:
    return [
        c for c in read_records(tmp_path / "logs", PROVIDER_CALLS) if c["session"] == sid and c["position"] == position
    ]


@pytest.mark.parametrize("provider", PATHS)
async def test_a_kill_mid_stream_retries_the_step_and_the_stream_says_so(provider, env, llm, tmp_path):
    script = getattr(llm, provider)
    script.reply_tool_calls([("get_weather", {"city": "Paris"}, "call_1")], text=LONG)  # the lost attempt
    script.reply_tool_calls([("get_weather", {"city": "Paris"}, "call_1")], text=LONG + " again")  # the retry
    script.reply_text("Rain in Paris.")
    worker = _worker(env, llm, tmp_path, provider)
    await worker.start_ready(env.client)
    store = SqliteStore(tmp_path / "store.db")
    try:
        client = AgentClient(env.client, store, worker.task_queue)
        sid = session_id()
        streaming = asyncio.create_task(collect(client.stream(f"{provider}-streamer", "Weather?", session_id=sid)))
        deadline = time.monotonic() + 60
        while sum(isinstance(parse_event(e.body), TextDelta) for e in store.read_events(sid)) < 3:
            assert time.monotonic() < deadline and not streaming.done(), "no deltas streamed"
            await asyncio.sleep(0.05)
        worker.kill()  # mid-stream: the turn is not stored
        assert store.load(sid).messages[-1].role == Role.USER
        await worker.start_ready(env.client)
        events = await asyncio.wait_for(streaming, 120)
    finally:
        worker.stop()
        store.close()

    result = events[-1].result
    assert result.finish_reason == FinishReason.STOP and result.text == "Rain in Paris."
    seen = [(e.type, getattr(e, "step", None), getattr(e, "attempt", None)) for e in events]
    retries = [e for e in events if isinstance(e, StepRetried)]
    assert len(retries) == 1, seen
    retried = retries[0]
    assert retried.step == 1 and retried.discarded_attempts == [1] and retried.attempt == 2
    lost = "".join(e.text for e in events if isinstance(e, TextDelta) and e.step == 1 and e.attempt == 1)
    assert lost and LONG.startswith(lost) and lost != LONG  # what streamed before the kill is void...
    assert step_text(events, 1) == LONG + " again" == result.messages[1].content  # ...the retry's adds up
    assert_deltas_add_up(events, result.messages)
    assert [m.role for m in result.messages] == [Role.USER, Role.ASSISTANT, Role.TOOL, Role.ASSISTANT]
    calls = _step_calls(tmp_path, sid, 1)
    assert len(calls) == 2 and not any(c["stored_before"] for c in calls)  # called again: nothing was stored


@pytest.mark.parametrize("provider", PATHS)
async def test_a_kill_after_the_turn_was_stored_never_generates_it_again(provider, env, llm, tmp_path):
    script = getattr(llm, provider)
    script.reply_tool_calls([("get_weather", {"city": "Rome"}, "call_1")], text="Checking the sky over Rome.")
    script.reply_text("Sun in Rome.")
    llm.stream_delay = 0.01
    worker = _worker(env, llm, tmp_path, f"{provider}-stored", CrashWindow.AFTER_MODEL_TURN_STORED)
    await worker.start_ready(env.client)
    store = SqliteStore(tmp_path / "store.db")
    try:
        client = AgentClient(env.client, store, worker.task_queue)
        sid = session_id()
        streaming = asyncio.create_task(collect(client.stream(f"{provider}-streamer", "Weather?", session_id=sid)))
        assert await worker.wait_exit(timeout=60) == -signal.SIGKILL, worker.log()[-2000:]
        assert [k["window"] for k in worker.kills()] == [CrashWindow.AFTER_MODEL_TURN_STORED.value]
        await worker.start_ready(env.client)
        events = await asyncio.wait_for(streaming, 120)
    finally:
        worker.stop()
        store.close()

    assert events[-1].result.text == "Sun in Rome."
    assert len(_step_calls(tmp_path, sid, 1)) == 1  # the stored turn was returned, not generated again
    assert len(llm.bodies(PATHS[provider])) == 2
    stored = [e for e in events if isinstance(e, TurnStored) and e.step == 1]
    assert len(stored) == 1 and stored[0].replayed and stored[0].text == "Checking the sky over Rome."
    assert not [e for e in events if isinstance(e, StepRetried)]  # the deltas before the kill add up
    assert step_text(events, 1) == stored[0].text
    assert_deltas_add_up(events, events[-1].result.messages)
