"""The agent tests/test_tracing.py traces (importable by a `durable-agents worker` subprocess).

``traced``: turn 1 asks for ``look_up`` (safe to retry), turn 2 for ``charge`` (needs
approval), turn 3 answers. With ``HANG_DIR_ENV`` set, the first invocation of ``look_up``
writes ``<dir>/<session>.started`` and hangs (the test kills that worker there).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from pydantic import BaseModel

from durable_agents import Agent, ScriptedToolCall, ScriptedTurn, ToolContext, register_script, tool
from durable_agents.checkpoint import Message, Role

HANG_DIR_ENV = "TRACING_TEST_HANG_DIR"
SECRET = "SECRET-PROMPT-TEXT"
"""Text of the prompt, arguments and results: no span attribute may carry it."""


class CityArgs(BaseModel):
    city: str


class ChargeArgs(BaseModel):
    amount: int
    memo: str


@tool(safe_to_retry=True, heartbeat_timeout=1.0, timeout=600)
async def look_up(args: CityArgs, ctx: ToolContext) -> dict:
    hang_dir = os.environ.get(HANG_DIR_ENV)
    if hang_dir and ctx.attempt == 1:
        (Path(hang_dir) / f"{ctx.session_id}.started").write_text("started")
        await asyncio.sleep(3600)  # killed here
    return {"city": args.city, "sky": f"clear over {SECRET}"}


@tool(needs_approval=True, heartbeat_timeout=2.0, timeout=60)
async def charge(args: ChargeArgs, ctx: ToolContext) -> dict:
    return {"charged": args.amount, "memo": args.memo}


def traced_turn(messages: list[Message]) -> ScriptedTurn:
    results = [m for m in messages if m.role == Role.TOOL]
    if not results:
        return ScriptedTurn(
            text=f"Looking up {SECRET}.", tool_calls=[ScriptedToolCall(name="look_up", arguments={"city": SECRET})]
        )
    if len(results) == 1:
        return ScriptedTurn(
            text="Charging.", tool_calls=[ScriptedToolCall(name="charge", arguments={"amount": 5, "memo": SECRET})]
        )
    return ScriptedTurn(text=f"Done with {SECRET}.")


register_script("traced", traced_turn)

traced = Agent(
    name="traced",
    model="scripted:traced",
    instructions=f"Tracing test agent; {SECRET}.",
    tools=[look_up, charge],
    model_heartbeat_timeout=2.0,
    model_timeout=30,
)
