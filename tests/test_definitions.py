"""Agent and tool definitions fail at construction with a message saying what to fix."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from durable_agents import Agent, ConfigurationError, ToolContext, build_worker, tool
from durable_agents.checkpoint import MemoryStore
from tests.agents import get_weather


class Q(BaseModel):
    q: str


def test_two_tools_of_one_name_are_refused():
    @tool(name="get_weather")
    async def other(args: Q, ctx: ToolContext) -> str:
        return args.q

    with pytest.raises(ConfigurationError, match="two tools named 'get_weather'.*@tool\\(name=...\\)"):
        Agent(name="a", model="scripted:x", tools=[get_weather, other])


@pytest.mark.parametrize("model", ["gpt-4.1", "mistral:large", "anthropic:", ""])
def test_a_model_string_without_a_known_provider_is_refused(model):
    with pytest.raises(
        ConfigurationError,
        match="no known provider.*'anthropic:claude-sonnet-4-6'.*known providers: anthropic, openai, openai-responses, scripted",
    ):
        Agent(name="a", model=model)


def test_tool_signature_is_checked():
    with pytest.raises(ConfigurationError, match="must be an `async def`"):

        @tool
        def sync_tool(args: Q, ctx: ToolContext) -> str:  # pragma: no cover
            return ""

    with pytest.raises(ConfigurationError, match="pydantic model"):

        @tool
        async def untyped(args, ctx):  # pragma: no cover
            return ""


def test_tool_schema_comes_from_its_input_model():
    spec = get_weather.spec()
    assert spec.input_schema["properties"] == {"city": {"title": "City", "type": "string"}}
    assert spec.safe_to_retry and not spec.needs_approval
    assert spec.description == "Today's weather in a city."


built_schemas: list[type] = []


class Booking(BaseModel):
    room: str

    @classmethod
    def model_json_schema(cls, *args, **kwargs):
        built_schemas.append(cls)
        return super().model_json_schema(*args, **kwargs)


def test_a_runs_definition_builds_each_tools_schema_once():
    # every run's begin_run records the agent's definition (run_config) and its
    # fingerprint: pydantic builds a JSON schema afresh at each call (≈ 0.2 ms a tool)
    built_schemas.clear()

    @tool
    async def book(args: Booking, ctx: ToolContext) -> str:  # pragma: no cover
        return args.room

    agent = Agent(name="booker", model="scripted:booker", tools=[book])
    first, fingerprint = agent.run_config(), agent.fingerprint()
    first.tools[0].input_schema["properties"]["room"]["type"] = "integer"  # a caller's own copy
    for _ in range(3):
        assert agent.run_config().tools[0].input_schema["properties"]["room"] == {"title": "Room", "type": "string"}
        assert agent.fingerprint() == fingerprint
    assert built_schemas == [Booking]


async def test_a_worker_refuses_the_memory_store_unless_allowed(env):
    with pytest.raises(ConfigurationError, match="allow_memory_store=True"):
        build_worker(env.client, agents=[], store=MemoryStore())
    build_worker(env.client, agents=[], store=MemoryStore(), allow_memory_store=True)


def test_public_api_is_complete():
    import durable_agents

    for name in durable_agents.__all__:
        assert getattr(durable_agents, name) is not None
    for name in ("Agent", "tool", "ToolContext", "AgentClient", "build_worker", "SessionBusyError"):
        assert name in durable_agents.__all__
