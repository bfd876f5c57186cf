"""The durable-agents side of the benches: an instant model and a no-op tool.

Each step is a ~1 KB model turn with one tool call and a ~1 KB tool result,
as in the raw loop (``_raw_loop.py``). The model (``instant:``, a provider of
the bench's own) is O(1) in the transcript: it counts from the last tool
result, so what grows with a session is durable-agents' own work, not the bench's.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pydantic import BaseModel

from durable_agents.agent.agent import Agent
from durable_agents.agent.tools import ToolContext, tool
from durable_agents.checkpoint import Message, Role, ToolCall, Usage
from durable_agents.providers.base import ModelRequest, ModelResponse
from durable_agents.providers.registry import register_provider
from durable_agents.providers.scripted import ScriptedToolCall, ScriptedTurn

PAD = "x" * 1000
LIMIT = {"steps": 30}
"""Tool steps per run (then a last model turn), for every run in this process."""
TICKS: list[float] = []
"""``time.perf_counter()`` at every tool call in this process (long_session.py times blocks of steps by it)."""


class Count(BaseModel):
    n: int


@tool  # at most once, as a side effect would be: every guarantee on
async def noop(args: Count, ctx: ToolContext) -> dict:
    """Returns a ~1 KB result."""
    TICKS.append(time.perf_counter())
    return {"n": args.n, "pad": PAD}


def play(messages: list[Message]) -> ScriptedTurn:
    last = messages[-1]
    # the step's tool result says its n; a tool-durability-error result (an at-most-once call
    # re-run after a live worker was taken for dead) does not: then count the results
    n = 0
    if last.role == "tool":
        said = json.loads(last.content or "{}").get("n")
        # (the count only then: counted at every step, it made the model O(session), 8 → 18 ms/step at 10,000)
        n = (said if said is not None else sum(m.role == "tool" for m in messages) - 1) + 1
    if n >= LIMIT["steps"]:
        return ScriptedTurn(text=f"done after {n}")
    return ScriptedTurn(text=f"step {n} {PAD}", tool_calls=[ScriptedToolCall(name="noop", arguments={"n": n})])


class InstantModel:
    """``instant:`` — :func:`play` as a provider, O(1) in the transcript (the ``scripted:``
    provider estimates token usage over the whole transcript, which a long session would time)."""

    async def generate(self, request: ModelRequest) -> ModelResponse:
        turn = play(request.messages)
        calls = [
            ToolCall(id=f"call_{len(request.messages)}", name=c.name, arguments=c.arguments) for c in turn.tool_calls
        ]
        return ModelResponse(
            message=Message(role=Role.ASSISTANT, content=turn.text, tool_calls=calls or None),
            usage=Usage(input_tokens=1, output_tokens=1, requests=1),
            stop_reason="tool_use" if calls else "end_turn",
        )


register_provider("instant", InstantModel)


def bench_agent(mode: str) -> Agent:
    """The bench's agent with ``Agent(activities=mode)``."""
    return Agent(name=f"bench-{mode}", model="instant:bench", tools=[noop], max_steps=1_000_000, activities=mode)
