"""The clients of ``capacity.py --client-process``: its sessions sent from a process of their
own, as an application's web server sends them, not from the worker's process.

Reads one JSON line per batch on stdin (``{"mode": …, "ids": […], "steps": …, "modelSeconds": …}``),
sends the batch (``AgentClient.send`` for our modes, ``execute_workflow`` of the raw loop for
``raw-*``; for ``raw-local-start``, the raw local loop started as our client starts a run:
its input written to the store file, then update-with-start) and writes one JSON line back: the model turns the runs took and the process's CPU
seconds so far.

    python bench/_capacity_clients.py ADDRESS STORE_PATH QUEUE
"""

from __future__ import annotations

import asyncio
import json
import resource
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _raw_loop import RawAgentLoop, RawRun, keep_input
from temporalio.client import Client, WithStartWorkflowOperation
from temporalio.common import WorkflowIDConflictPolicy

from durable_agents.checkpoint import SqliteStore
from durable_agents.client.client import AgentClient
from durable_agents.client.connection import data_converter


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def start_plainly(client: Client, run: RawRun, workflow_id: str, queue: str, _store: str) -> int:
    return await client.execute_workflow(RawAgentLoop.run, run, id=workflow_id, task_queue=queue)


async def start_as_ours(client: Client, run: RawRun, workflow_id: str, queue: str, store_path: str) -> int:
    """The raw loop started as ``AgentClient.send`` starts a run: its input written to the store
    file first (in a thread), then one update-with-start that waits for the run's end."""
    await asyncio.to_thread(keep_input, store_path, workflow_id)
    start = WithStartWorkflowOperation(
        RawAgentLoop.run, run, id=workflow_id, task_queue=queue, id_conflict_policy=WorkflowIDConflictPolicy.FAIL
    )
    return await client.execute_update_with_start_workflow(RawAgentLoop.wait_end, start_workflow_operation=start)


async def main() -> None:
    address, store_path, queue = sys.argv[1:4]
    client = await Client.connect(address, data_converter=data_converter())
    store = SqliteStore(store_path)
    agents = AgentClient(client, store, queue)
    loop = asyncio.get_running_loop()
    print(json.dumps({"ready": True}), flush=True)
    while line := await loop.run_in_executor(None, sys.stdin.readline):
        batch = json.loads(line)
        if batch["mode"].startswith("raw-"):
            run = RawRun(
                steps=batch["steps"] - 1,
                local=batch["mode"].startswith("raw-local"),
                model_seconds=batch["modelSeconds"],
            )
            send = start_as_ours if batch["mode"] == "raw-local-start" else start_plainly
            turns = await asyncio.gather(*(send(client, run, i, f"{queue}-raw", store_path) for i in batch["ids"]))
            done = {"steps": sum(turns), "requests": sum(turns)}
        else:
            results = await asyncio.gather(
                *(agents.send(f"cap-{batch['mode']}", "go", session_id=i) for i in batch["ids"])
            )
            done = {"steps": sum(r.steps for r in results), "requests": sum(r.usage.requests for r in results)}
        print(json.dumps({**done, "cpu": cpu_seconds()}), flush=True)
    store.close()


if __name__ == "__main__":
    asyncio.run(main())
