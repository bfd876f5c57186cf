"""The Anthropic and OpenAI providers, through the real SDKs, against a local fake.

What is checked is what the agent loop relies on: the transcript reaches the
API in the shape it demands, replies come back as neutral messages, and
failures become ApplicationErrors Temporal retries (or not) correctly, with
the SDK itself never retrying.
"""

from __future__ import annotations

import time
from datetime import timedelta

import anthropic
import openai
import pytest
from temporalio.exceptions import ApplicationError

from durable_agents.checkpoint.format import Message, ModelSettings, Role, ToolCall, ToolSpec
from durable_agents.providers.anthropic_messages import AnthropicProvider
from durable_agents.providers.base import ModelRequest
from durable_agents.providers.openai_chat import INVALID_JSON_KEY, OpenAIProvider
from tests.fakes.anthropic_rules import count_tokens, turn_blocks
from tests.fakes.llm_server import OUTPUT_TOKENS, FakeLLMServer

ANTHROPIC_PATH = "/v1/messages"
OPENAI_PATH = "/v1/chat/completions"

WEATHER = ToolSpec(
    name="get_weather",
    description="Weather for a city.",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
CLOCK = ToolSpec(name="get_time", description="The time.")  # no schema: must still send an object schema


def transcript() -> list[Message]:
    call_a = ToolCall(id="call_a", name="get_weather", arguments={"city": "Paris"})
    call_b = ToolCall(id="call_b", name="get_time", arguments={})
    return [
        Message.system("You are terse."),
        Message.system("Use tools."),
        Message.user("Weather and time in Paris?"),
        Message(role=Role.ASSISTANT, content="Checking.", tool_calls=[call_a, call_b]),
        Message.tool_result(call_a, '{"sky": "sunny"}'),
        Message.tool_result(call_b, "clock broken", is_error=True),
        Message(role=Role.ASSISTANT, content="Sunny; no clock."),
        Message.user("Thanks!"),
    ]


def request(messages: list[Message] | None = None, tools: list[ToolSpec] | None = None) -> ModelRequest:
    return ModelRequest(
        model="test-model", messages=messages or [Message.user("hi")], tools=tools or [], max_tokens=321
    )


@pytest.fixture
def srv():
    with FakeLLMServer() as server:
        yield server


@pytest.fixture
async def anthropic_provider(srv):
    client = anthropic.AsyncAnthropic(base_url=srv.anthropic_base_url, api_key="test", max_retries=0)
    yield AnthropicProvider(client)
    await client.close()


@pytest.fixture
async def openai_provider(srv):
    client = openai.AsyncOpenAI(base_url=srv.openai_base_url, api_key="test", max_retries=0)
    yield OpenAIProvider(client)
    await client.close()


@pytest.fixture(params=["anthropic", "openai"])
def api(request, srv, anthropic_provider, openai_provider):
    """(provider, the fake's script for its API, its path) for both APIs."""
    if request.param == "anthropic":
        return anthropic_provider, srv.anthropic, ANTHROPIC_PATH
    return openai_provider, srv.openai, OPENAI_PATH


async def raises(provider, req: ModelRequest) -> ApplicationError:
    with pytest.raises(ApplicationError) as info:
        await provider.generate(req)
    return info.value


# -- Anthropic transcript conversion ------------------------------------------------


async def test_anthropic_request_shape(srv, anthropic_provider):
    # Without prompt caching (on by default: tests/providers/test_anthropic_caching.py)
    uncached = ModelSettings(anthropic_cache=False)
    await anthropic_provider.generate(request(transcript(), [WEATHER, CLOCK]).model_copy(update={"settings": uncached}))
    (body,) = srv.bodies(ANTHROPIC_PATH)
    assert body["model"] == "test-model" and body["max_tokens"] == 321
    assert body["system"] == "You are terse.\n\nUse tools."
    assert body["tools"] == [
        {"name": "get_weather", "description": "Weather for a city.", "input_schema": WEATHER.input_schema},
        {"name": "get_time", "description": "The time.", "input_schema": {"type": "object", "properties": {}}},
    ]
    assert body["messages"] == [
        {"role": "user", "content": "Weather and time in Paris?"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "call_a", "name": "get_weather", "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "call_b", "name": "get_time", "input": {}},
            ],
        },
        # Both results in ONE user turn, right after the assistant turn that asked.
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "call_a", "content": '{"sky": "sunny"}'},
                {"type": "tool_result", "tool_use_id": "call_b", "content": "clock broken", "is_error": True},
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "Sunny; no clock."}]},
        {"role": "user", "content": "Thanks!"},
    ]


