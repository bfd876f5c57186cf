"""The approval policy as data (``checkpoint.approval_policy``) and its decision on a call
(``checkpoint.approval_decision``): what users rely on. Pure: no Temporal, no store."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from durable_agents.checkpoint import (
    ApprovalPolicy,
    ArgumentCondition,
    ConfigurationError,
    PolicyCall,
    PolicyRule,
    check_policy_against_tools,
    decide,
    parse_policy,
)
from durable_agents.checkpoint.approval_grants import Grant, GrantScope
from durable_agents.checkpoint.approval_policy import arguments_digest

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


class Address(BaseModel):
    country: str
    city: str | None = None


class RefundArgs(BaseModel):
    amount_cents: int
    currency: Literal["USD", "EUR"] = "USD"
    reason: str = ""
    ship_to: Address | None = None
    lines: list[Address] = []
    metadata: dict[str, Any] = {}


class SearchArgs(BaseModel):
    query: str


TOOLS = {"refund": RefundArgs.model_json_schema(), "search": SearchArgs.model_json_schema()}


def call(tool: str = "refund", agent: str = "support", session: str = "s1", **arguments: Any) -> PolicyCall:
    return PolicyCall(agent=agent, session_id=session, tool=tool, arguments=arguments)


def cond(arg: str, op: str, value: Any = None) -> ArgumentCondition:
    return ArgumentCondition(arg=arg, op=op, value=value)  # type: ignore[arg-type]


SMALL = {"name": "small-refunds", "tools": ["refund"], "when": [{"arg": "amount_cents", "op": "<=", "value": 5000}]}
HUGE = {"name": "huge-refunds", "tools": ["refund"], "when": [{"arg": "amount_cents", "op": ">", "value": 100000}]}


# -- the format ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "document",
    [
        {"allow": [SMALL], "approveEverything": True},  # a top-level field of no meaning
        {"allow": [{**SMALL, "tool": "refund"}]},  # a rule's misspelt field
        {"allow": [{**SMALL, "when": [{"arg": "amount_cents", "op": "<=", "value": 1, "unit": "cents"}]}]},
        {"auto": {"evaluator": {"python": "m:f", "retries": 3}, "criteria": []}},
    ],
)
def test_unknown_fields_are_refused_with_the_path_named(document):
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        ApprovalPolicy.model_validate(document)
    with pytest.raises(ConfigurationError, match="invalid approval policy: .*Extra inputs are not permitted"):
        parse_policy(document)


def test_parse_policy_names_each_wrong_field_by_its_json_path():
    with pytest.raises(ConfigurationError) as caught:
        parse_policy(
            '{"allow": [{"name": "x", "tools": ["refund"], "when": [{"arg": "a", "op": "~="}]}], "version": 0}'
        )
    message = caught.value.message
    assert "allow.0.when.0.op" in message and "version" in message
    assert caught.value.code == "CONFIGURATION_ERROR"


def test_a_policy_written_by_a_newer_format_is_refused_not_misread():
    with pytest.raises(ConfigurationError, match="formatVersion 2 is not one this durable-agents reads"):
        parse_policy({"formatVersion": 2})
    assert parse_policy({}).format_version == 1


def test_approving_everything_must_be_said_by_name():
    everything = {"name": "yes", "tools": ["*"]}
    with pytest.raises(ConfigurationError, match="approves every call of every tool.*'approveAll': true"):
        parse_policy({"allow": [everything]})
    with pytest.raises(ConfigurationError, match="approves every call of every tool"):
        parse_policy({"allow": [{**everything, "agents": ["support"]}]})  # every call of one agent: the same
    # said by name, it approves every call no deny rule denies
    policy = parse_policy({"approveAll": True, "deny": [HUGE]})
    assert decide(policy, [], call(amount_cents=10), NOW).outcome == "approve"
    assert decide(policy, [], call("search", query="x"), NOW).layer == "approve-all"
    assert decide(policy, [], call(amount_cents=10**6), NOW).outcome == "deny"
    # every tool with a condition, or a deny rule on everything, says what it does
    parse_policy({"allow": [{**everything, "when": [{"arg": "dry_run", "op": "==", "value": True}]}]})
    parse_policy({"deny": [everything]})


def test_rules_are_well_formed():
    with pytest.raises(ConfigurationError, match="stands alone"):
        parse_policy({"deny": [{"name": "x", "tools": ["*", "refund"]}]})
    with pytest.raises(ConfigurationError, match="unique.*small-refunds"):
        parse_policy({"deny": [SMALL], "allow": [SMALL]})
    with pytest.raises(ConfigurationError, match="tools"):
        parse_policy({"allow": [{"name": "x", "tools": []}]})
    with pytest.raises(ValidationError, match="needs a list value"):
        cond("currency", "in", "USD")
    with pytest.raises(ValidationError, match="compares with a number or a string"):
        cond("amount_cents", "<=", None)
    with pytest.raises(ValidationError, match="needs a string value"):
        cond("reason", "starts-with", 3)
    with pytest.raises(ValidationError, match="dotted path"):
        cond("ship_to..country", "==", "FR")
    with pytest.raises(ValidationError, match="op"):
        cond("reason", "matches", ".*")  # no regular expressions


def test_auto_mode_is_configuration_only_and_checked():
    auto = {
        "evaluator": {"model": "scripted:judge"},
        "minConfidence": 0.9,
        "criteria": [
            {
                "name": "refunds",
                "tools": ["refund"],
                "purpose": "Refunds a customer's order to their card.",
                "approveWhen": ["the order was late"],
                "denyWhen": ["the customer was refunded for this order before"],
                "escalateWhen": ["the amount is over the order's total"],
                "minConfidence": 0.95,
            }
        ],
    }
    policy = parse_policy({"auto": auto})
    assert policy.auto is not None and policy.auto.criteria[0].min_confidence == 0.95
    with pytest.raises(ConfigurationError, match="either 'python'"):
        parse_policy({"auto": {**auto, "evaluator": {"python": "m:f", "model": "scripted:x"}}})
    with pytest.raises(ConfigurationError, match="package.module:function"):
        parse_policy({"auto": {**auto, "evaluator": {"python": "judges"}}})
    with pytest.raises(ConfigurationError, match="no approveWhen, denyWhen or escalateWhen"):
        parse_policy({"auto": {**auto, "criteria": [{"name": "c", "tools": ["refund"]}]}})
    with pytest.raises(ConfigurationError, match="minConfidence"):
        parse_policy({"auto": {**auto, "minConfidence": 1.5}})


def test_revised_bumps_the_version_and_validates_again():
    policy = parse_policy({"version": 4, "allow": [SMALL]})
    revised = policy.revised(deny=[PolicyRule.model_validate(HUGE)])
    assert (revised.version, [r.name for r in revised.deny], policy.deny) == (5, ["huge-refunds"], [])
    with pytest.raises(ValidationError, match="approves every call"):
        policy.revised(allow=[{"name": "all", "tools": ["*"]}])


def test_a_policy_is_immutable():
    policy = parse_policy({"allow": [SMALL]})
    with pytest.raises(ValidationError, match="frozen"):
        policy.version = 2  # type: ignore[misc]


FULL = {
    "formatVersion": 1,
    "version": 7,
    "description": "support desk",
    "deny": [
        HUGE,
        {"name": "no-drops", "tools": ["*"], "when": [{"arg": "query", "op": "starts-with", "value": "DROP"}]},
    ],
    "allow": [
        SMALL,
        {
            "name": "eu-shipping",
            "tools": ["refund"],
            "agents": ["support", "billing"],
            "when": [
                {"arg": "ship_to.country", "op": "in", "value": ["FR", "DE"]},
                {"arg": "reason", "op": "starts-with", "value": "late"},
                {"arg": "metadata.ticket", "op": "!=", "value": None},
            ],
            "note": "late deliveries in the EU",
        },
    ],
    "approveAll": False,
    "auto": {
        "evaluator": {"python": "support.judges:refund_judge"},
        "criteria": [
            {
                "name": "refund-criteria",
                "tools": ["refund"],
                "purpose": "Refunds an order to the customer's card.",
                "approveWhen": ["the order was late"],
                "denyWhen": [],
                "escalateWhen": ["the customer asks twice"],
            }
        ],
        "minConfidence": 0.8,
        "timeoutSeconds": 30.0,
    },
}


def test_json_round_trip_keeps_every_field():
    policy = parse_policy(json.dumps(FULL))
    assert json.loads(policy.to_json()) == FULL
    assert parse_policy(policy.to_json()) == policy
    assert parse_policy(policy.to_dict()) == policy


# -- checked against the agent's tools -----------------------------------------------------------


def test_a_condition_on_an_argument_the_schema_lacks_is_refused():
    policy = parse_policy({"allow": [{**SMALL, "when": [{"arg": "amount", "op": "<=", "value": 5000}]}]})
    with pytest.raises(ConfigurationError, match=r"allow rule 'small-refunds': refund has no argument 'amount'"):
        check_policy_against_tools(policy, TOOLS)


def test_a_rule_on_a_tool_the_agent_lacks_is_refused_naming_its_tools():
    policy = parse_policy({"deny": [{"name": "no-wires", "tools": ["wire_money"]}]})
    with pytest.raises(ConfigurationError, match=r"no tool 'wire_money' \(its tools: refund, search\)"):
        check_policy_against_tools(policy, TOOLS)


def test_every_problem_is_listed_at_once():
    policy = parse_policy(
        {
            "deny": [{"name": "a", "tools": ["nope"]}],
            "allow": [{"name": "b", "tools": ["search"], "when": [{"arg": "q", "op": "==", "value": "x"}]}],
            "auto": {
                "evaluator": {"model": "scripted:j"},
                "criteria": [{"name": "c", "tools": ["gone"], "denyWhen": ["x"]}],
            },
        }
    )
    with pytest.raises(ConfigurationError) as caught:
        check_policy_against_tools(policy, TOOLS)
    assert all(part in caught.value.message for part in ("'nope'", "'q'", "criteria set 'c'", "'gone'"))


def test_the_full_policy_fits_its_tools():
    check_policy_against_tools(parse_policy(FULL), TOOLS)  # nested paths, $refs, Optional, dicts


@pytest.mark.parametrize(
    ("condition", "problem"),
    [
        (cond("amount_cents", "<=", "5000"), 'never takes "5000"'),  # a string for an integer
        (cond("currency", "==", "usd"), 'never takes "usd"'),  # outside its enum
        (cond("currency", "!=", "usd"), 'never takes "usd"'),  # always true: an allow rule would approve all
        (cond("currency", "in", ["USD", "GBP"]), 'never takes "GBP"'),
        (cond("amount_cents", "==", True), "never takes true"),
        (cond("ship_to.city", "starts-with", "Par"), None),  # Optional[str] in a $ref'd, Optional model
        (cond("ship_to.zip", "==", "75001"), "no argument 'ship_to.zip'"),
        (cond("lines.0.country", "==", "FR"), None),
        (cond("metadata.anything.at.all", "==", 1), None),  # a free dict
        (cond("amount_cents", "<", 5000.5), None),  # a number compares with an integer
        (cond("amount_cents", "==", 5000.0), None),
        (cond("reason", ">", 3), "never takes 3"),
    ],
)
def test_conditions_are_checked_against_the_json_schema(condition, problem):
    from durable_agents.checkpoint.approval_policy import check_conditions

    problems = check_conditions("refund", [condition], TOOLS["refund"])
    if problem is None:
        assert problems == []
    else:
        assert len(problems) == 1 and problem in problems[0]


def test_a_rule_on_every_tool_needs_one_tool_with_its_argument():
    ok = parse_policy({"deny": [{"name": "d", "tools": ["*"], "when": [{"arg": "query", "op": "==", "value": "x"}]}]})
    check_policy_against_tools(ok, TOOLS)
    bad = parse_policy({"deny": [{"name": "d", "tools": ["*"], "when": [{"arg": "dry_run", "op": "==", "value": 1}]}]})
    with pytest.raises(ConfigurationError, match="no tool takes dry_run == 1"):
        check_policy_against_tools(bad, TOOLS)


def test_a_shared_policy_is_checked_for_one_agent_by_its_rules():
    policy = parse_policy({"allow": [{"name": "ops", "tools": ["restart"], "agents": ["ops-bot"]}, SMALL]})
    check_policy_against_tools(policy, TOOLS, agent="support")  # the ops rule is not support's
    with pytest.raises(ConfigurationError, match="'restart'"):
        check_policy_against_tools(policy, TOOLS, agent="ops-bot")
    with pytest.raises(ConfigurationError, match="'restart'"):
        check_policy_against_tools(policy, TOOLS)


# -- conditions ----------------------------------------------------------------------------------

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=8,
)
ops = st.sampled_from(["==", "!=", "<", "<=", ">", ">=", "in", "not-in", "starts-with", "ends-with"])


def _condition(op: str, value: Any) -> ArgumentCondition | None:
    try:
        return cond("x", op, value)
    except ValidationError:
        return None


@settings(max_examples=300)
@given(
    op=ops, value=json_values, actual=json_values, other=st.dictionaries(st.text(max_size=3), json_values, max_size=3)
)
def test_a_condition_never_raises_and_a_missing_argument_never_satisfies_it(op, value, actual, other):
    condition = _condition(op, value)
    if condition is None:
        return
    other.pop("x", None)
    assert condition.holds(other) is False  # absent: false for every operator, != and not-in too
    assert isinstance(condition.holds({**other, "x": actual}), bool)
    assert isinstance(cond("x.y.0", op, value).holds({"x": actual}), bool)  # paths through anything


@given(value=json_values, actual=json_values)
def test_equal_and_not_equal_are_complementary_and_in_is_any_equal(value, actual):
    arguments = {"x": actual}
    assert cond("x", "==", value).holds(arguments) != cond("x", "!=", value).holds(arguments)
    assert cond("x", "==", actual).holds(arguments)  # a value equals itself
    listed = [value, actual]
    assert cond("x", "in", listed).holds(arguments)
    assert not cond("x", "not-in", listed).holds(arguments)
    assert cond("x", "in", [value]).holds(arguments) == cond("x", "==", value).holds(arguments)


@given(a=st.integers() | st.floats(allow_nan=False, allow_infinity=False), b=st.integers() | st.floats(allow_nan=False))
def test_ordering_is_numeric(a, b):
    import operator

    for op, fn in (("<", operator.lt), ("<=", operator.le), (">", operator.gt), (">=", operator.ge)):
        assert cond("x", op, b).holds({"x": a}) == fn(a, b)


def test_json_equality_is_strict_about_booleans():
    assert not cond("flag", "==", 1).holds({"flag": True})
    assert not cond("n", "==", True).holds({"n": 1})
    assert cond("n", "==", 1).holds({"n": 1.0})
    assert not cond("n", "in", [True]).holds({"n": 1})
    assert cond("n", "!=", True).holds({"n": 1})
    assert not cond("n", "<=", 5).holds({"n": True})  # a boolean is not a number
    assert not cond("n", "<=", 5).holds({"n": "4"})  # nor a string


def test_paths_reach_into_objects_and_lists():
    arguments = {"ship_to": {"country": "FR"}, "lines": [{"sku": "A"}, {"sku": "B"}]}
    assert cond("ship_to.country", "==", "FR").holds(arguments)
    assert cond("lines.1.sku", "==", "B").holds(arguments)
    assert not cond("lines.2.sku", "==", "B").holds(arguments)
    assert not cond("ship_to.country.code", "==", "FR").holds(arguments)
    assert cond("ship_to.country", "ends-with", "R").holds(arguments)
    assert not cond("lines", "starts-with", "x").holds(arguments)


# -- decide: the layers in order ------------------------------------------------------------------


def grant(grant_id: str = "g1", **scope: Any) -> Grant:
    scope = {"kind": "agent", "tool": "refund", "agent": "support", **scope}
    return Grant(id=grant_id, scope=GrantScope(**scope), created_by="alice", created_at=NOW - timedelta(hours=1))


AUTO = {
    "evaluator": {"model": "scripted:judge"},
    "criteria": [{"name": "refund-criteria", "tools": ["refund"], "approveWhen": ["late"]}],
}


def test_no_policy_and_no_grant_asks_a_person_as_today():
    decision = decide(None, [], call(amount_cents=1), NOW)
    assert (decision.outcome, decision.layer, decision.reason, decision.policy_version) == (
        "ask-person",
        "person",
        "no approval policy",
        None,
    )


def test_deny_beats_allow_grants_approve_all_and_auto_mode():
    policy = parse_policy(
        {"version": 3, "deny": [HUGE], "allow": [{**SMALL, "when": []}], "approveAll": True, "auto": AUTO}
    )
    decision = decide(policy, [grant()], call(amount_cents=200000), NOW)
    assert (decision.outcome, decision.layer, decision.rule, decision.policy_version) == (
        "deny",
        "deny-rule",
        "huge-refunds",
        3,
    )
    assert decision.reason == "deny rule 'huge-refunds' (amount_cents > 100000)"


@settings(max_examples=200)
@given(amount=st.integers(-(10**7), 10**7), deny_at=st.integers(-(10**7), 10**7), allow_at=st.integers(-(10**7), 10**7))
def test_whenever_a_deny_rule_and_an_allow_rule_both_match_the_call_is_denied(amount, deny_at, allow_at):
    policy = parse_policy(
        {
            "deny": [
                {"name": "d", "tools": ["refund"], "when": [{"arg": "amount_cents", "op": ">=", "value": deny_at}]}
            ],
            "allow": [
                {"name": "a", "tools": ["refund"], "when": [{"arg": "amount_cents", "op": "<=", "value": allow_at}]}
            ],
        }
    )
    outcome = decide(policy, [grant()], call(amount_cents=amount), NOW).outcome
    expected = "deny" if amount >= deny_at else "approve"  # below the deny line: allowed, or by the grant
    assert outcome == expected


def test_the_layers_decide_in_order():
    policy = parse_policy({"version": 2, "deny": [HUGE], "allow": [SMALL], "auto": AUTO})
    by_rule = decide(policy, [grant()], call(amount_cents=100), NOW)
    assert (by_rule.outcome, by_rule.layer, by_rule.rule, by_rule.grant_id) == (
        "approve",
        "allow-rule",
        "small-refunds",
        None,
    )
    by_grant = decide(policy, [grant()], call(amount_cents=9000), NOW)
    assert (by_grant.outcome, by_grant.layer, by_grant.grant_id) == ("approve", "grant", "g1")
    assert by_grant.reason == "grant 'g1' by alice"
    by_auto = decide(policy, [], call(amount_cents=9000), NOW)
    assert (by_auto.outcome, by_auto.layer, by_auto.criteria) == ("ask-evaluator", "auto-mode", "refund-criteria")
    by_person = decide(policy, [], call("search", query="x"), NOW)
    assert (by_person.outcome, by_person.layer) == ("ask-person", "person")
    assert by_person.reason == "no rule matched, and auto mode has no criteria for search"
    assert decide(policy.revised(auto=None), [], call(amount_cents=9000), NOW).reason == "no rule matched"
    assert {d.policy_version for d in (by_rule, by_grant, by_auto, by_person)} == {2}


def test_an_allow_rule_is_cited_before_approve_all():
    policy = parse_policy({"allow": [SMALL], "approveAll": True})
    assert decide(policy, [], call(amount_cents=1), NOW).rule == "small-refunds"
    assert decide(policy, [], call(amount_cents=9000), NOW).layer == "approve-all"


def test_rules_filter_by_agent_and_tool():
    policy = parse_policy({"allow": [{**SMALL, "agents": ["billing"]}]})
    assert decide(policy, [], call(amount_cents=1, agent="billing"), NOW).outcome == "approve"
    assert decide(policy, [], call(amount_cents=1, agent="support"), NOW).outcome == "ask-person"
    assert decide(policy, [], call("search", query="x", agent="billing"), NOW).outcome == "ask-person"


def test_grants_apply_without_a_policy_and_never_beat_a_deny_rule():
    assert decide(None, [grant()], call(amount_cents=1), NOW).layer == "grant"
    denied = decide(parse_policy({"deny": [HUGE]}), [grant()], call(amount_cents=10**6), NOW)
    assert denied.outcome == "deny"


def test_a_missing_argument_neither_allows_nor_denies():
    policy = parse_policy({"deny": [HUGE], "allow": [SMALL]})
    assert decide(policy, [], call(reason="late"), NOW).outcome == "ask-person"


def test_a_decision_binds_the_arguments_it_was_made_on():
    decision = decide(parse_policy({"allow": [SMALL]}), [], call(amount_cents=10), NOW)
    assert decision.arguments_digest == arguments_digest({"amount_cents": 10})
    assert decision.arguments_digest != arguments_digest({"amount_cents": 11})


def test_the_digest_is_the_web_inboxs():
    from durable_agents.web.views import arguments_digest as inbox_digest

    arguments = {"b": [1, {"z": "é"}], "a": None}
    assert arguments_digest(arguments) == inbox_digest(arguments)


def test_decide_needs_an_aware_time_and_changes_nothing():
    policy = parse_policy(FULL)
    grants = [grant().model_copy(update={"max_uses": 1})]
    before = [g.model_copy(deep=True) for g in grants]
    first = decide(policy, grants, call(amount_cents=9000), NOW)
    assert decide(policy, grants, call(amount_cents=9000), NOW) == first  # deterministic
    assert grants == before  # a grant's use is the caller's to record (consume_grant)
    with pytest.raises(ValueError, match="timezone-aware"):
        decide(policy, grants, call(amount_cents=1), datetime(2026, 12, 3))


def test_a_decision_is_json():
    decision = decide(parse_policy({"version": 5, "allow": [SMALL]}), [], call(amount_cents=1), NOW)
    data = json.loads(decision.to_json())
    assert data == {
        "outcome": "approve",
        "layer": "allow-rule",
        "reason": "allow rule 'small-refunds' (amount_cents <= 5000)",
        "rule": "small-refunds",
        "policyVersion": 5,
        "argumentsDigest": arguments_digest({"amount_cents": 1}),
    }


# -- round trips of generated policies -------------------------------------------------------------

names = st.text(alphabet="abcdefghij-", min_size=1, max_size=8)
conditions = st.builds(
    lambda arg, op, value: _condition(op, value),
    st.just("x"),
    ops,
    json_values,
).filter(lambda c: c is not None)
rules = st.builds(
    lambda tools, agents, when: {"tools": tools, "agents": agents, "when": [c.to_dict() for c in when]},
    st.lists(names, min_size=1, max_size=3, unique=True),
    st.none() | st.lists(names, min_size=1, max_size=2),
    st.lists(conditions, max_size=3),
)


@settings(max_examples=100)
@given(
    deny=st.lists(rules, max_size=3),
    allow=st.lists(rules, max_size=3),
    version=st.integers(1, 10**6),
    approve_all=st.booleans(),
)
def test_any_valid_policy_survives_a_json_round_trip(deny, allow, version, approve_all):
    document = {
        "version": version,
        "approveAll": approve_all,
        "deny": [{**rule, "name": f"deny-{i}"} for i, rule in enumerate(deny)],
        "allow": [{**rule, "name": f"allow-{i}"} for i, rule in enumerate(allow)],
    }
    policy = parse_policy(document)
    assert parse_policy(policy.to_json()) == policy
    assert ApprovalPolicy.model_validate_json(json.dumps(policy.to_dict())) == policy
