"""Human approvals inside a run: the one pending decision and the ones taken."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from pydantic import ValidationError

    from durable_agents.activities.contracts import (
        MAX_DECISION_BYTES,
        ApprovalDecision,
        PendingApproval,
        decision_too_large,
        edited_arguments_problem,
        grant_problem,
    )
    from durable_agents.checkpoint.errors import FailureType, too_large_problem
    from durable_agents.checkpoint.format import ToolCall, ToolSpec

DECISION_SHAPE = '{"approvalId": "<the pending approval id>", "approved": true}'
"""What an ``approve`` signal or a ``decide`` update carries (plus optional ``note``,
``arguments``, ``decidedBy``), as the refusals quote it."""
DROPS_SHOWN = 3
"""Ignored signals the run's Current Details keep showing (the newest)."""


def refused(problem: str, approval_id: str | None = None) -> ApplicationError:
    """A decision refused for what it says (the update's error; the signal's logged drop)."""
    return ApplicationError(problem, approval_id, problem, type=FailureType.INVALID_DECISION, non_retryable=True)


def one_decision(payloads: tuple[Any, ...]) -> ApprovalDecision:
    """The one decision a handler's payloads must be, or a ``refused`` error saying what they are."""
    if len(payloads) != 1:
        got = "no payload" if not payloads else f"{len(payloads)} payloads"
        raise refused(f"a decision is one JSON payload like {DECISION_SHAPE}; got {got}")
    try:
        return ApprovalDecision.model_validate(payloads[0])
    except ValidationError as e:
        raise refused(f"not a decision ({validation_problems(e)}); expected {DECISION_SHAPE}") from None


def validation_problems(error: ValidationError, most: int = 3) -> str:
    """Pydantic's errors in one line: ``field: problem``, the first few."""
    found = error.errors(include_url=False)
    said = [f"{'.'.join(str(p) for p in e['loc']) or 'the payload'}: {e['msg']}" for e in found[:most]]
    more = f"; and {len(found) - most} more" if len(found) > most else ""
    return "; ".join(said) + more


def too_large(decision: ApprovalDecision) -> ApplicationError | None:
    """The refusal of a decision with a part over ``MAX_DECISION_BYTES`` (details: approval
    id, the problem, the part, its size, the limit), or None when every part fits."""
    found = decision_too_large(decision.arguments, decision.note, decision.decided_by)
    if found is None:
        return None
    part, size = found
    problem = too_large_problem(part, size, MAX_DECISION_BYTES)
    return ApplicationError(
        problem,
        decision.approval_id,
        problem,
        part,
        size,
        MAX_DECISION_BYTES,
        type=FailureType.INVALID_DECISION,
        non_retryable=True,
    )


def check_edited_arguments(decision: ApprovalDecision, spec: ToolSpec | None) -> None:
    """Refuse edited arguments that do not fit the tool's recorded input schema, and a grant
    that cannot be made (with a rejection, with edited arguments, on arguments the tool lacks)."""
    problem = edited_arguments_problem(decision, spec) or grant_problem(decision, spec)
    if problem is not None:
        raise refused(problem, decision.approval_id)


