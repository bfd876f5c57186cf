"""Anthropic prompt caching through the real SDK, against the fake that counts cache
reads and writes by prefix as the API does."""

from __future__ import annotations

import itertools
import json

import anthropic
import pytest

from durable_agents.checkpoint.format import Message, ModelSettings, ToolSpec, Usage
from durable_agents.providers.anthropic_messages import AnthropicProvider
from durable_agents.providers.base import ModelRequest
from tests.fakes.anthropic_rules import count_tokens
from tests.fakes.llm_server import FakeLLMServer

PATH = "/v1/messages"
EPHEMERAL = {"type": "ephemeral"}
TOOLS = [
    ToolSpec(name="get_weather", description="Weather for a city.", input_schema={"type": "object", "properties": {}}),
    ToolSpec(name="get_time", description="The time.", input_schema={"type": "object", "properties": {}}),
]


def request(messages: list[Message], **settings) -> ModelRequest:
    return ModelRequest(model="claude-test", messages=messages, tools=TOOLS, settings=ModelSettings(**settings))


def marks(body: dict) -> list[str]:
    """Where the request's cache breakpoints are."""
    found = [f"tools.{i}" for i, t in enumerate(body.get("tools", [])) if "cache_control" in t]
    system = body.get("system")
    found += [f"system.{i}" for i, b in enumerate(system if isinstance(system, list) else []) if "cache_control" in b]
    for i, message in enumerate(body["messages"]):
        content = message["content"] if isinstance(message["content"], list) else []
        found += [f"messages.{i}.content.{j}" for j, b in enumerate(content) if "cache_control" in b]
    return found


@pytest.fixture
def srv():
    with FakeLLMServer() as server:
        yield server


@pytest.fixture
async def provider(srv):
    client = anthropic.AsyncAnthropic(base_url=srv.anthropic_base_url, api_key="test", max_retries=0)
    yield AnthropicProvider(client)
    await client.close()


async def test_the_second_step_reads_the_prefix_the_first_wrote(srv, provider):
    srv.anthropic.reply_tool_calls([("get_weather", {}, "toolu_1"), ("get_time", {}, "toolu_2")], text="Checking.")
    start = [Message.system("You check the weather. " * 20), Message.user("Weather and time in Oslo?")]
    first = await provider.generate(request(start))
    results = [Message.tool_result(c, '{"sky": "clear"}') for c in first.message.tool_calls]
    second = await provider.generate(request([*start, first.message, *results]))

    one, two = srv.bodies(PATH)
    assert marks(one) == ["tools.1", "system.0", "messages.0.content.0"]
    assert one["tools"][1]["cache_control"] == EPHEMERAL and one["system"][0]["cache_control"] == EPHEMERAL
    # the second marks where the first ended (read) and its own end (written for the third)
    assert marks(two) == ["tools.1", "system.0", "messages.0.content.0", "messages.2.content.1"]
    assert first.usage == Usage(
        input_tokens=count_tokens(one),
        output_tokens=7,
        requests=1,
        cache_read_tokens=0,
        cache_write_tokens=count_tokens(one),
    )
    assert second.usage.cache_read_tokens == count_tokens(one) > 0
    assert second.usage.cache_write_tokens == count_tokens(two) - count_tokens(one) > 0
    assert second.usage.input_tokens == count_tokens(two)  # every input token, cached or not
    total = first.usage + second.usage
    assert (total.cache_read_tokens, total.cache_write_tokens) == (count_tokens(one), count_tokens(two))


async def test_the_moving_breakpoint_reads_past_a_turn_of_many_blocks(srv, provider):
    """The API looks back only 20 blocks from a breakpoint for a cached prefix: a turn of
    15 tool calls adds 30 blocks, so the previous end is marked too and read exactly."""
    calls = [("get_weather", {"n": i}, f"toolu_{i}") for i in range(15)]
    srv.anthropic.reply_tool_calls(calls)
    start = [Message.system("System."), Message.user("Fifteen cities, please.")]
    first = await provider.generate(request(start))
    results = [Message.tool_result(c, "ok") for c in first.message.tool_calls]
    second = await provider.generate(request([*start, first.message, *results]))
    assert second.usage.cache_read_tokens == count_tokens(srv.bodies(PATH)[0])


async def test_caching_off_sends_no_breakpoint(srv, provider):
    await provider.generate(request([Message.system("Be brief."), Message.user("hi")], anthropic_cache=False))
    (body,) = srv.bodies(PATH)
    assert "cache_control" not in json.dumps(body)
    assert body["system"] == "Be brief." and body["messages"] == [{"role": "user", "content": "hi"}]


async def test_a_cached_prefix_is_sent_unchanged_so_it_can_be_read(srv, provider):
    """What each step sent is, byte for byte, the start of the next (breakpoints aside)."""
    transcript = [Message.system("S."), Message.user("Time?")]
    for step in range(3):
        srv.anthropic.reply_tool_calls([("get_time", {}, f"toolu_{step}")])
        turn = (await provider.generate(request(transcript))).message
        transcript += [turn, Message.tool_result(turn.tool_calls[0], "noon")]

    def plain(body: dict) -> str:
        return json.dumps(body["messages"]).replace(', "cache_control": {"type": "ephemeral"}', "")

    bodies = srv.bodies(PATH)
    for before, after in itertools.pairwise(bodies):
        assert plain(after).startswith(plain(before)[:-1])  # the list's closing bracket aside
    assert srv.bodies(PATH)[0]["messages"][0]["content"] == [
        {"type": "text", "text": "Time?", "cache_control": EPHEMERAL}
    ]


async def test_the_fake_refuses_more_than_four_breakpoints(srv, provider):
    marked = [{"type": "text", "text": f"part {i}", "cache_control": EPHEMERAL} for i in range(5)]
    with pytest.raises(anthropic.BadRequestError) as raised:
        await provider._get_client().messages.create(
            model="claude-test", max_tokens=10, messages=[{"role": "user", "content": marked}]
        )
    assert "A maximum of 4 blocks with cache_control may be provided. Found 5." in str(raised.value)


async def test_prefixes_below_the_minimum_are_not_cached(srv, provider):
    srv.anthropic.cache.min_cache_tokens = 10_000  # like the API's 1024-4096, by model
    srv.anthropic.reply_tool_calls([("get_time", {}, "toolu_1")])
    first = await provider.generate(request([Message.user("Time?")]))
    second = await provider.generate(
        request([Message.user("Time?"), first.message, Message.tool_result(first.message.tool_calls[0], "noon")])
    )
    assert (first.usage.cache_write_tokens, second.usage.cache_read_tokens) == (0, 0)
