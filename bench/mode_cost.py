"""What each activity mode asks of Temporal per step as the model's latency grows.

One session per mode and latency on the embedded server: --steps model turns that each
call the bench's tool, then a last turn, with a model that answers after N seconds
(``wait:N``). Prints, per model turn, the run's workflow tasks, activity tasks and
history events (what the server stores and dispatches), and the wall time beyond the
model's. Local activities save an activity task's round trip per step, but a local step
longer than 80 % of the workflow task timeout keeps its task alive by completing it and
taking a new one (three more events), once per such span: with seconds-long model calls
and a short task timeout that costs more than the regular activity it saved.

    .venv/bin/python bench/mode_cost.py [--latencies 0,1,3,10] [--steps 2]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
import uuid
from collections import Counter
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _agents import LIMIT, InstantModel, noop
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from durable_agents.agent.agent import Agent
from durable_agents.checkpoint import SqliteStore
from durable_agents.client.client import AgentClient
from durable_agents.client.connection import data_converter
from durable_agents.devserver import DevServer
from durable_agents.providers.base import ModelRequest, ModelResponse
from durable_agents.providers.registry import register_provider
from durable_agents.worker import build_worker

MODES = (("regular", None), ("auto", 10.0), ("auto", 4.0))
"""(activity mode, the client's workflow task timeout in seconds; None: Temporal's 10 s)."""


class WaitModel(InstantModel):
    """``wait:N`` — the bench's instant model after N seconds (a provider's latency)."""

    async def generate(self, request: ModelRequest) -> ModelResponse:
        await asyncio.sleep(float(request.model))
        return await super().generate(request)


register_provider("wait", WaitModel)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latencies", default="0,1,3,10", help="model latencies in seconds")
    parser.add_argument("--steps", type=int, default=2, help="tool steps per run (then a last turn)")
    opts = parser.parse_args()
    LIMIT["steps"] = opts.steps
    latencies = [float(x) for x in opts.latencies.split(",")]
    agents = [
        Agent(name=f"{mode}-{latency:g}", model=f"wait:{latency:g}", tools=[noop], activities=mode)
        for latency in latencies
        for mode in {m for m, _ in MODES}
    ]
    rows = []
    with tempfile.TemporaryDirectory() as tmp, DevServer(ui=False, db_file=None) as server:
        client = await Client.connect(server.address, data_converter=data_converter())
        store = SqliteStore(Path(tmp) / "store.db")
        async with build_worker(client, agents=agents, store=store, task_queue="mode-cost"):
            for latency in latencies:
                for mode, task_timeout in MODES:
                    timeout = {"workflow_task_timeout": timedelta(seconds=task_timeout)} if task_timeout else {}
                    agent_client = AgentClient(client, store, "mode-cost", **timeout)
                    session = f"cost-{uuid.uuid4().hex[:8]}"
                    started = time.perf_counter()
                    result = await agent_client.send(f"{mode}-{latency:g}", "go", session_id=session)
                    wall = time.perf_counter() - started
                    history = await client.get_workflow_handle(session).fetch_history()
                    kinds = Counter(e.event_type for e in history.events)
                    turns = result.steps
                    rows.append(
                        (
                            latency,
                            f"{mode} ({task_timeout or 10:g} s task timeout)",
                            kinds[EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED] / turns,
                            kinds[EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED] / turns,
                            len(history.events) / turns,
                            1000 * (wall - turns * latency) / turns,
                        )
                    )
                    print(f"{latency:g} s model, {rows[-1][1]}: done", flush=True)
        store.close()
    print(f"\nper model turn ({opts.steps + 1} turns a run, {opts.steps} tool calls between them)")
    print(
        f"{'model':>6}  {'mode':28} {'workflow tasks':>14} {'activity tasks':>14} {'events':>7} {'ms beyond model':>15}"
    )
    for latency, mode, tasks, activities, events, extra in rows:
        print(f"{latency:5g}s  {mode:28} {tasks:14.1f} {activities:14.1f} {events:7.1f} {extra:15.0f}")


if __name__ == "__main__":
    asyncio.run(main())
