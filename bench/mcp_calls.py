"""Milliseconds per MCP tool call: one session kept per worker vs a session per call,
over stdio and streamable HTTP; and per agent step with an MCP tool vs a local tool.

    .venv/bin/python bench/mcp_calls.py [--calls 50] [--steps 30]

The server is the tests' MCP server (``tests/mcp/server.py``, written with the ``mcp``
SDK) with recording off; its ``echo`` tool does no work. Part 1 calls it through the
worker's ``MCPConnections`` directly; part 2 runs an agent whose every step is a model
turn (scripted) and one tool call, on the embedded dev server with a warm worker.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pydantic import BaseModel
from temporalio.client import Client

from durable_agents.activities.mcp_client import MCPConnections
from durable_agents.agent.agent import Agent
from durable_agents.agent.mcp import MCPServerHTTP, MCPServerStdio
from durable_agents.agent.tools import ToolContext, tool
from durable_agents.checkpoint import Message, SqliteStore
from durable_agents.client.client import AgentClient
from durable_agents.client.connection import data_converter
from durable_agents.devserver import DevServer
from durable_agents.providers.scripted import ScriptedToolCall, ScriptedTurn, register_script
from durable_agents.worker import build_worker

SERVER = Path(__file__).resolve().parent.parent / "tests" / "mcp" / "server.py"


@contextlib.contextmanager
def http_server():
    proc = subprocess.Popen([sys.executable, str(SERVER), "--record", "-", "--http"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline().split("=")[1])
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)


def servers(url: str, reuse: bool) -> dict[str, MCPServerStdio | MCPServerHTTP]:
    stdio = MCPServerStdio(name="s", command=sys.executable, args=[str(SERVER), "--record", "-"], reuse_session=reuse)
    return {"stdio": stdio, "http": MCPServerHTTP(name="h", url=url, reuse_session=reuse)}


async def per_call(url: str, calls: int) -> None:
    for reuse in (True, False):
        for transport, server in servers(url, reuse).items():
            pool = MCPConnections()
            async with pool.running():
                await pool.call_tool(server, "echo", {"text": "warm"}, {}, retry_lost=True)
                n = calls if reuse else max(3, calls // 10)
                times = []
                for i in range(n):
                    started = time.perf_counter()
                    await pool.call_tool(
                        server, "echo", {"text": str(i)}, {"durable-agents/attempt": 1}, retry_lost=True
                    )
                    times.append((time.perf_counter() - started) * 1000)
            mode = "session kept per worker" if reuse else "session per call      "
            print(f"  {transport:5} {mode}: median {statistics.median(times):7.1f} ms/call ({n} calls)")


class Args(BaseModel):
    text: str


@tool(safe_to_retry=True)
async def echo(args: Args, ctx: ToolContext) -> str:
    return f"echo: {args.text}"


def script(steps: int):
    def play(messages: list[Message]) -> ScriptedTurn:
        turns = sum(1 for m in messages if m.role == "assistant")
        if turns >= steps - 1:
            return ScriptedTurn(text="done")
        return ScriptedTurn(tool_calls=[ScriptedToolCall(name="echo", arguments={"text": str(turns)})])

    return play


@contextlib.asynccontextmanager
async def worker(agents: list[Agent]) -> AsyncIterator[AgentClient]:
    with tempfile.TemporaryDirectory() as tmp, DevServer(ui=False, db_file=None) as dev:
        client = await Client.connect(dev.address, data_converter=data_converter())
        store = SqliteStore(Path(tmp) / "store.db")
        queue = f"bench-{uuid.uuid4().hex[:6]}"
        async with build_worker(client, agents=agents, store=store, task_queue=queue):
            yield AgentClient(client, store, queue)


async def per_step(url: str, steps: int, runs: int) -> None:
    register_script("mcp-bench", script(steps))
    kinds = {
        "local tool": {"tools": [echo]},
        **{f"MCP {k}": {"mcp_servers": [s]} for k, s in servers(url, True).items()},
    }
    agents = [
        Agent(name=f"bench-{i}", model="scripted:mcp-bench", max_steps=steps + 1, **kw)
        for i, kw in enumerate(kinds.values())
    ]
    async with worker(agents) as client:
        for agent, label in zip(agents, kinds):
            await client.send(agent.name, "warm up", session_id=f"warm-{uuid.uuid4().hex[:6]}")
            times = []
            for _ in range(runs):
                started = time.perf_counter()
                result = await client.send(agent.name, "go", session_id=f"b-{uuid.uuid4().hex[:8]}")
                times.append((time.perf_counter() - started) * 1000 / result.steps)
            print(f"  {label:10}: median {statistics.median(times):6.1f} ms/step ({runs} runs of {steps} steps)")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--runs", type=int, default=3)
    opts = parser.parse_args()
    with http_server() as url:
        print("one MCP tool call (MCPConnections.call_tool):")
        await per_call(url, opts.calls)
        print("one agent step (model turn + one tool call, regular activities):")
        await per_step(url, opts.steps, opts.runs)


if __name__ == "__main__":
    asyncio.run(main())
