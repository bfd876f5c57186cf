"""The backtest of a candidate policy against the decisions people made
(``checkpoint.policy_backtest``), and reading those decisions from a real store."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from durable_agents.checkpoint import (
    BacktestReport,
    PolicyCall,
    RecordedDecision,
    SqliteStore,
    backtest,
    parse_policy,
    recorded_decisions,
)
from durable_agents.checkpoint.format import (
    Checkpoint,
    CheckpointStatus,
    Decision,
    Evaluation,
    Message,
    Role,
    ToolCall,
)

T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)

POLICY = parse_policy(
    {
        "version": 4,
        "deny": [{"name": "huge", "tools": ["refund"], "when": [{"arg": "amount_cents", "op": ">", "value": 50000}]}],
        "allow": [
            {"name": "small", "tools": ["refund"], "when": [{"arg": "amount_cents", "op": "<=", "value": 5000}]},
            {"name": "lookups", "tools": ["lookup_order"]},
        ],
        "auto": {
            "evaluator": {"model": "scripted:judge"},
            "criteria": [{"name": "emails", "tools": ["send_email"], "approveWhen": ["to the customer"]}],
        },
    }
)


def recorded(tool: str, approved: bool, *, edited: dict[str, Any] | None = None, timed_out: bool = False, **arguments):
    return RecordedDecision(
        call=PolicyCall(agent="support", session_id="s", tool=tool, arguments=arguments),
        approved=approved,
        edited_arguments=edited,
        timed_out=timed_out,
        decided_by=None if timed_out else "alice",
        decided_at=T0,
    )


HAND_MADE = [
    recorded("refund", True, amount_cents=100),  # small, approved: agree
    recorded("refund", True, amount_cents=5000),  # small, approved: agree
    recorded("refund", False, amount_cents=90000),  # huge, rejected: agree
    recorded("lookup_order", True, order="A"),  # lookups, approved: agree
    recorded("refund", False, amount_cents=4000),  # small, rejected: would approve what they rejected
    recorded("lookup_order", False, order="B"),  # lookups, rejected: would approve what they rejected
    recorded("refund", True, edited={"amount_cents": 10}, amount_cents=3000),  # small, edited: approve-edited
    recorded("refund", True, amount_cents=60000),  # huge, approved: would deny what they approved
    recorded("refund", True, amount_cents=20000),  # no rule: still asks a person
    recorded("refund", False, amount_cents=30000),  # no rule: still asks a person
    recorded("send_email", True, to="x@example.com"),  # the evaluator would judge it
    recorded("refund", False, timed_out=True, amount_cents=1),  # no person decided: counted apart
]


def test_backtest_counts_on_a_hand_made_set():
    report = backtest(POLICY, HAND_MADE)
    assert report.model_dump(exclude={"examples", "by_rule"}) == {
        "policy_version": 4,
        "total": 12,
        "agree": 4,
        "would_approve_rejected": 2,
        "would_approve_edited": 1,
        "would_deny_approved": 1,
        "would_ask_person": 2,
        "would_ask_evaluator": 1,
        "no_person": 1,
        "evaluator_recorded": 0,
        "evaluator_run": 0,
        "evaluator_failed": 0,
        "evaluator_cost_usd": None,
    }
    assert report.automated == 8
    assert {name: (t.decided, t.agree, t.against) for name, t in report.by_rule.items()} == {
        "huge": (2, 1, 1),
        "lookups": (2, 1, 1),
        "small": (4, 2, 2),
    }
    # the examples: the disagreements, the count that matters first, each with why
    assert [(e.verdict, e.decision.rule) for e in report.examples] == [
        ("approve-rejected", "small"),
        ("approve-rejected", "lookups"),
        ("approve-edited", "small"),
        ("deny-approved", "huge"),
    ]
    assert report.examples[0].recorded.call.arguments == {"amount_cents": 4000}


def _said(verdict: str | None, confidence: float = 0.9, *, evaluator: str = "model:scripted:judge", criteria="emails"):
    return Evaluation(
        evaluator=evaluator, criteria=criteria, verdict=verdict, confidence=confidence, min_confidence=0.8
    )


def emailed(approved: bool, evaluation: Evaluation | None = None) -> RecordedDecision:
    return recorded("send_email", approved, to="x@example.com").model_copy(update={"evaluation": evaluation})


def test_the_auto_modes_calls_are_judged_by_recorded_verdicts_then_by_the_evaluator_when_asked():
    calls = [
        emailed(False, _said("approve")),  # recorded, sure: it would approve what they rejected
        emailed(True, _said("approve", 0.5)),  # recorded, unsure: a person again
        emailed(True, _said("deny")),  # recorded, sure: it would deny what they approved
        emailed(True, _said("approve", criteria="other")),  # judged by other criteria: unknown
        emailed(True, _said(None)),  # no verdict (cancelled: a person was first): unknown
        emailed(True),  # not judged at run time: unknown
    ]
    report = backtest(POLICY, calls)
    assert (report.would_approve_rejected, report.would_ask_person, report.would_deny_approved) == (1, 1, 1)
    assert (report.would_ask_evaluator, report.evaluator_recorded, report.evaluator_run) == (3, 3, 0)
    assert report.by_rule["evaluator:emails"].model_dump() == {"decided": 2, "agree": 0, "against": 2}

    asked: list[str] = []

    def evaluate(call, auto, criteria):
        asked.append(criteria.name)
        return Evaluation(evaluator="model:scripted:judge", criteria=criteria.name, verdict="approve",
                          confidence=0.99, cost_usd=0.25)  # fmt: skip

    report = backtest(POLICY, calls, evaluate=evaluate)  # the unknown three run; the recorded stand
    assert (report.evaluator_recorded, report.evaluator_run, report.agree, report.evaluator_cost_usd) == (3, 3, 3, 0.75)
    assert report.would_ask_evaluator == 0 and asked == ["emails"] * 3
    report = backtest(POLICY, calls, evaluate=evaluate, rerun=True)  # every one runs: the criteria changed
    assert (report.evaluator_recorded, report.evaluator_run, report.agree, report.would_approve_rejected) == (
        0,
        6,
        5,
        1,
    )

    def broken(call, auto, criteria):
        return Evaluation(evaluator="model:scripted:judge", criteria=criteria.name, error="ConnectionError: down")

    report = backtest(POLICY, calls, evaluate=broken, rerun=True)  # an error escalates: never approves
    assert (report.would_ask_person, report.evaluator_failed, report.automated) == (6, 6, 0)


def test_a_report_is_json_and_keeps_only_the_first_examples():
    report = backtest(POLICY, HAND_MADE * 5, examples=3)
    assert report.would_approve_rejected == 10
    assert [e.verdict for e in report.examples] == ["approve-rejected"] * 3 + ["approve-edited"] * 3 + [
        "deny-approved"
    ] * 3
    data = json.loads(report.to_json())
    assert data["wouldApproveRejected"] == 10 and data["byRule"]["small"] == {"decided": 20, "agree": 10, "against": 10}
    assert data["examples"][0]["decision"]["reason"] == "allow rule 'small' (amount_cents <= 5000)"
    assert BacktestReport.model_validate_json(report.to_json()) == report


def test_approve_all_is_tallied_by_name():
    report = backtest(parse_policy({"approveAll": True}), HAND_MADE)
    assert report.by_rule["approveAll"].decided == 11
    assert report.would_approve_rejected == 4 and report.would_ask_person == 0


# -- from a store ----------------------------------------------------------------------------------


def _session(store: SqliteStore, session_id: str, agent: str, decided: list[tuple[ToolCall, Decision | None]]) -> None:
    """A session in which each call is its own assistant turn, followed by its result."""
    messages, decisions = [Message.user("go")], []
    for call, decision in decided:
        messages.append(Message(role=Role.ASSISTANT, tool_calls=[call]))
        if decision is not None:
            decisions.append(decision.model_copy(update={"position": len(messages)}))
        messages.append(Message.tool_result(call, '{"ok": true}'))
    store.save(
        Checkpoint(
            session_id=session_id,
            agent=agent,
            messages=messages,
            decisions=decisions or None,
            status=CheckpointStatus.FINISHED,
        )
    )


def _decision(call: ToolCall, approved: bool, minutes: int, **more: Any) -> Decision:
    return Decision(
        approval_id=f"ap-{call.id}-{minutes}",
        tool_call_id=call.id,
        tool_name=call.name,
        approved=approved,
        decided_at=T0 + timedelta(minutes=minutes),
        **{"decided_by": "alice", **more},
    )


@pytest.fixture
def store(tmp_path):
    store = SqliteStore(tmp_path / "store.db")
    yield store
    store.close()


def test_recorded_decisions_read_a_real_store(store):
    small = ToolCall(id="call_1", name="refund", arguments={"amount_cents": 300})
    big = ToolCall(id="call_1", name="refund", arguments={"amount_cents": 9000})  # the model reused the id
    edited = ToolCall(id="call_2", name="refund", arguments={"amount_cents": 4000})
    timeout = ToolCall(id="call_3", name="refund", arguments={"amount_cents": 10})
    lookup = ToolCall(id="call_4", name="lookup_order", arguments={"order": "A"})
    _session(
        store,
        "chat-1",
        "support",
        [
            (lookup, None),  # ungated: no decision
            (small, _decision(small, False, 1, note="not this customer")),
            (big, _decision(big, True, 2)),
            (edited, _decision(edited, True, 3, arguments={"amount_cents": 400})),
            (
                timeout,
                _decision(
                    timeout, False, 4, decided_by=None, note="no decision within 0:10:00: the approval timed out"
                ),
            ),
        ],
    )
    _session(store, "ops-1", "ops", [(lookup, _decision(lookup, True, 5))])
    _session(store, "empty", "support", [])

    read = sorted(recorded_decisions(store), key=lambda r: r.decided_at)  # type: ignore[arg-type, return-value]
    assert [(r.call.session_id, r.call.agent, r.call.tool, r.call.arguments, r.approved) for r in read] == [
        ("chat-1", "support", "refund", {"amount_cents": 300}, False),
        ("chat-1", "support", "refund", {"amount_cents": 9000}, True),  # by position, not by the repeated id
        ("chat-1", "support", "refund", {"amount_cents": 4000}, True),  # the model's arguments, as shown
        ("chat-1", "support", "refund", {"amount_cents": 10}, False),
        ("ops-1", "ops", "lookup_order", {"order": "A"}, True),
    ]
    assert read[2].edited_arguments == {"amount_cents": 400} and read[1].edited_arguments is None
    assert read[3].timed_out and not any(r.timed_out for r in read[:3])
    assert (read[0].decided_by, read[0].note, read[0].approval_id) == ("alice", "not this customer", "ap-call_1-1")

    assert [r.call.agent for r in recorded_decisions(store, agent="ops")] == ["ops"]
    assert sorted(r.decided_at for r in recorded_decisions(store, since=T0 + timedelta(minutes=3))) == [
        T0 + timedelta(minutes=3),
        T0 + timedelta(minutes=4),
        T0 + timedelta(minutes=5),
    ]

    report = backtest(POLICY, read)
    assert (report.total, report.would_approve_rejected, report.would_approve_edited, report.no_person) == (5, 1, 1, 1)
    assert (report.agree, report.would_ask_person) == (1, 1)  # the lookup approved; the 9000 refund asks


def test_a_decision_whose_call_is_not_in_the_transcript_is_left_out(store):
    call = ToolCall(id="call_1", name="refund", arguments={"amount_cents": 1})
    _session(store, "s", "support", [(call, _decision(call, True, 1))])
    checkpoint = store.load("s")
    assert checkpoint is not None
    # a fork that rewrote the messages: the decision's position now holds another call
    other = ToolCall(id="call_9", name="refund", arguments={"amount_cents": 2})
    rewritten = [
        checkpoint.messages[0],
        Message(role=Role.ASSISTANT, tool_calls=[other]),
        Message.tool_result(other, "{}"),
    ]
    store.save(checkpoint.model_copy(update={"messages": rewritten, "updated_at": None}))
    assert list(recorded_decisions(store)) == []


def test_ten_thousand_recorded_decisions_are_read_and_backtested_in_seconds(store):
    for s in range(1000):
        decided = []
        for i in range(10):
            amount = (s * 10 + i) * 37 % 100000
            call = ToolCall(id=f"c{i}", name="refund", arguments={"amount_cents": amount})
            decided.append((call, _decision(call, amount < 9000, s * 10 + i)))
        _session(store, f"s{s}", "support", decided)
    started = time.perf_counter()
    report = backtest(POLICY, recorded_decisions(store))
    elapsed = time.perf_counter() - started
    assert report.total == 10_000
    assert report.agree + report.would_approve_rejected + report.would_deny_approved + report.would_ask_person == 10_000
    assert elapsed < 20, f"{elapsed:.1f} s"  # ≈ 0.4 s on a 2-core machine; the issue asks under a minute
