"""``generate_stream`` of the Anthropic and OpenAI providers, through the real SDKs, against
the fake's server-sent events: the deltas add up to the reply's text, and the reply is
the one ``generate`` returns for the same answer (tool calls, usage, thinking blocks)."""

from __future__ import annotations

import anthropic
import openai
import pytest
from temporalio.exceptions import ApplicationError

from durable_agents.checkpoint.format import Message, ModelSettings, Role, ToolCall
from durable_agents.checkpoint.parts import OpaquePart
from durable_agents.providers.anthropic_messages import AnthropicProvider
from durable_agents.providers.base import ModelRequest
from durable_agents.providers.openai_chat import INVALID_JSON_KEY, OpenAIProvider
from tests.fakes.llm_server import FakeLLMServer
from tests.providers.test_provider_wire import WEATHER

TEXT = "It rains in Paris today — take an umbrella, and don't forget your boots. ☔"


def request(**update) -> ModelRequest:
    # no prompt caching: the second of two equal requests would read the first one's cache
    update.setdefault("settings", ModelSettings(anthropic_cache=False))
    return ModelRequest(model="test-model", messages=[Message.user("Weather in Paris?")], tools=[WEATHER], **update)


@pytest.fixture
def srv():
    with FakeLLMServer() as server:
        yield server


@pytest.fixture(params=["anthropic", "openai"])
async def api(request, srv):
    if request.param == "anthropic":
        client = anthropic.AsyncAnthropic(base_url=srv.anthropic_base_url, api_key="test", max_retries=0)
        yield AnthropicProvider(client), srv.anthropic, "/v1/messages"
    else:
        client = openai.AsyncOpenAI(base_url=srv.openai_base_url, api_key="test", max_retries=0)
        yield OpenAIProvider(client), srv.openai, "/v1/chat/completions"
    await client.close()


async def both(provider, script, queue) -> tuple:
    """The same answer, once streamed and once not: (deltas, streamed reply, plain reply)."""
    queue(script)
    deltas: list[str] = []
    streamed = await provider.generate_stream(request(), deltas.append)
    queue(script)
    plain = await provider.generate(request())
    return deltas, streamed, plain


