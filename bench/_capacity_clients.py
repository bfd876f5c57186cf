"""The clients of ``capacity.py --client-process``: its sessions sent from a process of their
own, as an application's web server sends them, not from the worker's process.

Reads one JSON line per batch on stdin (``{"mode": …, "ids": […], "steps": …, "modelSeconds": …}``),
sends the batch (``AgentClient.send`` for our modes, ``execute_workflow`` of the raw loop for
``raw-*``) and writes one JSON line back: the model turns the runs took and the process's CPU
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

from _raw_loop import RawAgentLoop, RawRun
from temporalio.client import Client

from durable_agents.checkpoint import SqliteStore
from durable_agents.client.client import AgentClient
from durable_agents.client.connection import data_converter


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


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
                steps=batch["steps"] - 1, local=batch["mode"] == "raw-local", model_seconds=batch["modelSeconds"]
            )
            turns = await asyncio.gather(
                *(client.execute_workflow(RawAgentLoop.run, run, id=i, task_queue=f"{queue}-raw") for i in batch["ids"])
            )
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
