"""Record the history of a run that waited for its budget (``tests/histories/budget_wait_v6.json``).

    .venv/bin/python -m tests.budgets.record_history

One session, three model calls, a budget of one call per 20 s: its second call hands its
wait back (``BudgetWait``: no slack yet), the run waits on a timer (patch
``model-turn-waits-for-budget``) and schedules the turn again; its third call waits in its
activity (the run's turns have slack now) and signals the run (``budget_wait``). Re-record
only on purpose.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import uuid
from pathlib import Path

from temporalio.client import Client

from durable_agents import AgentClient, build_worker
from durable_agents.checkpoint import SqliteStore
from durable_agents.client.connection import data_converter
from durable_agents.devserver import DevServer
from durable_agents.providers.budgets import Budget
from tests.budgets.agents import BUDGETED
from tests.fakes.rate_limited import RateLimitedServer

OUT = Path(__file__).resolve().parents[1] / "histories" / "budget_wait_v6.json"


async def main() -> None:
    with RateLimitedServer(requests_per_window=100, tool_turns=2) as fake, tempfile.TemporaryDirectory() as tmp:
        os.environ["ANTHROPIC_BASE_URL"] = fake.anthropic_base_url
        os.environ["ANTHROPIC_API_KEY"] = "record"
        with DevServer(ui=False, db_file=None) as server:
            client = await Client.connect(server.address, data_converter=data_converter())
            store = SqliteStore(Path(tmp) / "store.db")
            queue = f"record-{uuid.uuid4().hex[:6]}"
            budget = Budget("anthropic:claude-fake", requests_per_minute=1, window_seconds=20)
            async with build_worker(client, agents=[BUDGETED], store=store, task_queue=queue, budgets=[budget]):
                agents = AgentClient(client, store, queue)
                await agents.send("budgeted", "second", session_id="budget-wait")
            history = await client.get_workflow_handle("budget-wait").fetch_history()
            OUT.write_text(history.to_json())
            kinds = {e.event_type for e in history.events}
            print(f"wrote {OUT} ({len(history.events)} events, {len(kinds)} kinds)")


if __name__ == "__main__":
    asyncio.run(main())
