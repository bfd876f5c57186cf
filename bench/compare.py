"""durable-agents side by side with the raw Temporal loop (and Pydantic AI's integration).

    .venv/bin/python bench/compare.py [--steps 30] [--rounds 5] [--sessions 20] [--concurrent-rounds 2]

One embedded dev server (in memory, as ``durable-agents dev`` runs it headless),
one process, every system's worker warm, rounds interleaved (each round runs
every system once, in a rotated order), so drift of the machine hits all
alike. Systems, each step a ~1 KB model turn with a tool call and a ~1 KB
tool result:

- ``raw regular`` / ``raw local``: a minimal workflow calling a model-like and
  a tool-like activity per step (``_raw_loop.py``), in Temporal's workflow sandbox
  (the default); ``…, no sandbox``: the same on an unsandboxed worker (durable-agents'
  workflows run unsandboxed: ``workflows/options.py``);
- ``raw regular + store`` / ``raw local + store``: the unsandboxed raw loop plus the store
  work durable-agents' guarantees rest on and nothing else (``_raw_loop.py``, ``stored``):
  a read and three durable SQLite commits per step. What durable-agents costs above this
  floor is its own code, not the guarantees' writes;
- ``durable-agents regular`` / ``local`` / ``auto``: ``Agent(activities=…)`` with an
  instant model (``_agents.py``) and an at-most-once no-op tool (default timeout: local
  in ``auto``), SQLite store; ``local`` and ``auto`` against the raw local loop;
- ``pydantic-ai``: Pydantic AI's ``TemporalDurability`` on the same loop, when
  installed (``pip install -e '.[bench]'``; regular activities only).

Printed: ms per step (one session at a time; median of the rounds), the process's CPU ms
per step (same sessions), steps/s
with ``--sessions`` concurrent sessions (best round; the CPU ms per step meanwhile, median,
in the ratio lines: one process does at most about one core of Python, so steps/s there
follows it), Temporal history bytes
per step, and each figure's ratio to the raw loop of the same activity mode.
A step is one model turn; a run is ``--steps`` tool steps and a last turn.
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
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _agents import LIMIT, bench_agent
from _raw_loop import (
    RawAgentLoop,
    RawRun,
    raw_model_turn,
    raw_model_turn_stored,
    raw_tool_call,
    raw_tool_call_stored,
    use_floor_store,
)
from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from durable_agents.checkpoint import SqliteStore
from durable_agents.client.client import AgentClient
from durable_agents.client.connection import data_converter
from durable_agents.devserver import DevServer
from durable_agents.worker import build_worker

MODES = ("regular", "local", "auto")
BASELINE = {"regular": "regular", "local": "local", "auto": "local"}
"""The raw loop each mode is compared with (auto schedules local activities here)."""


@dataclass
class System:
    name: str
    baseline: str
    """The raw loop this one is compared with."""
    run: Callable[[str], Awaitable[int]]
    """Run one session (by id) to its end; returns its steps (model turns)."""
    client: Client
    ms_per_step: list[float] = field(default_factory=list)
    cpu_ms_per_step: list[float] = field(default_factory=list)
    """This process's CPU time (all its threads: client, workers) per step of one session: what
    a step costs the host, and steadier than wall time when the machine is shared."""
    steps_per_s: list[float] = field(default_factory=list)
    concurrent_cpu_ms: list[float] = field(default_factory=list)
    """The process's CPU ms per step while ``--sessions`` sessions run at once."""
    history_bytes: float = 0.0
    last_id: str = ""

    async def once(self) -> None:
        self.last_id = f"{self.name.replace(' ', '-')}-{uuid.uuid4().hex[:8]}"
        started, cpu = time.perf_counter(), time.process_time()
        steps = await self.run(self.last_id)
        self.ms_per_step.append((time.perf_counter() - started) * 1000 / steps)
        self.cpu_ms_per_step.append((time.process_time() - cpu) * 1000 / steps)

    async def concurrently(self, sessions: int) -> None:
        started, cpu = time.perf_counter(), time.process_time()
        ids = [f"{self.name.replace(' ', '-')}-c-{uuid.uuid4().hex[:8]}" for _ in range(sessions)]
        steps = sum(await asyncio.gather(*(self.run(i) for i in ids)))
        self.steps_per_s.append(steps / (time.perf_counter() - started))
        self.concurrent_cpu_ms.append((time.process_time() - cpu) * 1000 / steps)

    async def measure_history(self) -> None:
        history = await self.client.get_workflow_handle(self.last_id).fetch_history()
        self.history_bytes = sum(e.ByteSize() for e in history.events) / (LIMIT["steps"] + 1)