class ApprovalGate:
    """Deterministic state: which approval is open, which decisions arrived.

    A decision applies only to the approval id it names, once: a repeated or
    stray decision is refused by the update validator and ignored (logged) as
    a signal, never applied to another call.
    """

    def __init__(self) -> None:
        self.pending: PendingApproval | None = None
        self._decisions: dict[str, ApprovalDecision] = {}
        self._preset: tuple[str, ApprovalDecision] | None = None
        self.dropped: list[str] = []
        """Why the newest ignored signals were ignored (``DROPS_SHOWN`` of them)."""
        self.timed_out: set[str] = set()
        """The approvals nobody decided in time (their decision is the timeout's)."""

    def validate(self, decision: ApprovalDecision) -> None:
        """Refuse a decision for an approval that is not open (unknown or already decided).

        Raises an ``ApplicationError`` of type ``FailureType.APPROVAL_NOT_PENDING``
        with details ``(approval id, pending approval id or None)``; the client
        maps it by type to ``ApprovalNotPendingError``.
        """
        pending = self.pending.approval_id if self.pending else None
        if decision.approval_id in self._decisions:
            problem = "was already decided"
        elif pending != decision.approval_id:
            problem = f"is not pending in this run (pending: {pending or 'none'})"
        else:
            return
        raise ApplicationError(
            f"approval {decision.approval_id} {problem}",
            decision.approval_id,
            pending,
            type=FailureType.APPROVAL_NOT_PENDING,
            non_retryable=True,
        )

    def check(
        self, payloads: tuple[Any, ...], spec: ToolSpec | None, *, bounded: Callable[[], bool] = lambda: True
    ) -> ApprovalDecision:
        """The decision the payloads carry, if this run takes it: one decision, for the
        pending approval, no part of it over ``MAX_DECISION_BYTES`` (when ``bounded()``: a
        signal's handler asks its patch), with edited arguments (if any) that fit ``spec``'s schema."""
        decision = one_decision(payloads)
        self.validate(decision)
        refusal = too_large(decision)
        if refusal is not None and bounded():
            raise refusal
        check_edited_arguments(decision, spec)
        return decision

    def offer(self, decision: ApprovalDecision) -> None:
        try:
            self.validate(decision)
        except ApplicationError as e:
            self.drop(str(e))
            return
        self._decisions[decision.approval_id] = decision

    def drop(self, why: str) -> None:
        """A signal this run ignores: said in the worker's log and kept for Current Details."""
        workflow.logger.warning("ignoring an approve signal: %s", why)
        self.dropped = [*self.dropped, why][-DROPS_SHOWN:]

    def preset(self, call_id: str, decision: ApprovalDecision) -> None:
        """A decision given while no run was open, for the call that was paused."""
        self._preset = (call_id, decision)

    def take_preset(self, call_id: str) -> ApprovalDecision | None:
        if self._preset is None or self._preset[0] != call_id:
            return None
        decision = self._preset[1]
        self._preset = None
        return decision

    def open(
        self,
        approval_id: str,
        session_id: str,
        agent: str,
        call: ToolCall,
        remaining: list[ToolCall],
        timeout_seconds: float | None,
    ) -> PendingApproval:
        now = workflow.now()
        self.pending = PendingApproval(
            approval_id=approval_id,
            session_id=session_id,
            agent=agent,
            tool_name=call.name,
            tool_call_id=call.id,
            arguments=call.arguments,
            requested_at=now,
            remaining_tool_calls=remaining,
            timeout_at=now + timedelta(seconds=timeout_seconds) if timeout_seconds else None,
        )
        return self.pending

    async def wait(self, pending: PendingApproval) -> ApprovalDecision:
        """Wait as long as it takes (a durable timer when the tool has a timeout)."""
        approval_id = pending.approval_id
        timeout = pending.timeout_at - pending.requested_at if pending.timeout_at else None
        try:
            await workflow.wait_condition(lambda: approval_id in self._decisions, timeout=timeout)
        except TimeoutError:
            self.timed_out.add(approval_id)
            self._decisions[approval_id] = ApprovalDecision(
                approval_id=approval_id, approved=False, note=f"no decision within {timeout}: the approval timed out"
            )
        self.pending = None
        return self._decisions[approval_id]

    def settle(self, decision: ApprovalDecision) -> bool:
        """Decide the open approval without a person (the auto mode's evaluator), unless a
        decision was taken already; a person's later decision is then refused as taken."""
        if decision.approval_id in self._decisions:
            return False
        self._decisions[decision.approval_id] = decision
        return True

    def close(self) -> None:
        self.pending = None

    def relay(self, pending: PendingApproval) -> PendingApproval:
        """Open a sub-agent's approval here: this run's handlers show and take it (the
        sub-agent's run times it out, if its tool says so; this run only passes it on)."""
        self.pending = pending
        return pending

    def decision(self, approval_id: str) -> ApprovalDecision | None:
        """The decision taken on ``approval_id`` here, if any."""
        return self._decisions.get(approval_id)
