"""Agents for the worker-log test (importable by the worker process): a scripted agent whose
second model call waits for a one-request budget, and one whose tool fails its run."""

from __future__ import annotations

from pydantic import BaseModel

from durable_agents import (
    Agent,
    PropagatingToolError,
    ScriptedToolCall,
    ScriptedTurn,
    ToolContext,
    register_script,
    tool,
)
from durable_agents.providers.budgets import Budget


class StepArgs(BaseModel):
    n: int = 0


@tool(safe_to_retry=True)
async def step(args: StepArgs, ctx: ToolContext) -> dict:
    """A step of work."""
    return {"done": args.n}


@tool(safe_to_retry=True)
async def charge(args: StepArgs, ctx: ToolContext) -> dict:
    """A payment provider that is down."""
    raise PropagatingToolError("the payment provider is down (a real failure)")


register_script(
    "log-step-then-answer",
    [ScriptedTurn(text="A step first.", tool_calls=[ScriptedToolCall(name="step")]), ScriptedTurn(text="Done.")],
)
register_script("log-charge", [ScriptedTurn(text="Charging.", tool_calls=[ScriptedToolCall(name="charge")])])

AGENTS = [
    Agent(name="log-waiter", model="scripted:log-step-then-answer", tools=[step]),
    Agent(name="log-charger", model="scripted:log-charge", tools=[charge]),
]
BUDGETS = [Budget("scripted:log-step-then-answer", requests_per_minute=1, window_seconds=4.0)]
