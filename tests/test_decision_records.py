"""What the approval path computes its own way (it runs with each gated call a policy
approves) is what the standard way gives: approval ids of calls approved in their model
turn, arguments digests; and each decision record reads back as it was written."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from durable_agents.activities.approval_policy import uuid5_of_url
from durable_agents.activities.approvals import decision_record
from durable_agents.activities.contracts import ApprovalDecision, PolicyVerdict, RecordDecisionInput
from durable_agents.checkpoint.approval_policy import arguments_digest
from durable_agents.checkpoint.format import Decision, Evaluation, ToolCall

pytestmark = pytest.mark.unit


@settings(max_examples=500, deadline=None)
@given(st.text())
def test_an_in_turn_approval_id_is_uuid5_of_its_name(name: str) -> None:
    assert uuid5_of_url(name) == str(uuid.uuid5(uuid.NAMESPACE_URL, name))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=10,
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=8), json_values, max_size=4))
def test_the_arguments_digest_is_of_their_canonical_json(arguments: dict) -> None:  # type: ignore[type-arg]
    import hashlib
    import json

    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert arguments_digest(arguments) == "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


CALL = ToolCall(id="call_1_0", name="refund", arguments={"amount_cents": 1200})
VERDICTS = [
    None,
    PolicyVerdict(outcome="approve", source="allow-rule", reason="allow rule 'small'", rule="small", policy_version=3),
    PolicyVerdict(outcome="approve", source="grant", reason="grant 'g1' by alice", grant_id="g1", policy_version=2),
    PolicyVerdict(outcome="deny", source="deny-rule", reason="deny rule 'huge'", rule="huge", agent_policy_version=4),
]


@pytest.mark.parametrize("verdict", VERDICTS)
@pytest.mark.parametrize(
    "decision",
    [
        ApprovalDecision(approval_id="a1", approved=True),
        ApprovalDecision(approval_id="a2", approved=True, arguments={"amount_cents": 900}, decided_by="bob", note="ok"),
        ApprovalDecision(approval_id="a3", approved=False, note="no"),
    ],
)
def test_a_decision_record_is_what_validation_gives(decision: ApprovalDecision, verdict: PolicyVerdict | None) -> None:
    evaluation = Evaluation(evaluator="python:x", criteria="refunds", verdict="approve", confidence=0.9, decided=True)
    for source, extra in [
        (None, {}),
        (verdict.source if verdict else None, {}),
        ("evaluator", {"evaluation": evaluation}),
    ]:
        inp = RecordDecisionInput(
            session_id="s", decision=decision, call=CALL, batch_start=3, batch=[CALL.id], index=0,
            source=source, policy=verdict, **extra,
        )  # fmt: skip
        for record in (
            decision_record(inp),
            decision_record(inp, CALL.arguments),
            decision_record(inp, digest="sha256:ab"),
        ):
            assert Decision.model_validate(record.model_dump()) == record
            assert Decision.model_validate_json(record.to_json()).to_json() == record.to_json()