async def test_anthropic_tool_calls_round_trip(srv, anthropic_provider):
    srv.anthropic.reply_tool_calls([("get_weather", {"city": "Oslo"}, "toolu_01"), ("get_time", {})], text="On it.")
    first = await anthropic_provider.generate(request([Message.user("Oslo?")], [WEATHER, CLOCK]))
    msg = first.message
    assert msg.role == Role.ASSISTANT and msg.content == "On it." and first.stop_reason == "tool_use"
    assert next((c.id, c.name, c.arguments) for c in msg.tool_calls) == ("toolu_01", "get_weather", {"city": "Oslo"})
    assert msg.tool_calls[1].id.startswith("toolu_fake_") and msg.tool_calls[1].arguments == {}
    assert first.usage.input_tokens == count_tokens(srv.bodies(ANTHROPIC_PATH)[0]) > 0
    assert (first.usage.output_tokens, first.usage.requests) == (OUTPUT_TOKENS, 1)

    results = [Message.tool_result(c, "ok") for c in msg.tool_calls]
    second = await anthropic_provider.generate(request([Message.user("Oslo?"), msg, *results]))
    assert second.message.content == "done" and second.message.tool_calls is None
    sent = srv.bodies(ANTHROPIC_PATH)[1]["messages"]
    assert [b["id"] for b in sent[1]["content"] if b["type"] == "tool_use"] == [c.id for c in msg.tool_calls]
    assert [b["tool_use_id"] for b in sent[2]["content"]] == [c.id for c in msg.tool_calls]


# -- OpenAI transcript conversion --------------------------------------------------------