async def raw_system(client: Client, queue: str, local: bool, sandboxed: bool = True, stored: bool = False) -> System:
    async def run(workflow_id: str) -> int:
        return await client.execute_workflow(
            RawAgentLoop.run,
            RawRun(steps=LIMIT["steps"], local=local, stored=stored),
            id=workflow_id,
            task_queue=queue,
        )

    kind = "raw local" if local else "raw regular"
    if stored:
        return System(f"{kind} + store", f"{kind}, no sandbox", run, client)
    name = kind + ("" if sandboxed else ", no sandbox")
    return System(name, name, run, client)


def durable_system(client: Client, agents: AgentClient, mode: str) -> System:
    agent = bench_agent(mode).name

    async def run(session_id: str) -> int:
        return (await agents.send(agent, "go", session_id=session_id)).steps

    return System(f"durable-agents {mode}", f"raw {BASELINE[mode]}", run, client)


async def pydantic_ai_system(address: str, stack: contextlib.AsyncExitStack) -> System | None:
    try:
        from _pydantic_ai_loop import PydanticAIBenchLoop
        from pydantic_ai.durable_exec.temporal import PydanticAIPlugin
    except ImportError:
        return None
    client = await Client.connect(address, plugins=[PydanticAIPlugin()])
    queue = f"bench-pyd-{uuid.uuid4().hex[:6]}"
    await stack.enter_async_context(
        Worker(client, task_queue=queue, workflows=[PydanticAIBenchLoop], max_concurrent_activities=200)
    )

    async def run(workflow_id: str) -> int:
        return await client.execute_workflow(
            PydanticAIBenchLoop.run, f"steps={LIMIT['steps']}", id=workflow_id, task_queue=queue
        )

    return System("pydantic-ai regular", "raw regular", run, client)


