"""Replaying recorded sessions against running them fresh, on the same kind of worker.

    .venv/bin/python bench/replay.py [--sessions 200] [--steps 10] [--concurrency 20] [--rounds 3] [--local]

Records ``--sessions`` sessions of ``--steps`` steps (each step a scripted model turn
with one tool call, the last one the answer) on an in-process worker, timing that as
"fresh"; then replays all of them against the same agent as one batch (``ReplayBatch``
workflow, a replay worker in this process, tools answered from the recording), timing
it from the batch's start to its report. Both run ``--concurrency`` sessions at once, in
``--rounds`` interleaved rounds (fresh sessions anew each round, the first round's replayed
under a new tag each round); the medians are printed.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
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
    parser.add_argument("--rounds", type=int, default=3, help="fresh and replay rounds, interleaved")
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
            slots = asyncio.Semaphore(args.concurrency)

            async def fresh(name: str) -> None:
                async with slots:
                    await client.send(agent.name, "Search, please.", session_id=name)

            fresh_s, replay_s, reports = [], [], []
            recorded = [f"r0-s{i}" for i in range(args.sessions)]
            async with build_worker(env.client, agents=[agent], store=store, task_queue="bench-replay"):
                await client.send(agent.name, "warm up", session_id="warm")
                for round in range(args.rounds):  # interleaved: the host's load varies
                    names = [f"r{round}-s{i}" for i in range(args.sessions)]
                    started = time.perf_counter()
                    await asyncio.gather(*(fresh(n) for n in names))
                    fresh_s.append(time.perf_counter() - started)
                    started = time.perf_counter()
                    reports.append(
                        await replay(client, recorded, against=agent, concurrency=args.concurrency, tag=f"b{round}")
                    )
                    replay_s.append(time.perf_counter() - started)
            steps = sum(store.load_header(n).step_index for n in recorded)  # type: ignore[union-attr]
            store.close()
    mode = "local" if args.local else "regular"
    f, r = statistics.median(fresh_s), statistics.median(replay_s)
    print(f"{args.sessions} sessions x {args.steps} steps ({steps} steps), {mode} activities, "
          f"concurrency {args.concurrency}, {args.rounds} rounds (median; each round)")  # fmt: skip
    print(f"fresh:  {f:6.1f} s  ({steps / f:5.0f} steps/s)  {' '.join(f'{x:.1f}' for x in fresh_s)}")
    print(f"replay: {r:6.1f} s  ({steps / r:5.0f} steps/s)  {' '.join(f'{x:.1f}' for x in replay_s)}; "
          f"{r / f:.2f}x fresh; {min(x.identical for x in reports)}/{args.sessions} identical")  # fmt: skip


if __name__ == "__main__":
    asyncio.run(main())
