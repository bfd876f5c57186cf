"""Approval policies in runs (issue 42): rules, grants and auto mode decide gated calls, and
every decision says who or what decided and why. An in-process worker on the test server;
tests/crash/test_approval_policy_processes.py does the same with worker processes."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import pytest
from temporalio.client import WorkflowUpdateFailedError

from durable_agents.checkpoint import CheckpointStatus, FinishReason, Role
from durable_agents.checkpoint.approval_grants import Grant, GrantScope
from durable_agents.checkpoint.policy_book import PolicyScope, policy_book_for
from durable_agents.cli._render import decision_text
from tests import policy_agents
from tests.conftest import session_id

SMALL = {"name": "small payments", "tools": ["pay"], "when": [{"arg": "amount_cents", "op": "<=", "value": 5000}]}
BIG = {"name": "no big payments", "tools": ["pay"], "when": [{"arg": "amount_cents", "op": ">", "value": 5000}]}


def now() -> datetime:
    return datetime.now(UTC)


def set_policy(store, policy: dict, agent: str = "payer"):
    return policy_book_for(store).set_policy(PolicyScope.of_agent(agent), policy, by="ops", now=now())


def add_grant(store, grant_id: str, *, max_uses: int | None = None, expires_in: float | None = None) -> Grant:
    made = now() - timedelta(seconds=1)
    return policy_book_for(store).add_grant(
        Grant(
            id=grant_id,
            scope=GrantScope(kind="tool", tool="pay"),
            created_by="alice",
            created_at=made,
            max_uses=max_uses,
            expires_at=now() + timedelta(seconds=expires_in) if expires_in else None,
        )
    )


def results(result) -> list[dict]:
    return [json.loads(m.content) for m in result.messages if m.role == Role.TOOL]


def paid() -> list[int]:
    return [args["amount_cents"] for _, args in policy_agents.CALL_LOG]


async def test_rules_approve_and_deny_gated_calls_and_say_why(run_worker, store):
    policy_agents.CALL_LOG.clear()
    stored = set_policy(store, {"deny": [BIG], "allow": [SMALL]})
    sid = session_id()
    async with run_worker([policy_agents.payer]) as client:
        result = await client.send("payer", "1000 9000 2000", session_id=sid)
    assert result.finish_reason == FinishReason.STOP and result.text == "Paid."
    assert paid() == [1000, 2000]  # each approved call ran once; the denied one never
    first, denied, third = results(result)
    assert first["paid"] == 1000 and third["paid"] == 2000
    assert denied["error"] == "denied by the approval policy"
    assert "no big payments" in denied["note"] and "amount_cents > 5000" in denied["note"]
    # in the order they were made: the turn's approvals first (in its model activity), then the denial
    decisions = sorted(store.load(sid).decisions, key=lambda d: d.position)
    assert [(d.source, d.rule, d.approved, d.policy_version) for d in decisions] == [
        ("allow-rule", "small payments", True, stored.version),
        ("deny-rule", "no big payments", False, stored.version),
        ("allow-rule", "small payments", True, stored.version),
    ]
    assert all(d.reason and d.arguments_digest and d.decided_by is None for d in decisions)


@pytest.mark.parametrize("agent", ["payer", "payer-local"])
async def test_calls_the_policy_approves_run_as_ungated_calls_do(run_worker, store, env, agent):
    """A call a rule or a grant approves is decided in the model activity that stored its turn:
    no activity of its own for the decision, and a local step runs it in its model turn (one
    local activity a step, as for an ungated call)."""
    policy_agents.CALL_LOG.clear()
    tiny = {"name": "tiny payments", "tools": ["pay"], "when": [{"arg": "amount_cents", "op": "<=", "value": 1000}]}
    set_policy(store, {"deny": [BIG], "allow": [tiny]}, agent=agent)
    add_grant(store, f"g-{agent}", max_uses=1)
    sid = session_id()
    async with run_worker([policy_agents.payer, policy_agents.payer_local]) as client:
        result = await client.send(agent, "3000 1000", session_id=sid)  # 3000 by the grant, 1000 by the rule
    assert result.finish_reason == FinishReason.STOP and paid() == [3000, 1000]
    decisions = sorted(store.load(sid).decisions, key=lambda d: d.position)
    assert [(d.source, d.approved) for d in decisions] == [("grant", True), ("allow-rule", True)]
    types: list[str] = []
    async for event in env.client.get_workflow_handle(sid).fetch_history_events():
        if event.HasField("activity_task_scheduled_event_attributes"):
            types.append(event.activity_task_scheduled_event_attributes.activity_type.name)
        elif event.marker_recorded_event_attributes.marker_name == "core_local_activity":
            data = event.marker_recorded_event_attributes.details["data"].payloads[0].data
            types.append(json.loads(data)["activity_type"])
    assert "durable_agents.decide_by_policy" not in types
    ran_alone = types.count("durable_agents.execute_tool")
    assert ran_alone == (0 if agent == "payer-local" else 2)  # a local step ran both in its model turn


async def test_no_policy_asks_a_person_as_before(run_worker, store):
    sid = session_id()
    async with run_worker([policy_agents.payer]) as client:
        paused = await client.send("payer", "1000", session_id=sid)
        assert paused.finish_reason == FinishReason.AWAITING_APPROVAL
        done = await client.approve(sid, paused.approval_id, decided_by="bob")
    assert done.finish_reason == FinishReason.STOP
    [decision] = store.load(sid).decisions
    assert (decision.source, decision.decided_by, decision.policy_version) == ("person", "bob", None)


async def test_a_grant_approves_until_its_uses_are_taken_and_a_deny_rule_beats_it(run_worker, store):
    policy_agents.CALL_LOG.clear()
    add_grant(store, "g-two", max_uses=2)
    set_policy(store, {"deny": [BIG]})
    sid = session_id()
    async with run_worker([policy_agents.payer]) as client:
        paused = await client.send("payer", "100 9000 200 300", session_id=sid)
        # 100 and 200 by the grant, 9000 denied though the grant covers pay; 300: the grant is used up
        assert paused.finish_reason == FinishReason.AWAITING_APPROVAL
        assert (await client.pending_approval(sid)).arguments == {"amount_cents": 300}
        done = await client.reject(sid, paused.approval_id, decided_by="bob")
    assert done.finish_reason == FinishReason.STOP and paid() == [100, 200]
    decisions = sorted(store.load(sid).decisions, key=lambda d: d.position)  # (the grant's made first)
    assert [(d.source, d.grant_id or d.rule) for d in decisions] == [
        ("grant", "g-two"),
        ("deny-rule", "no big payments"),
        ("grant", "g-two"),
        ("person", None),
    ]
    grant = policy_book_for(store).get_grant("g-two")
    assert grant is not None and grant.uses == 2


async def test_a_revoked_grant_stops_the_next_call(run_worker, store):
    policy_agents.CALL_LOG.clear()
    add_grant(store, "g-revoked")
    sid = session_id()
    async with run_worker([policy_agents.payer]) as client:
        first = await client.send("payer", "100", session_id=sid)
        assert first.finish_reason == FinishReason.STOP
        policy_book_for(store).revoke_grant("g-revoked", by="alice", now=now())
        second = await client.send("payer", "200", session_id=sid)
        assert second.finish_reason == FinishReason.AWAITING_APPROVAL
        await client.reject(sid, second.approval_id)
    assert paid() == [100]
    assert [d.source for d in store.load(sid).decisions] == ["grant", "person"]


async def test_a_policy_change_decides_the_next_gated_call_of_a_running_session(run_worker, store):
    policy_agents.CALL_LOG.clear()
    sid = session_id()
    async with run_worker([policy_agents.payer]) as client:
        paused = await client.send("payer", "100 200", session_id=sid)  # no policy: a person
        stored = set_policy(store, {"allow": [SMALL]})
        done = await client.approve(sid, paused.approval_id)  # the next call: under the new policy
    assert done.finish_reason == FinishReason.STOP and paid() == [100, 200]
    assert [(d.source, d.policy_version) for d in store.load(sid).decisions] == [
        ("person", None),
        ("allow-rule", stored.version),
    ]


async def test_a_decision_with_a_grant_approves_the_next_calls(run_worker, store, env):
    policy_agents.CALL_LOG.clear()
    sid = session_id()
    async with run_worker([policy_agents.payer]) as client:
        paused = await client.send("payer", "100 200 300", session_id=sid)
        handle = env.client.get_workflow_handle(sid)
        grant = {"scope": "session", "maxUses": 1, "expiresInSeconds": 600}
        await handle.execute_update(
            "decide", {"approvalId": paused.approval_id, "approved": True, "decidedBy": "carol", "grant": grant}
        )
        again = await client.outcome(sid)  # 200 by the grant; 300 asks again (one use)
        assert again.finish_reason == FinishReason.AWAITING_APPROVAL
        assert (await client.pending_approval(sid)).arguments == {"amount_cents": 300}
        await client.approve(sid, again.approval_id)
    decisions = store.load(sid).decisions
    made = f"grant-{paused.approval_id}"
    assert [(d.source, d.grant_created, d.grant_id) for d in decisions] == [
        ("person", made, None),
        ("grant", None, made),
        ("person", None, None),
    ]
    kept = policy_book_for(store).get_grant(made)
    assert kept is not None and kept.created_by == "carol" and kept.scope.session_id == sid
    assert kept.expires_at is not None and kept.uses == 1 and kept.approval_id == paused.approval_id


@pytest.mark.parametrize(
    ("decision", "problem"),
    [
        ({"approved": True, "arguments": {"amount_cents": 1}}, "edited arguments makes no grant"),
        ({"approved": False}, "a rejected call makes no grant"),
        ({"approved": True, "grant": {"scope": "agent", "when": [{"arg": "nope", "op": "==", "value": 1}]}}, "nope"),
    ],
)
async def test_a_grant_the_decision_cannot_make_is_refused(run_worker, store, env, decision, problem):
    sid = session_id()
    async with run_worker([policy_agents.payer]) as client:
        paused = await client.send("payer", "100", session_id=sid)
        handle = env.client.get_workflow_handle(sid)
        body = {"approvalId": paused.approval_id, "grant": {"scope": "session"}, **decision}
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update("decide", body)
        assert problem in str(refused.value.cause)
        assert refused.value.cause.type == "InvalidDecisionError"
        # a signal with it is dropped; the approval still waits
        await handle.signal("approve", body)
        assert (await client.pending_approval(sid)).approval_id == paused.approval_id
        await client.reject(sid, paused.approval_id)
    assert policy_book_for(store).list_grants() == []


# -- auto mode ----------------------------------------------------------------------------------


def auto_policy(evaluator: dict, *, timeout: float = 30, min_confidence: float = 0.8) -> dict:
    criteria = {"name": "payments", "tools": ["pay"], "purpose": "pays money", "approveWhen": ["small amounts"]}
    return {"auto": {"evaluator": evaluator, "criteria": [criteria], "minConfidence": min_confidence,
                     "timeoutSeconds": timeout}}  # fmt: skip


async def _decided(store, sid: str, count: int = 1):
    for _ in range(400):
        header = store.load_header(sid)
        if header is not None and len(header.decisions or []) >= count:
            return header.decisions
        await asyncio.sleep(0.05)
    raise AssertionError(f"{sid}: no decision recorded")


async def test_auto_mode_approves_and_denies_with_confidence(run_worker, store):
    policy_agents.CALL_LOG.clear()
    set_policy(store, auto_policy({"python": "tests.policy_agents:judge_sure"}))
    sid = session_id()
    async with run_worker([policy_agents.payer]) as client:
        paused = await client.send("payer", "100 9000", session_id=sid)
        # the approval was opened for people to see while the evaluator judged it
        assert paused.finish_reason == FinishReason.AWAITING_APPROVAL
        done = await client.result(sid)
    assert done.finish_reason == FinishReason.STOP and paid() == [100]
    approved, denied = store.load(sid).decisions
    assert (approved.source, approved.approved, approved.criteria) == ("evaluator", True, "payments")
    assert approved.evaluation.verdict == "approve" and approved.evaluation.confidence == 0.95
    assert approved.evaluation.decided and approved.evaluation.latency_ms is not None
    assert "small payment" in approved.reason
    took = f"the evaluator's verdict approve in {approved.evaluation.latency_ms:.0f} ms"
    assert took in decision_text(approved)  # what the CLI shows (approvals --decided, show)
    assert (denied.source, denied.approved) == ("evaluator", False)
    assert results(done)[1]["error"] == "denied by the approval policy"


async def test_a_model_evaluator_judges_through_the_providers(run_worker, store):
    policy_agents.CALL_LOG.clear()
    set_policy(store, auto_policy({"model": "scripted:judge"}))
    sid = session_id()
    async with run_worker([policy_agents.payer]) as client:
        await client.send("payer", "100", session_id=sid)
        done = await client.result(sid)
    assert done.finish_reason == FinishReason.STOP and paid() == [100]
    [decision] = store.load(sid).decisions
    assert decision.source == "evaluator" and decision.evaluation.evaluator == "model:scripted:judge"
    assert decision.evaluation.usage is not None and decision.evaluation.usage.output_tokens > 0
    assert decision.evaluation.cost_usd is None  # no price for scripted models


@pytest.mark.parametrize(
    ("evaluator", "timeout", "escalated"),
    [
        ({"python": "tests.policy_agents:judge_broken"}, 30, "error: RuntimeError"),
        ({"python": "tests.policy_agents:judge_unsure"}, 30, "low confidence: 0.30 < minConfidence 0.80"),
        ({"python": "tests.policy_agents:judge_escalates"}, 30, "the evaluator escalated"),
        ({"python": "tests.policy_agents:judge_slow"}, 1, "timeout"),
        ({"model": "scripted:judge-prose"}, 30, "error: ValueError"),
    ],
)
async def test_auto_mode_leaves_the_call_to_a_person_when_unsure(run_worker, store, evaluator, timeout, escalated):
    policy_agents.CALL_LOG.clear()
    set_policy(store, auto_policy(evaluator, timeout=timeout))
    sid = session_id()
    async with run_worker([policy_agents.payer]) as client:
        paused = await client.send("payer", "100", session_id=sid)
        await asyncio.sleep(timeout + 1.5 if timeout < 5 else 1.0)  # the evaluator has had its say
        assert (await client.pending_approval(sid)).approval_id == paused.approval_id  # never fails open
        assert store.load_header(sid).status == CheckpointStatus.AWAITING_APPROVAL and paid() == []
        done = await client.approve(sid, paused.approval_id, decided_by="dora")
    assert done.finish_reason == FinishReason.STOP and paid() == [100]
    [decision] = store.load(sid).decisions
    assert (decision.source, decision.decided_by) == ("person", "dora")
    assert decision.evaluation is not None and not decision.evaluation.decided
    assert escalated in decision.evaluation.escalated
    assert "the evaluator left it to a person" in decision_text(decision)


async def test_a_person_deciding_first_cancels_the_evaluator(run_worker, store):
    policy_agents.CALL_LOG.clear()
    set_policy(store, auto_policy({"python": "tests.policy_agents:judge_slow"}, timeout=120))
    sid = session_id()
    async with run_worker([policy_agents.payer]) as client:
        paused = await client.send("payer", "100", session_id=sid)
        done = await client.reject(sid, paused.approval_id, decided_by="erin", note="not today")
    assert done.finish_reason == FinishReason.STOP and paid() == []
    [decision] = store.load(sid).decisions
    assert (decision.source, decision.decided_by, decision.approved) == ("person", "erin", False)
    assert decision.evaluation.escalated == "a person decided first" and decision.evaluation.verdict is None


# -- every decision says why: Current Details, the event stream, the audit -------------------------


async def _details(handle) -> str:
    meta = await handle.query("__temporal_workflow_metadata")
    return meta.get("currentDetails", "") if isinstance(meta, dict) else meta.current_details


async def test_current_details_and_the_event_stream_say_who_decided(run_worker, store, env):
    tiny = {"name": "tiny payments", "tools": ["pay"], "when": [{"arg": "amount_cents", "op": "<", "value": 10}]}
    set_policy(store, {"deny": [BIG], "allow": [tiny]})
    add_grant(store, "g-events", max_uses=1)
    sid = session_id()
    async with run_worker([policy_agents.payer]) as client:
        events = [e async for e in client.stream("payer", "100 9000 7", session_id=sid)]
        # 100 by the grant, 9000 denied, 7 by the allow rule; a person never asked
        details = await _details(env.client.get_workflow_handle(sid))
    assert "last decision: pay call_1_2 approved by allow rule 'tiny payments'" in details
    assert "policy v1" in details
    # as they were made (the turn's approvals in its model activity, then the denial), in call order here
    decided = sorted((e for e in events if e.type == "approval-decided"), key=lambda e: e.tool_call_id)
    assert [(e.source, e.grant_id or e.rule, e.approved) for e in decided] == [
        ("grant", "g-events", True),
        ("deny-rule", "no big payments", False),
        ("allow-rule", "tiny payments", True),
    ]
    assert all(e.policy_version == 1 and e.reason for e in decided)
    assert not [e for e in events if e.type == "approval-requested"]


def test_the_audit_says_who_or_what_decided_and_why(store):
    from durable_agents.checkpoint.format import Decision, Evaluation
    from durable_agents.cli._render import decision_text

    at = now()
    rule = Decision(approval_id="a1", tool_call_id="c", tool_name="pay", approved=False, decided_at=at,
                    source="deny-rule", rule="no big", reason="deny rule 'no big' (amount_cents > 5000)",
                    policy_version=3)  # fmt: skip
    assert "✗ denied by deny rule 'no big' under policy v3" in decision_text(rule)
    assert "because deny rule 'no big' (amount_cents > 5000)" in decision_text(rule)
    granted = rule.model_copy(update={"approved": True, "source": "grant", "grant_id": "g-1", "rule": None})
    assert "✓ approved by grant g-1 under policy v3" in decision_text(granted)
    judged = Evaluation(evaluator="python:x:y", criteria="payments", verdict="approve", confidence=0.3,
                        min_confidence=0.8, escalated="low confidence: 0.30 < minConfidence 0.80")  # fmt: skip
    person = Decision(approval_id="a2", tool_call_id="c", tool_name="pay", approved=True, decided_at=at,
                      decided_by="dora", source="person", evaluation=judged, grant_created="grant-a2")  # fmt: skip
    text = decision_text(person)
    assert "✓ approved by dora" in text and "the evaluator left it to a person (low confidence" in text
    assert "made grant grant-a2" in text
    old = Decision(approval_id="a3", tool_call_id="c", tool_name="pay", approved=True, decided_at=at, decided_by="bo")
    assert "✓ approved by bo at" in decision_text(old)  # a record from before policies reads as before


async def test_the_approvals_audit_command_lists_policy_decisions_like_a_persons(run_worker, store, tmp_path):
    import argparse
    import contextlib
    import io

    from durable_agents.cli.approvals import cmd_approvals, decided_calls

    set_policy(store, {"allow": [SMALL]})
    sid = session_id()
    async with run_worker([policy_agents.payer]) as client:
        paused = await client.send("payer", "100 9000", session_id=sid)
        await client.approve(sid, paused.approval_id, decided_by="hal")
    entries = [e for e in decided_calls(store, "payer", 50) if e.session_id == sid]
    assert [(e.decision.source, e.decision.decided_by) for e in entries] == [("person", "hal"), ("allow-rule", None)]
    out = io.StringIO()
    args = argparse.Namespace(decided=True, agent="payer", limit=50, json=False, store=f"sqlite:///{store.path}")
    with contextlib.redirect_stdout(out):
        assert await cmd_approvals(args) == 0
    lines = [line for line in out.getvalue().splitlines() if line.startswith(sid)]
    assert "approved by hal" in lines[0] and "approved by allow rule 'small payments' under policy v1" in lines[1]


async def test_the_client_and_the_cli_make_a_grant_with_an_approval(run_worker, store):
    import argparse

    from durable_agents.cli._common import UsageError
    from durable_agents.cli.approvals import _grant

    policy_agents.CALL_LOG.clear()
    sid = session_id()
    async with run_worker([policy_agents.payer]) as client:
        paused = await client.send("payer", "100 200", session_id=sid)
        done = await client.approve(sid, paused.approval_id, decided_by="ivy", grant={"scope": "tool", "maxUses": 1})
    assert done.finish_reason == FinishReason.STOP and paid() == [100, 200]
    assert [d.source for d in store.load(sid).decisions] == ["person", "grant"]

    flags = {"grant": "agent", "grant_for": 600.0, "grant_uses": 3, "grant_when": None, "arguments": None}
    made = _grant(argparse.Namespace(**flags))
    assert made is not None and (made.scope, made.expires_in_seconds, made.max_uses) == ("agent", 600.0, 3)
    with pytest.raises(UsageError, match="cannot go with --arguments"):
        _grant(argparse.Namespace(**{**flags, "arguments": '{"amount_cents": 1}'}))
    with pytest.raises(UsageError, match="go with --grant"):
        _grant(argparse.Namespace(**{**flags, "grant": None}))


async def test_a_backtest_compares_with_peoples_decisions_only(run_worker, store):
    from durable_agents.checkpoint.policy_backtest import recorded_decisions

    set_policy(store, {"allow": [SMALL]})
    sid = session_id()
    async with run_worker([policy_agents.payer]) as client:
        paused = await client.send("payer", "100 9000", session_id=sid)  # 100 by the rule, 9000 by a person
        await client.reject(sid, paused.approval_id, decided_by="jo")
    recorded = [r for r in recorded_decisions(store, agent="payer") if r.call.session_id == sid]
    assert [(r.call.arguments["amount_cents"], r.decided_by, r.approved) for r in recorded] == [(9000, "jo", False)]


async def test_an_approval_timeout_is_recorded_as_the_timeouts_decision(run_worker, store):
    policy_agents.CALL_LOG.clear()
    sid = session_id()
    async with run_worker([policy_agents.hasty]) as client:
        await client.send("hasty", "100", session_id=sid)
        done = await client.result(sid)
    assert done.finish_reason == FinishReason.STOP and paid() == []
    [decision] = store.load(sid).decisions
    assert (decision.source, decision.approved, decision.decided_by) == ("timeout", False, None)
    assert "timed out" in decision.reason


async def test_deciding_again_answers_what_was_recorded_and_takes_no_second_use(run_worker, store):
    """The policy's activity retried (a worker lost after it recorded, before Temporal knew), or
    a resumed run deciding the same call again: it answers the decision recorded for the call,
    whatever the policy and grants say now, and records nothing more."""
    from durable_agents.activities.approval_policy import DecideByPolicyInput, PolicyDecisionActivities
    from durable_agents.activities.deps import ActivityDeps
    from durable_agents.checkpoint.format import ToolCall

    sid = session_id()
    async with run_worker([policy_agents.payer]) as client:
        paused = await client.send("payer", "100", session_id=sid)  # no policy yet: it waits
        add_grant(store, "g-retry", max_uses=5)
        deps = ActivityDeps(store=store, agents={"payer": policy_agents.payer})
        header = store.load(sid)
        turn = next(i for i, m in enumerate(header.messages) if m.tool_calls)
        call = ToolCall(id=header.messages[turn].tool_calls[0].id, name="pay")
        inp = DecideByPolicyInput(
            session_id=sid, agent="payer", approval_id="retry-1", call=call, batch_start=turn + 1,
            batch=[call.id], index=0, turn_position=turn,
        )  # fmt: skip
        decide = PolicyDecisionActivities(deps)._decide
        first = decide(inp)
        policy_book_for(store).revoke_grant("g-retry", by="ops", now=now())
        set_policy(store, {"deny": [{"name": "all", "tools": ["pay"]}]})
        again = decide(inp)
        assert first.verdict.source == again.verdict.source == "grant"
        assert again.verdict.grant_id == "g-retry" and first.recorded_through == again.recorded_through
        resumed = decide(inp.model_copy(update={"approval_id": "resumed-1"}))  # a new run, the same call
        assert (resumed.verdict.source, resumed.verdict.grant_id) == ("grant", "g-retry")
        assert policy_book_for(store).get_grant("g-retry").uses == 1
        assert [d.approval_id for d in store.load(sid).decisions] == ["retry-1"]
        await client.cancel(sid)
    assert paused.approval_id != "retry-1"


# -- sub-agents: a sub-agent's gated call is decided by its own agent's policy ------------------


@pytest.mark.parametrize("how", ["rule", "evaluator"])
async def test_a_subagents_gated_call_is_decided_by_its_agents_policy(run_worker, store, tmp_path, how):
    from durable_agents.testing import configured
    from tests import subagent_agents as sa

    if how == "rule":
        set_policy(store, {"allow": [{"name": "notes", "tools": ["publish"]}]}, agent="writer")
    else:
        criteria = {"name": "notes", "tools": ["publish"], "approveWhen": ["a note"]}
        auto = {"evaluator": {"python": "tests.policy_agents:judge_sure"}, "criteria": [criteria]}
        set_policy(store, {"auto": auto}, agent="writer")
    sid = session_id()
    with configured(log_dir=tmp_path):
        async with run_worker([sa.lead]) as client:
            first = await asyncio.wait_for(client.send("lead", "Rome", session_id=sid), 60)
            done = first if how == "rule" else await asyncio.wait_for(client.result(sid), 60)
    assert done.finish_reason == FinishReason.STOP
    if how == "rule":  # decided before any pause: the parent never waited
        assert first.finish_reason == FinishReason.STOP
    [decision] = store.load(f"{sid}/4").decisions  # the writer's session
    assert decision.source == ("allow-rule" if how == "rule" else "evaluator") and decision.approved


async def test_cancelling_a_run_while_the_evaluator_judges_stops_both(run_worker, store):
    policy_agents.CALL_LOG.clear()
    set_policy(store, auto_policy({"python": "tests.policy_agents:judge_slow"}, timeout=120))
    sid = session_id()
    async with run_worker([policy_agents.payer]) as client:
        paused = await client.send("payer", "100", session_id=sid)
        assert paused.finish_reason == FinishReason.AWAITING_APPROVAL
        aborted = await asyncio.wait_for(client.cancel(sid), 30)
    assert aborted is not None and aborted.finish_reason == FinishReason.ABORTED and paid() == []


# -- the backtest of an auto mode: the evaluator's recorded verdicts, or the evaluator run ------------


async def _left_to_a_person(handle, approval_id: str) -> None:
    """Until the evaluator has had its say on the waiting call and left it to a person."""
    for _ in range(200):
        details = await _details(handle)
        if approval_id in details and "the evaluator left it to a person" in details:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"the evaluator never left {approval_id} to a person: {details!r}")


async def test_a_backtest_judges_auto_mode_calls_by_the_evaluators_recorded_verdicts_or_runs_it(
    run_worker, store, env, tmp_path
):
    """Issue 42 §5: a candidate auto mode is judged by what its evaluator said of each call at
    run time when the same evaluator judged it by the same criteria set (nothing runs, its
    minConfidence is the candidate's); with ``--evaluate``, by the evaluator run now (a Python
    function, or a model through the providers), an error counting as asking a person."""
    from durable_agents.checkpoint import parse_policy
    from durable_agents.checkpoint.policy_backtest import backtest, recorded_decisions
    from tests.cli.conftest import Cli

    policy_agents.CALL_LOG.clear()
    unsure = {"python": "tests.policy_agents:judge_unsure"}  # approve, at 0.30: under 0.80, a person decides
    set_policy(store, auto_policy(unsure))
    sid = session_id()
    async with run_worker([policy_agents.payer]) as client:
        handle = env.client.get_workflow_handle(sid)
        first = await client.send("payer", "100 9000", session_id=sid)
        await _left_to_a_person(handle, first.approval_id)
        second = await client.approve(sid, first.approval_id, decided_by="dora")
        await _left_to_a_person(handle, second.approval_id)
        done = await client.reject(sid, second.approval_id, decided_by="dora")
    assert done.finish_reason == FinishReason.STOP and paid() == [100]
    records = list(recorded_decisions(store, agent="payer"))
    assert [(r.call.arguments["amount_cents"], r.approved, r.evaluation.verdict, r.evaluation.confidence)
            for r in records] == [(100, True, "approve", 0.3), (9000, False, "approve", 0.3)]  # fmt: skip

    # the policy as it ran: both left to a person again, from the recorded verdicts
    report = backtest(parse_policy(auto_policy(unsure)), records)
    assert (report.would_ask_person, report.evaluator_recorded, report.evaluator_run) == (2, 2, 0)
    # trusting the same evaluator more: its recorded "approve" would have approved what dora rejected
    report = backtest(parse_policy(auto_policy(unsure, min_confidence=0.2)), records)
    assert (report.agree, report.would_approve_rejected, report.evaluator_recorded) == (1, 1, 2)
    assert report.by_rule["evaluator:payments"].model_dump() == {"decided": 2, "agree": 1, "against": 1}
    [example] = report.examples
    assert (
        example.recorded.call.arguments == {"amount_cents": 9000} and example.evaluation.reasoning == "not sure at all"
    )

    # another evaluator: no verdict of it is recorded; the CLI (a process) runs it only when asked
    cli = Cli("unused:7233", "unused", store.path)
    sure = tmp_path / "sure.json"
    sure.write_text(json.dumps(auto_policy({"python": "tests.policy_agents:judge_sure"})))
    as_recorded = json.loads(cli.ok("policy", "test", "--policy", str(sure), "--agent", "payer", "--json", "-"))
    assert (as_recorded["wouldAskEvaluator"], as_recorded["evaluatorRun"]) == (2, 0)
    table = cli.ok("policy", "test", "--policy", str(sure), "--agent", "payer")
    assert "would ask the evaluator (no verdict known)" in table and "--evaluate missing runs it" in table
    ran = json.loads(
        cli.ok("policy", "test", "--policy", str(sure), "--agent", "payer", "--evaluate", "missing", "--json", "-")
    )
    assert (ran["agree"], ran["evaluatorRun"], ran["evaluatorFailed"], ran["wouldAskEvaluator"]) == (2, 2, 0, 0)
    # a model evaluator through the providers: the scripted judge registered by --import
    judge = tmp_path / "judge.json"
    judge.write_text(json.dumps(auto_policy({"model": "scripted:judge"})))
    by_model = cli.ok("policy", "test", "--policy", str(judge), "--agent", "payer", "--evaluate", "all",
                      "--import", "tests.policy_agents")  # fmt: skip
    assert "agree with people" in by_model and "0 verdicts recorded at run time, 2 run now" in by_model
    # a broken evaluator escalates: asking a person, never approving; a module that is not there: one line
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(auto_policy({"python": "tests.policy_agents:judge_broken"})))
    failed = json.loads(
        cli.ok("policy", "test", "--policy", str(broken), "--agent", "payer", "--evaluate", "all", "--json", "-")
    )
    assert (failed["wouldAskPerson"], failed["evaluatorFailed"], failed["agree"]) == (2, 2, 0)
    missing = cli("policy", "test", "--policy", str(judge), "--evaluate", "all", "--import", "tests.no_such_module")
    assert missing.returncode == 2 and "--import tests.no_such_module: cannot import it" in missing.stderr