async def test_openai_request_shape(srv, openai_provider):
    await openai_provider.generate(request(transcript(), [WEATHER, CLOCK]))
    (body,) = srv.bodies(OPENAI_PATH)
    assert body["model"] == "test-model" and body["max_tokens"] == 321 and "max_completion_tokens" not in body
    assert body["tool_choice"] == "auto"  # explicit: some compatible servers read a missing value as "none"
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather for a city.",
                "parameters": WEATHER.input_schema,
            },
        },
        {
            "type": "function",
            "function": {
                "name": "get_time",
                "description": "The time.",
                "parameters": {"type": "object", "properties": {}},
            },
        },
    ]
    assert body["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "system", "content": "Use tools."},
        {"role": "user", "content": "Weather and time in Paris?"},
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                },
                {"id": "call_b", "type": "function", "function": {"name": "get_time", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": '{"sky": "sunny"}'},
        {"role": "tool", "tool_call_id": "call_b", "content": "clock broken"},
        {"role": "assistant", "content": "Sunny; no clock."},
        {"role": "user", "content": "Thanks!"},
    ]


async def test_openai_tool_calls_and_usage(srv, openai_provider):
    srv.openai.reply_tool_calls([("get_weather", {"city": "Oslo"}, "call_01")])
    reply = await openai_provider.generate(request([Message.user("Oslo?")], [WEATHER]))
    assert reply.message.content is None and reply.stop_reason == "tool_calls"
    assert reply.message.tool_calls == [ToolCall(id="call_01", name="get_weather", arguments={"city": "Oslo"})]
    assert reply.usage.input_tokens == len("userOslo?") // 4
    assert (reply.usage.output_tokens, reply.usage.requests) == (OUTPUT_TOKENS, 1)


async def test_openai_invalid_arguments_are_kept_not_raised(srv, openai_provider):
    srv.openai.reply_tool_calls([("get_weather", '{"city": "Os', "c1"), ("get_weather", "[1, 2]", "c2")])
    reply = await openai_provider.generate(request(tools=[WEATHER]))
    assert [c.arguments for c in reply.message.tool_calls] == [
        {INVALID_JSON_KEY: '{"city": "Os'},
        {INVALID_JSON_KEY: "[1, 2]"},
    ]
    # Sent back later, the model sees exactly what it wrote.
    await openai_provider.generate(request([Message.user("hi"), reply.message]))
    sent = srv.bodies(OPENAI_PATH)[1]["messages"][1]["tool_calls"]
    assert [c["function"]["arguments"] for c in sent] == ['{"city": "Os', "[1, 2]"]


def settings_request(model: str = "test-model", tools=None, **settings) -> ModelRequest:
    return request(tools=tools).model_copy(update={"model": model, "settings": ModelSettings(**settings)})


@pytest.mark.parametrize(
    ("model", "setting", "sent"),
    [
        ("gpt-5-mini", None, "max_completion_tokens"),  # reasoning models refuse max_tokens
        ("o3", None, "max_completion_tokens"),
        ("o4-mini-2025-04-16", None, "max_completion_tokens"),
        ("gpt-4.1", None, "max_tokens"),
        ("gemma-3-270m", None, "max_tokens"),  # llama.cpp, vLLM, Ollama read max_tokens
        ("gemma-3-270m", "max_completion_tokens", "max_completion_tokens"),
        ("gpt-5", "max_tokens", "max_tokens"),
    ],
)
async def test_openai_max_tokens_field_by_model_family(srv, openai_provider, model, setting, sent):
    await openai_provider.generate(settings_request(model, max_tokens_param=setting))
    (body,) = srv.bodies(OPENAI_PATH)
    other = {"max_tokens", "max_completion_tokens"} - {sent}
    assert body[sent] == 321 and not other & set(body)


@pytest.mark.parametrize(
    ("choice", "sent"),
    [
        ("required", "required"),
        ("none", "none"),
        ("get_weather", {"type": "function", "function": {"name": "get_weather"}}),
    ],
)
async def test_openai_tool_choice_is_sent_as_configured(srv, openai_provider, choice, sent):
    await openai_provider.generate(settings_request(tools=[WEATHER], tool_choice=choice))
    assert srv.bodies(OPENAI_PATH)[0]["tool_choice"] == sent


async def test_openai_no_tool_choice_without_tools(srv, openai_provider):
    await openai_provider.generate(settings_request(tool_choice="required"))
    assert "tool_choice" not in srv.bodies(OPENAI_PATH)[0] and "tools" not in srv.bodies(OPENAI_PATH)[0]


async def test_openai_sampling_settings_and_extras_reach_the_wire(srv, openai_provider):
    await openai_provider.generate(
        settings_request(temperature=0.0, top_p=0.5, stop=["END"], seed=7, reasoning_effort="low", extra={"top_k": 3})
    )
    body = srv.bodies(OPENAI_PATH)[0]
    assert (body["temperature"], body["top_p"], body["stop"], body["seed"]) == (0.0, 0.5, ["END"], 7)
    assert (body["reasoning_effort"], body["top_k"]) == ("low", 3)


async def test_openai_unset_settings_are_not_sent(srv, openai_provider):
    await openai_provider.generate(settings_request())
    assert not {"temperature", "top_p", "stop", "seed", "reasoning_effort"} & set(srv.bodies(OPENAI_PATH)[0])


async def test_openai_tool_call_turn_without_text_is_replayed_with_empty_content(srv, openai_provider):
    call = ToolCall(id="call_1", name="get_weather", arguments={"city": "Oslo"})
    turn = Message(role=Role.ASSISTANT, tool_calls=[call])
    await openai_provider.generate(request([Message.user("Oslo?"), turn, Message.tool_result(call, "sunny")]))
    sent = srv.bodies(OPENAI_PATH)[0]["messages"][1]
    assert sent["content"] == ""  # null is refused by llama.cpp's server (HTTP 500, a validation error)


# -- errors (both APIs) ------------------------------------------------------------------


async def test_429_is_retryable_after_retry_after(srv, api):
    provider, script, path = api
    script.reply_error(429, "Rate limited, slow down.", headers={"retry-after": "2"})
    err = await raises(provider, request())
    assert err.non_retryable is False and err.type == "ModelProviderRetryableError"
    assert err.next_retry_delay == timedelta(seconds=2)
    assert "returned 429: Rate limited, slow down." in err.message
    assert len(srv.bodies(path)) == 1  # the SDK did not retry on its own


@pytest.mark.parametrize("status", [500, 503, 529])
async def test_5xx_is_retryable(srv, api, status):
    provider, script, path = api
    script.reply_error(status, "Internal trouble.")
    err = await raises(provider, request())
    assert err.non_retryable is False and err.next_retry_delay is None
    assert f"returned {status}: Internal trouble." in err.message
    assert len(srv.bodies(path)) == 1


@pytest.mark.parametrize("status", [400, 401, 404])
async def test_4xx_is_final_with_provider_message(srv, api, status):
    provider, script, path = api
    script.reply_error(status, "messages.1: tool_use ids must be unique")
    err = await raises(provider, request())
    assert err.non_retryable is True and err.type == "ModelProviderRequestError"
    assert f"returned {status}: messages.1: tool_use ids must be unique" in err.message
    assert err.message.startswith("anthropic" if path == ANTHROPIC_PATH else "openai")
    assert len(srv.bodies(path)) == 1


async def test_5xx_that_refuses_the_request_itself_is_final(srv, api):
    """A compatible server that answers an invalid request with 500 (llama.cpp's does)
    gets no retries: the same request cannot succeed."""
    provider, script, path = api
    detail = "1 validation error for ChatCompletionRequestAssistantMessage content Input should be a valid string"
    script.reply_error(500, detail)
    err = await raises(provider, request())
    assert err.non_retryable is True and err.type == "ModelProviderRequestError"
    assert detail in err.message and "retrying it cannot help" in err.message
    assert len(srv.bodies(path)) == 1


async def test_openai_cached_prompt_tokens_are_cache_reads(srv, openai_provider):
    body = {
        "id": "c1",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": 2000,
            "completion_tokens": 5,
            "total_tokens": 2005,
            "prompt_tokens_details": {"cached_tokens": 1536},
        },
    }
    srv.openai.reply_raw(200, body)
    usage = (await openai_provider.generate(request())).usage
    assert (usage.input_tokens, usage.cache_read_tokens, usage.output_tokens) == (2000, 1536, 5)


