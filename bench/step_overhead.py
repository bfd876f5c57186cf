"""Orchestration overhead per agent step (model turn + tool call), and Temporal
history bytes per step, on the embedded dev server with a warm in-process worker.

    .venv/bin/python bench/step_overhead.py [--steps 50] [--runs 5]

The scripted model and the tool do no work, so the time is what durable-agents
and Temporal add: activities, store writes, workflow tasks.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pydantic import BaseModel
from temporalio.client import Client

from durable_agents.agent.agent import Agent
from durable_agents.agent.tools import ToolContext, tool
from durable_agents.checkpoint import Message, SqliteStore
from durable_agents.client.client import AgentClient
from durable_agents.client.connection import data_converter
from durable_agents.devserver import DevServer
from durable_agents.encryption import encryption_from_env
from durable_agents.providers.scripted import ScriptedToolCall, ScriptedTurn, register_script
from durable_agents.worker import build_worker


class Args(BaseModel):
    n: int


@tool(safe_to_retry=True)
async def noop(args: Args, ctx: ToolContext) -> dict:
    return {"n": args.n}


def script_for(steps: int):
    def play(messages: list[Message]) -> ScriptedTurn:
        turns = sum(1 for m in messages if m.role == "assistant")
        if turns >= steps - 1:
            return ScriptedTurn(text="done")
        return ScriptedTurn(text="t", tool_calls=[ScriptedToolCall(name="noop", arguments={"n": turns})])

    return play


@contextlib.asynccontextmanager
async def warm_bench_worker(steps: int, local: bool) -> AsyncIterator[tuple[Client, AgentClient]]:
    """A headless in-memory dev server and a warm in-process worker for the bench agent."""
    register_script("bench", script_for(steps))
    agent = Agent(name="bench", model="scripted:bench", tools=[noop], max_steps=steps + 1, local_activities=local)
    with tempfile.TemporaryDirectory() as tmp, DevServer(ui=False, db_file=None) as server:
        # DURABLE_AGENTS_ENCRYPTION_KEYS set: the same with encrypted payloads
        client = await Client.connect(server.address, data_converter=data_converter(encryption_from_env()))
        store = SqliteStore(Path(tmp) / "store.db")
        queue = f"bench-{uuid.uuid4().hex[:6]}"
        async with build_worker(client, agents=[agent], store=store, task_queue=queue):
            agents = AgentClient(client, store, queue)
            await agents.send("bench", "warm up", session_id=f"warm-{uuid.uuid4().hex[:6]}")
            yield client, agents


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--local", action="store_true", help="Agent(local_activities=True)")
    opts = parser.parse_args()
    async with warm_bench_worker(opts.steps, opts.local) as (client, agents):
        per_step = []
        for _ in range(opts.runs):
            sid = f"bench-{uuid.uuid4().hex[:8]}"
            started = time.perf_counter()
            result = await agents.send("bench", "go", session_id=sid)
            per_step.append((time.perf_counter() - started) * 1000 / result.steps)
        history = await client.get_workflow_handle(sid).fetch_history()
        size = sum(e.ByteSize() for e in history.events)
    print(f"steps per run: {opts.steps}, runs: {opts.runs}, {'local' if opts.local else 'regular'} activities")
    print(
        f"ms per step (model turn + tool call): median {statistics.median(per_step):.1f}, "
        f"min {min(per_step):.1f}, max {max(per_step):.1f}"
    )
    print(f"Temporal history: {len(history.events)} events, {size} bytes, {size / opts.steps:.0f} bytes/step")


if __name__ == "__main__":
    asyncio.run(main())
