"""Extended thinking through the real anthropic SDK, against the fake that checks it as
the API does: thinking blocks come back as opaque parts and go back verbatim, before
the turn's tool_use blocks; a transcript that drops or alters one is refused."""

from __future__ import annotations

import json

import anthropic
import pytest
from temporalio.exceptions import ApplicationError

from durable_agents import Agent, ConfigurationError
from durable_agents.checkpoint.format import Message, ModelSettings, Role, ToolCall, ToolSpec
from durable_agents.checkpoint.parts import OpaquePart, TextPart
from durable_agents.providers.anthropic_messages import AnthropicProvider, to_anthropic_params
from durable_agents.providers.base import ModelRequest
from tests.fakes.llm_server import FakeLLMServer

PATH = "/v1/messages"
WEATHER = ToolSpec(name="get_weather", description="Weather.", input_schema={"type": "object", "properties": {}})
THINKING = ModelSettings(thinking_budget_tokens=2048)


def request(messages: list[Message], settings: ModelSettings = THINKING) -> ModelRequest:
    return ModelRequest(model="claude-test", messages=messages, tools=[WEATHER], max_tokens=4096, settings=settings)


@pytest.fixture
def srv():
    with FakeLLMServer() as server:
        yield server


@pytest.fixture
async def provider(srv):
    client = anthropic.AsyncAnthropic(base_url=srv.anthropic_base_url, api_key="test", max_retries=0)
    yield AnthropicProvider(client)
    await client.close()


async def _tool_turn(srv, provider) -> tuple[list[Message], dict]:
    """One thinking tool-use turn and its result: the transcript, and the reply as served."""
    redacted = srv.anthropic.thinking.redacted("the model's hidden reasoning")
    srv.anthropic.reply_tool_calls(
        [("get_weather", {}, "toolu_1")], text="Checking.", thinking=["The user wants weather.", redacted]
    )
    first = await provider.generate(request([Message.user("Weather?")]))
    turn = first.message
    return [Message.user("Weather?"), turn, Message.tool_result(turn.tool_calls[0], "sunny")], srv.replies(PATH)[0]