def report(systems: list[System], opts: argparse.Namespace) -> None:
    by_name = {s.name: s for s in systems}
    print(
        f"\n{opts.steps} tool steps + a last turn per run; ms/step: median of {opts.rounds} rounds; "
        f"steps/s: {opts.sessions} concurrent sessions, best of {opts.concurrent_rounds} rounds\n"
    )
    print(
        f"{'system':<24}{'ms/step':>9}{'×raw':>7}{'CPU ms/step':>13}{'×raw':>7}{'steps/s':>10}{'×raw':>7}"
        f"{'history B/step':>16}{'×raw':>7}"
    )
    for s in systems:
        base = by_name[s.baseline]
        ms, base_ms = statistics.median(s.ms_per_step), statistics.median(base.ms_per_step)
        sps, base_sps = max(s.steps_per_s), max(base.steps_per_s)
        cpu, base_cpu = statistics.median(s.cpu_ms_per_step), statistics.median(base.cpu_ms_per_step)
        print(
            f"{s.name:<24}{ms:>9.1f}{ms / base_ms:>7.2f}{cpu:>13.1f}{cpu / base_cpu:>7.2f}"
            f"{sps:>10.0f}{sps / base_sps:>7.2f}"
            f"{s.history_bytes:>16.0f}{s.history_bytes / base.history_bytes:>7.2f}"
        )
    for mode in MODES:
        ours, bare = by_name.get(f"durable-agents {mode}"), by_name.get(f"raw {BASELINE[mode]}, no sandbox")
        if ours and bare:
            ms = statistics.median(ours.ms_per_step) / statistics.median(bare.ms_per_step)
            sps = max(ours.steps_per_s) / max(bare.steps_per_s)
            cpu = statistics.median(ours.cpu_ms_per_step) / statistics.median(bare.cpu_ms_per_step)
            busy = statistics.median(ours.concurrent_cpu_ms) / statistics.median(bare.concurrent_cpu_ms)
            print(
                f"durable-agents {mode} ÷ raw {BASELINE[mode]}, no sandbox: ms/step {ms:.2f}×, "
                f"CPU ms/step {cpu:.2f}×, steps/s {sps:.2f}× (CPU ms/step meanwhile {busy:.2f}×)"
            )
        floor = by_name.get(f"raw {BASELINE[mode]} + store")
        if ours and floor:
            print(
                f"durable-agents {mode} ÷ raw {BASELINE[mode]} + store: ms/step "
                f"{statistics.median(ours.ms_per_step) / statistics.median(floor.ms_per_step):.2f}×, CPU ms/step "
                f"{statistics.median(ours.cpu_ms_per_step) / statistics.median(floor.cpu_ms_per_step):.2f}×, "
                f"steps/s {max(ours.steps_per_s) / max(floor.steps_per_s):.2f}× (CPU ms/step meanwhile "
                f"{statistics.median(ours.concurrent_cpu_ms) / statistics.median(floor.concurrent_cpu_ms):.2f}×)"
            )
    if "pydantic-ai regular" not in by_name:
        print("\npydantic-ai: not installed (pip install -e '.[bench]' adds pydantic-ai-slim[temporal])")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--concurrent-rounds", type=int, default=2)
    parser.add_argument("--no-pydantic-ai", action="store_true", help="leave Pydantic AI out even when installed")
    opts = parser.parse_args()
    LIMIT["steps"] = opts.steps
    with tempfile.TemporaryDirectory() as tmp, DevServer(ui=False, db_file=None) as server:
        client = await Client.connect(server.address, data_converter=data_converter())
        store = SqliteStore(Path(tmp) / "store.db")
        use_floor_store(str(Path(tmp) / "floor.db"))
        raw_queue, da_queue = f"bench-raw-{uuid.uuid4().hex[:6]}", f"bench-da-{uuid.uuid4().hex[:6]}"
        bare_queue = f"{raw_queue}-bare"
        async with contextlib.AsyncExitStack() as stack:
            for queue, runner in ((raw_queue, {}), (bare_queue, {"workflow_runner": UnsandboxedWorkflowRunner()})):
                await stack.enter_async_context(
                    Worker(
                        client,
                        task_queue=queue,
                        workflows=[RawAgentLoop],
                        activities=[raw_model_turn, raw_tool_call, raw_model_turn_stored, raw_tool_call_stored],
                        max_concurrent_activities=200,
                        **runner,
                    )
                )
            agents = [bench_agent(mode) for mode in MODES]
            await stack.enter_async_context(build_worker(client, agents=agents, store=store, task_queue=da_queue))
            da = AgentClient(client, store, da_queue)
            systems = [
                await raw_system(client, raw_queue, False),
                await raw_system(client, raw_queue, True),
                await raw_system(client, bare_queue, False, sandboxed=False),
                await raw_system(client, bare_queue, True, sandboxed=False),
                await raw_system(client, bare_queue, False, sandboxed=False, stored=True),
                await raw_system(client, bare_queue, True, sandboxed=False, stored=True),
                *(durable_system(client, da, mode) for mode in MODES),
            ]
            pyd = None if opts.no_pydantic_ai else await pydantic_ai_system(server.address, stack)
            systems += [pyd] if pyd else []
            for s in systems:  # warm up: imports, sandboxes, sticky caches
                await s.once()
                s.ms_per_step.clear()
            for r in range(opts.rounds):
                for s in systems[r % len(systems) :] + systems[: r % len(systems)]:
                    await s.once()
                print(f"round {r + 1}: " + ", ".join(f"{s.name} {s.ms_per_step[-1]:.1f}" for s in systems), flush=True)
            for r in range(opts.concurrent_rounds):
                for s in systems[r % len(systems) :] + systems[: r % len(systems)]:
                    await s.concurrently(opts.sessions)
                print(
                    f"concurrent round {r + 1}: "
                    + ", ".join(
                        f"{s.name} {s.steps_per_s[-1]:.0f} ({s.concurrent_cpu_ms[-1]:.1f} CPU ms)" for s in systems
                    )
                )
            for s in systems:
                await s.measure_history()
        store.close()
    report(systems, opts)


if __name__ == "__main__":
    asyncio.run(main())
