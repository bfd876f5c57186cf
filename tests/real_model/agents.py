"""Agents on the real model (``openai:`` through the llama server), also imported by
worker subprocesses (``tests.real_model.agents:CRASH``).

The model is a base model: its text means nothing, so the tests check what went
over the wire. Tool calls are forced with ``tool_choice`` (the server then fills
the arguments under a grammar made from the tool's schema), and the argument is
an enum, so a call's arguments are short and always valid.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from durable_agents import Agent, ToolContext, tool
from durable_agents.checkpoint.format import ModelSettings
from durable_agents.testing import side_effect_tool

MODEL = "openai:gemma3-270m"
"""The llama server serves its one model whatever the name; this one is what runs record."""
DETERMINISTIC = ModelSettings(temperature=0.0, seed=7)
HEARTBEAT = 2.0


class CityArgs(BaseModel):
    city: Literal["Paris", "Oslo"]


TOOL_DESCRIPTION = "Look up a city."
"""Both tools show the model the same name, description and schema, so every forced
tool prompt of the session starts alike and the server reuses its evaluation."""


@tool(safe_to_retry=True, name="lookup_city", description=TOOL_DESCRIPTION)
async def lookup_city(args: CityArgs, ctx: ToolContext) -> dict:
    """Returns what this call was given, so the next request shows it."""
    return {"seen_call_id": ctx.tool_call_id, "seen_args": args.model_dump()}


@tool(safe_to_retry=True, name="lookup_city", description=TOOL_DESCRIPTION, heartbeat_timeout=HEARTBEAT, timeout=60)
async def slow_lookup(args: CityArgs, ctx: ToolContext) -> dict:
    """Slow the first time (3 s, to be killed in), fast when run again; logs its runs."""
    seconds = 3.0 if ctx.step == 1 and ctx.attempt == 1 else 0.1
    return await side_effect_tool("lookup_city", ctx, safe=True, seconds=seconds, city=args.city)


def forced_tool_agent(name: str, tool_name: str, tools: list, max_steps: int = 2) -> Agent:
    """Calls ``tool_name`` in every turn (forced), so it ends at ``max_steps``."""
    return Agent(
        name=name,
        model=MODEL,
        instructions="You look up cities with the tools you have.",
        tools=tools,
        max_steps=max_steps,
        max_tokens=48,
        model_settings=DETERMINISTIC.model_copy(update={"tool_choice": tool_name}),
    )


CRASH = [forced_tool_agent("real-crash", "lookup_city", [slow_lookup])]