async def test_provider_text_in_a_failure_is_one_bounded_line(srv, api):
    provider, script, _ = api
    script.reply_error(400, "context too long:\n" + "x" * 50_000)
    err = await raises(provider, request())
    assert "\n" not in err.message and len(err.message) < 2100


async def test_unreadable_reply_body_is_malformed(srv, api):
    provider, script, _ = api
    script.reply_raw(200, "this is not json")
    err = await raises(provider, request())
    assert err.non_retryable is True and err.type == "ModelProviderMalformedReply"
    assert "malformed reply" in err.message


@pytest.mark.parametrize(
    "body",
    [
        {"id": "msg_1", "type": "message", "role": "assistant"},  # no content
        {"type": "message", "content": [{"type": "tool_use", "input": {}}]},  # no id/name
    ],
)
async def test_anthropic_malformed_reply(srv, anthropic_provider, body):
    srv.anthropic.reply_raw(200, body)
    err = await raises(anthropic_provider, request())
    assert err.non_retryable is True and err.type == "ModelProviderMalformedReply"
    assert err.message.startswith("anthropic returned a malformed reply:")


async def test_anthropic_non_object_tool_input_is_kept_for_a_validation_error(srv, anthropic_provider):
    """Like OpenAI's unparsable arguments: the tool layer answers, the run goes on."""
    srv.anthropic.reply_raw(
        200, {"type": "message", "content": [{"type": "tool_use", "id": "t1", "name": "get_weather", "input": "Paris"}]}
    )
    response = await anthropic_provider.generate(request())
    [call] = response.message.tool_calls
    assert (call.id, call.name, call.arguments) == ("t1", "get_weather", {INVALID_JSON_KEY: '"Paris"'})


