"""The official anthropic/openai SDKs, through Temporal, against a local server
that speaks their wire formats. Keys and base URLs come from the worker's env."""

from __future__ import annotations

import json
import time

import pytest

from durable_agents import Agent, ModelProviderError
from durable_agents.checkpoint import CheckpointStatus, FinishReason, Role
from tests import agents
from tests.conftest import session_id
from tests.fakes.llm_server import FakeLLMServer

PROVIDERS = {
    "anthropic": ("/v1/messages", "toolu_01"),
    "openai": ("/v1/chat/completions", "call_01"),
}


@pytest.fixture
def llm(monkeypatch):
    with FakeLLMServer() as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.anthropic_base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-anthropic")
        monkeypatch.setenv("OPENAI_BASE_URL", server.openai_base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key-openai")
        yield server


def _agent(provider: str) -> Agent:
    return Agent(
        name=f"{provider}-agent",
        model=f"{provider}:test-model",
        instructions="You check the weather.",
        tools=[agents.get_weather],
    )


def _tool_results_sent(provider: str, body: dict) -> list[tuple[str, str]]:
    """(call id, content) of the tool results in a request body, in order."""
    if provider == "anthropic":
        return [
            (b["tool_use_id"], b["content"])
            for m in body["messages"]
            if isinstance(m["content"], list)
            for b in m["content"]
            if b.get("type") == "tool_result"
        ]
    return [(m["tool_call_id"], m["content"]) for m in body["messages"] if m["role"] == "tool"]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_two_step_tool_loop_through_temporal(provider, llm, run_worker, store):
    path, call_id = PROVIDERS[provider]
    script = getattr(llm, provider)
    script.reply_tool_calls([("get_weather", {"city": "Paris"}, call_id)], text="Let me check.")
    script.reply_text("It rains in Paris: take an umbrella.")
    sid = session_id()
    async with run_worker([_agent(provider)]) as client:
        result = await client.send(f"{provider}-agent", "Weather in Paris?", session_id=sid)

    assert result.finish_reason == FinishReason.STOP
    assert result.text == "It rains in Paris: take an umbrella."
    assert [c.id for c in result.tool_calls] == [call_id]
    bodies = llm.bodies(path)
    assert len(bodies) == 2
    # the second request carries the tool result under the model's call id
    ((sent_id, content),) = _tool_results_sent(provider, bodies[1])
    assert sent_id == call_id and json.loads(content)["sky"] == "rain"
    assert result.usage.requests == 2 and result.usage.output_tokens == 14
    assert store.load(sid).status == CheckpointStatus.FINISHED


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_429_is_retried_by_temporal_honouring_retry_after(provider, llm, run_worker):
    path, _ = PROVIDERS[provider]
    script = getattr(llm, provider)
    script.reply_error(429, "rate limited, slow down", headers={"retry-after": "3"})
    script.reply_text("Done after waiting.")
    started = time.monotonic()
    async with run_worker([_agent(provider)]) as client:
        result = await client.send(f"{provider}-agent", "hi", session_id=session_id())
    assert result.text == "Done after waiting."
    assert len(llm.bodies(path)) == 2  # one refused, one retried by Temporal (SDK retries are off)
    assert time.monotonic() - started >= 2.8  # waited Retry-After, not the 1 s default backoff


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_400_fails_without_retry_and_reports_the_provider_message(provider, llm, run_worker, store):
    path, _ = PROVIDERS[provider]
    getattr(llm, provider).reply_error(400, "max_tokens: 99999999 is too large for test-model")
    sid = session_id()
    async with run_worker([_agent(provider)]) as client:
        with pytest.raises(ModelProviderError) as raised:
            await client.send(f"{provider}-agent", "hi", session_id=sid)
    assert "max_tokens: 99999999 is too large for test-model" in str(raised.value)
    assert f"{provider} returned 400" in str(raised.value)
    assert raised.value.code == "MODEL_PROVIDER_ERROR"
    assert len(llm.bodies(path)) == 1
    # the run keeps its last checkpoint: in-progress, input recorded, nothing invented
    saved = store.load(sid)
    assert saved.status == CheckpointStatus.IN_PROGRESS
    assert [m.role for m in saved.messages] == [Role.SYSTEM, Role.USER]
