"""Beyond a dead worker: the Temporal server restarted mid-run, a store that is
unavailable for a while, a write whose reply is lost, an abort mid-tool."""

from __future__ import annotations

import asyncio
import time

import pytest

from durable_agents import AgentClient, build_worker, connect
from durable_agents.checkpoint import FinishReason, Role, SqliteStore
from durable_agents.devserver import DevServer, free_port
from durable_agents.testing import FailingStore, check_guarantees, configured, read_records, recording_providers
from tests import crash_agents
from tests.conftest import session_id

pytestmark = pytest.mark.integration


async def _until(predicate, timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def _started(logs, sid: str, tool: str) -> bool:
    return any(
        r["session"] == sid and r["tool"] == tool and r["event"] == "start"
        for r in read_records(logs, "side_effects.jsonl")
    )


async def test_temporal_server_restarted_mid_tool(tmp_path, make_worker):
    server = DevServer(port=free_port(), ui=False, db_file=tmp_path / "temporal.db", log_file=tmp_path / "temporal.log")
    await server.start_async()
    try:
        worker, store_path, logs = make_worker("server-restart", address=server.address)
        await worker.start_ready(await connect(server.address))
        store = SqliteStore(store_path)
        client = AgentClient(await connect(server.address), store, worker.task_queue)
        sid = session_id()
        await client.start("crash-slow", "Slowly, please.", session_id=sid)
        await _until(lambda: _started(logs, sid, "safe_work"), what="the slow tool to start")
        await asyncio.to_thread(server.stop)  # SIGTERM: the server's SQLite file is kept
        await asyncio.sleep(1.0)
        await server.start_async()  # same port, same file
        client = AgentClient(await connect(server.address), store, worker.task_queue)
        result = await asyncio.wait_for(client.result(sid), 120)
        assert result.finish_reason == FinishReason.STOP and result.text == "Both done."
        assert worker.alive  # the worker rode out the outage
        summary = check_guarantees(store.load(sid), logs, logs)
        once = result.messages[2].tool_calls[1].id
        assert summary.executions[once] == [1] and not summary.durability_errors
        print(f"\nserver restart: executions {summary.executions}, model calls {summary.provider_calls}")
    finally:
        await asyncio.to_thread(server.stop)


@pytest.fixture
def in_process(env, tmp_path, task_queue):
    """An in-process worker over ``FailingStore(SqliteStore)``; logs in tmp_path/logs."""
    logs = tmp_path / "logs"

    async def run(agent: str, sid: str, **failing):
        store = FailingStore(SqliteStore(tmp_path / "store.db"), **failing)
        worker = build_worker(
            env.client, agents=crash_agents.ALL, store=store, task_queue=task_queue, providers=recording_providers()
        )
        with configured(log_dir=logs, store=store.inner):
            async with worker:
                result = await asyncio.wait_for(
                    AgentClient(env.client, store, task_queue).send(agent, "Do the two things.", session_id=sid), 120
                )
        return result, store, check_guarantees(store.inner.load(sid), logs, logs)

    return run


REFERENCE = [Role.SYSTEM, Role.USER, Role.ASSISTANT, Role.TOOL, Role.TOOL, Role.ASSISTANT]


@pytest.mark.parametrize("agent", ["crash-safe", "crash-once"])
async def test_store_unavailable_for_a_while_model_and_tool_start(in_process, agent):
    # writes 2-3 are the model turn and the first tool's start marker: every write
    # raises for 1.5 s from the 2nd on; activities retry until the store is back
    sid = session_id()
    result, store, summary = await in_process(agent, sid, outage_from=2, outage_seconds=1.5)
    assert len(store.failures) >= 2 and {m for _, m in store.failures} >= {"append"}
    assert result.finish_reason == FinishReason.STOP
    assert [m.role for m in result.messages] == REFERENCE  # nothing lost, nothing twice
    assert not summary.durability_errors and all(a == [1] for a in summary.executions.values())
    # the turn whose write failed was never stored, so asking the model again is allowed
    assert summary.provider_calls == 2 + summary.regenerated_uncommitted


@pytest.mark.parametrize("agent", ["crash-safe", "crash-once"])
async def test_lost_write_acknowledgements_neither_rerun_nor_regenerate(in_process, agent):
    # crashAfterToolResults: the model turn (write 2) and the first result (write 4)
    # land, then the call raises as if the worker died before Temporal heard back
    sid = session_id()
    result, store, summary = await in_process(agent, sid, fail_writes=[2, 4], commit_then_fail=True)
    assert [m for _, m in store.failures] == ["append", "record_tool_result"]
    assert [m.role for m in result.messages] == REFERENCE
    assert summary.provider_calls == 2 and summary.regenerated_uncommitted == 0
    assert not summary.durability_errors and all(a == [1] for a in summary.executions.values())


async def test_store_outage_while_recording_keeps_an_at_most_once_result(in_process):
    sid = session_id()
    result, store, summary = await in_process("crash-once", sid, outage_from=4, outage_seconds=1.5)
    assert "record_tool_result" in {m for _, m in store.failures}
    assert [m.role for m in result.messages] == REFERENCE
    assert not summary.durability_errors  # the tool ran and returned: its result is not lost


async def test_abort_mid_tool_then_resume_with_new_input(env, make_worker):
    worker, store_path, logs = make_worker("abort")
    await worker.start_ready(env.client)
    store = SqliteStore(store_path)
    client = AgentClient(env.client, store, worker.task_queue)
    sid = session_id()
    await client.start("crash-abort", "Do the slow thing.", session_id=sid)
    await _until(lambda: _started(logs, sid, "once_work"), what="the slow tool to start")
    aborted = await asyncio.wait_for(client.cancel(sid), 60)
    assert aborted.finish_reason == FinishReason.ABORTED
    result = await asyncio.wait_for(client.send("crash-abort", "Stop that; do something else.", session_id=sid), 60)
    assert result.finish_reason == FinishReason.STOP and result.text == "Noted, changing course."
    roles = [m.role for m in result.messages]
    assert roles == [Role.SYSTEM, Role.USER, Role.ASSISTANT, Role.TOOL, Role.USER, Role.ASSISTANT]
    call = result.messages[2].tool_calls[0].id
    assert result.messages[3].tool_call_id == call and result.messages[3].content == '{"error": "cancelled"}'
    summary = check_guarantees(store.load(sid), logs, logs)
    assert summary.cancelled == [call] and summary.executions[call] == [1]  # not run again on resume
