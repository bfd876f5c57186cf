"""Decisions too large for Temporal (issue 41): a decision crosses Temporal inline (edited
arguments cannot go through the store: any Temporal client may send them), so one whose
edited arguments (or note) are over ``MAX_DECISION_BYTES`` is refused at every entry point
before anything is decided, and the approval stays pending: ``AgentClient.approve`` raises
``DecisionTooLargeError`` before it sends anything, the ``decide`` update's validator refuses
it, the ``approve`` signal is dropped (logged, shown in Current Details), and a run started
with such a decision fails at once. Before, the run's workflow task failed on Temporal's
payload limit again and again and ``approve`` hung."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
from temporalio.client import Client, WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from durable_agents.activities.contracts import MAX_DECISION_BYTES, decision_too_large
from durable_agents.errors import DecisionTooLargeError, InvalidDecisionError
from tests.conftest import session_id
from tests.outside_clients import agents as outside

WAIT = 60


def _edited(memo_bytes: int) -> dict[str, Any]:
    """Arguments the tool's schema takes (extra properties are allowed), of about ``memo_bytes``."""
    return {"amount_cents": 100, "recipient": "Bob", "memo": "m" * memo_bytes}


async def _history_types(client: Client, sid: str) -> list[int]:
    history = await client.get_workflow_handle(sid).fetch_history()
    return [e.event_type for e in history.events]


async def _plain(env: WorkflowEnvironment) -> Client:
    """A Temporal client as an outside team has it: default data converter, no plugin."""
    return await Client.connect(env.client.service_client.config.target_host)


async def _details(handle) -> str:
    meta = await handle.query("__temporal_workflow_metadata")
    return meta.get("currentDetails", "") if isinstance(meta, dict) else meta.current_details


