"""``stream()`` on the Anthropic and OpenAI wire-format fakes that stream (server-sent
events), through Temporal and the official SDKs: the deltas are the provider's, they
add up to each stored turn, a stream that breaks midway is retried and says so, and
``watch`` from offset 0 after the run ended replays every event."""

from __future__ import annotations

import pytest

from durable_agents import Agent
from durable_agents.checkpoint import FinishReason, Role
from durable_agents.events import (
    RunFinished,
    StepRetried,
    TextDelta,
    ToolCallFinished,
    TurnStored,
    step_text,
)
from tests import agents
from tests.conftest import session_id
from tests.fakes.llm_server import FakeLLMServer
from tests.test_streaming import assert_deltas_add_up, collect

PATHS = {"anthropic": "/v1/messages", "openai": "/v1/chat/completions", "openai-responses": "/v1/responses"}
SCRIPTS = {"anthropic": "anthropic", "openai": "openai", "openai-responses": "responses"}
ANSWER = "It rains in Paris: take an umbrella, and boots if you have them."


@pytest.fixture
def llm(monkeypatch):
    with FakeLLMServer() as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.anthropic_base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-anthropic")
        monkeypatch.setenv("OPENAI_BASE_URL", server.openai_base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key-openai")
        yield server


def _agent(provider: str) -> Agent:
    return Agent(name=f"{provider}-streamer", model=f"{provider}:test-model", tools=[agents.get_weather])


@pytest.mark.parametrize("provider", PATHS)
async def test_stream_on_the_streaming_api_adds_up_to_the_stored_turns(provider, llm, run_worker, store):
    script = getattr(llm, SCRIPTS[provider])
    script.reply_tool_calls([("get_weather", {"city": "Paris"}, "call_1")], text="Let me check the sky.")
    script.reply_text(ANSWER)
    llm.stream_delay = 0.01  # the answer's 16 deltas span several of the worker's writes
    sid = session_id()
    async with run_worker([_agent(provider)]) as client:
        events = await collect(client.stream(f"{provider}-streamer", "Weather in Paris?", session_id=sid))
        replayed = await collect(client.watch(sid, after=0))

    result = events[-1].result
    assert isinstance(events[-1], RunFinished) and result.finish_reason == FinishReason.STOP
    assert result.text == ANSWER and store.load(sid).messages[-1].content == ANSWER
    assert all(body["stream"] is True for body in llm.bodies(PATHS[provider]))  # the streaming API, each step
    assert_deltas_add_up(events, result.messages)
    deltas = [e for e in events if isinstance(e, TextDelta)]
    # the provider's own pieces (merged only when several arrive within one flush)
    assert len([d for d in deltas if d.step == 2]) > 1
    assert not any(isinstance(e, StepRetried) for e in events)
    [finished] = [e for e in events if isinstance(e, ToolCallFinished)]
    assert finished.tool_call_id == "call_1" and '"sky": "rain"' in finished.result.replace('":"', '": "')
    if provider == "openai-responses":  # reasoning items kept whole from the stream, and sent back
        [turn, _] = [m for m in store.load(sid).messages if m.role == Role.ASSISTANT]
        kept = [p.data for p in turn.parts or [] if getattr(p, "data", {}).get("type") == "reasoning"]
        issued = [i for i in llm.replies(PATHS[provider])[0]["output"] if i["type"] == "reasoning"]
        assert kept == issued and kept[0]["encrypted_content"]
        assert kept[0] in llm.bodies(PATHS[provider])[1]["input"]  # the next request carries it back
    # watch from offset 0 after the run ended: every event again, the same ones
    assert [(e.offset, e.model_dump(exclude={"result"})) for e in replayed] == [
        (e.offset, e.model_dump(exclude={"result"})) for e in events
    ]
    assert replayed[-1].result.model_dump() == result.model_dump()


@pytest.mark.parametrize("provider", PATHS)
async def test_a_stream_broken_midway_is_retried_and_the_stream_says_so(provider, llm, run_worker, store):
    script = getattr(llm, SCRIPTS[provider])
    script.reply_text(ANSWER)  # the first attempt's answer, cut after a few deltas...
    script.fail_stream_after(10 if provider == "openai-responses" else 6)  # a few text deltas in
    script.reply_text(ANSWER)  # ...and the retry's, whole
    sid = session_id()
    async with run_worker([_agent(provider)]) as client:
        events = await collect(client.stream(f"{provider}-streamer", "Weather?", session_id=sid))

    assert len(llm.bodies(PATHS[provider])) == 2  # the model was called again: its turn was never stored
    [retried] = [e for e in events if isinstance(e, StepRetried)]
    assert retried.step == 1 and retried.attempt == 2 and retried.discarded_attempts == [1]
    lost = [e for e in events if isinstance(e, TextDelta) and e.attempt == 1]
    assert lost and "".join(d.text for d in lost) != ANSWER  # a cut answer streamed first
    assert events.index(retried) > events.index(lost[-1])
    [stored] = [e for e in events if isinstance(e, TurnStored)]
    assert stored.attempt == 2 and stored.text == ANSWER == step_text(events, 1)
    assert [m.content for m in store.load(sid).messages if m.role == Role.ASSISTANT] == [ANSWER]
