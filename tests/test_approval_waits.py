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
from tests import agents, policy_agents
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


async def _finished(store, sid: str) -> None:
    """Wait for the run to finish, polling the store: ``result()`` would let the server skip
    time while local activities it does not see run."""
    for _ in range(200):
        header = store.load_header(sid)
        if header is not None and header.status == CheckpointStatus.FINISHED:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"the run of {sid} never finished")


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


@pytest.mark.parametrize("agent", [policy_agents.payer, policy_agents.payer_local], ids=["regular", "local"])
async def test_a_grants_expiry_is_judged_by_temporals_clock(skipping, store, task_queue, agent):
    """A ten-minute grant approves a call nine minutes later and none eleven minutes later,
    in the time a time-skipping test server keeps (the worker's own clock moved by seconds),
    with regular activities and with local ones (whose start time is the worker's clock)."""
    policy_agents.CALL_LOG.clear()
    async with build_worker(skipping.client, agents=[agent], store=store, task_queue=task_queue):
        client = AgentClient(skipping.client, store, task_queue)
        first, within, after = session_id(), session_id(), session_id()
        handle = await client.start(agent.name, "100", session_id=first)
        pending = await _paused(client, first)
        grant = {"scope": "agent", "expiresInSeconds": 600}
        await handle.signal("approve", {"approvalId": pending.approval_id, "approved": True, "grant": grant})
        await _finished(store, first)

        await skipping.sleep(timedelta(minutes=9))
        await client.start(agent.name, "200", session_id=within)
        await _finished(store, within)

        await skipping.sleep(timedelta(minutes=2))
        await client.start(agent.name, "300", session_id=after)
        assert (await _paused(client, after)).arguments == {"amount_cents": 300}
    made = f"grant-{pending.approval_id}"
    assert [(d.source, d.grant_id) for d in store.load(within).decisions] == [("grant", made)]
    assert not store.load(after).decisions  # nothing decided: a person is asked
    assert [args["amount_cents"] for _, args in policy_agents.CALL_LOG] == [100, 200]
