"""Agents that run against the rate-limited fake (importable by worker subprocesses too)."""

from __future__ import annotations

from pydantic import BaseModel

from durable_agents import Agent, ToolContext, tool


class WorkArgs(BaseModel):
    n: int = 0


@tool(safe_to_retry=True)
async def work(args: WorkArgs, ctx: ToolContext) -> dict:
    """A step of work."""
    return {"done": args.n}


def agent(name: str = "budgeted", model: str = "anthropic:claude-fake", max_tokens: int = 64, **more) -> Agent:
    return Agent(
        name=name,
        model=model,
        instructions="You work in steps. " * 20,
        tools=[work],
        max_steps=10,
        max_tokens=max_tokens,
        **more,
    )


BUDGETED = agent()
OPENAI_BUDGETED = agent("budgeted-openai", "openai:gpt-fake")
