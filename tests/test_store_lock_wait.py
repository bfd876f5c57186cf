"""A worker runs its SQLite calls on its event loop (``CheckpointStore.without_waiting``), but
never waits there: while another process holds the store's write lock, the step's write goes
to a thread and waits there, and the worker goes on (heartbeats, other runs' steps)."""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
import time

from pydantic import BaseModel
from temporalio.client import WorkflowExecutionStatus

from durable_agents import Agent, ScriptedToolCall, ScriptedTurn, ToolContext, register_script, tool
from tests.conftest import session_id

ENTERED: dict[str, asyncio.Event] = {}
RELEASE: dict[str, asyncio.Event] = {}


class Key(BaseModel):
    key: str


@tool(safe_to_retry=True)
async def gated(args: Key, ctx: ToolContext) -> dict:
    """Returns once the test lets it (so the test can take the write lock first)."""
    ENTERED[args.key].set()
    await RELEASE[args.key].wait()
    return {"done": args.key}


def script(messages):  # one call of the gate, then an answer
    if messages[-1].tool_call_id is None:
        key = messages[-1].content or ""
        return ScriptedTurn(tool_calls=[ScriptedToolCall(name="gated", arguments={"key": key})])
    return ScriptedTurn(text="Through.")


register_script("lock-wait", script)
lock_agent = Agent(name="lock-wait", model="scripted:lock-wait", tools=[gated])


async def test_a_step_whose_write_finds_the_store_locked_by_another_process_waits_off_the_event_loop(run_worker, store):
    sid = session_id()
    ENTERED[sid], RELEASE[sid] = asyncio.Event(), asyncio.Event()
    ticks: list[float] = []

    async def tick() -> None:
        while True:
            ticks.append(time.monotonic())
            await asyncio.sleep(0.02)

    async with run_worker([lock_agent]) as client:
        handle = await client.start("lock-wait", sid, session_id=sid)
        await asyncio.wait_for(ENTERED[sid].wait(), 30)
        other = sqlite3.connect(store.path, isolation_level=None)  # another worker process's connection
        other.execute("BEGIN IMMEDIATE")  # holds the write lock the tool's result needs
        ticker = asyncio.create_task(tick())
        try:
            RELEASE[sid].set()
            await asyncio.sleep(2.0)  # the result's write waits, in a thread
            assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING  # held up by the lock
        finally:
            other.execute("ROLLBACK")
            other.close()
        result = await asyncio.wait_for(client.result(sid, handle), 30)
        ticker.cancel()
    assert result.text == "Through." and len(result.tool_calls) == 1
    assert '"done"' in (store.tool_result(sid, 2).content or "")
    gaps = [b - a for a, b in itertools.pairwise(ticks)]
    assert max(gaps) < 1.0, f"the worker's event loop stalled {max(gaps):.1f} s while the store was locked"
