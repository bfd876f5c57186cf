"""An approved at-most-once tool runs once, whatever crashes around it (issue: approvals)."""

from __future__ import annotations

import asyncio
import json
import signal

import pytest

from durable_agents import AgentClient, ApprovalNotPendingError
from durable_agents.checkpoint import CheckpointStatus, FinishReason, Role, SqliteStore
from durable_agents.testing import CrashWindow, check_guarantees
from tests.conftest import session_id


async def _paused(store: SqliteStore, sid: str) -> str:
    for _ in range(400):
        header = store.load_header(sid)
        if header is not None and header.status == CheckpointStatus.AWAITING_APPROVAL:
            return header.approval_id
        await asyncio.sleep(0.05)
    raise AssertionError("the run never paused for approval")


@pytest.mark.parametrize("window", [CrashWindow.AFTER_TOOL_BEFORE_RECORD, CrashWindow.AFTER_LAST_RESULT])
async def test_an_approved_call_runs_once_across_a_sigkill(env, make_worker, window):
    worker, store_path, logs = make_worker(f"gated-{window.value}", window)
    await worker.start_ready(env.client)
    store = SqliteStore(store_path)
    client = AgentClient(env.client, store, worker.task_queue)
    sid = session_id()
    await client.start("crash-gated", "Do the gated thing.", session_id=sid)
    approval_id = await _paused(store, sid)
    deciding = asyncio.create_task(client.approve(sid, approval_id))
    assert await worker.wait_exit(timeout=60) == -signal.SIGKILL, worker.log()[-2000:]
    await worker.start_ready(env.client)  # a fresh worker takes over
    with pytest.raises(ApprovalNotPendingError):  # the same decision again is refused
        await client.approve(sid, approval_id)
    result = await asyncio.wait_for(deciding, 90)
    assert result.finish_reason == FinishReason.STOP and result.text == "Approved and done."

    summary = check_guarantees(store.load(sid), logs, logs)
    call = result.messages[2].tool_calls[0]
    tool_result = next(m for m in result.messages if m.role == Role.TOOL)
    assert summary.executions[call.id] == [1]  # exactly one execution of the approved call
    if window == CrashWindow.AFTER_TOOL_BEFORE_RECORD:  # its result was lost: not run again
        assert json.loads(tool_result.content)["kind"] == "tool-durability-error"
    else:  # its result was recorded before the kill: kept
        assert json.loads(tool_result.content)["item"] == 1 and not tool_result.is_error
    store.close()
