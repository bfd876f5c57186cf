"""A tool or a model reply that misbehaves becomes a clear result, once: never an
endless retry, never a second paid model call."""

from __future__ import annotations

import asyncio
import json
import sys

from pydantic import BaseModel

from durable_agents import Agent, FinishReason, ScriptedToolCall, ScriptedTurn, ToolContext, register_script, tool
from tests.conftest import session_id
from tests.fakes.llm_server import FakeLLMServer

RUNS: list[str] = []


class Nothing(BaseModel):
    pass


class Unencodable:
    """Not JSON, and its str() fails too."""

    def __str__(self) -> str:
        raise RuntimeError("no text form")


@tool(safe_to_retry=True)
async def returns_unencodable(args: Nothing, ctx: ToolContext) -> object:
    RUNS.append("unencodable")
    return {"value": Unencodable()}


@tool(safe_to_retry=True)
async def exits(args: Nothing, ctx: ToolContext) -> dict:
    RUNS.append("exits")
    sys.exit(3)


@tool(safe_to_retry=True)
async def lists_odd_names(args: Nothing, ctx: ToolContext) -> dict:
    RUNS.append("surrogate")
    return {"files": ["caf\udce9.txt"]}  # what os.listdir returns for a latin-1 name


@tool
async def prints_odd_name(args: Nothing, ctx: ToolContext) -> str:
    RUNS.append("surrogate text")
    return "caf\udce9.txt"  # returned as the result text itself


@tool(timeout=1.0)
async def too_slow(args: Nothing, ctx: ToolContext) -> dict:
    RUNS.append("slow")
    await asyncio.sleep(30)
    return {}


def _one_call(name: str) -> list[ScriptedTurn]:
    return [ScriptedTurn(tool_calls=[ScriptedToolCall(name=name)]), ScriptedTurn(text="Handled.")]


for _name in ("returns_unencodable", "exits", "lists_odd_names", "prints_odd_name", "too_slow"):
    register_script(f"call-{_name}", _one_call(_name))

AGENTS = {
    name: Agent(name=f"a-{name}", model=f"scripted:call-{name}", tools=[t])
    for name, t in {
        "returns_unencodable": returns_unencodable,
        "exits": exits,
        "lists_odd_names": lists_odd_names,
        "prints_odd_name": prints_odd_name,
        "too_slow": too_slow,
    }.items()
}


async def _run_one(run_worker, name: str):
    RUNS.clear()
    sid = session_id()
    async with run_worker([AGENTS[name]]) as client:
        result = await asyncio.wait_for(client.send(f"a-{name}", "Go", session_id=sid), 60)
    [tool_result] = [m for m in result.messages if m.role == "tool"]
    return result, tool_result


async def test_an_unencodable_result_is_the_calls_error_not_a_retry(run_worker):
    result, tool_result = await _run_one(run_worker, "returns_unencodable")
    assert result.finish_reason == FinishReason.STOP and RUNS == ["unencodable"]
    assert tool_result.is_error and "cannot be encoded as JSON" in json.loads(tool_result.content)["error"]


async def test_a_tool_calling_sys_exit_is_its_error_not_a_retry(run_worker):
    result, tool_result = await _run_one(run_worker, "exits")
    assert result.finish_reason == FinishReason.STOP and RUNS == ["exits"]
    assert tool_result.is_error and "SystemExit" in json.loads(tool_result.content)["error"]


async def test_a_result_with_a_lone_surrogate_is_repaired_and_recorded_once(run_worker):
    result, tool_result = await _run_one(run_worker, "lists_odd_names")
    assert result.finish_reason == FinishReason.STOP and RUNS == ["surrogate"]
    assert json.loads(tool_result.content) == {"files": ["caf\ufffd.txt"]}


async def test_a_text_result_with_a_lone_surrogate_is_recorded_once_not_retried_as_an_outage(run_worker):
    result, tool_result = await _run_one(run_worker, "prints_odd_name")
    assert result.finish_reason == FinishReason.STOP and RUNS == ["surrogate text"]
    assert tool_result.content == "caf\ufffd.txt" and not tool_result.is_error


async def test_a_tool_that_times_out_gets_a_timeout_result_not_cancelled(run_worker):
    result, tool_result = await _run_one(run_worker, "too_slow")
    assert result.finish_reason == FinishReason.STOP and RUNS == ["slow"]
    body = json.loads(tool_result.content)
    assert body["kind"] == "tool-timeout" and "within 1 s" in body["error"] and body["error"] != "cancelled"


async def test_a_model_reply_with_a_lone_surrogate_is_stored_once(run_worker, monkeypatch):
    with FakeLLMServer() as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.anthropic_base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
        server.anthropic.reply_text("bad \udce9 text")  # JSON carries it as an escaped lone surrogate
        agent = Agent(name="surrogate-model", model="anthropic:m")
        async with run_worker([agent]) as client:
            result = await asyncio.wait_for(client.send("surrogate-model", "Hi", session_id=session_id()), 60)
        assert len(server.requests) == 1  # one paid call
    assert result.text == "bad \ufffd text"


async def test_anthropic_tool_use_with_non_object_input_is_a_validation_error(run_worker, monkeypatch):
    with FakeLLMServer() as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.anthropic_base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
        server.anthropic.reply_tool_calls([("returns_unencodable", [1, 2], "toolu_x")])
        server.anthropic.reply_text("I will fix my arguments.")
        agent = Agent(name="list-input", model="anthropic:m", tools=[returns_unencodable])
        async with run_worker([agent]) as client:
            result = await asyncio.wait_for(client.send("list-input", "Go", session_id=session_id()), 60)
        second = server.requests[1]["body"]
    assert result.finish_reason == FinishReason.STOP
    [tool_result] = [m for m in result.messages if m.role == "tool"]
    assert tool_result.is_error and "not a valid JSON object" in tool_result.content
    tool_use = [
        b
        for m in second["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_use"
    ]
    assert isinstance(tool_use[0]["input"], dict)  # the replayed transcript stays valid for the API


@tool
async def raises(args: Nothing, ctx: ToolContext) -> dict:
    RUNS.append("raises")
    raise ValueError("no such table")


register_script("call-raises", _one_call("raises"))
AGENTS["raises"] = Agent(name="a-raises", model="scripted:call-raises", tools=[raises])


async def test_a_tool_exception_is_logged_at_warning_with_its_traceback(run_worker, caplog):
    caplog.set_level("WARNING")
    _, tool_result = await _run_one(run_worker, "raises")
    assert json.loads(tool_result.content) == {"error": "ValueError: no such table"} and RUNS == ["raises"]
    [record] = [r for r in caplog.records if "raises" in r.getMessage() and r.levelname == "WARNING"]
    assert record.exc_info is not None and record.exc_info[0] is ValueError