@pytest.mark.parametrize(
    "body",
    [
        {"id": "x", "object": "chat.completion", "choices": []},
        {"id": "x", "object": "chat.completion"},
        {"choices": [{"index": 0, "message": {"role": "assistant", "tool_calls": [{"type": "function"}]}}]},
    ],
)
async def test_openai_malformed_reply(srv, openai_provider, body):
    srv.openai.reply_raw(200, body)
    err = await raises(openai_provider, request())
    assert err.non_retryable is True and err.type == "ModelProviderMalformedReply"
    assert err.message.startswith("openai returned a malformed reply:")


async def test_connection_refused_is_retryable():
    with FakeLLMServer() as gone:
        url_a, url_o = gone.anthropic_base_url, gone.openai_base_url
    providers = [
        AnthropicProvider(anthropic.AsyncAnthropic(base_url=url_a, api_key="t", max_retries=0)),
        OpenAIProvider(openai.AsyncOpenAI(base_url=url_o, api_key="t", max_retries=0)),
    ]
    for provider in providers:
        err = await raises(provider, request())
        assert err.non_retryable is False and err.type == "ModelProviderRetryableError"


async def test_timeout_is_retryable(srv):
    srv.anthropic.responder = lambda body: time.sleep(1.0)  # then answers "done"
    client = anthropic.AsyncAnthropic(base_url=srv.anthropic_base_url, api_key="t", max_retries=0, timeout=0.2)
    err = await raises(AnthropicProvider(client), request())
    assert err.non_retryable is False and err.type == "ModelProviderRetryableError"
    assert len(srv.bodies(ANTHROPIC_PATH)) == 1


# -- clients built from the worker's environment ---------------------------------------------


async def test_clients_come_from_the_environment(srv, monkeypatch, tmp_path):
    monkeypatch.setenv("ANTHROPIC_BASE_URL", srv.anthropic_base_url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "env-anthropic-key")
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(tmp_path))
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", srv.openai_base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "env-openai-key")
    assert (await AnthropicProvider().generate(request())).message.content == "done"
    assert (await OpenAIProvider().generate(request())).message.content == "done"
    sent = {r["path"]: r["headers"] for r in srv.requests}
    auth = sent[ANTHROPIC_PATH].get("x-api-key") or sent[ANTHROPIC_PATH].get("authorization", "")
    assert auth.endswith("env-anthropic-key")
    assert sent[OPENAI_PATH]["authorization"] == "Bearer env-openai-key"


async def test_missing_credentials_is_a_configuration_error(monkeypatch, tmp_path):
    for name in (
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_PROFILE",
        "OPENAI_API_KEY",
        "OPENAI_ADMIN_KEY",
        "ANTHROPIC_IDENTITY_TOKEN",
        "ANTHROPIC_IDENTITY_TOKEN_FILE",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(tmp_path))
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")  # never reached
    for provider in (AnthropicProvider(), OpenAIProvider()):
        err = await raises(provider, request())
        assert err.non_retryable is True and err.type == "ConfigurationError"


# -- the fake itself: responders and the default answer ------------------------------------------


async def test_responder_scripts_replies_from_the_request(srv, anthropic_provider, openai_provider):
    srv.anthropic.responder = lambda body: f"you said {turn_blocks(body['messages'][-1]['content'])[-1]['text']}"
    srv.openai.responder = lambda body: srv.openai.tool_calls([("get_time", {}, "c9")])
    srv.anthropic.reply_text("queued first")
    assert (await anthropic_provider.generate(request())).message.content == "queued first"
    assert (await anthropic_provider.generate(request())).message.content == "you said hi"
    calls = (await openai_provider.generate(request())).message.tool_calls
    assert calls == [ToolCall(id="c9", name="get_time", arguments={})]
    srv.openai.responder = None
    assert (await openai_provider.generate(request())).message.content == "done"


async def test_anthropic_sampling_settings_reach_the_body(srv, anthropic_provider):
    """The SDK's messages.create has no temperature/top_p arguments (a TypeError, retried as a
    crash, before they went through extra_body)."""
    req = request().model_copy(
        update={"settings": ModelSettings(temperature=0.2, top_p=0.9, stop=["END"], extra={"top_k": 5})}
    )
    await anthropic_provider.generate(req)
    body = srv.bodies(ANTHROPIC_PATH)[0]
    assert (body["temperature"], body["top_p"], body["stop_sequences"], body["top_k"]) == (0.2, 0.9, ["END"], 5)
