"""Structured output: ``Agent(output_type=…)`` gives a validated final answer; an invalid
one is sent back with its validation error at most ``output_retries`` times."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from durable_agents import (
    Agent,
    ConfigurationError,
    OutputValidationError,
    ScriptedToolCall,
    ScriptedTurn,
    ToolContext,
    register_script,
    tool,
)
from durable_agents.agent.output import OUTPUT_TOOL
from durable_agents.checkpoint import CheckpointStatus, FinishReason, Role
from tests import agents
from tests.conftest import session_id
from tests.fakes.llm_server import FakeLLMServer


class Booking(BaseModel):
    restaurant: str
    people: int


GOOD = '{"restaurant": "Roscioli", "people": 2}'

register_script(
    "answer-after-weather",
    [
        ScriptedTurn(tool_calls=[ScriptedToolCall(name="get_weather", arguments={"city": "Rome"})]),
        ScriptedTurn(text=f"```json\n{GOOD}\n```"),
    ],
)
register_script("answer-wrong-then-right", [ScriptedTurn(text='{"restaurant": "Roscioli"}'), ScriptedTurn(text=GOOD)])
register_script("answer-wrong-always", lambda messages: ScriptedTurn(text='{"people": "many"}'))
register_script(
    "tool-answer",
    [
        ScriptedTurn(text="Here it is.", tool_calls=[ScriptedToolCall(name=OUTPUT_TOOL, arguments={"people": "x"})]),
        ScriptedTurn(
            tool_calls=[
                ScriptedToolCall(name="get_weather", arguments={"city": "Rome"}),
                ScriptedToolCall(name=OUTPUT_TOOL, arguments={"restaurant": "Roscioli", "people": 2}),
            ]
        ),
    ],
)


@tool(name=OUTPUT_TOOL)
async def clash(args: Booking, ctx: ToolContext) -> dict:
    return {}


async def test_native_answer_is_validated_typed_and_stored(run_worker, store):
    agent = Agent(
        name="so-native", model="scripted:answer-after-weather", tools=[agents.get_weather], output_type=Booking
    )
    sid = session_id()
    async with run_worker([agent]) as client:
        result = await client.send("so-native", "book", session_id=sid, output_type=Booking)
    assert result.finish_reason == FinishReason.STOP
    assert result.output == Booking(restaurant="Roscioli", people=2)
    saved = store.load(sid)
    assert saved.output == {"restaurant": "Roscioli", "people": 2} and saved.status == CheckpointStatus.FINISHED
    assert saved.run_config.output_mode == "native" and saved.run_config.output_schema == Booking.model_json_schema()


async def test_invalid_answer_is_sent_back_with_its_error(run_worker, store):
    agent = Agent(name="so-retry", model="scripted:answer-wrong-then-right", output_type=Booking)
    sid = session_id()
    async with run_worker([agent]) as client:
        result = await client.send("so-retry", "book", session_id=sid)
    assert result.output == {"restaurant": "Roscioli", "people": 2}  # JSON without output_type=
    assert result.output_as(Booking).people == 2
    roles = [m.role for m in store.load(sid).messages]
    assert roles == [Role.USER, Role.ASSISTANT, Role.USER, Role.ASSISTANT]
    feedback = store.load(sid).messages[2].content
    assert "does not match the required output: people: Field required" in feedback
    assert result.steps == 2 and result.usage.requests == 2


async def test_retries_are_bounded_then_the_run_fails_resumably(run_worker, store):
    agent = Agent(name="so-never", model="scripted:answer-wrong-always", output_type=Booking, output_retries=1)
    sid = session_id()
    async with run_worker([agent]) as client:
        with pytest.raises(OutputValidationError) as raised:
            await client.send("so-never", "book", session_id=sid)
    assert "does not match Booking after 2 attempts" in str(raised.value)
    assert raised.value.code == "OUTPUT_INVALID"
    header = store.load_header(sid)
    assert header.status == CheckpointStatus.IN_PROGRESS and header.last_error.type == "OutputValidationError"
    assert header.usage.requests == 2  # no more model calls than 1 + output_retries
    assert store.load(sid).messages[-1].role == Role.USER  # the last error was sent back: a resume asks again


async def test_tool_mode_answer_ends_the_run_and_gives_other_calls_results(run_worker, store):
    agent = Agent(
        name="so-tool",
        model="scripted:tool-answer",
        tools=[agents.get_weather],
        output_type=Booking,
        output_mode="tool",
    )
    sid = session_id()
    async with run_worker([agent]) as client:
        result = await client.send("so-tool", "book", session_id=sid)
    assert result.finish_reason == FinishReason.STOP and result.output["restaurant"] == "Roscioli"
    messages = store.load(sid).messages
    # first answer invalid: its call got the validation error as its result
    first_result = json.loads(messages[2].content)
    assert messages[2].is_error and "invalid final answer: restaurant: Field required" in first_result["error"]
    # second turn: the answer, and the call beside it did not run but has a result
    assert [m.tool_name for m in messages[4:]] == ["get_weather", OUTPUT_TOOL]
    assert json.loads(messages[4].content)["error"] == "not run: the final answer was given"
    assert store.load_header(sid).message_count == len(messages) == 6


async def test_openai_gets_the_schema_as_response_format(monkeypatch, run_worker):
    with FakeLLMServer() as llm:
        monkeypatch.setenv("OPENAI_BASE_URL", llm.openai_base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "k")
        llm.openai.reply_text(GOOD)
        agent = Agent(name="so-openai", model="openai:gpt-4.1", output_type=Booking)
        async with run_worker([agent]) as client:
            result = await client.send("so-openai", "book", session_id=session_id(), output_type=Booking)
        (body,) = llm.bodies("/v1/chat/completions")
    assert result.output.restaurant == "Roscioli"
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Booking", "schema": Booking.model_json_schema()},
    }


async def test_anthropic_is_asked_through_the_output_tool(monkeypatch, run_worker):
    with FakeLLMServer() as llm:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", llm.anthropic_base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
        llm.anthropic.reply_tool_calls([(OUTPUT_TOOL, {"restaurant": "Roscioli", "people": 2}, "toolu_1")])
        agent = Agent(name="so-anthropic", model="anthropic:claude-sonnet-4-6", output_type=Booking)
        async with run_worker([agent]) as client:
            result = await client.send("so-anthropic", "book", session_id=session_id(), output_type=Booking)
        (body,) = llm.bodies("/v1/messages")
    assert result.output == Booking(restaurant="Roscioli", people=2)
    assert [t["name"] for t in body["tools"]] == [OUTPUT_TOOL]
    assert body["tools"][0]["input_schema"] == Booking.model_json_schema()
    assert body["tool_choice"] == {"type": "tool", "name": OUTPUT_TOOL}  # the only tool: forced


def test_output_type_must_be_a_model_and_the_tool_name_free():
    with pytest.raises(ConfigurationError, match="output_type must be a pydantic model class"):
        Agent(name="x", model="scripted:x", output_type=dict)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="has a tool named 'final_result'"):
        Agent(name="x", model="scripted:x", tools=[clash], output_type=Booking)
