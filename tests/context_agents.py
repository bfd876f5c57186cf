"""Agents for the context-policy tests (imported by crash-test worker subprocesses too).

``ctx-steps`` is a scripted model that works one tool call at a time and counts
from the last tool result it is sent (so it works on a cut transcript), until the
run's first user message (``steps=N``, always sent) says it is done. The
summariser ``ctx-summarizer`` answers with a summary naming the messages it read.
"""

from __future__ import annotations

import json

from pydantic import BaseModel

from durable_agents import (
    Agent,
    ScriptedToolCall,
    ScriptedTurn,
    SummarizeOlder,
    ToolContext,
    register_script,
    tool,
)
from durable_agents.checkpoint.format import Message, Role
from durable_agents.testing import side_effect_tool

HEARTBEAT = 2.0
PAD = "p" * 200


class Step(BaseModel):
    n: int


@tool(safe_to_retry=True, heartbeat_timeout=HEARTBEAT, timeout=60)
async def step_tool(args: Step, ctx: ToolContext) -> dict:
    """One step of work: returns its number (and some padding)."""
    return await side_effect_tool("step_tool", ctx, safe=True, n=args.n, pad=PAD)


def steps_wanted(messages: list[Message]) -> int:
    first = next(m for m in messages if m.role == Role.USER)
    return int((first.content or "steps=0").split("=")[1])


def counting_script(messages: list[Message]) -> ScriptedTurn:
    last = messages[-1]
    n = json.loads(last.content or "{}")["n"] + 1 if last.role == Role.TOOL else 0
    if n >= steps_wanted(messages):
        return ScriptedTurn(text=f"done after {n}")
    return ScriptedTurn(text=f"step {n}", tool_calls=[ScriptedToolCall(name="step_tool", arguments={"n": n})])


def summarizer(messages: list[Message]) -> ScriptedTurn:
    text = messages[-1].content or ""
    results = text.count("[tool result")
    return ScriptedTurn(text=f"SUMMARY of {results} tool results")


register_script("ctx-steps", counting_script)
register_script("ctx-summarizer", summarizer)

summarizing_agent = Agent(
    name="ctx-summarizing",
    model="scripted:ctx-steps",
    instructions="You work in steps.",
    tools=[step_tool],
    max_steps=100,
    model_heartbeat_timeout=HEARTBEAT,
    model_timeout=30,
    context=SummarizeOlder(max_turns=4, keep_turns=2, model="scripted:ctx-summarizer"),
)

ALL = [summarizing_agent]
