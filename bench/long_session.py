"""One long session per activity mode: does a step cost the same at step 9,000 as at step 1?

    .venv/bin/python bench/long_session.py [--steps 2000] [--block 1000] [--modes regular,local]
    .venv/bin/python bench/long_session.py --steps 10000      # the issue's 10,000-step session

Each step is a ~1 KB instant model turn with a call to an at-most-once no-op
tool returning ~1 KB (``_agents.py``), on the embedded dev server (in memory)
with a warm in-process worker and a SQLite store (``history_limit=50``, the
default). Printed per mode: ms/step for each block of ``--block`` steps (timed
by the tool calls), the last block's ratio to the first, and the store's size
on disk against the transcript's own bytes (its messages as JSON).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _agents import LIMIT, TICKS, bench_agent
from temporalio.client import Client

from durable_agents.checkpoint import SqliteStore
from durable_agents.client.client import AgentClient
from durable_agents.client.connection import data_converter
from durable_agents.devserver import DevServer
from durable_agents.worker import build_worker


def store_bytes(store: SqliteStore) -> int:
    """The store's files on disk once its write-ahead log is folded in."""
    with store._lock:
        store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return sum(os.path.getsize(p) for p in (store.path, store.path + "-wal") if os.path.exists(p))


async def one_session(client: Client, mode: str, steps: int, block: int) -> None:
    local = mode == "local"
    agent = bench_agent("local" if local else "regular")
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore(Path(tmp) / "store.db")
        queue = f"long-{mode}-{uuid.uuid4().hex[:6]}"
        async with build_worker(client, agents=[agent], store=store, task_queue=queue):
            agents = AgentClient(client, store, queue)
            TICKS.clear()
            started = time.perf_counter()
            result = await agents.send(agent.name, "go", session_id=f"long-{mode}-{uuid.uuid4().hex[:6]}")
            elapsed = time.perf_counter() - started
            ticks = [started, *TICKS]
        messages = store.load_messages(result.session_id)
        transcript = sum(len(m.to_json().encode()) for m in messages)
        size = store_bytes(store)
        store.close()
    print(f"\n{mode} activities: {result.steps} steps ({len(messages)} messages) in {elapsed:.0f} s")
    blocks = []
    for start in range(0, len(ticks) - 1, block):
        end = min(start + block, len(ticks) - 1)
        blocks.append((start, end, (ticks[end] - ticks[start]) * 1000 / (end - start)))
    print(f"{'steps':>14}{'ms/step':>10}")
    for start, end, ms in blocks:
        print(f"{f'{start}–{end}':>14}{ms:>10.1f}")
    print(f"last block / first block: {blocks[-1][2] / blocks[0][2]:.2f}")
    print(
        f"store on disk: {size / 1e6:.1f} MB for {transcript / 1e6:.1f} MB of transcript "
        f"({size / transcript:.2f}×, history_limit={SqliteStore.history_limit})"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--block", type=int, default=1000)
    parser.add_argument("--modes", default="regular,local", help="comma-separated: regular, local")
    opts = parser.parse_args()
    LIMIT["steps"] = opts.steps
    with DevServer(ui=False, db_file=None) as server:
        client = await Client.connect(server.address, data_converter=data_converter())
        for mode in opts.modes.split(","):
            await one_session(client, mode.strip(), opts.steps, opts.block)


if __name__ == "__main__":
    asyncio.run(main())
