"""Human approvals: mid-batch pauses, decisions as signals and updates, long waits."""

from __future__ import annotations

import asyncio
import json

import pytest
from temporalio.client import WorkflowUpdateFailedError

from durable_agents import ApprovalNotPendingError, SessionAwaitingApprovalError
from durable_agents.activities.contracts import ApprovalDecision
from durable_agents.checkpoint import CheckpointStatus, FinishReason, Role
from durable_agents.providers import scripted
from tests import agents
from tests.conftest import session_id


def _results(result) -> list:
    return [m for m in result.messages if m.role == Role.TOOL]


def _model_calls(sid: str) -> int:
    return sum(1 for _, s, _ in scripted.calls if s == sid)


async def test_free_gated_gated_pauses_twice_then_one_model_call(run_worker, store):
    agents.CALL_LOG.clear()
    sid = session_id()
    async with run_worker([agents.payments_agent]) as client:
        first = await client.send("payments", "Charge me twice", session_id=sid)
        assert first.finish_reason == FinishReason.AWAITING_APPROVAL
        calls = first.messages[1].tool_calls
        # the free call before the gated one ran and is recorded; the rest wait
        assert [m.tool_call_id for m in _results(first)] == [calls[0].id]
        saved = store.load(sid)
        assert saved.status == CheckpointStatus.AWAITING_APPROVAL and saved.approval_id == first.approval_id
        assert [c.id for c in saved.remaining_tool_calls] == [calls[2].id]
        pending = await client.pending_approval(sid)
        assert (pending.tool_name, pending.tool_call_id, pending.arguments) == (
            "charge_card",
            calls[1].id,
            {"amount": 10},
        )

        second = await client.approve(sid, first.approval_id)
        assert second.finish_reason == FinishReason.AWAITING_APPROVAL
        assert second.approval_id not in (None, first.approval_id)
        assert store.load(sid).remaining_tool_calls == []

        third = await client.reject(sid, second.approval_id, note="too expensive")
    assert third.finish_reason == FinishReason.STOP
    results = _results(third)
    assert [m.tool_call_id for m in results] == [c.id for c in calls]  # one each, in call order
    assert json.loads(results[1].content) == {"charged": 10, "idempotency_key": calls[1].id}
    assert json.loads(results[2].content)["note"] == "too expensive" and results[2].is_error
    assert [(n, a) for n, _, a in agents.CALL_LOG] == [
        ("get_weather", {"city": "Rome"}),
        ("charge_card", {"amount": 10}),
    ]
    assert _model_calls(sid) == 2  # the first turn, then exactly one after every call had a result
    assert third.text == "All calls have results."


async def test_send_while_waiting_and_bad_decisions_are_refused(run_worker, store):
    agents.CALL_LOG.clear()
    sid = session_id()
    async with run_worker([agents.payments_agent]) as client:
        paused = await client.send("payments", "Charge me", session_id=sid)
        with pytest.raises(SessionAwaitingApprovalError):
            await client.send("payments", "hello?", session_id=sid)
        with pytest.raises(ApprovalNotPendingError, match="no approval nope"):
            await client.approve(sid, "nope")
        handle = client.temporal.get_workflow_handle(sid)
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update("decide", ApprovalDecision(approval_id="bogus", approved=True))
        assert f"approval bogus is not pending in this run (pending: {paused.approval_id})" in str(refused.value.cause)
        # a signal with a wrong id is ignored, never applied to the pending call
        await handle.signal("approve", ApprovalDecision(approval_id="bogus", approved=True))
        assert (await client.pending_approval(sid)).approval_id == paused.approval_id
        assert [n for n, _, _ in agents.CALL_LOG] == ["get_weather"]
        nxt = await client.approve(sid, paused.approval_id)
        with pytest.raises(ApprovalNotPendingError):
            await client.approve(sid, paused.approval_id)  # the same decision again: refused
        # the same decision as a signal: ignored
        await handle.signal("approve", ApprovalDecision(approval_id=paused.approval_id, approved=True))
        done = await client.reject(sid, nxt.approval_id)
    assert done.finish_reason == FinishReason.STOP
    assert [n for n, _, _ in agents.CALL_LOG].count("charge_card") == 1


async def test_conditional_approval_and_argument_override(run_worker):
    agents.CALL_LOG.clear()
    sid = session_id()
    async with run_worker([agents.email_agent]) as client:
        paused = await client.send("emailer", "Mail both", session_id=sid)
        pending = await client.pending_approval(sid)
        assert pending.arguments == {"to": "client@else.example"}  # only the external one is gated
        done = await client.approve(sid, paused.approval_id, arguments={"to": "legal@else.example"})
    assert [a for _, _, a in agents.CALL_LOG] == [{"to": "team@ours.example"}, {"to": "legal@else.example"}]
    assert done.finish_reason == FinishReason.STOP


