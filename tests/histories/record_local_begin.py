"""Record the history of a run begun locally (``tests/histories/local_begin_v9.json``).

    .venv/bin/python -m tests.histories.record_local_begin

A local agent's second run from one client: the client has seen the first step locally, so it
starts the second with ``beginLocally`` and the run begins with a local ``begin_run`` (patch
``begin-run-locally``), its first model turn in the same workflow task. Re-record only on purpose.
"""

from __future__ import annotations

import asyncio
import dataclasses
import tempfile
import uuid
from pathlib import Path

from temporalio.client import Client

from durable_agents import AgentClient, build_worker
from durable_agents.checkpoint import SqliteStore
from durable_agents.client.connection import data_converter
from durable_agents.devserver import DevServer
from tests import agents

OUT = Path(__file__).resolve().parent / "local_begin_v9.json"
LOCAL = dataclasses.replace(agents.weather_agent, name="weather-local", activities="local")


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp, DevServer(ui=False, db_file=None) as server:
        client = await Client.connect(server.address, data_converter=data_converter())
        store = SqliteStore(Path(tmp) / "store.db")
        queue = f"record-{uuid.uuid4().hex[:6]}"
        async with build_worker(client, agents=[LOCAL], store=store, task_queue=queue):
            agent_client = AgentClient(client, store, queue)
            await agent_client.send(LOCAL.name, "Book a table for 2 tonight", session_id="local_begin_first")
            await agent_client.send(LOCAL.name, "Book a table for 2 tonight", session_id="local_begin_v9")
        history = await client.get_workflow_handle("local_begin_v9").fetch_history()
        OUT.write_text(history.to_json())
        print(f"wrote {OUT} ({len(history.events)} events)")


if __name__ == "__main__":
    asyncio.run(main())
