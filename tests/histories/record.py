"""Record workflow histories for the replay tests.

    .venv/bin/python -m tests.histories.record

Re-record only on purpose: a replay failure after a change to ``workflows/``
means in-flight runs would break on deploy; guard the change with
``workflow.patched()`` instead, and add a new history next to the old ones.
"""

from __future__ import annotations

import asyncio
import tempfile
import uuid
from pathlib import Path

from temporalio.client import Client

from checkpoint import SqliteStore
from durable_agents import AgentClient, build_worker
from durable_agents.connection import data_converter
from durable_agents.devserver import DevServer
from tests import agents

HERE = Path(__file__).parent
RUNS = {
    "weather_then_book_v1": (agents.weather_agent, "Book a table for 2 tonight"),
    "bad_calls_v1": (agents.bad_agent, "go"),
    "max_steps_v1": (agents.looping_agent, "loop"),
}


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp, DevServer(ui=False, db_file=None) as server:
        client = await Client.connect(server.address, data_converter=data_converter())
        store = SqliteStore(Path(tmp) / "store.db")
        queue = f"record-{uuid.uuid4().hex[:6]}"
        all_agents = [agent for agent, _ in RUNS.values()]
        async with build_worker(client, agents=all_agents, store=store, task_queue=queue):
            agent_client = AgentClient(client, store, queue)
            for name, (agent, text) in RUNS.items():
                await agent_client.send(agent.name, text, session_id=name)
                history = await client.get_workflow_handle(name).fetch_history()
                (HERE / f"{name}.json").write_text(history.to_json())
                print(f"recorded {name}: {len(history.events)} events")


if __name__ == "__main__":
    asyncio.run(main())