async def test_waiting_runs_are_found_by_search_attribute(run_worker, env):
    sid, other = session_id(), session_id()
    async with run_worker([agents.payments_agent, agents.weather_agent]) as client:
        paused = await client.send("payments", "Charge me", session_id=sid)
        await client.send("booker", "Book a table for 2 tonight", session_id=other)
        query = f'AgentStatus = "awaiting-approval" AND WorkflowId IN ("{sid}", "{other}")'
        import asyncio

        for _ in range(100):  # visibility is eventually consistent
            found = [w.id async for w in env.client.list_workflows(query)]
            if found:
                break
            await asyncio.sleep(0.1)
        assert found == [sid]
        described = await env.client.get_workflow_handle(sid).describe()
        assert (
            described.typed_search_attributes.get(
                __import__("durable_agents.workflows.search", fromlist=["x"]).PENDING_APPROVAL_ID
            )
            == paused.approval_id
        )
        await client.cancel(sid)


async def test_approval_after_the_run_was_terminated_resumes_from_the_checkpoint(run_worker, store):
    agents.CALL_LOG.clear()
    sid = session_id()
    async with run_worker([agents.payments_agent]) as client:
        paused = await client.send("payments", "Charge me", session_id=sid)
        await client.temporal.get_workflow_handle(sid).terminate("operator cleanup")
        resumed = await client.approve(sid, paused.approval_id)
        assert resumed.finish_reason == FinishReason.AWAITING_APPROVAL  # on the third call
        done = await client.reject(sid, resumed.approval_id, note="no")
    results = _results(done)
    assert len(results) == 3 and json.loads(results[1].content)["charged"] == 10
    assert [n for n, _, _ in agents.CALL_LOG].count("charge_card") == 1
    assert [n for n, _, _ in agents.CALL_LOG].count("get_weather") == 1  # recorded: never re-run


def test_listing_a_long_paused_session_reads_its_last_turn_not_its_whole_transcript(tmp_path):
    """The pending call is found from the end of the transcript: listing approvals costs
    the same for a session of 4,000 messages as for one of 4 (it read all of them before)."""
    from durable_agents import AgentClient
    from durable_agents.checkpoint.format import Checkpoint, CheckpointStatus, Message, ToolCall
    from tests.counting_store import CountingStore

    store = CountingStore(tmp_path / "s.db")
    older = [Message.user("hello")] + [Message(role="assistant", content=f"turn {i}") for i in range(3_998)]
    calls = [ToolCall(id="c1", name="charge_card", arguments={"amount": 5}), ToolCall(id="c2", name="noop")]
    store.save(
        Checkpoint(
            session_id="long",
            agent="payments",
            status=CheckpointStatus.AWAITING_APPROVAL,
            approval_id="ap-1",
            remaining_tool_calls=calls[1:],
            messages=[*older, Message(role="assistant", tool_calls=calls)],
        )
    )
    store.reset()
    [pending] = AgentClient(None, store).pending_approvals()  # type: ignore[arg-type]  # store only
    assert (pending.tool_call_id, pending.arguments, pending.approval_id) == ("c1", {"amount": 5}, "ap-1")
    assert [c.id for c in pending.remaining_tool_calls] == ["c2"]
    assert store.parsed <= 64, f"{store.parsed} messages parsed to list one approval"


async def test_two_decisions_in_one_workflow_task_one_wins_the_other_is_refused(run_worker, store):
    """Two ``decide`` updates that reach the run in the same workflow task (both sent while no
    worker ran): the first is taken, the second refused as already decided, never answered as
    if its decision had been taken. (Each update's validator and the start of its handler run
    together, before the next update's validator: ``decide`` records the decision before its
    first await, which this test holds it to.)"""
    agents.CALL_LOG.clear()
    sid = session_id()
    async with run_worker([agents.payments_agent]) as client:
        paused = await client.send("payments", "Charge me", session_id=sid)
    handle = client.temporal.get_workflow_handle(sid)
    approve = ApprovalDecision(approval_id=paused.approval_id, approved=True, decided_by="ana")
    reject = ApprovalDecision(approval_id=paused.approval_id, approved=False, decided_by="bo")
    first = asyncio.ensure_future(handle.execute_update("decide", approve))
    await asyncio.sleep(0.5)  # queued in Temporal before the other one
    second = asyncio.ensure_future(handle.execute_update("decide", reject))
    await asyncio.sleep(0.5)
    async with run_worker([agents.payments_agent]):
        won = await asyncio.wait_for(first, 60)
        with pytest.raises(WorkflowUpdateFailedError) as lost:
            await asyncio.wait_for(second, 60)
    assert "was already decided" in str(lost.value.cause)
    assert won["summary"] is not None  # the run's next outcome, for the winner
    recorded = store.load(sid).decisions
    assert [(d.approved, d.decided_by) for d in recorded] == [(True, "ana")]
