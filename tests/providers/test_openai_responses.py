"""The OpenAI Responses API provider (``openai-responses:``), through the real SDK, against
the wire-format fake, which refuses a function call sent back without its reasoning item."""

from __future__ import annotations

import asyncio
import json
import signal
import uuid
from pathlib import Path

import openai
import pytest
from temporalio.exceptions import ApplicationError

from durable_agents import AgentClient
from durable_agents.checkpoint import FinishReason, Role, SqliteStore
from durable_agents.checkpoint.format import Message, ModelSettings, ToolCall, ToolSpec
from durable_agents.checkpoint.parts import ImagePart, OpaquePart, TextPart
from durable_agents.providers.base import ModelRequest
from durable_agents.providers.openai_responses import OpenAIResponsesProvider
from durable_agents.testing import CrashWindow, WorkerProcess
from tests.conftest import session_id
from tests.fakes.llm_server import FakeLLMServer

PATH = "/v1/responses"
ROOT = Path(__file__).resolve().parents[2]
WEATHER = ToolSpec(
    name="get_weather",
    description="Weather for a city.",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


@pytest.fixture
def srv():
    with FakeLLMServer() as server:
        yield server


@pytest.fixture
async def provider(srv):
    client = openai.AsyncOpenAI(base_url=srv.openai_base_url, api_key="test", max_retries=0)
    yield OpenAIResponsesProvider(client)
    await client.close()


def request(messages: list[Message], tools: list[ToolSpec] | None = None, **settings) -> ModelRequest:
    return ModelRequest(
        model="o4-mini", messages=messages, tools=tools or [], max_tokens=300, settings=ModelSettings(**settings)
    )


async def test_request_shape(srv, provider):
    call = ToolCall(id="call_a", name="get_weather", arguments={"city": "Paris"})
    picture = ImagePart(media_type="image/png", data="aGVsbG8=")
    transcript = [
        Message.system("Be terse."),
        Message.user("Weather here?", picture),
        Message(role=Role.ASSISTANT, content="Checking.", tool_calls=[call]),
        Message.tool_result(call, '{"sky": "sunny"}'),
    ]
    await provider.generate(request(transcript, [WEATHER], tool_choice="get_weather", reasoning_effort="low"))
    (body,) = srv.bodies(PATH)
    assert body["store"] is False and body["include"] == ["reasoning.encrypted_content"]
    assert body["max_output_tokens"] == 300 and body["reasoning"] == {"effort": "low"}
    assert body["tool_choice"] == {"type": "function", "name": "get_weather"}
    assert body["tools"] == [
        {
            "type": "function",
            "name": "get_weather",
            "description": "Weather for a city.",
            "parameters": WEATHER.input_schema,
            "strict": False,
        }
    ]
    assert body["input"] == [
        {"role": "system", "content": "Be terse."},
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "Weather here?"},
                {"type": "input_image", "image_url": "data:image/png;base64,aGVsbG8="},
            ],
        },
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Checking."}]},
        {"type": "function_call", "call_id": "call_a", "name": "get_weather", "arguments": '{"city": "Paris"}'},
        {"type": "function_call_output", "call_id": "call_a", "output": '{"sky": "sunny"}'},
    ]


async def test_reasoning_items_are_kept_and_sent_back_verbatim(srv, provider):
    srv.responses.reply_tool_calls([("get_weather", {"city": "Oslo"}, "call_1")], text="Let me look.")
    reply = await provider.generate(request([Message.user("Oslo?")], [WEATHER]))
    turn = reply.message
    assert turn.content == "Let me look." and turn.tool_calls == [
        ToolCall(id="call_1", name="get_weather", arguments={"city": "Oslo"})
    ]
    issued = srv.replies(PATH)[0]["output"]
    assert [p.type for p in turn.parts] == ["opaque", "text", "opaque"]
    assert turn.parts[0] == OpaquePart(provider="openai-responses", data=issued[0])  # reasoning, as sent
    assert isinstance(turn.parts[1], TextPart) and turn.parts[2].data["id"] == issued[2]["id"]  # fc_ id kept
    assert reply.usage.output_tokens == 7 and reply.usage.cache_read_tokens == 0

    # the stored turn (a JSON round trip, as the store does) goes back with its items as they came
    stored = Message.model_validate_json(turn.to_json())
    result = Message.tool_result(turn.tool_calls[0], '{"sky": "snow"}')
    srv.responses.reply_text("Snow in Oslo.")
    final = await provider.generate(request([Message.user("Oslo?"), stored, result], [WEATHER]))
    assert final.message.content == "Snow in Oslo." and [p.type for p in final.message.parts] == ["opaque", "text"]
    sent = srv.bodies(PATH)[1]["input"]
    assert sent[1] == issued[0] and sent[3] == issued[2] and sent[4]["type"] == "function_call_output"


