"""A worker SIGKILLed while an MCP tool call is out: the crash harness's worker
subprocess starts the stdio test server; the test kills the worker once the server
has the call, and a fresh worker finishes the run."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path

from durable_agents import AgentClient, FinishReason
from durable_agents.activities.keys import idempotency_key
from durable_agents.checkpoint import Role, SqliteStore
from durable_agents.testing import WorkerProcess
from tests.conftest import session_id
from tests.mcp.agents import RECORD_ENV, records

ROOT = Path(__file__).resolve().parents[2]


async def _killed_during_the_call(env, tmp_path: Path, agent: str):
    record = tmp_path / "record.jsonl"
    worker = WorkerProcess(
        ["tests.mcp.agents:CRASH"],
        address=env.client.service_client.config.target_host,
        store_url=f"sqlite:///{tmp_path / 'store.db'}",
        task_queue=f"mcp-crash-{uuid.uuid4().hex[:8]}",
        log_dir=tmp_path / "logs",
        cwd=ROOT,
        env={RECORD_ENV: str(record)},
    )
    store = SqliteStore(tmp_path / "store.db")
    try:
        await worker.start_ready(env.client)
        client = AgentClient(env.client, store, worker.task_queue)
        sid = session_id()
        handle = await client.start(agent, "Charge it.", session_id=sid)
        deadline = time.monotonic() + 60
        while not records(record, "charge"):  # the server is running the call (it takes 3 s)
            assert time.monotonic() < deadline, worker.log()[-3000:]
            await asyncio.sleep(0.05)
        worker.kill()
        header = store.load_header(sid)
        assert store.load_messages(sid, 0, header.message_count)[-1].role == Role.ASSISTANT  # no result yet
        await worker.start_ready(env.client)
        result = await asyncio.wait_for(client.result(sid, handle), 90)
        return result, store.load(sid), record
    finally:
        worker.stop()
        store.close()


async def test_an_at_most_once_mcp_call_lost_in_a_crash_is_a_durability_error_not_a_second_call(env, tmp_path):
    result, _, record = await _killed_during_the_call(env, tmp_path, "mcp-crash-once")
    assert result.finish_reason == FinishReason.STOP and result.text == "Charged once."
    [lost] = [m for m in result.messages if m.role == Role.TOOL]
    body = json.loads(lost.content)
    assert lost.is_error and body["kind"] == "tool-durability-error"
    assert (body["toolName"], body["toolCallId"]) == ("charge", lost.tool_call_id)
    assert len(records(record, "charge")) == 1  # the server was called once, never again


async def test_a_safe_mcp_call_lost_in_a_crash_runs_again_with_the_same_keys(env, tmp_path):
    result, saved, record = await _killed_during_the_call(env, tmp_path, "mcp-crash-safe")
    [done] = [m for m in result.messages if m.role == Role.TOOL]
    position = saved.messages.index(done)
    key = idempotency_key(saved.header(), position)
    assert not done.is_error and json.loads(done.content) == {"charged": 7, "receipt": f"R-{key}"}
    assert [r["meta"] for r in records(record, "charge")] == [
        {
            "durable-agents/idempotencyKey": key,
            "durable-agents/toolCallId": done.tool_call_id,
            "durable-agents/attempt": attempt,
        }
        for attempt in (1, 2)
    ]