async def test_thinking_is_requested_and_its_blocks_are_kept_as_opaque_parts(srv, provider):
    transcript, served = await _tool_turn(srv, provider)
    assert srv.bodies(PATH)[0]["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    turn = transcript[1]
    assert [type(p) for p in turn.parts] == [OpaquePart, OpaquePart, TextPart]
    assert [p.data for p in turn.parts[:2]] == served["content"][:2]  # the blocks exactly as served
    assert {p.provider for p in turn.parts[:2]} == {"anthropic"}
    assert turn.content == "Checking." and [c.id for c in turn.tool_calls] == ["toolu_1"]


async def test_thinking_blocks_go_back_verbatim_before_tool_use(srv, provider):
    transcript, served = await _tool_turn(srv, provider)
    srv.anthropic.reply_text("Sunny.")
    second = await provider.generate(request(transcript))
    assert second.message.content == "Sunny."  # the fake accepted the signatures
    sent = srv.bodies(PATH)[1]["messages"][1]["content"]
    assert sent == served["content"]  # every block, in order, field for field
    assert json.dumps(sent[:2]) == json.dumps(served["content"][:2])  # keys in the API's order too
    assert [b["type"] for b in sent] == ["thinking", "redacted_thinking", "text", "tool_use"]


@pytest.mark.parametrize(
    ("keep", "says"),
    [
        ("text", "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `text`"),
        ("thinking", "the thinking blocks of this turn are not those the model sent with it"),
    ],
)
async def test_the_fake_refuses_a_tool_turn_missing_its_thinking_like_the_api(srv, provider, keep, says):
    """Sent with thinking on (the SDK called directly: the provider would leave thinking off
    for a turn without any), a tool turn lacking its thinking blocks is a 400."""
    transcript, _ = await _tool_turn(srv, provider)
    turn = transcript[1]
    kept = [p for p in turn.parts if isinstance(p, TextPart) or (keep == "thinking" and p.kind == "thinking")]
    transcript[1] = turn.model_copy(update={"parts": kept})
    params = to_anthropic_params(request(transcript))
    assert ("thinking" in params) == (keep == "thinking")
    params["thinking"] = {"type": "enabled", "budget_tokens": 2048}
    with pytest.raises(anthropic.BadRequestError) as raised:
        await provider._get_client().messages.create(**params)
    assert says in str(raised.value)


async def test_a_changed_signature_is_refused(srv, provider):
    transcript, _ = await _tool_turn(srv, provider)
    turn = transcript[1]
    altered = turn.parts[0].model_copy(update={"data": {**turn.parts[0].data, "thinking": "Something else."}})
    transcript[1] = turn.model_copy(update={"parts": [altered, *turn.parts[1:]]})
    with pytest.raises(ApplicationError) as raised:
        await provider.generate(request(transcript))
    assert "messages.1.content.0: Invalid `signature` in `thinking` block" in raised.value.message


async def test_the_fake_answers_a_thinking_request_with_a_signed_block_of_its_own(srv, provider):
    srv.anthropic.reply_tool_calls([("get_weather", {}, "toolu_9")])  # no thinking queued
    first = await provider.generate(request([Message.user("Weather?")]))
    assert first.message.parts[0].kind == "thinking" and first.message.parts[0].data["signature"]


async def test_a_tool_turn_from_another_provider_continues_without_thinking(srv, provider):
    """The API refuses thinking on a tool loop whose turn has no thinking block (e.g. the
    session started on OpenAI): that one request goes without; the next user turn thinks."""
    call = ToolCall(id="call_1", name="get_weather", arguments={})
    other = OpaquePart(provider="openai-responses", data={"type": "reasoning", "id": "rs_1", "summary": []})
    turn = Message(
        role=Role.ASSISTANT, content="Let me look.", tool_calls=[call], parts=[other, TextPart(text="Let me look.")]
    )
    transcript = [Message.user("Weather?"), turn, Message.tool_result(call, "sunny")]
    srv.anthropic.reply_text("Sunny.")
    assert (await provider.generate(request(transcript))).message.content == "Sunny."
    body = srv.bodies(PATH)[0]
    assert "thinking" not in body
    assert [b["type"] for b in body["messages"][1]["content"]] == ["text", "tool_use"]  # the OpenAI item is dropped
    later = [*transcript, Message(role=Role.ASSISTANT, content="Sunny."), Message.user("And tomorrow?")]
    await provider.generate(request(later))
    assert srv.bodies(PATH)[1]["thinking"]["type"] == "enabled"


@pytest.mark.parametrize(
    ("settings", "max_tokens", "says"),
    [
        (ModelSettings(thinking_budget_tokens=512), 4096, "below Anthropic's minimum of 1024"),
        (ModelSettings(thinking_budget_tokens=4096), 4096, "max_tokens=4096 must be greater than"),
        (ModelSettings(thinking_budget_tokens=2048, temperature=0.3), 4096, "leave temperature unset"),
        (ModelSettings(thinking_budget_tokens=2048, tool_choice="required"), 4096, "use 'auto' or 'none'"),
    ],
)
def test_agent_construction_refuses_settings_thinking_cannot_take(settings, max_tokens, says):
    with pytest.raises(ConfigurationError) as raised:
        Agent(name="thinker", model="anthropic:claude-test", max_tokens=max_tokens, model_settings=settings)
    assert says in str(raised.value) and "agent 'thinker'" in str(raised.value)


async def test_a_run_whose_settings_conflict_fails_before_any_request(srv, provider):
    bad = ModelSettings(thinking_budget_tokens=2048, temperature=0.5)
    with pytest.raises(ApplicationError) as raised:
        await provider.generate(request([Message.user("hi")], bad))
    assert raised.value.non_retryable and raised.value.type == "ConfigurationError"
    assert "temperature" in raised.value.message and srv.bodies(PATH) == []
