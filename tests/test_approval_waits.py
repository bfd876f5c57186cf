"""Approvals that wait for days, on Temporal's time-skipping test server."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

import pytest
from temporalio.testing import WorkflowEnvironment

from durable_agents import AgentClient, build_worker
from durable_agents.activities.contracts import ApprovalDecision, PendingApproval
from durable_agents.checkpoint import CheckpointStatus, FinishReason
from durable_agents.client.connection import data_converter
from durable_agents.devserver import find_test_server_binary
from tests import agents
from tests.conftest import session_id


@pytest.fixture
async def skipping():
    async with await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=str(find_test_server_binary()),
        data_converter=data_converter(),
    ) as environment:
        yield environment


async def _paused(client: AgentClient, sid: str) -> PendingApproval:
    handle = client.temporal.get_workflow_handle(sid)
    for _ in range(200):
        pending = await handle.query("pending_approval", result_type=PendingApproval | None)
        if pending is not None:
            return pending
        await asyncio.sleep(0.05)
    raise AssertionError("the run never paused for approval")


async def test_an_approval_three_days_later_still_resumes_the_run(skipping, store, task_queue):
    agents.CALL_LOG.clear()
    sid = session_id()
    async with build_worker(skipping.client, agents=[agents.payments_agent], store=store, task_queue=task_queue):
        client = AgentClient(skipping.client, store, task_queue)
        handle = await client.start("payments", "Charge me", session_id=sid)
        first = await _paused(client, sid)
        await skipping.sleep(timedelta(days=3))
        assert store.load(sid).status == CheckpointStatus.AWAITING_APPROVAL
        await handle.signal("approve", ApprovalDecision(approval_id=first.approval_id, approved=True))
        second = await _paused(client, sid)
        assert second.approval_id != first.approval_id
        await handle.signal(
            "approve", ApprovalDecision(approval_id=second.approval_id, approved=False, note="once is enough")
        )
        result = await client.result(sid, handle)
    assert result.finish_reason == FinishReason.STOP
    assert [n for n, _, _ in agents.CALL_LOG] == ["get_weather", "charge_card"]


async def test_an_approval_timeout_rejects_with_a_note(skipping, store, task_queue):
    agents.CALL_LOG.clear()
    sid = session_id()
    async with build_worker(skipping.client, agents=[agents.wire_agent], store=store, task_queue=task_queue):
        client = AgentClient(skipping.client, store, task_queue)
        handle = await client.start("wire", "Wire 500", session_id=sid)
        pending = await _paused(client, sid)
        assert pending.timeout_at - pending.requested_at == timedelta(days=1)
        result = await client.result(sid, handle)  # time skips past the day
    assert result.finish_reason == FinishReason.STOP
    rejected = json.loads(result.messages[-2].content)
    assert "timed out" in rejected["note"] and result.messages[-2].is_error
    assert agents.CALL_LOG == []  # never ran
