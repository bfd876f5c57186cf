"""Anthropic prompt caching, extended thinking and content parts through Temporal,
the real SDK and the wire-format fake (which counts the cache by prefix and
refuses a transcript that loses its thinking, as the API does)."""

from __future__ import annotations

import pytest

from durable_agents import Agent, DocumentPart, ImagePart, Message, ModelProviderError, ModelSettings
from durable_agents.checkpoint import OpaquePart
from durable_agents.cli._render import render_checkpoint
from tests import agents
from tests.conftest import session_id
from tests.fakes.anthropic_rules import count_tokens
from tests.fakes.llm_server import FakeLLMServer

PATH = "/v1/messages"


@pytest.fixture
def llm(monkeypatch):
    with FakeLLMServer() as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.anthropic_base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-anthropic")
        yield server


def weather_agent(**settings) -> Agent:
    return Agent(
        name="claude-weather",
        model="anthropic:claude-test",
        instructions="You check the weather. " * 30,
        tools=[agents.get_weather],
        model_settings=ModelSettings(**settings) if settings else None,
    )


async def test_the_second_step_reads_the_cache_and_usage_adds_up(llm, run_worker, store):
    llm.anthropic.reply_tool_calls([("get_weather", {"city": "Paris"}, "toolu_01")])
    llm.anthropic.reply_text("Take an umbrella.")
    sid = session_id()
    async with run_worker([weather_agent()]) as client:
        result = await client.send("claude-weather", "Weather in Paris?", session_id=sid)

    one, two = llm.bodies(PATH)
    assert one["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert one["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" in one["messages"][-1]["content"][-1]
    # the second request marks the prefix the first one wrote, and its own end
    assert (
        "cache_control" in two["messages"][0]["content"][-1] and "cache_control" in two["messages"][-1]["content"][-1]
    )
    usage = result.usage
    assert usage.cache_read_tokens == count_tokens(one)  # step 2 read all of step 1's prompt
    assert usage.cache_write_tokens == count_tokens(two)  # step 1 wrote its prompt, step 2 the rest
    assert usage.input_tokens == count_tokens(one) + count_tokens(two)
    saved = store.load(sid)
    assert saved.usage == usage  # the session's total, as recorded
    assert f"(cache: {usage.cache_read_tokens} read, {usage.cache_write_tokens} written)" in render_checkpoint(saved)


async def test_thinking_blocks_round_trip_through_the_store(llm, run_worker, store):
    llm.anthropic.reply_tool_calls([("get_weather", {"city": "Oslo"}, "toolu_02")], thinking=["Oslo: check the sky."])
    llm.anthropic.reply_text("Clear skies.")
    sid = session_id()
    async with run_worker([weather_agent(thinking_budget_tokens=1024)]) as client:
        result = await client.send("claude-weather", "Weather in Oslo?", session_id=sid)
    assert result.text == "Clear skies."
    served, _ = llm.replies(PATH)
    sent = llm.bodies(PATH)[1]["messages"][1]["content"]
    assert sent[0] == served["content"][0] and sent[0]["type"] == "thinking"
    turn = store.load(sid).messages[2]
    assert isinstance(turn.parts[0], OpaquePart) and turn.parts[0].data == served["content"][0]
    assert all(b.get("thinking", {}).get("type") == "enabled" for b in llm.bodies(PATH))
    assert "thinking   Oslo: check the sky." in render_checkpoint(store.load(sid))


async def test_an_image_and_a_document_as_input(llm, run_worker, store, tmp_path):
    (tmp_path / "sky.png").write_bytes(b"\x89PNG fake")
    words = "What do these say?"
    message = Message.user(words, ImagePart.from_path(tmp_path / "sky.png"), DocumentPart.from_text("Rain at 5."))
    other = Message.user(words, ImagePart.from_bytes(b"another picture", "image/png"))
    llm.anthropic.reply_error(400, "image could not be processed")
    sid = session_id()
    async with run_worker([weather_agent(anthropic_cache=False)]) as client:
        with pytest.raises(ModelProviderError):
            await client.send("claude-weather", message, session_id=sid)
        # the same words with another image are new input, not a retry of the failed run
        await client.send("claude-weather", other, session_id=sid)
    first, second = llm.bodies(PATH)
    assert [b["type"] for b in first["messages"][0]["content"]] == ["text", "image", "document"]
    images = [b["source"]["data"] for m in second["messages"] for b in m["content"] if b["type"] == "image"]
    assert images == [message.parts[1].data, other.parts[1].data]
    stored = store.load(sid).messages
    assert stored[1].parts == message.parts and stored[1].content == words and stored[2].parts == other.parts
    assert "[image image/png 0 KB]" in render_checkpoint(store.load(sid))
