"""What carrying a run's events through Temporal would cost in history, measured with
``temporalio.contrib.workflow_streams`` (signals carry publishes, updates serve
long-polls) on a toy step loop, next to the same loop without a stream (what
durable-agents records: its events go to the store, not through Temporal).

    .venv/bin/python bench/stream_history.py [--steps 30] [--deltas 40]

Per step: one activity (the model call). Variants: no stream; the workflow publishes
4 step-level events (~200 bytes each) with one subscriber reading them; and the
activity also publishes ``--deltas`` text deltas (batched every 50 ms by the
stream's client). Prints history bytes per step and the subscriber's delta latency.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
import warnings
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.contrib.workflow_streams import WorkflowStream, WorkflowStreamClient
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from durable_agents.devserver import DevServer

warnings.filterwarnings("ignore", category=workflow.UnfinishedUpdateHandlersWarning)  # the last poll, at close
EVENT = {"type": "tool-call-finished", "result": "x" * 150}


@activity.defn
async def model_call(deltas: int) -> str:
    if deltas:
        async with WorkflowStreamClient.from_within_activity(batch_interval=timedelta(milliseconds=50)) as stream:
            topic = stream.topic("deltas")
            for i in range(deltas):
                topic.publish({"t": time.time(), "text": f"tok{i:03d} "})
                await asyncio.sleep(0.01)
    return "done"


@workflow.defn
class StepLoop:
    @workflow.init
    def __init__(self, steps: int, mode: str, deltas: int) -> None:
        self.stream = WorkflowStream() if mode != "none" else None

    @workflow.run
    async def run(self, steps: int, mode: str, deltas: int) -> int:
        for step in range(steps):
            await workflow.execute_activity(
                model_call, deltas if mode == "deltas" else 0, start_to_close_timeout=timedelta(seconds=30)
            )
            if self.stream is not None:
                for kind in ("model-turn-started", "turn-stored", "tool-call-started", "tool-call-finished"):
                    self.stream.topic("events").publish({**EVENT, "type": kind, "step": step})
        if self.stream is not None:
            await workflow.sleep(0.5)  # let the subscriber drain before the run closes
        return steps


async def measure(client: Client, queue: str, steps: int, mode: str, deltas: int) -> tuple[float, list[float]]:
    wid = f"loop-{mode}-{uuid.uuid4().hex[:6]}"
    handle = await client.start_workflow(StepLoop.run, args=[steps, mode, deltas], id=wid, task_queue=queue)
    lat: list[float] = []

    async def subscribe() -> None:
        async for item in WorkflowStreamClient.create(client, wid).subscribe(["events", "deltas"]):
            if item.topic == "deltas":
                lat.append(time.time() - item.data["t"])

    reader = asyncio.create_task(subscribe()) if mode != "none" else None
    await handle.result()
    if reader is not None:
        try:
            await asyncio.wait_for(reader, 10)
        except TimeoutError:
            reader.cancel()
    history = await handle.fetch_history()
    return sum(e.ByteSize() for e in history.events) / steps, lat


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--deltas", type=int, default=40)
    opts = parser.parse_args()
    with DevServer(ui=False, db_file=None) as server:
        client = await Client.connect(server.address)
        queue = f"bench-{uuid.uuid4().hex[:6]}"
        async with Worker(
            client,
            task_queue=queue,
            workflows=[StepLoop],
            activities=[model_call],
            workflow_runner=UnsandboxedWorkflowRunner(),
        ):
            base, _ = await measure(client, queue, opts.steps, "none", 0)
            events, _ = await measure(client, queue, opts.steps, "events", 0)
            deltas, lat = await measure(client, queue, opts.steps, "deltas", opts.deltas)
    print(f"toy loop, {opts.steps} steps, one activity each, embedded Temporal")
    print(
        f"history bytes/step: no stream {base:.0f}; step events via workflow_streams {events:.0f} ({events / base:.2f}x)"
    )
    print(f"  + {opts.deltas} text deltas/step via signals {deltas:.0f} ({deltas / base:.2f}x)")
    if lat:
        ms = sorted(x * 1000 for x in lat)
        print(
            f"delta latency to the subscriber: p50 {statistics.median(ms):.0f} ms, p95 {ms[int(len(ms) * 0.95) - 1]:.0f} ms"
        )


if __name__ == "__main__":
    asyncio.run(main())
