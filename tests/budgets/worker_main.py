"""A worker process with budgets: ``python -m tests.budgets.worker_main <address> <store-url>
<task-queue> <name> <budget JSON> [own-ledger]``. Its model calls say ``x-worker: <name>`` to
the fake; ``own-ledger``: its budget is booked in this process only (not shared)."""

from __future__ import annotations

import asyncio
import json
import sys

import anthropic

from durable_agents import connect
from durable_agents.checkpoint import open_store
from durable_agents.checkpoint.budget_ledger import MemoryLedger
from durable_agents.providers.anthropic_messages import AnthropicProvider
from durable_agents.providers.budgets import Budget
from durable_agents.worker import build_worker
from tests.budgets.agents import BUDGETED


async def main(address: str, store_url: str, task_queue: str, name: str, budget: str, ledger: str = "") -> None:
    client = await connect(address)
    provider = AnthropicProvider(anthropic.AsyncAnthropic(max_retries=0, default_headers={"x-worker": name}))
    worker = build_worker(
        client,
        agents=[BUDGETED],
        store=open_store(store_url),
        task_queue=task_queue,
        providers={"anthropic": provider},
        budgets=[Budget(**json.loads(budget))],
        budget_ledger=MemoryLedger() if ledger == "own-ledger" else None,
    )
    async with worker:
        print("ready", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:7]))
