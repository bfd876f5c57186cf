"""Input tokens billed per step of a 50-step Anthropic session, prompt caching on vs off.

    .venv/bin/python bench/anthropic_caching.py [--steps 50] [--min-cache-tokens 1024]

Each session runs the real loop (embedded Temporal server, in-process worker,
the official SDK) against the wire-format fake in ``tests/fakes``, which counts
tokens as a quarter of the characters and accounts the cache by prefix as the
API does (breakpoints, 20-block lookback, a minimum cacheable prefix). Every
step is one tool call with a ~300-token result under a ~2,000-token system
prompt. "Billed" weighs tokens by Anthropic's prices relative to plain input:
cache writes 1.25x (5-minute TTL), cache reads 0.1x.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pydantic import BaseModel
from temporalio.client import Client

from durable_agents.agent.agent import Agent
from durable_agents.agent.tools import ToolContext, tool
from durable_agents.checkpoint import SqliteStore
from durable_agents.checkpoint.format import ModelSettings
from durable_agents.client.client import AgentClient
from durable_agents.client.connection import data_converter
from durable_agents.devserver import DevServer
from durable_agents.worker import build_worker
from tests.fakes.llm_server import FakeLLMServer

WRITE_PRICE, READ_PRICE = 1.25, 0.1
INSTRUCTIONS = "You research a topic step by step, one search per step, and cite every source. " * 100


class Query(BaseModel):
    q: str


@tool(safe_to_retry=True)
async def search(args: Query, ctx: ToolContext) -> dict:
    """Search the archive."""
    return {
        "query": args.q,
        "hits": [f"document {ctx.step}.{i}: " + "lorem ipsum dolor sit amet " * 8 for i in range(5)],
    }


def responder(llm: FakeLLMServer, steps: int):
    def reply(body: dict[str, Any]) -> Any:
        done = sum(1 for m in body["messages"] if m["role"] == "assistant")
        if done >= steps - 1:
            return "Here is the summary."
        return llm.anthropic.tool_calls([("search", {"q": f"topic part {done}"})], text=f"Searching part {done}.")

    return reply


def billed(usage: dict[str, int]) -> float:
    return (
        usage["input_tokens"]
        + WRITE_PRICE * usage["cache_creation_input_tokens"]
        + READ_PRICE * usage["cache_read_input_tokens"]
    )


async def run_session(agents: AgentClient, llm: FakeLLMServer, agent: str) -> list[dict[str, int]]:
    llm.clear_requests()
    result = await agents.send(agent, "Research prompt caching.", session_id=f"{agent}-{uuid.uuid4().hex[:6]}")
    usages = [r["reply"]["usage"] for r in llm.requests if r["path"] == "/v1/messages"]
    assert len(usages) == result.steps, (len(usages), result.steps)
    assert result.usage.input_tokens == sum(
        u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"] for u in usages
    )
    return usages


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--min-cache-tokens", type=int, default=1024, help="the API's minimum cacheable prefix")
    opts = parser.parse_args()
    agents = [
        Agent(
            name=name,
            model="anthropic:claude-bench",
            instructions=INSTRUCTIONS,
            tools=[search],
            max_steps=opts.steps + 1,
            model_settings=ModelSettings(anthropic_cache=cache),
        )
        for name, cache in (("cache-off", False), ("cache-on", True))
    ]
    with FakeLLMServer() as llm, tempfile.TemporaryDirectory() as tmp, DevServer(ui=False, db_file=None) as server:
        llm.anthropic.responder = responder(llm, opts.steps)
        llm.anthropic.cache.min_cache_tokens = opts.min_cache_tokens
        os.environ.update(ANTHROPIC_BASE_URL=llm.anthropic_base_url, ANTHROPIC_API_KEY="bench")
        client = await Client.connect(server.address, data_converter=data_converter())
        store = SqliteStore(Path(tmp) / "store.db")
        queue = f"bench-{uuid.uuid4().hex[:6]}"
        async with build_worker(client, agents=agents, store=store, task_queue=queue):
            runner = AgentClient(client, store, queue)
            off = await run_session(runner, llm, "cache-off")
            on = await run_session(runner, llm, "cache-on")
        store.close()
    print(f"{opts.steps}-step session, min cacheable prefix {opts.min_cache_tokens} tokens")
    print(f"{'step':>4} | {'off: input':>10} | {'on: input':>9} {'written':>8} {'read':>7} {'billed':>8}")
    for step, (a, b) in enumerate(zip(off, on), 1):
        print(
            f"{step:>4} | {a['input_tokens']:>10} | {b['input_tokens']:>9} {b['cache_creation_input_tokens']:>8} "
            f"{b['cache_read_input_tokens']:>7} {billed(b):>8.0f}"
        )
    total_off, total_on = sum(map(billed, off)), sum(map(billed, on))
    print(
        f"total billed input (plain-input tokens): off {total_off:,.0f}, on {total_on:,.0f} "
        f"({total_on / total_off:.1%} of off; last step {billed(on[-1]) / billed(off[-1]):.1%})"
    )


if __name__ == "__main__":
    asyncio.run(main())