def test_the_limit_is_on_each_part_of_a_decision_as_json_bytes():
    assert decision_too_large(_edited(MAX_DECISION_BYTES - 100)) is None
    part, size = decision_too_large(_edited(MAX_DECISION_BYTES)) or ("", 0)
    assert part == "edited arguments" and size > MAX_DECISION_BYTES
    assert decision_too_large(None, note="é" * (MAX_DECISION_BYTES // 2 + 1)) == ("note", MAX_DECISION_BYTES + 2)
    assert decision_too_large(None, decided_by="x" * (MAX_DECISION_BYTES + 1))[0] == "decidedBy"
    assert MAX_DECISION_BYTES * 4 < 2 * 1024 * 1024  # every part at once stays far under Temporal's 2 MB


async def test_approve_refuses_edited_arguments_over_the_limit_before_sending_anything(run_worker):
    sid = session_id()
    async with run_worker([outside.payer]) as client:
        paused = await client.send(outside.AGENT_NAME, "charge it", session_id=sid)
        before = await _history_types(client.temporal, sid)
        with pytest.raises(DecisionTooLargeError) as refused:
            await asyncio.wait_for(client.approve(sid, paused.approval_id, arguments=_edited(3 * 1024 * 1024)), WAIT)
        error = refused.value
        assert isinstance(error, InvalidDecisionError) and error.code == "DECISION_TOO_LARGE"
        assert (error.part, error.limit, error.approval_id) == (
            "edited arguments",
            MAX_DECISION_BYTES,
            paused.approval_id,
        )
        assert error.size > 3 * 1024 * 1024
        assert f"edited arguments too large: {error.size:,} bytes, the limit is {MAX_DECISION_BYTES:,} bytes" in str(
            error
        )
        with pytest.raises(DecisionTooLargeError, match="note too large"):
            await asyncio.wait_for(client.reject(sid, paused.approval_id, note="n" * (MAX_DECISION_BYTES + 1)), WAIT)
        # before anything is sent: not even the session is looked up
        with pytest.raises(DecisionTooLargeError):
            await client.approve("no-such-session", arguments=_edited(MAX_DECISION_BYTES))
        assert await _history_types(client.temporal, sid) == before  # the run saw nothing
        assert (await client.pending_approval(sid)).approval_id == paused.approval_id
        done = await asyncio.wait_for(client.approve(sid, paused.approval_id, arguments=_edited(1000)), WAIT)
    assert done.finish_reason == "stop"
    assert outside.charges_of(sid) == [{"amount_cents": 100, "recipient": "Bob"}]


async def test_an_outside_clients_decide_update_over_the_limit_is_refused_by_its_validator(run_worker, env):
    plain = await _plain(env)
    sid = session_id()
    async with run_worker([outside.payer]) as client:
        paused = await client.send(outside.AGENT_NAME, "charge it", session_id=sid)
        handle = plain.get_workflow_handle(sid)
        before = await _history_types(client.temporal, sid)
        decision = {"approvalId": paused.approval_id, "approved": True, "arguments": _edited(1024 * 1024)}
        with pytest.raises(WorkflowUpdateFailedError) as refused:  # 1 MB: under Temporal's limit, over ours
            await asyncio.wait_for(handle.execute_update("decide", decision), WAIT)
        cause = refused.value.cause
        assert isinstance(cause, ApplicationError) and cause.type == "InvalidDecisionError"
        assert f"the limit is {MAX_DECISION_BYTES:,} bytes" in cause.message
        approval_id, problem, part, size, limit = cause.details
        assert (approval_id, part, limit) == (paused.approval_id, "edited arguments", MAX_DECISION_BYTES)
        assert problem == cause.message and size > 1024 * 1024
        assert await _history_types(client.temporal, sid) == before  # refused: nothing in history
        assert (await handle.query("pending_approval"))["approvalId"] == paused.approval_id
        outcome = await asyncio.wait_for(handle.execute_update("decide", {**decision, "arguments": _edited(10)}), WAIT)
    assert outcome["summary"]["finishReason"] == "stop"
    assert outside.charges_of(sid) == [{"amount_cents": 100, "recipient": "Bob"}]


async def test_an_update_over_temporals_own_limit_fails_and_the_run_goes_on_waiting(run_worker, env):
    """Over 2 MB the run cannot even refuse the update (Temporal's refusal carries the request
    back, over its own limit): the update fails with Temporal's error after the worker's
    retries, nothing is decided, and the run goes on waiting for a decision."""
    plain = await _plain(env)
    sid = session_id()
    async with run_worker([outside.payer]) as client:
        paused = await client.send(outside.AGENT_NAME, "charge it", session_id=sid)
        handle = plain.get_workflow_handle(sid)
        decision = {"approvalId": paused.approval_id, "approved": True, "arguments": _edited(3 * 1024 * 1024)}
        with pytest.raises((RPCError, WorkflowUpdateFailedError)):
            await asyncio.wait_for(handle.execute_update("decide", decision), WAIT)
        assert not client.store.load_header(sid).decisions
        pending = None
        for _ in range(WAIT * 10):  # its failed workflow task is retried without the update: it answers again
            with contextlib.suppress(RPCError):
                pending = await handle.query("pending_approval")
                break
            await asyncio.sleep(0.1)
        assert pending is not None and pending["approvalId"] == paused.approval_id  # still waiting
        outcome = await asyncio.wait_for(handle.execute_update("decide", {**decision, "arguments": _edited(10)}), WAIT)
    assert outcome["summary"]["finishReason"] == "stop"
    assert outside.charges_of(sid) == [{"amount_cents": 100, "recipient": "Bob"}]


async def test_an_outside_clients_approve_signal_over_the_limit_is_dropped_and_the_call_still_waits(run_worker, env):
    plain = await _plain(env)
    sid = session_id()
    async with run_worker([outside.payer]) as client:
        paused = await client.send(outside.AGENT_NAME, "charge it", session_id=sid)
        handle = plain.get_workflow_handle(sid)
        big = {"approvalId": paused.approval_id, "approved": True, "arguments": _edited(1024 * 1024)}
        await handle.signal("approve", big)  # 1 MB: Temporal takes the signal, the run must not take the decision
        said = ""
        for _ in range(WAIT * 10):
            said = await _details(handle)
            if "ignored a signal" in said:
                break
            await asyncio.sleep(0.1)
        assert "ignored a signal" in said and "edited arguments too large" in said, said
        assert (await handle.query("pending_approval"))["approvalId"] == paused.approval_id
        assert client.store.load_header(sid).status == "awaiting-approval"
        await handle.signal("approve", {**big, "arguments": _edited(10)})
        result = await asyncio.wait_for(handle.result(), WAIT)
    assert result["finishReason"] == "stop"
    assert outside.charges_of(sid) == [{"amount_cents": 100, "recipient": "Bob"}]


async def test_a_run_started_with_a_decision_over_the_limit_fails_at_once_and_the_call_still_waits(
    run_worker, env, task_queue
):
    plain = await _plain(env)
    sid = session_id()
    async with run_worker([outside.payer]) as client:
        paused = await client.send(outside.AGENT_NAME, "charge it", session_id=sid)
        await client.temporal.get_workflow_handle(sid).terminate("its worker went away")  # the run closed
        decision = {"approvalId": paused.approval_id, "approved": True, "arguments": _edited(1024 * 1024)}
        start = {"sessionId": sid, "agent": outside.AGENT_NAME, "input": [], "approval": decision}
        handle = await plain.start_workflow("AgentRun", start, id=sid, task_queue=task_queue)
        with pytest.raises(WorkflowFailureError) as failed:
            await asyncio.wait_for(handle.result(), WAIT)
        cause = failed.value.cause
        assert isinstance(cause, ApplicationError) and cause.type == "InvalidRunInputError"
        assert "edited arguments too large" in cause.message and f"{MAX_DECISION_BYTES:,} bytes" in cause.message
        header = client.store.load_header(sid)
        assert header.status == "awaiting-approval" and header.approval_id == paused.approval_id
        assert not header.decisions
        done = await asyncio.wait_for(client.approve(sid, paused.approval_id), WAIT)  # the session goes on
    assert done.finish_reason == "stop"
    assert outside.charges_of(sid) == [{"amount_cents": outside.AMOUNT_CENTS, "recipient": outside.RECIPIENT}]
