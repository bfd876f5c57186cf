"""Approval audit: every decision is recorded (who, when, note, edited arguments), and the
model sees the note."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from durable_agents.activities.approvals import ApprovalActivities
from durable_agents.activities.contracts import ApprovalDecision, RecordDecisionInput
from durable_agents.activities.deps import ActivityDeps
from durable_agents.checkpoint import CheckpointStatus, FinishReason, Role
from durable_agents.checkpoint.format import Checkpoint, CheckpointHeader, Message, ToolCall
from tests import agents
from tests.conftest import session_id


async def _paused_twice_then_decided(client, sid: str, **approve_kw):
    first = await client.send("payments", "Charge me twice", session_id=sid)
    assert first.finish_reason == FinishReason.AWAITING_APPROVAL
    before = datetime.now(UTC)
    second = await client.approve(sid, first.approval_id, **approve_kw)
    between = datetime.now(UTC)
    assert second.finish_reason == FinishReason.AWAITING_APPROVAL
    return first, second, before, between


async def test_every_decision_is_recorded_in_the_checkpoint_with_who_when_note_and_arguments(run_worker, store):
    sid = session_id()
    async with run_worker([agents.payments_agent]) as client:
        first, second, before, between = await _paused_twice_then_decided(
            client, sid, note="smaller, please", arguments={"amount": 9}, decided_by="alice"
        )
        third = await client.reject(sid, second.approval_id, note="once is enough", decided_by="bob")
        after = datetime.now(UTC)
    assert third.finish_reason == FinishReason.STOP
    saved = store.load(sid)
    calls = saved.messages[1].tool_calls
    approved, rejected = saved.decisions
    assert (approved.approval_id, approved.tool_call_id, approved.tool_name, approved.position) == (
        first.approval_id,
        calls[1].id,
        "charge_card",
        3,
    )
    assert (approved.approved, approved.decided_by, approved.note, approved.arguments) == (
        True,
        "alice",
        "smaller, please",
        {"amount": 9},
    )
    assert before <= approved.decided_at <= between  # the activity's clock, when it was recorded
    assert (rejected.approval_id, rejected.tool_call_id, rejected.position) == (second.approval_id, calls[2].id, 4)
    assert (rejected.approved, rejected.decided_by, rejected.note, rejected.arguments) == (
        False,
        "bob",
        "once is enough",
        None,
    )
    assert between <= rejected.decided_at <= after
    # in the documented camelCase format, and the history keeps them too
    data = json.loads(saved.to_json())["decisions"][0]
    assert {"approvalId", "toolCallId", "toolName", "approved", "decidedBy", "decidedAt", "note", "arguments"} <= set(
        data
    )
    assert [d.approval_id for d in store.history(sid)[0].checkpoint.decisions] == [
        first.approval_id,
        second.approval_id,
    ]


async def test_a_decision_without_decided_by_records_no_decider(run_worker, store):
    sid = session_id()
    async with run_worker([agents.payments_agent]) as client:
        await _paused_twice_then_decided(client, sid)
    (decision,) = store.load(sid).decisions
    assert decision.decided_by is None and decision.note is None and decision.arguments is None
    assert "decidedBy" not in json.loads(store.load(sid).to_json())["decisions"][0]


async def test_a_decision_given_after_the_run_closed_is_recorded_too(run_worker, store):
    sid = session_id()
    async with run_worker([agents.payments_agent]) as client:
        first = await client.send("payments", "Charge me twice", session_id=sid)
        await client.temporal.get_workflow_handle(sid).terminate("gone")
        await client.approve(sid, first.approval_id, decided_by="carol", note="late but fine")
    (decision,) = store.load(sid).decisions
    assert (decision.approval_id, decision.decided_by, decision.note) == (first.approval_id, "carol", "late but fine")


async def test_the_model_sees_the_rejection_note(run_worker, store):
    sid = session_id()
    async with run_worker([agents.payments_agent]) as client:
        first = await client.send("payments", "Charge me twice", session_id=sid)
        await client.reject(sid, first.approval_id, note="not today", decided_by="dave")
    result = store.load(sid).messages[3]
    assert result.role == Role.TOOL and result.is_error
    assert json.loads(result.content) == {"error": "rejected by a human reviewer", "note": "not today"}


async def test_the_model_sees_the_approval_note_and_the_edited_arguments_in_the_tool_result(run_worker, store):
    sid = session_id()
    async with run_worker([agents.payments_agent]) as client:
        await _paused_twice_then_decided(client, sid, note="smaller, please", arguments={"amount": 9})
    saved = store.load(sid)
    assert saved.messages[1].tool_calls[1].arguments == {"amount": 10}  # the model's turn is kept as it was
    assert json.loads(saved.messages[3].content) == {
        "result": {"charged": 9, "idempotency_key": saved.messages[1].tool_calls[1].id},
        "approvalNote": "smaller, please",
        "editedArguments": {"amount": 9},
    }


# -- units --------------------------------------------------------------------------------------
def test_approved_content_carries_the_note_and_the_edited_arguments():
    from durable_agents.activities.approvals import approved_content
    from durable_agents.checkpoint.format import Decision

    def decision(**kw) -> Decision:
        base = dict(approval_id="ap", tool_call_id="c", tool_name="t", approved=True, decided_at=datetime.now(UTC))
        return Decision(**{**base, **kw})

    assert approved_content('{"ok": true}', None) == '{"ok": true}'
    assert approved_content('{"ok": true}', decision()) == '{"ok": true}'  # nothing to add: unchanged
    assert json.loads(approved_content('{"ok": true}', decision(note="fine"))) == {
        "result": {"ok": True},
        "approvalNote": "fine",
    }
    assert json.loads(approved_content("plain text", decision(arguments={"a": 1}))) == {
        "result": "plain text",
        "editedArguments": {"a": 1},
    }
    failed = approved_content('{"error": "boom"}', decision(note="go"), is_error=True)
    assert json.loads(failed) == {"error": "boom", "approvalNote": "go"}  # still an {error, …} result
    assert approved_content('{"ok": 1}', decision(approved=False, note="no")) == '{"ok": 1}'


def test_checkpoints_and_decisions_written_before_the_audit_still_load():
    old = '{"formatVersion": 1, "sessionId": "s", "status": "in-progress", "messageCount": 0}'
    assert CheckpointHeader.model_validate_json(old).decisions is None
    assert Checkpoint.model_validate_json('{"sessionId": "s"}').decisions is None
    assert ApprovalDecision.model_validate({"approval_id": "a", "approved": True}).decided_by is None


async def test_a_retried_record_decision_records_the_decision_once(store):
    call = ToolCall(id="c1", name="charge_card", arguments={"amount": 10})
    store.save(
        Checkpoint(
            session_id="s",
            messages=[Message.user("go"), Message(role=Role.ASSISTANT, tool_calls=[call])],
            status=CheckpointStatus.AWAITING_APPROVAL,
            approval_id="ap-1",
        )
    )
    activities = ApprovalActivities(ActivityDeps(store=store, agents={}))
    inp = RecordDecisionInput(
        session_id="s",
        decision=ApprovalDecision(approval_id="ap-1", approved=False, note="no", decided_by="erin"),
        call=call,
        batch_start=2,
        batch=["c1"],
        index=0,
    )
    await activities.record_decision(inp)
    first = store.load("s").decisions
    await activities.record_decision(inp)  # Temporal retried it (the worker died before it reported)
    saved = store.load("s")
    assert saved.decisions == first and len(first) == 1
    assert first[0].decided_by == "erin" and first[0].position == 2
    assert [m.role for m in saved.messages] == [Role.USER, Role.ASSISTANT, Role.TOOL]
