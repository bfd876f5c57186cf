"""A store outage while a tool's result is being written is ridden out: the tool
ran once, its REAL result is recorded (not a durability error), and the run
finishes. Once over SQLite behind ``FailingStore``, once over a real
PostgreSQL cluster that is stopped while the tool runs and started again a few
seconds later (a private cluster: stopping it breaks no other test)."""

from __future__ import annotations

import asyncio
import json

import pytest
from pydantic import BaseModel

from durable_agents import (
    Agent,
    AgentClient,
    ScriptedToolCall,
    ScriptedTurn,
    ToolContext,
    build_worker,
    register_script,
    tool,
)
from durable_agents.checkpoint import CheckpointStatus, FinishReason, Role, SqliteStore
from durable_agents.checkpoint.errors import StoreUnavailableError
from durable_agents.checkpoint.stores.base import CheckpointStore
from durable_agents.checkpoint.stores.postgres import PostgresStore
from durable_agents.testing import FailingStore
from tests.checkpoint.conftest import ThrowawayPostgres
from tests.conftest import session_id

OUTAGE_SECONDS = 3.0
RUNS: list[tuple[str, str]] = []
"""(session id, tool call id) of every execution of ``charge``."""
_hooks: dict[str, asyncio.Event] = {}


class ChargeArgs(BaseModel):
    amount: int


@tool(timeout=120, heartbeat_timeout=5)
async def charge(args: ChargeArgs, ctx: ToolContext) -> dict:
    """An at-most-once side effect: a retried activity would record a durability error instead."""
    RUNS.append((ctx.session_id, ctx.tool_call_id))
    if ctx.session_id in _hooks:  # the test takes the store down while the tool runs
        _hooks[ctx.session_id].set()
        await _hooks[f"{ctx.session_id}/down"].wait()
    return {"receipt": f"R-{ctx.tool_call_id}", "amount": args.amount}


register_script(
    "outage-charge",
    [
        ScriptedTurn(text="Charging.", tool_calls=[ScriptedToolCall(name="charge", arguments={"amount": 42})]),
        ScriptedTurn(text="Charged."),
    ],
)
AGENT = Agent(name="outage-charge", model="scripted:outage-charge", instructions="Charge the card.", tools=[charge])


def _assert_real_result_recorded(result, sid: str) -> None:
    assert result.finish_reason == FinishReason.STOP and result.text == "Charged."
    roles = [m.role for m in result.messages]
    assert roles == [Role.SYSTEM, Role.USER, Role.ASSISTANT, Role.TOOL, Role.ASSISTANT]
    call = result.messages[2].tool_calls[0]
    assert [r for r in RUNS if r[0] == sid] == [(sid, call.id)]  # ran exactly once
    recorded = result.messages[3]
    assert recorded.tool_call_id == call.id and not recorded.is_error
    assert json.loads(recorded.content) == {"receipt": f"R-{call.id}", "amount": 42}  # the real result


async def _send(env, store: CheckpointStore, task_queue: str, sid: str):
    worker = build_worker(env.client, agents=[AGENT], store=store, task_queue=task_queue)
    async with worker:
        return await asyncio.wait_for(
            AgentClient(env.client, store, task_queue).send(AGENT.name, "Charge 42.", session_id=sid), 120
        )


async def test_sqlite_outage_during_tool_result_write_records_the_real_result(env, tmp_path, task_queue):
    sid = session_id()
    store = FailingStore(
        SqliteStore(tmp_path / "store.db"),
        methods=["record_tool_result"],
        outage_from=1,
        outage_seconds=OUTAGE_SECONDS,
    )
    result = await _send(env, store, task_queue, sid)
    assert len(store.failures) >= 2 and {m for _, m in store.failures} == {"record_tool_result"}
    _assert_real_result_recorded(result, sid)


# -- PostgreSQL -----------------------------------------------------------------


def _pg_ctl(cluster: ThrowawayPostgres, *args: str) -> None:
    cluster._run(str(cluster.bin / "pg_ctl"), "-D", str(cluster.data), *args)


def stop_cluster(cluster: ThrowawayPostgres) -> None:
    """Stop the server and keep its data directory (``ThrowawayPostgres.stop`` deletes it)."""
    _pg_ctl(cluster, "-m", "fast", "-w", "stop")


def restart_cluster(cluster: ThrowawayPostgres) -> None:
    """Start the stopped server again on the same data and socket (options as ``ThrowawayPostgres.start``)."""
    opts = (
        f"-c listen_addresses='' -c unix_socket_directories={cluster.base} -c fsync=off"
        " -c synchronous_commit=off -c full_page_writes=off"
    )
    _pg_ctl(cluster, "-l", str(cluster.base / "log"), "-o", opts, "-w", "-t", "60", "start")


@pytest.fixture
def private_postgres():
    pytest.importorskip("psycopg")
    cluster = ThrowawayPostgres()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


async def test_postgres_outage_during_tool_result_write_records_the_real_result(env, private_postgres, task_queue):
    cluster = private_postgres
    sid = session_id()
    store = PostgresStore(cluster.url, connect_timeout=5)
    running, down = asyncio.Event(), asyncio.Event()
    _hooks.update({sid: running, f"{sid}/down": down})
    try:
        send = asyncio.create_task(_send(env, store, task_queue, sid))
        await asyncio.wait_for(running.wait(), 60)
        await asyncio.to_thread(stop_cluster, cluster)  # down while the tool runs
        with pytest.raises(StoreUnavailableError):
            store.load_header(sid)  # it really is down
        down.set()  # the tool returns; its result cannot be written yet
        await asyncio.sleep(OUTAGE_SECONDS)
        assert not send.done()
        await asyncio.to_thread(restart_cluster, cluster)
        result = await send
        _assert_real_result_recorded(result, sid)
        stored = store.load(sid)
        assert stored is not None and stored.status == CheckpointStatus.FINISHED
    finally:
        for key in (sid, f"{sid}/down"):
            _hooks.pop(key, None)
        store.close()