async def test_text_deltas_add_up_to_the_reply_which_is_the_plain_reply(api, srv):
    provider, script, path = api
    deltas, streamed, plain = await both(provider, script, lambda s: s.reply_text(TEXT))
    assert len(deltas) == -(-len(TEXT) // srv.stream_chunk) > 10  # as the server sent them: 4 characters each
    assert "".join(deltas) == TEXT == streamed.message.content
    assert streamed.message == plain.message and streamed.usage == plain.usage
    assert streamed.stop_reason == plain.stop_reason
    first, second = srv.bodies(path)
    assert first["stream"] is True and "stream" not in second
    if path.endswith("completions"):
        assert first["stream_options"] == {"include_usage": True}  # usage comes in the last chunk


async def test_tool_calls_and_their_text_stream_back_whole(api):
    provider, script, _ = api
    calls = [("get_weather", {"city": "Paris", "days": [1, 2]}, "call_1"), ("get_weather", {"city": "Rome"}, "call_2")]
    deltas, streamed, plain = await both(provider, script, lambda s: s.reply_tool_calls(calls, text="Checking both."))
    assert "".join(deltas) == "Checking both."
    assert streamed.message.tool_calls == [
        ToolCall(id="call_1", name="get_weather", arguments={"city": "Paris", "days": [1, 2]}),
        ToolCall(id="call_2", name="get_weather", arguments={"city": "Rome"}),
    ]
    assert streamed.message == plain.message and streamed.usage == plain.usage


async def test_openai_invalid_arguments_streamed_are_kept_as_the_model_wrote_them(srv):
    client = openai.AsyncOpenAI(base_url=srv.openai_base_url, api_key="test", max_retries=0)
    srv.openai.reply_tool_calls([("get_weather", '{"city": "Par', "call_x")])
    reply = await OpenAIProvider(client).generate_stream(request(), lambda _: None)
    await client.close()
    assert reply.message.tool_calls[0].arguments == {INVALID_JSON_KEY: '{"city": "Par'}


async def test_anthropic_thinking_blocks_stream_back_verbatim(srv):
    client = anthropic.AsyncAnthropic(base_url=srv.anthropic_base_url, api_key="test", max_retries=0)
    provider = AnthropicProvider(client)
    thinking = ModelSettings(thinking_budget_tokens=2048, anthropic_cache=False)
    srv.anthropic.reply_tool_calls([("get_weather", {"city": "Paris"}, "toolu_1")], thinking=["Rain likely."])
    deltas: list[str] = []
    streamed = await provider.generate_stream(request(settings=thinking, max_tokens=4096), deltas.append)
    await client.close()
    [served] = [r for r in srv.replies("/v1/messages")]
    [part] = [p for p in streamed.message.parts or [] if isinstance(p, OpaquePart)]
    assert part.data == served["content"][0]  # thinking text and signature, exactly as the API sent them
    assert deltas == [] and streamed.message.role == Role.ASSISTANT  # thinking is not the answer's text


async def test_a_stream_that_fails_midway_is_a_retryable_error(api, srv):
    provider, script, _ = api
    script.reply_text(TEXT)
    script.fail_stream_after(5)
    deltas: list[str] = []
    with pytest.raises(Exception) as info:
        await provider.generate_stream(request(), deltas.append)
    error = info.value
    if isinstance(error, ApplicationError):
        assert not error.non_retryable, error  # Temporal calls the model again
    assert 0 < len("".join(deltas)) < len(TEXT)


async def test_an_error_reply_to_a_streamed_request_maps_like_a_plain_one(api):
    provider, script, _ = api
    script.reply_error(429, "slow down", headers={"retry-after": "3"})
    with pytest.raises(ApplicationError) as info:
        await provider.generate_stream(request(), lambda _: None)
    assert not info.value.non_retryable and "slow down" in info.value.message
    script.reply_error(400, "bad tool schema")
    with pytest.raises(ApplicationError) as info:
        await provider.generate_stream(request(), lambda _: None)
    assert info.value.non_retryable and "bad tool schema" in info.value.message


async def test_openai_streams_from_a_server_that_refuses_stream_options(srv):
    def refuse(request: dict):
        if "stream_options" in request:
            return srv.openai.error(400, "Unrecognized request argument supplied: stream_options")
        return TEXT

    srv.openai.responder = refuse
    client = openai.AsyncOpenAI(base_url=srv.openai_base_url, api_key="test", max_retries=0)
    deltas: list[str] = []
    reply = await OpenAIProvider(client).generate_stream(request(), deltas.append)
    await client.close()
    assert "".join(deltas) == TEXT == reply.message.content
    assert [("stream_options" in b, b["stream"]) for b in srv.bodies("/v1/chat/completions")] == [
        (True, True),
        (False, True),
    ]


@pytest.fixture
async def responses(srv):
    from durable_agents.providers.openai_responses import OpenAIResponsesProvider

    client = openai.AsyncOpenAI(base_url=srv.openai_base_url, api_key="test", max_retries=0)
    yield OpenAIResponsesProvider(client)
    await client.close()


async def test_responses_streams_its_text_and_keeps_every_output_item_verbatim(responses, srv):
    """The Responses API's stream (``response.output_text.delta``… ``response.completed``): the
    deltas add up to the text, and the reasoning and function_call items are the served ones."""
    calls = [("get_weather", {"city": "Paris"}, "call_1")]
    srv.responses.reply_tool_calls(calls, text="Checking the sky over Paris.")
    deltas: list[str] = []
    streamed = await responses.generate_stream(request(), deltas.append)
    [served] = srv.replies("/v1/responses")
    assert srv.bodies("/v1/responses")[0]["stream"] is True and len(deltas) > 3
    assert "".join(deltas) == "Checking the sky over Paris." == streamed.message.content
    assert streamed.message.tool_calls == [ToolCall(id="call_1", name="get_weather", arguments={"city": "Paris"})]
    opaque = [p.data for p in streamed.message.parts or [] if isinstance(p, OpaquePart)]
    assert opaque == [i for i in served["output"] if i["type"] != "message"]  # reasoning with encrypted_content
    assert opaque[0]["type"] == "reasoning" and opaque[0]["encrypted_content"]
    srv.responses.reply_text(TEXT)
    plain = await responses.generate(request())
    assert plain.usage == streamed.usage and streamed.usage.input_tokens > 0 and streamed.usage.requests == 1


async def test_responses_stream_failing_midway_or_refused_maps_like_the_others(responses, srv):
    srv.responses.reply_text(TEXT)
    srv.responses.fail_stream_after(10)  # created, in_progress, the reasoning item, the message's start, deltas
    deltas: list[str] = []
    with pytest.raises(ApplicationError) as info:
        await responses.generate_stream(request(), deltas.append)
    assert not info.value.non_retryable and 0 < len("".join(deltas)) < len(TEXT)
    srv.responses.reply_error(400, "bad tool schema")
    with pytest.raises(ApplicationError) as info:
        await responses.generate_stream(request(), lambda _: None)
    assert info.value.non_retryable and "bad tool schema" in info.value.message
