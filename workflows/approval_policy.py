"""The approval policy in a run: which gated calls it decides, and the auto mode's evaluator
racing a person for an open approval.

Deterministic: the policy is read and applied in the ``decide_by_policy`` local activity
(``activities/approval_policy.py``); here are the patch that guards it, what the run says
about a decision (Current Details), and the evaluator's task.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, TimeoutError, is_cancelled_exception
from temporalio.workflow import ActivityCancellationType

with workflow.unsafe.imports_passed_through():
    from durable_agents.activities.approval_policy import (
        AutoModeCall,
        EvaluateCallInput,
        PolicyDecisionActivities,
        describe_evaluator,
    )
    from durable_agents.activities.contracts import ApprovalDecision, PendingApproval, PolicyVerdict
    from durable_agents.checkpoint.format import Evaluation, ToolCall
    from durable_agents.workflows.approvals import ApprovalGate

APPROVAL_POLICY_PATCH = "approval-policy"
"""A gated call is first decided by the approval policy (rules, grants, auto mode) in one local
activity; a call the policy leaves to a person pauses as before (before: every gated call
paused for a person)."""

APPROVAL_POLICY_IN_TURN_PATCH = "approval-policy-in-turn"
"""The model turn's activity decides the turn's gated calls by policy once the turn is stored;
those it approves run as ungated calls do, with no activity for the decision (before: one local
activity a gated call). Those it does not approve are decided as under ``approval-policy``."""

EVALUATOR_RETRY = RetryPolicy(maximum_attempts=2, initial_interval=timedelta(seconds=1))
"""One more attempt (a lost worker); an evaluator that fails escalates, it is not retried on."""
EVALUATOR_HEARTBEAT = timedelta(seconds=10)


def said(verdict: PolicyVerdict, approved: bool | None = None) -> str:
    """A decision in one line, for Current Details and logs."""
    what = {"approve": "approved", "deny": "denied"}.get(verdict.outcome, "left to a person")
    if approved is not None:
        what = "approved" if approved else "denied"
    version = f", policy v{verdict.policy_version}" if verdict.policy_version is not None else ""
    return f"{what} by {verdict.reason}{version}"


class Evaluator:
    """The auto mode's evaluator on one open approval: an activity racing a person. Its
    approve or deny settles the approval unless a person decided first (then it is
    cancelled); anything else leaves the approval to the person."""

    def __init__(self, gate: ApprovalGate, pending: PendingApproval, auto: AutoModeCall) -> None:
        self.gate, self.pending, self.auto = gate, pending, auto
        self.evaluation: Evaluation | None = None
        self.decided = False
        """Its verdict settled the approval."""
        self._task: asyncio.Task[None] | None = None
        self.on_escalated: Callable[[Evaluation], None] = lambda evaluation: None
        """Called when the evaluator leaves the approval to the person (to say so in Current Details)."""

    def start(self, session_id: str, agent: str, call: ToolCall, position: int, turn_position: int | None) -> None:
        inp = EvaluateCallInput(
            session_id=session_id,
            agent=agent,
            call=call,
            position=position,
            turn_position=turn_position,
            auto=self.auto,
        )
        self._task = asyncio.ensure_future(self._run(inp))

    async def _run(self, inp: EvaluateCallInput) -> None:
        timeout = timedelta(seconds=self.auto.timeout_seconds)
        try:
            evaluation = await workflow.execute_activity_method(
                PolicyDecisionActivities.evaluate_call,
                inp,
                start_to_close_timeout=timeout,
                schedule_to_close_timeout=timeout,
                heartbeat_timeout=EVALUATOR_HEARTBEAT,
                retry_policy=EVALUATOR_RETRY,
                cancellation_type=ActivityCancellationType.TRY_CANCEL,
                summary=f"evaluate {inp.call.name} {inp.call.id}",
            )
        except ActivityError as e:
            if is_cancelled_exception(e):
                self.evaluation = self._without("a person decided first")
                return
            why = (
                f"timeout: no verdict within {self.auto.timeout_seconds:g}s"
                if isinstance(e.cause, TimeoutError)
                else f"error: {e.cause or e}"
            )
            self.evaluation = self._without(why[:2000], error=why[:2000])
            self.on_escalated(self.evaluation)
            return
        except asyncio.CancelledError:
            self.evaluation = self._without("a person decided first")
            return
        self.evaluation = evaluation
        if not evaluation.decided:
            self.on_escalated(evaluation)
        if evaluation.decided and evaluation.verdict in ("approve", "deny"):
            decision = ApprovalDecision(
                approval_id=self.pending.approval_id,
                approved=evaluation.verdict == "approve",
                decided_by=f"evaluator {evaluation.evaluator}",
            )
            self.decided = self.gate.settle(decision)
            if not self.decided:
                self.evaluation = evaluation.model_copy(
                    update={"decided": False, "escalated": "a person decided first"}
                )

    def _without(self, why: str, error: str | None = None) -> Evaluation:
        return Evaluation(
            evaluator=describe_evaluator(self.auto.evaluator),
            criteria=self.auto.criteria.name,
            min_confidence=self.auto.min_confidence,
            escalated=why,
            error=error,
        )

    @property
    def done(self) -> bool:
        return self._task is None or self._task.done()

    async def stop(self) -> Evaluation | None:
        """After the approval is decided: cancel the evaluator if it still runs (a person was
        first), and what it said."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        return self.evaluation
