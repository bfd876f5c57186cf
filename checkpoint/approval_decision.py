"""The policy's decision on one gated tool call: which layer decides, and why.

:func:`decide` is pure and deterministic (the time is passed in; no clock, no I/O), so a
workflow may call it: the same policy, grants, call and time give the same decision on
every worker and every replay. The layers, first that decides wins:

==============  =================  ==============================================
layer           outcome            when
==============  =================  ==============================================
``deny-rule``   ``deny``           a deny rule matches
``allow-rule``  ``approve``        an allow rule matches
``approve-all`` ``approve``        the policy says ``approveAll: true``
``grant``       ``approve``        a live grant covers the call (:func:`best_grant`)
``auto-mode``   ``ask-evaluator``  a criteria set of the auto mode covers the tool
``person``      ``ask-person``     nothing above decided (also: no policy, no grant)
==============  =================  ==============================================

Grants apply with no policy too: a person made them. Without a policy and without grants,
every gated call asks a person, as it always has.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Literal

from durable_agents.checkpoint._format_model import FormatModel
from durable_agents.checkpoint.approval_grants import Grant, best_grant
from durable_agents.checkpoint.approval_policy import (
    ApprovalPolicy,
    ArgumentCondition,
    EvaluatorRef,
    PolicyCall,
    arguments_digest,
)
from durable_agents.checkpoint.format import Evaluation

__all__ = ["DecisionLayer", "PolicyDecision", "PolicyOutcome", "decide"]

PolicyOutcome = Literal["approve", "deny", "ask-evaluator", "ask-person"]
DecisionLayer = Literal["deny-rule", "allow-rule", "approve-all", "grant", "auto-mode", "person"]


class PolicyDecision(FormatModel):
    """What the policy decided for a call, which layer decided, and why."""

    outcome: PolicyOutcome
    layer: DecisionLayer
    reason: str
    """For people: the rule, grant or criteria set and what matched, or why a person is asked."""
    rule: str | None = None
    """The deny or allow rule that decided."""
    grant_id: str | None = None
    """The grant that approved (the caller records its use: ``consume_grant``)."""
    criteria: str | None = None
    """The auto mode's criteria set the evaluator is to judge by."""
    policy_version: int | None = None
    """The version of the policy decided under; None: no policy."""
    arguments_digest: str
    """The arguments decided on: an approval holds for arguments with this digest only."""

    @property
    def decided(self) -> bool:
        """Approved or denied without asking anyone."""
        return self.outcome in ("approve", "deny")


def decide(policy: ApprovalPolicy | None, grants: Iterable[Grant], call: PolicyCall, now: datetime) -> PolicyDecision:
    """The decision on the gated ``call`` at ``now`` (timezone-aware) under ``policy`` and ``grants``."""
    if now.tzinfo is None:
        raise ValueError("decide needs a timezone-aware time (e.g. workflow.now())")
    version = policy.version if policy is not None else None
    digest = arguments_digest(call.arguments)

    def decision(outcome: PolicyOutcome, layer: DecisionLayer, reason: str, **by: str) -> PolicyDecision:
        return PolicyDecision(
            outcome=outcome, layer=layer, reason=reason, policy_version=version, arguments_digest=digest, **by
        )

    if policy is not None:
        for rule in policy.deny:
            if rule.matches(call):
                return decision("deny", "deny-rule", f"deny rule {rule.name!r}{_conditions(rule.when)}", rule=rule.name)
        for rule in policy.allow:
            if rule.matches(call):
                return decision(
                    "approve", "allow-rule", f"allow rule {rule.name!r}{_conditions(rule.when)}", rule=rule.name
                )
        if policy.approve_all:
            return decision("approve", "approve-all", "the policy approves every call no deny rule denies")
    grant = best_grant(grants, call, now)
    if grant is not None:
        return decision("approve", "grant", f"grant {grant.id!r} by {grant.created_by}", grant_id=grant.id)
    if policy is not None and policy.auto is not None:
        criteria = policy.auto.criteria_for(call)
        if criteria is not None:
            return decision(
                "ask-evaluator", "auto-mode", f"auto mode, criteria set {criteria.name!r}", criteria=criteria.name
            )
        return decision("ask-person", "person", f"no rule matched, and auto mode has no criteria for {call.tool}")
    return decision("ask-person", "person", "no rule matched" if policy is not None else "no approval policy")


def _conditions(conditions: Iterable[ArgumentCondition]) -> str:
    described = [c.describe() for c in conditions]
    return f" ({' and '.join(described)})" if described else ""


# -- the auto mode's evaluator -----------------------------------------------------------------


def describe_evaluator(ref: EvaluatorRef) -> str:
    """The evaluator as an evaluation names it: ``python:<module>:<function>`` or ``model:<provider>:<model>``."""
    return f"python:{ref.python}" if ref.python is not None else f"model:{ref.model}"


def judged(evaluation: Evaluation) -> Evaluation:
    """``evaluation`` with whether its verdict decides the call (approve or deny, sure enough:
    at or above its ``minConfidence``) or why the call goes to a person instead."""
    if evaluation.verdict == "escalate":
        return evaluation.model_copy(update={"escalated": "the evaluator escalated", "decided": False})
    if (evaluation.confidence or 0.0) < (evaluation.min_confidence or 0.0):
        return evaluation.model_copy(
            update={
                "escalated": f"low confidence: {evaluation.confidence or 0.0:.2f} < minConfidence "
                f"{evaluation.min_confidence:.2f}",
                "decided": False,
            }
        )
    return evaluation.model_copy(update={"decided": True, "escalated": None})