async def test_the_fake_refuses_a_call_without_its_reasoning(srv, provider):
    """The check the round-trip tests rely on: drop or alter the reasoning item, get a 400."""
    srv.responses.reply_tool_calls([("get_weather", {"city": "Oslo"}, "call_1")])
    turn = (await provider.generate(request([Message.user("Oslo?")], [WEATHER]))).message
    result = Message.tool_result(turn.tool_calls[0], "{}")
    altered = turn.model_copy(deep=True)
    altered.parts[0].data["encrypted_content"] += "x"
    dropped = turn.model_copy(update={"parts": None})
    for bad in (altered, dropped):
        with pytest.raises(ApplicationError) as raised:
            await provider.generate(request([Message.user("Oslo?"), bad, result], [WEATHER]))
        assert raised.value.non_retryable and "without its required 'reasoning' item" in raised.value.message


async def test_a_session_from_another_provider_continues_here(srv, provider):
    """Anthropic thinking blocks are dropped; tool calls without items become function_call items."""
    call = ToolCall(id="toolu_1", name="get_weather", arguments={"city": "Rome"})
    thinking = OpaquePart(provider="anthropic", data={"type": "thinking", "thinking": "hm", "signature": "sig"})
    turn = Message(
        role=Role.ASSISTANT, content="Looking.", parts=[thinking, TextPart(text="Looking.")], tool_calls=[call]
    )
    await provider.generate(request([Message.user("Rome?"), turn, Message.tool_result(call, "sunny")], [WEATHER]))
    sent = srv.bodies(PATH)[0]["input"]
    assert [i.get("type") for i in sent] == [None, "message", "function_call", "function_call_output"]
    assert "sig" not in json.dumps(sent)


async def test_output_schema_and_errors(srv, provider):
    srv.responses.reply_error(400, "Unsupported parameter: 'temperature' is not supported with this model.")
    with pytest.raises(ApplicationError) as raised:
        await provider.generate(request([Message.user("hi")], temperature=0.5))
    assert raised.value.non_retryable and raised.value.type == "ModelProviderRequestError"
    assert "openai-responses returned 400: Unsupported parameter" in raised.value.message
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    srv.responses.reply_text('{"n": 1}')
    await provider.generate(
        request([Message.user("n?")]).model_copy(update={"output_schema": schema, "output_name": "N"})
    )
    assert srv.bodies(PATH)[1]["text"] == {"format": {"type": "json_schema", "name": "N", "schema": schema}}


async def test_reasoning_survives_a_worker_kill_after_the_turn_is_stored(env, tmp_path, srv):
    """SIGKILL right after the reasoning turn is stored: a fresh worker runs the tools and the
    next request carries the reasoning item byte-for-byte (the fake refuses it otherwise);
    the stored turn is not requested again."""
    srv.responses.reply_tool_calls(
        [("once_work", {"item": 1, "seconds": 0.05}, "call_r1"), ("safe_work", {"item": 2, "seconds": 0.05}, "call_r2")]
    )
    srv.responses.reply_text("Both done.")
    task_queue = f"responses-{uuid.uuid4().hex[:8]}"
    worker = WorkerProcess(
        ["tests.responses_agents:ALL"],
        address=env.client.service_client.config.target_host,
        store_url=f"sqlite:///{tmp_path / 'store.db'}",
        task_queue=task_queue,
        log_dir=tmp_path / "logs",
        crash_window=CrashWindow.AFTER_MODEL_TURN_STORED,
        cwd=ROOT,
        env={"OPENAI_BASE_URL": srv.openai_base_url, "OPENAI_API_KEY": "test"},
    )
    try:
        await worker.start_ready(env.client)
        store = SqliteStore(tmp_path / "store.db")
        client = AgentClient(env.client, store, task_queue)
        sid = session_id()
        handle = await client.start("responses-agent", "Do the work.", session_id=sid)
        assert await worker.wait_exit(timeout=60) == -signal.SIGKILL, worker.log()[-2000:]
        await worker.start_ready(env.client)
        result = await asyncio.wait_for(client.result(sid, handle), 90)
    finally:
        worker.stop()
    assert result.finish_reason == FinishReason.STOP and result.text == "Both done."
    bodies = srv.bodies(PATH)
    assert len(bodies) == 2  # the stored turn was not asked for again
    issued = srv.replies(PATH)[0]["output"]
    assert bodies[1]["input"][2] == issued[0]  # system, user, then the reasoning item as it came
    assert [m.role for m in result.messages] == [
        Role.SYSTEM,
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
        Role.TOOL,
        Role.ASSISTANT,
    ]
