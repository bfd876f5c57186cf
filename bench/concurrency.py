"""Steps per second across concurrent sessions on one in-process worker.

    .venv/bin/python bench/concurrency.py [--sessions 20] [--steps 30] [--local]

Each step is a scripted model turn plus one no-op tool call, so the figure
is orchestration throughput (Temporal + store + activities), not model time.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from temporalio.client import Client  # noqa: E402

from checkpoint import SqliteStore  # noqa: E402
from durable_agents import Agent, AgentClient, build_worker, register_script  # noqa: E402
from durable_agents.connection import data_converter  # noqa: E402
from durable_agents.devserver import DevServer  # noqa: E402
from step_overhead import noop, script_for  # noqa: E402


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--local", action="store_true")
    opts = parser.parse_args()
    register_script("bench", script_for(opts.steps))
    agent = Agent(name="bench", model="scripted:bench", tools=[noop], max_steps=opts.steps + 1,
                  local_activities=opts.local)
    with tempfile.TemporaryDirectory() as tmp, DevServer(ui=False, db_file=None) as server:
        client = await Client.connect(server.address, data_converter=data_converter())
        store = SqliteStore(Path(tmp) / "store.db")
        queue = f"bench-{uuid.uuid4().hex[:6]}"
        async with build_worker(client, agents=[agent], store=store, task_queue=queue):
            agents = AgentClient(client, store, queue)
            await agents.send("bench", "warm up", session_id=f"warm-{uuid.uuid4().hex[:6]}")
            started = time.perf_counter()
            results = await asyncio.gather(*(
                agents.send("bench", "go", session_id=f"c-{uuid.uuid4().hex[:8]}")
                for _ in range(opts.sessions)))
            elapsed = time.perf_counter() - started
    steps = sum(r.steps for r in results)
    print(f"{opts.sessions} concurrent sessions × {opts.steps} steps "
          f"({'local' if opts.local else 'regular'} activities): {steps} steps in {elapsed:.1f}s "
          f"= {steps / elapsed:.0f} steps/s")


if __name__ == "__main__":
    asyncio.run(main())
