"""Many sessions paused for approval on one worker: memory, `approvals`, and one approval.

N sessions start (a model turn that calls a gated tool, then the pause), on one
in-process worker with its default cache (`max_cached_workflows=1000`: paused runs
beyond it are evicted and replay their history when decided). Then it times
`waiting_approvals()` (what `durable-agents approvals` lists) and `approve()` of one
session until its next outcome.

    .venv/bin/python bench/waiting_sessions.py [--sessions 10000] [--concurrency 100]
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import json
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pydantic import BaseModel
from temporalio.client import Client

from durable_agents.agent.agent import Agent
from durable_agents.agent.tools import ToolContext, tool
from durable_agents.checkpoint import CheckpointStatus, Message, Role, SqliteStore, ToolCall, Usage
from durable_agents.client.client import AgentClient
from durable_agents.client.connection import data_converter
from durable_agents.devserver import DevServer
from durable_agents.providers.base import ModelRequest, ModelResponse
from durable_agents.providers.registry import register_provider
from durable_agents.worker import build_worker


class Charge(BaseModel):
    amount: int


@tool(needs_approval=True)
async def charge(args: Charge, ctx: ToolContext) -> dict:
    """Charge the card (a human approves)."""
    return {"charged": args.amount}


class GatedModel:
    """``gated:`` — asks for a charge, then says done."""

    async def generate(self, request: ModelRequest) -> ModelResponse:
        done = request.messages[-1].role == Role.TOOL
        calls = None if done else [ToolCall(id=f"call_{request.step}", name="charge", arguments={"amount": 5})]
        return ModelResponse(
            message=Message(role=Role.ASSISTANT, content="done" if done else "charging", tool_calls=calls),
            usage=Usage(input_tokens=1, output_tokens=1, requests=1),
            stop_reason="end_turn" if done else "tool_use",
        )


register_provider("gated", GatedModel)


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def compiled() -> None:
    """Our modules' bytecode written, as installing the package's wheel writes it: a process
    started with PYTHONDONTWRITEBYTECODE set (this host sets it) over an editable install
    would otherwise compile every module of ours at each start (≈ 0.1 s)."""
    import durable_agents.activities
    import durable_agents.checkpoint
    import durable_agents.workflows

    for package in (durable_agents, durable_agents.activities, durable_agents.checkpoint, durable_agents.workflows):
        for folder in package.__path__:
            compileall.compile_dir(folder, quiet=1)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=100, help="sessions started at a time")
    opts = parser.parse_args()
    agent = Agent(name="gated", model="gated:m", tools=[charge])
    with tempfile.TemporaryDirectory() as tmp, DevServer(ui=False, db_file=None) as server:
        client = await Client.connect(server.address, data_converter=data_converter())
        store = SqliteStore(Path(tmp) / "store.db")
        queue = f"waiting-{uuid.uuid4().hex[:6]}"
        async with build_worker(client, agents=[agent], store=store, task_queue=queue):
            agents = AgentClient(client, store, queue)
            print(f"RSS at start: {rss_mb():.0f} MB", flush=True)
            started = time.perf_counter()
            gate = asyncio.Semaphore(opts.concurrency)
            sids = [f"wait-{i}-{uuid.uuid4().hex[:6]}" for i in range(opts.sessions)]

            async def pause(sid: str) -> None:
                async with gate:
                    result = await agents.send("gated", "charge me", session_id=sid)
                    assert result.approval_id, result

            for i in range(0, len(sids), 1000):
                await asyncio.gather(*(pause(s) for s in sids[i : i + 1000]))
                print(f"{i + len(sids[i : i + 1000])} paused, {time.perf_counter() - started:.0f} s, "
                      f"RSS {rss_mb():.0f} MB", flush=True)  # fmt: skip
            waiting = len(store.list_sessions(status=CheckpointStatus.AWAITING_APPROVAL))
            print(f"{waiting} sessions wait for approval after {time.perf_counter() - started:.0f} s")
            times = []
            for _ in range(3):
                t = time.perf_counter()
                listed = await agents.waiting_approvals()
                times.append(time.perf_counter() - t)
            print(f"waiting_approvals(): {len(listed)} listed in {min(times):.2f}–{max(times):.2f} s")
            t = time.perf_counter()
            store_only = agents.pending_approvals()
            print(f"pending_approvals() (store only): {len(store_only)} in {time.perf_counter() - t:.2f} s")
            cli = [sys.executable, "-m", "durable_agents.cli", "--address", server.address]
            cli += ["--store", f"sqlite:///{Path(tmp) / 'store.db'}", "--task-queue", queue]
            compiled()
            took: dict[str, list[float]] = {"--version": [], "approvals": []}
            for _ in range(3):
                for command in (["--version"], ["approvals", "--json"]):  # interpreter start and imports; the list
                    t = time.perf_counter()
                    done = await asyncio.to_thread(subprocess.run, cli + command, capture_output=True, text=True)
                    took[command[0]].append(time.perf_counter() - t)
            span = {name: f"{min(times):.2f}–{max(times):.2f} s" for name, times in took.items()}
            print(
                f"`durable-agents approvals --json` (its own process, 3 runs): {len(json.loads(done.stdout))} listed "
                f"in {span['approvals']}, of which {span['--version']} start the interpreter and import the CLI "
                "(`--version`)"
            )
            decided = []
            for sid in (sids[0], sids[len(sids) // 2], sids[-1]):  # evicted (oldest) and cached (newest)
                t = time.perf_counter()
                result = await agents.approve(sid)
                decided.append(time.perf_counter() - t)
                assert result.finish_reason == "stop", result
            print("approve() until the next outcome: " + ", ".join(f"{d:.2f} s" for d in decided))
            print(f"RSS at the end: {rss_mb():.0f} MB (client, worker and its cache in one process)")
        store.close()


if __name__ == "__main__":
    asyncio.run(main())
