"""An agent that delegates: a planner calls a researcher and a writer, each a sub-agent.

Run it: ``.venv/bin/python examples/subagents/main.py`` (offline: the embedded Temporal
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
    ScriptedToolCall,
    ScriptedTurn,
    ToolContext,
    build_worker,
    register_script,
    tool,
)
from durable_agents.checkpoint import SqliteStore
from durable_agents.devserver import DevServer


class Topic(BaseModel):
    topic: str


@tool(safe_to_retry=True)
async def search_notes(args: Topic, ctx: ToolContext) -> dict:
    """Look a topic up in the team's notes."""
    return {"topic": args.topic, "notes": ["ships durably", "waits days for approvals"]}


def researcher_script(messages):
    if messages[-1].role == "user":
        return ScriptedTurn(tool_calls=[ScriptedToolCall(name="search_notes", arguments={"topic": "release"})])
    return ScriptedTurn(text="it " + " and ".join(json.loads(messages[-1].content)["notes"]))


def writer_script(messages):
    return ScriptedTurn(text=f"New this release: {messages[-1].content}.")


def planner_script(messages):
    last = messages[-1]
    if last.role == "user":
        return ScriptedTurn(tool_calls=[ScriptedToolCall(name="researcher", arguments={"task": "What is new?"})])
    answer = json.loads(last.content)  # a sub-agent's result: its answer and its session
    if last.tool_name == "researcher":
        return ScriptedTurn(tool_calls=[ScriptedToolCall(name="writer", arguments={"task": answer["result"]})])
    return ScriptedTurn(text=answer["result"])


register_script("researcher", researcher_script)
register_script("writer", writer_script)
register_script("planner", planner_script)
researcher = Agent(name="researcher", model="scripted:researcher", instructions="Find facts.", tools=[search_notes])
writer = Agent(name="writer", model="scripted:writer", instructions="Write it up.")
planner = Agent(
    name="planner",
    model="scripted:planner",
    instructions="Research, then have it written.",
    subagents=[researcher, writer.as_tool(description="Turn findings into an announcement.")],
)


async def main() -> None:
    folder = Path(tempfile.mkdtemp(prefix="subagents-"))
    server = await DevServer(ui=False, db_file=None).start_async()
    try:
        store = SqliteStore(folder / "store.db")
        client = await AgentClient.connect(server.address, store=store)
        async with build_worker(client.temporal, agents=[planner], store=store):  # its sub-agents come along
            result = await client.send("planner", "Announce the release", session_id="launch-1")
            print(result.finish_reason, result.text)
            for summary in store.list_sessions():  # the planner's session and one per sub-agent call
                header = store.load_header(summary.session_id)
                print("session", header.session_id, "of", header.agent, "under", header.parent_session_id)
    finally:
        server.stop()


if __name__ == "__main__":
    asyncio.run(main())
