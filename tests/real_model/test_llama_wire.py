"""durable-agents' ``openai:`` provider against a real OpenAI-compatible server
(llama-cpp-python's, serving a real GGUF model), through a real Temporal worker.

The model is a small base model: its text is nonsense, so these tests check the
wire (recorded by a proxy in front of the server), ids, counts, usage and
statuses, never what the text says.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from durable_agents import Agent, ModelProviderError
from durable_agents.checkpoint import FinishReason, Role
from tests.conftest import session_id
from tests.real_model.agents import DETERMINISTIC, MODEL, forced_tool_agent, lookup_city
from tests.real_model.conftest import N_CTX

pytestmark = pytest.mark.integration

RUN_TIMEOUT = 120.0
"""Seconds a run may take here (a model call takes about one)."""


def _chat_agent(name: str, max_tokens: int) -> Agent:
    return Agent(
        name=name,
        model=MODEL,
        instructions="You answer in one short sentence.",
        max_tokens=max_tokens,
        model_settings=DETERMINISTIC,
    )


def _usage_sum(exchanges, field: str) -> int:
    return sum(e.response["usage"][field] for e in exchanges)


async def test_tool_loop_round_trips_the_servers_call_ids_and_arguments(wire, run_worker):
    agent = forced_tool_agent("real-tools", "lookup_city", [lookup_city], max_steps=2)
    async with run_worker([agent]) as client:
        result = await asyncio.wait_for(client.send(agent.name, "Which city?", session_id=session_id()), RUN_TIMEOUT)

    # forced: every turn calls the tool, so the run ends at max_steps after two requests
    assert result.finish_reason == FinishReason.MAX_STEPS
    first, second = wire.chat()
    assert first.request["tool_choice"] == {"type": "function", "function": {"name": "lookup_city"}}
    assert [t["function"]["name"] for t in first.request["tools"]] == ["lookup_city"]
    assert first.status == 200 and first.response["choices"][0]["finish_reason"] == "tool_calls"
    (call,) = first.response["choices"][0]["message"]["tool_calls"]
    args = json.loads(call["function"]["arguments"])
    assert set(args) == {"city"} and args["city"] in ("Paris", "Oslo")

    # the next request replays the model's turn under the server's id, and carries the
    # tool's result: the tool was given exactly that id and those arguments
    assert second.status == 200, second.response
    sent = second.request["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool"]
    replayed = sent[2]
    assert replayed["content"] == ""  # not null: this server answers 500 to a null content
    [(replayed_call)] = replayed["tool_calls"]
    assert (replayed_call["id"], replayed_call["function"]["name"]) == (call["id"], "lookup_city")
    assert json.loads(replayed_call["function"]["arguments"]) == args
    assert sent[3]["tool_call_id"] == call["id"]
    assert json.loads(sent[3]["content"]) == {"seen_call_id": call["id"], "seen_args": args}

    # the transcript keeps the server's ids; usage is the server's counts summed
    (second_call,) = second.response["choices"][0]["message"]["tool_calls"]
    assert second_call["id"] != call["id"]
    assert [m.role for m in result.messages] == [Role.SYSTEM, Role.USER, *[Role.ASSISTANT, Role.TOOL] * 2]
    assert [c.id for m in result.messages if m.tool_calls for c in m.tool_calls] == [call["id"], second_call["id"]]
    assert [m.tool_call_id for m in result.messages if m.role == Role.TOOL] == [call["id"], second_call["id"]]
    assert result.usage.requests == 2
    assert result.usage.input_tokens == _usage_sum([first, second], "prompt_tokens")
    assert result.usage.output_tokens == _usage_sum([first, second], "completion_tokens")


async def test_plain_chat_finishes_with_the_servers_text(wire, run_worker):
    agent = _chat_agent("real-chat", max_tokens=16)
    async with run_worker([agent]) as client:
        result = await asyncio.wait_for(client.send(agent.name, "Say hello.", session_id=session_id()), RUN_TIMEOUT)

    (exchange,) = wire.chat()
    assert "tools" not in exchange.request and "tool_choice" not in exchange.request
    assert (exchange.request["temperature"], exchange.request["seed"]) == (0.0, 7)
    assert exchange.status == 200
    message = exchange.response["choices"][0]["message"]
    assert not message.get("tool_calls") and isinstance(message["content"], str) and message["content"]
    assert result.finish_reason == FinishReason.STOP
    assert result.text == message["content"]
    assert [m.role for m in result.messages] == [Role.SYSTEM, Role.USER, Role.ASSISTANT]
    assert result.usage.input_tokens == exchange.response["usage"]["prompt_tokens"] > 0
    assert result.usage.output_tokens == exchange.response["usage"]["completion_tokens"] > 0


async def test_max_tokens_is_honoured_by_the_server(wire, run_worker):
    agent = _chat_agent("real-max-tokens", max_tokens=5)
    async with run_worker([agent]) as client:
        result = await asyncio.wait_for(
            client.send(agent.name, "Tell me a long story about the sea.", session_id=session_id()), RUN_TIMEOUT
        )

    (exchange,) = wire.chat()
    assert exchange.response["usage"]["completion_tokens"] == 5
    assert exchange.response["choices"][0]["finish_reason"] == "length"  # cut by the limit, not ended
    assert result.finish_reason == FinishReason.STOP and result.usage.output_tokens == 5
    # sent in the field this server reads (it ignores max_completion_tokens)
    assert exchange.request["max_tokens"] == 5 and "max_completion_tokens" not in exchange.request


async def test_a_prompt_beyond_the_context_window_fails_once_with_the_servers_message(wire, run_worker):
    agent = _chat_agent("real-overflow", max_tokens=16)
    too_long = "the quick brown fox jumps over the lazy dog " * (N_CTX // 4)  # ~9 tokens per repeat
    async with run_worker([agent]) as client:
        with pytest.raises(ModelProviderError) as raised:
            await asyncio.wait_for(client.send(agent.name, too_long, session_id=session_id()), RUN_TIMEOUT)

    (exchange,) = wire.chat()  # one request: a refused prompt is not retried
    assert exchange.status == 400
    server_message = exchange.response["error"]["message"]
    assert f"maximum context length is {N_CTX} tokens" in server_message
    assert server_message in str(raised.value) and "openai returned 400" in str(raised.value)
