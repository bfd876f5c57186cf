"""What if the forecast had been rain? Fork a finished session at a step with a patched tool
result, resume the fork on Temporal, and compare the two runs.

Run it: ``.venv/bin/python examples/fork_and_diff/main.py`` (offline: the embedded Temporal
dev server and the ``scripted:`` model).
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path

from pydantic import BaseModel

from durable_agents import (
    Agent,
    AgentClient,
    Patch,
    ScriptedToolCall,
    ScriptedTurn,
    ToolContext,
    build_worker,
    register_script,
    tool,
)
from durable_agents.checkpoint import SqliteStore
from durable_agents.checkpoint.compare import compare_trajectories
from durable_agents.checkpoint.fork import ToolResultPatch
from durable_agents.devserver import DevServer


class City(BaseModel):
    city: str


@tool(safe_to_retry=True)
async def get_weather(args: City, ctx: ToolContext) -> dict:
    """Tonight's forecast for a city."""
    return {"city": args.city, "forecast": "clear"}


@tool
async def book_terrace(args: City, ctx: ToolContext) -> dict:
    """Book a table outside."""
    return {"booked": "terrace", "city": args.city}


@tool
async def book_inside(args: City, ctx: ToolContext) -> dict:
    """Book a table inside."""
    return {"booked": "inside", "city": args.city}


def planner_script(messages):
    """The model follows the forecast: a terrace when it is clear, inside when it rains."""
    last = messages[-1]
    if last.role == "user":
        return ScriptedTurn(tool_calls=[ScriptedToolCall(name="get_weather", arguments={"city": "Rome"})])
    if last.tool_name == "get_weather":
        where = "book_inside" if "rain" in last.content else "book_terrace"
        return ScriptedTurn(tool_calls=[ScriptedToolCall(name=where, arguments={"city": "Rome"})])
    return ScriptedTurn(text=f"Booked: {json.loads(last.content)['booked']}")


register_script("planner", planner_script)
planner = Agent(
    name="planner",
    model="scripted:planner",
    instructions="Book dinner.",
    tools=[get_weather, book_terrace, book_inside],
)


async def main() -> None:
    folder = Path(tempfile.mkdtemp(prefix="fork-"))
    server = await DevServer(ui=False, db_file=None).start_async()
    try:
        store = SqliteStore(folder / "store.db")
        client = await AgentClient.connect(server.address, store=store)
        async with build_worker(client.temporal, agents=[planner], store=store):
            first = await client.send("planner", "Dinner in Rome tonight", session_id="dinner")
            print("dinner:", first.text)

            weather = next(m for m in first.messages if m.tool_name == "get_weather")  # the recorded result
            rain = ToolResultPatch(tool_call_id=weather.tool_call_id, result={"city": "Rome", "forecast": "rain"})
            forked = await client.fork("dinner", from_step=1, patch=Patch(tool_result=rain))
            second = await client.resume(forked.session_id)
            print(f"{forked.session_id}:", second.text)

            diff = compare_trajectories(store.load("dinner"), store.load(forked.session_id))
            print("diverged at step", diff.diverged_at)
            for a, b in zip(diff.a, diff.b, strict=False):
                print(" ", [c.name for c in a.tool_calls], "|", [c.name for c in b.tool_calls])
    finally:
        server.stop()


if __name__ == "__main__":
    asyncio.run(main())
