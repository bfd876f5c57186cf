"""Grants, "approve and stop asking" (``checkpoint.approval_grants``): which calls a grant
approves, for how long, how often; and never edited arguments. Pure: the time is given."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from durable_agents.checkpoint import ArgumentCondition, ConfigurationError, PolicyCall, decide
from durable_agents.checkpoint.approval_grants import (
    Grant,
    GrantScope,
    best_grant,
    check_grant_against_tools,
    consume_grant,
    grant_from_approval,
    grant_is_live,
    grant_matches,
    revoke_grant,
)
from durable_agents.checkpoint.approval_policy import arguments_digest

T0 = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)


def call(tool: str = "refund", agent: str = "support", session: str = "s1", **arguments: Any) -> PolicyCall:
    return PolicyCall(agent=agent, session_id=session, tool=tool, arguments=arguments or {"amount_cents": 100})


def grant(grant_id: str = "g", *, scope: dict[str, Any] | None = None, **fields: Any) -> Grant:
    scope = scope or {"kind": "agent", "tool": "refund", "agent": "support"}
    return Grant(id=grant_id, scope=GrantScope(**scope), created_by="alice", created_at=T0, **fields)


def test_an_expired_grant_does_not_match():
    g = grant(expires_at=T0 + timedelta(minutes=10))
    assert grant_matches(g, call(), T0 + timedelta(minutes=9, seconds=59))
    assert not grant_matches(g, call(), T0 + timedelta(minutes=10))  # expiry is exclusive
    assert not grant_matches(g, call(), T0 + timedelta(days=1))


def test_a_revoked_grant_does_not_match_from_its_revocation_on():
    g = revoke_grant(grant(), "bob", T0 + timedelta(minutes=5))
    assert (g.revoked_by, g.revoked_at) == ("bob", T0 + timedelta(minutes=5))
    assert grant_matches(g, call(), T0 + timedelta(minutes=4))  # what it approved before stays approved
    assert not grant_matches(g, call(), T0 + timedelta(minutes=5))
    assert revoke_grant(g, "carol", T0 + timedelta(hours=1)) == g  # the first revocation is kept


def test_a_used_up_grant_does_not_match_and_cannot_be_used():
    g = grant(max_uses=2)
    g = consume_grant(g, T0)
    assert grant_matches(g, call(), T0) and g.uses_left == 1
    g = consume_grant(g, T0)
    assert g.uses == 2 and not grant_matches(g, call(), T0)
    with pytest.raises(ValueError, match="not live"):
        consume_grant(g, T0)
    with pytest.raises(ValidationError, match="more than its maxUses"):
        grant(max_uses=1, uses=2)


def test_a_grant_is_not_live_before_it_is_made():
    assert not grant_is_live(grant(), T0 - timedelta(seconds=1))
    assert grant_is_live(grant(), T0)


@given(
    expires_in=st.none() | st.integers(1, 10**6),
    revoked_in=st.none() | st.integers(-10, 10**6),
    max_uses=st.none() | st.integers(1, 5),
    uses=st.integers(0, 5),
    at=st.integers(-10, 2 * 10**6),
)
def test_a_grant_is_live_exactly_while_made_unexpired_unrevoked_and_not_used_up(
    expires_in, revoked_in, max_uses, uses, at
):
    if max_uses is not None and uses > max_uses:
        return
    seconds = timedelta(seconds=1)
    g = grant(
        expires_at=T0 + expires_in * seconds if expires_in else None,
        revoked_at=T0 + revoked_in * seconds if revoked_in is not None else None,
        max_uses=max_uses,
        uses=uses,
    )
    expected = (
        at >= 0
        and (expires_in is None or at < expires_in)
        and (revoked_in is None or at < revoked_in)
        and (max_uses is None or uses < max_uses)
    )
    assert grant_is_live(g, T0 + at * seconds) == expected
    assert grant_matches(g, call(), T0 + at * seconds) == expected


def test_scopes_session_agent_tool():
    session = grant(scope={"kind": "session", "tool": "refund", "agent": "support", "session_id": "s1"})
    agent = grant(scope={"kind": "agent", "tool": "refund", "agent": "support"})
    tool = grant(scope={"kind": "tool", "tool": "refund"})
    cases = {
        "same session": call(),
        "other session": call(session="s2"),
        "other agent": call(agent="billing", session="s3"),
        "other tool": call("search", query="x"),
    }
    matched = {
        name: [g.scope.kind for g in (session, agent, tool) if grant_matches(g, c, T0)] for name, c in cases.items()
    }
    assert matched == {
        "same session": ["session", "agent", "tool"],
        "other session": ["agent", "tool"],
        "other agent": ["tool"],
        "other tool": [],
    }


@pytest.mark.parametrize(
    ("scope", "problem"),
    [
        ({"kind": "session", "tool": "refund", "agent": "support"}, "names its sessionId"),
        ({"kind": "agent", "tool": "refund", "agent": "support", "session_id": "s1"}, "only a session grant"),
        ({"kind": "agent", "tool": "refund"}, "names its agent"),
        ({"kind": "tool", "tool": "refund", "agent": "support"}, "'agent' grant"),
        ({"kind": "tool", "tool": ""}, "tool"),
        ({"kind": "everything", "tool": "refund"}, "kind"),
        ({"kind": "tool", "tool": "refund", "toolName": "x"}, "Extra inputs"),
    ],
)
def test_a_scope_says_exactly_what_its_kind_needs(scope, problem):
    with pytest.raises(ValidationError, match=problem):
        GrantScope.model_validate(scope)


def test_a_grant_may_narrow_by_argument_conditions():
    small = grant(
        scope={"kind": "tool", "tool": "refund", "when": [{"arg": "amount_cents", "op": "<=", "value": 5000}]}
    )
    assert grant_matches(small, call(amount_cents=5000), T0)
    assert not grant_matches(small, call(amount_cents=5001), T0)
    assert not grant_matches(small, call(reason="no amount"), T0)


# -- the digest binding: a grant approves the arguments shown, never edited ones -----------------


def test_a_grant_never_matches_edited_arguments():
    shown = call(amount_cents=4200, order="A-1")
    g = grant_from_approval(
        grant_id="g1",
        kind="session",
        call=shown,
        approved_by="alice",
        now=T0,
        shown_digest=arguments_digest(shown.arguments),
        exact_arguments=True,
        expires_at=T0 + timedelta(minutes=10),
        approval_id="ap-1",
    )
    assert g.scope.arguments_digest == arguments_digest({"amount_cents": 4200, "order": "A-1"})
    assert grant_matches(g, call(order="A-1", amount_cents=4200), T0)  # the same arguments, any key order
    for edited in ({"amount_cents": 4201, "order": "A-1"}, {"amount_cents": 4200}, {**shown.arguments, "note": ""}):
        assert not grant_matches(g, call(**edited), T0), edited
        assert decide(None, [g], call(**edited), T0).outcome == "ask-person"


def test_an_approval_with_edited_arguments_makes_no_grant():
    shown = call(amount_cents=4200)
    with pytest.raises(ConfigurationError, match="edited arguments makes no grant"):
        grant_from_approval(
            grant_id="g1",
            kind="agent",
            call=shown,
            approved_by="alice",
            now=T0,
            shown_digest=arguments_digest(shown.arguments),
            edited_arguments={"amount_cents": 420},
        )


def test_a_grant_is_made_only_on_the_arguments_the_approver_was_shown():
    with pytest.raises(ConfigurationError, match="not the ones alice was shown"):
        grant_from_approval(
            grant_id="g1",
            kind="agent",
            call=call(amount_cents=9999),
            approved_by="alice",
            now=T0,
            shown_digest=arguments_digest({"amount_cents": 4200}),
        )


def test_a_grant_from_an_approval_takes_its_scope_from_the_call():
    shown = call(agent="billing", session="chat-9", amount_cents=1)
    made = {
        kind: grant_from_approval(
            grant_id=kind,
            kind=kind,  # type: ignore[arg-type]
            call=shown,
            approved_by="alice",
            now=T0,
            shown_digest=arguments_digest(shown.arguments),
            max_uses=3,
        ).scope
        for kind in ("session", "agent", "tool")
    }
    assert (made["session"].agent, made["session"].session_id) == ("billing", "chat-9")
    assert (made["agent"].agent, made["agent"].session_id) == ("billing", None)
    assert (made["tool"].agent, made["tool"].session_id, made["tool"].arguments_digest) == (None, None, None)


# -- which grant, when several -----------------------------------------------------------------


def test_the_grant_used_is_the_one_that_ends_first_the_same_everywhere():
    forever = grant("a-forever")
    soon = grant("b-soon", expires_at=T0 + timedelta(minutes=5))
    later = grant("c-later", expires_at=T0 + timedelta(hours=5))
    counted = grant("d-counted", max_uses=1)
    assert best_grant([forever, later, soon, counted], call(), T0) == soon
    assert best_grant([forever, counted], call(), T0) == counted
    assert best_grant([grant("z"), grant("y")], call(), T0).id == "y"  # type: ignore[union-attr]
    assert best_grant([forever], call("search", query="x"), T0) is None


def test_a_grant_round_trips_as_json_and_refuses_naive_times():
    g = grant(
        scope={
            "kind": "session",
            "tool": "refund",
            "agent": "support",
            "session_id": "s1",
            "when": [{"arg": "amount_cents", "op": "<", "value": 100}],
        },
        expires_at=T0 + timedelta(minutes=10),
        max_uses=5,
        uses=1,
        approval_id="ap-7",
        note="this customer's refunds today",
    )
    data = json.loads(g.to_json())
    assert data["scope"]["sessionId"] == "s1" and data["expiresAt"] == "2026-12-03T09:10:00Z"
    assert Grant.model_validate_json(g.to_json()) == g
    with pytest.raises(ValidationError, match="timezone"):
        Grant.model_validate({**data, "createdAt": "2026-12-03T09:00:00"})
    with pytest.raises(ValidationError, match="expires before it is created"):
        Grant.model_validate({**data, "expiresAt": "2026-12-03T08:00:00Z"})


def test_a_grant_is_checked_against_the_agents_tools():
    tools = {"refund": {"type": "object", "properties": {"amount_cents": {"type": "integer"}}}}
    ok = grant(scope={"kind": "tool", "tool": "refund", "when": [{"arg": "amount_cents", "op": "<", "value": 9}]})
    check_grant_against_tools(ok, tools)
    with pytest.raises(ConfigurationError, match="no tool 'search'"):
        check_grant_against_tools(grant(scope={"kind": "tool", "tool": "search"}), tools)
    bad = ok.model_copy(
        update={"scope": ok.scope.model_copy(update={"when": [ArgumentCondition(arg="amount", op="<", value=9)]})}
    )
    with pytest.raises(ConfigurationError, match="no argument 'amount'"):
        check_grant_against_tools(bad, tools)
