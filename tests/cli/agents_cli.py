"""Agents only the CLI tests use (importable by worker subprocesses)."""

from __future__ import annotations

import asyncio

from pydantic import BaseModel

from durable_agents import Agent, ScriptedToolCall, ScriptedTurn, ToolContext, register_script, tool


class NapArgs(BaseModel):
    seconds: float


@tool(safe_to_retry=True)
async def nap(args: NapArgs, ctx: ToolContext) -> dict:
    """Sleeps a little, so a waiting CLI has progress to show."""
    await asyncio.sleep(args.seconds)
    return {"napped": args.seconds}


register_script(
    "cli-nap-then-answer",
    [
        ScriptedTurn(text="Napping first.", tool_calls=[ScriptedToolCall(name="nap", arguments={"seconds": 1.5})]),
        ScriptedTurn(text="Rested."),
    ],
)

napper_agent = Agent(name="napper", model="scripted:cli-nap-then-answer", tools=[nap])

register_script(
    "cli-long-nap",
    [
        ScriptedTurn(text="A long nap first.", tool_calls=[ScriptedToolCall(name="nap", arguments={"seconds": 6})]),
        ScriptedTurn(text="Rested at last."),
    ],
)

dozer_agent = Agent(name="dozer", model="scripted:cli-long-nap", tools=[nap])

register_script("cli-hello", [ScriptedTurn(text="Hello.")])

greeter_agent = Agent(name="greeter", model="scripted:cli-hello")


# rate-limit budgets for `durable-agents worker --budgets` (tests/cli/test_budgets_cli.py)
from durable_agents.providers.budgets import Budget, FairShare  # noqa: E402

BUDGETS = [Budget("scripted:*", requests_per_minute=600), Budget("openai:gpt-4o", tokens_per_minute=30_000)]
BY_SESSION = FairShare(key="session")
NOT_A_BUDGET = "600 a minute"
