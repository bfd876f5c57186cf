"""Replaying recorded sessions against running them fresh, on the same kind of worker.

    .venv/bin/python bench/replay.py [--sessions 200] [--steps 10] [--concurrency 20] [--local]

Records ``--sessions`` sessions of ``--steps`` steps (each step a scripted model turn
with one tool call, the last one the answer) on an in-process worker, timing that as
"fresh"; then replays all of them against the same agent as one batch (``ReplayBatch``
workflow, a replay worker in this process, tools answered from the recording), timing
it from the batch's start to its report. Both run ``--concurrency`` sessions at once.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pydantic import BaseModel
from temporalio.testing import WorkflowEnvironment

from durable_agents.agent.agent import Agent
from durable_agents.agent.tools import ToolContext, tool
from durable_agents.checkpoint.format import Message, Role
from durable_agents.checkpoint.stores import SqliteStore
from durable_agents.client.client import AgentClient
from durable_agents.client.connection import data_converter
from durable_agents.devserver import dynamic_config_args, find_temporal_binary
from durable_agents.providers.scripted import ScriptedToolCall, ScriptedTurn, register_script
from durable_agents.replay import replay
from durable_agents.worker import build_worker

STEPS = 10


class Query(BaseModel):
    q: int


@tool(safe_to_retry=True)
async def search(args: Query, ctx: ToolContext) -> dict:
    return {"q": args.q, "hits": [args.q, args.q + 1], "text": "x" * 200}


def script(messages: list[Message]) -> ScriptedTurn:
    done = sum(1 for m in messages if m.role == Role.ASSISTANT)
    if done + 1 >= STEPS:
        return ScriptedTurn(text=f"Answer after {done} searches.")
    return ScriptedTurn(text=f"step {done}", tool_calls=[ScriptedToolCall(name="search", arguments={"q": done})])


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--local", action="store_true", help="Agent(activities='local')")
    args = parser.parse_args()
    global STEPS
    STEPS = args.steps
    register_script("bench-replay", script)
    agent = Agent(
        name="searcher", model="scripted:bench-replay", tools=[search], max_steps=args.steps + 1,
        activities="local" if args.local else "regular",
    )  # fmt: skip
    async with await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(find_temporal_binary()),
        data_converter=data_converter(),
        dev_server_extra_args=dynamic_config_args(),  # as `durable-agents dev` runs it
    ) as env:
        with tempfile.TemporaryDirectory() as folder:
            store = SqliteStore(Path(folder) / "store.db")
            client = AgentClient(env.client, store, "bench-replay")
            names = [f"s{i}" for i in range(args.sessions)]
            slots = asyncio.Semaphore(args.concurrency)

            async def fresh(name: str) -> None:
                async with slots:
                    await client.send(agent.name, "Search, please.", session_id=name)

            async with build_worker(env.client, agents=[agent], store=store, task_queue="bench-replay"):
                await client.send(agent.name, "warm up", session_id="warm")
                started = time.perf_counter()
                await asyncio.gather(*(fresh(n) for n in names))
                fresh_s = time.perf_counter() - started
            steps = sum(store.load_header(n).step_index for n in names)  # type: ignore[union-attr]

            started = time.perf_counter()
            report = await replay(client, names, against=agent, concurrency=args.concurrency, tag="bench")
            replay_s = time.perf_counter() - started
            store.close()
    mode = "local" if args.local else "regular"
    print(
        f"{args.sessions} sessions x {args.steps} steps ({steps} steps), {mode} activities, concurrency {args.concurrency}"
    )
    print(f"fresh:  {fresh_s:6.1f} s  ({steps / fresh_s:5.0f} steps/s)")
    print(f"replay: {replay_s:6.1f} s  ({steps / replay_s:5.0f} steps/s), {replay_s / fresh_s:.2f}x fresh; "
          f"{report.identical}/{report.total} identical")  # fmt: skip


if __name__ == "__main__":
    asyncio.run(main())
