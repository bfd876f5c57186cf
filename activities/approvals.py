"""Approval activities: decide which calls need a human, pause, record decisions.

Every decision is recorded in the checkpoint's ``decisions`` (who, when, the
note, the arguments an approved call runs with), once even when the activity
is retried. A rejection becomes the call's result, ``{error, note}``. An
approved call's result is the tool's; :func:`approved_content` is what the
tool activity records for it when the decision carries a note or edited
arguments: ``{"result": <the tool's result>, "approvalNote": …,
"editedArguments": …}``, one JSON text like any tool result, so every
provider's transcript carries it and the model sees the note.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import ValidationError
from temporalio import activity
from temporalio.exceptions import ApplicationError

from durable_agents.activities import tracing
from durable_agents.activities.contracts import (
    CHECK_APPROVALS,
    PAUSE_FOR_APPROVAL,
    RECORD_DECISION,
    CheckApprovalsInput,
    CheckApprovalsOutput,
    PauseForApprovalInput,
    PolicyVerdict,
    RecordDecisionInput,
    RecordDecisionOutput,
)
from durable_agents.activities.deps import ActivityDeps, asked_at, policy_book, policy_now
from durable_agents.activities.events import streams, write_events_now
from durable_agents.activities.keys import idempotency_key
from durable_agents.activities.step_events import approval_decided, approval_requested, rejected_call
from durable_agents.agent.tools import ToolContext
from durable_agents.checkpoint.approval_grants import Grant, grant_from_approval
from durable_agents.checkpoint.approval_policy import PolicyCall, arguments_digest
from durable_agents.checkpoint.errors import ConfigurationError, FailureType
from durable_agents.checkpoint.events import parse_event
from durable_agents.checkpoint.format import (
    CheckpointHeader,
    CheckpointStatus,
    Decision,
    DecisionSource,
    Evaluation,
    Message,
    ToolCall,
)


def rejection_content(note: str | None) -> str:
    return json.dumps({"error": "rejected by a human reviewer", "note": note or "no reason given"})


def decision_at(header: CheckpointHeader | None, position: int) -> Decision | None:
    """The decision recorded for the call whose result goes at ``position`` (the newest, if several)."""
    for decision in reversed((header.decisions if header else None) or []):
        if decision.position == position:
            return decision
    return None


def approved_content(content: str, decision: Decision | None, *, is_error: bool = False) -> str:
    """An approved call's result as the model should see it.

    Unchanged when the decision has neither a note nor edited arguments (and for
    no decision); else ``{"result": <the result, parsed when it is JSON>,
    "approvalNote": <note>, "editedArguments": <arguments>}`` (each key only when
    set). An error result (``is_error``) that is a JSON object keeps its shape,
    ``{error, …}``, and gains the two keys.
    """
    if decision is None or not decision.approved or (decision.note is None and decision.arguments is None):
        return content
    try:
        result: Any = json.loads(content)
    except ValueError:
        result = content
    wrapped: dict[str, Any] = dict(result) if is_error and isinstance(result, dict) else {"result": result}
    if decision.note is not None:
        wrapped["approvalNote"] = decision.note
    if decision.arguments is not None:
        wrapped["editedArguments"] = decision.arguments
    return json.dumps(wrapped, ensure_ascii=False)


def save_pause(
    deps: ActivityDeps,
    header: CheckpointHeader,
    approval_id: str,
    remaining: list[ToolCall],
    turn_position: int | None,
    **more: Any,
) -> list[ToolCall]:
    """Save ``header``'s session as waiting for ``approval_id`` with the calls after the gated
    one (their arguments read from the stored turn when they came as references), in one
    write: the pause of a run, or of its sub-agent's (``more``: the snapshot). The calls saved."""
    if turn_position is not None:
        remaining = deps.stored_calls(header.session_id, turn_position, remaining)
    update = {
        "status": CheckpointStatus.AWAITING_APPROVAL,
        "approval_id": approval_id,
        "remaining_tool_calls": remaining,
        "updated_at": None,
        **more,
    }
    deps.store.append(header.model_copy(update=update), header.message_count, [])
    return remaining


def rejection_by_policy(reason: str) -> str:
    """The result of a call the approval policy denied: ``{error, note}``, the note saying the rule."""
    return json.dumps({"error": "denied by the approval policy", "note": reason}, ensure_ascii=False)


def decision_record(
    inp: RecordDecisionInput, arguments: dict[str, Any] | None = None, *, digest: str | None = None
) -> Decision:
    """The ``decisions`` entry for ``inp``: who or what decided, under which policy, and why
    (``arguments``: the call's as the model gave them, for their digest; or their ``digest``)."""
    decision, policy, evaluation = inp.decision, inp.policy, inp.evaluation
    source = inp.source or "person"
    reason = decision.note if source in ("person", "timeout") else None
    if source not in ("person", "timeout") and policy is not None:
        reason = policy.reason
    if source == "evaluator" and evaluation is not None:
        reason = (
            f"evaluator {evaluation.evaluator} by criteria {evaluation.criteria!r} "
            f"(confidence {evaluation.confidence or 0:.2f}): {evaluation.reasoning or 'no reasoning given'}"
        )
    return _record(
        decision.approval_id,
        inp.call,
        inp.position,
        approved=decision.approved,
        decided_by=decision.decided_by,
        note=decision.note,
        arguments=decision.arguments if decision.approved else None,
        source=source if (inp.source or policy or evaluation) else None,
        reason=reason,
        policy=policy,
        criteria=(policy.criteria if policy else None) or (evaluation.criteria if evaluation else None),
        digest=digest or (arguments_digest(arguments) if arguments is not None else None),
        evaluation=evaluation,
    )


def policy_record(approval_id: str, call: ToolCall, position: int, verdict: PolicyVerdict) -> Decision:
    """The ``decisions`` entry of a call the approval policy approved by ``verdict`` (a rule,
    ``approveAll`` or a grant) in its model turn: :func:`decision_record` of such a decision,
    built without the activity input (it runs with every call a policy approves in its turn)."""
    return _record(
        approval_id,
        call,
        position,
        approved=True,
        source=verdict.source,
        reason=verdict.reason,
        policy=verdict,
        criteria=verdict.criteria,
        digest=verdict.arguments_digest,
    )


def _record(
    approval_id: str,
    call: ToolCall,
    position: int,
    *,
    approved: bool,
    source: DecisionSource | None,
    reason: str | None,
    policy: PolicyVerdict | None,
    criteria: str | None,
    digest: str | None,
    decided_by: str | None = None,
    note: str | None = None,
    arguments: dict[str, Any] | None = None,
    evaluation: Evaluation | None = None,
) -> Decision:
    return Decision(
        approval_id=approval_id,
        tool_call_id=call.id,
        tool_name=call.name,
        approved=approved,
        decided_at=datetime.now(UTC),  # the activity's clock: when the decision was recorded
        decided_by=decided_by,
        note=note,
        arguments=arguments,
        position=position,
        source=source,
        reason=reason,
        rule=policy.rule if policy else None,
        grant_id=policy.grant_id if policy and source == "grant" else None,
        criteria=criteria,
        policy_version=policy.policy_version if policy else None,
        agent_policy_version=policy.agent_policy_version or None if policy else None,
        session_policy_version=policy.session_policy_version or None if policy else None,
        arguments_digest=digest,
        evaluation=evaluation,
    )


def _with_decision(decisions: list[Decision] | None, record: Decision) -> list[Decision]:
    """``decisions`` plus ``record``, unless a retried activity recorded it already."""
    kept = list(decisions or [])
    if any(d.approval_id == record.approval_id for d in kept):
        return kept
    return [*kept, record]


class ApprovalActivities:
    def __init__(self, deps: ActivityDeps) -> None:
        self.deps = deps

    @activity.defn(name=CHECK_APPROVALS)
    async def check_approvals(self, inp: CheckApprovalsInput) -> CheckApprovalsOutput:
        """Evaluate ``needs_approval`` functions on the calls' arguments (code runs here, not in the workflow)."""
        agent = self.deps.agent(inp.agent)
        header = await self.deps.in_store(self.deps.live_header, inp.session_id) if inp.batch_start else None
        calls = inp.calls
        if inp.turn_position is not None:  # references: their arguments are in the stored turn
            calls = await self.deps.in_store(self.deps.stored_calls, inp.session_id, inp.turn_position, inp.calls)
        needs = []
        for index, call in enumerate(calls):
            tool = agent.tool_named(call.name)
            if tool is None and agent.mcp_servers:  # an MCP tool: its gate is in the run's config
                from durable_agents.activities.mcp import recorded_mcp_tool

                tool = await recorded_mcp_tool(self.deps, agent, inp.session_id, call.name)
            try:
                args = tool.input_model.model_validate(call.arguments) if tool else None
            except ValidationError:
                args = None  # the tool activity will return the validation error
            key = idempotency_key(header, inp.batch_start + index) if header and inp.batch_start else ""
            ctx = ToolContext(
                tool_call_id=call.id, session_id=inp.session_id, step=inp.step, agent=inp.agent, idempotency_key=key
            )
            needs.append(bool(tool and args is not None and tool.requires_approval(args, ctx)))
        return CheckApprovalsOutput(needs_approval=needs)

    @activity.defn(name=PAUSE_FOR_APPROVAL)
    async def pause_for_approval(self, inp: PauseForApprovalInput) -> None:
        def write() -> None:
            header = self.deps.live_header(inp.session_id)
            remaining = save_pause(self.deps, header, inp.approval_id, inp.remaining_tool_calls, inp.turn_position)
            if streams(header):
                events = [approval_requested(self.deps, inp, remaining)]
                if inp.outcome is not None:  # the run's RunPaused, which the workflow made
                    events.append((f"outcome:{inp.approval_id}", parse_event(inp.outcome)))
                write_events_now(self.deps, inp.session_id, events)

        await self.deps.in_store(write)

    @activity.defn(name=RECORD_DECISION)
    async def record_decision(self, inp: RecordDecisionInput) -> RecordDecisionOutput:
        """The decision is saved before an approved tool runs; a rejection becomes the call's
        result; a decision with a ``grant`` makes the grant (once, whatever the retries)."""
        if tracing.on():  # the wait's span, from the pause's save to now (one more read, traced workers only)
            tracing.approval_waited(
                await self.deps.in_store(self.deps.live_header, inp.session_id), inp.decision, inp.call
            )

        def write() -> int:
            call = self._shown_call(inp)
            record = decision_record(inp, call.arguments if inp.decision.grant or inp.policy else None)
            if inp.decision.grant is not None:
                record = record.model_copy(update={"grant_created": make_grant(self.deps, inp, call).id})
            rejection = rejection_content(inp.decision.note)
            if inp.source == "evaluator":
                rejection = rejection_by_policy(record.reason or "the auto mode's evaluator")
            return record_decision_now(self.deps, inp, record, rejection)

        with asked_at(inp.asked_at):  # (the time a grant counts from)
            return RecordDecisionOutput(recorded_through=await self.deps.in_store(write))

    def _shown_call(self, inp: RecordDecisionInput) -> ToolCall:
        """The decided call with the arguments the model gave (the ones shown), read from its turn
        when the workflow holds a reference."""
        if inp.turn_position is None:
            return inp.call
        return self.deps.stored_call(inp.session_id, inp.turn_position, inp.position)


def record_decision_now(deps: ActivityDeps, inp: RecordDecisionInput, record: Decision, rejection: str) -> int:
    """Save ``record`` in the session's ``decisions`` (once, whatever the retries) and the
    session as going on; a rejected call gets ``rejection`` as its result. Where the batch's
    results are recorded through. In the store call of the activity that records it."""
    store = deps.store
    header = deps.live_header(inp.session_id)
    store.append(
        header.model_copy(
            update={
                "status": CheckpointStatus.IN_PROGRESS,
                "approval_id": None,
                "remaining_tool_calls": None,
                "decisions": _with_decision(header.decisions, record),
                "updated_at": None,
            }
        ),
        header.message_count,
        [],
    )
    if streams(header):
        kept = next((d for d in header.decisions or [] if d.approval_id == record.approval_id), record)
        write_events_now(deps, inp.session_id, [approval_decided(inp, kept)])
    if inp.decision.approved:
        return header.message_count
    rejected = Message.tool_result(inp.call, rejection, is_error=True)
    count = store.record_tool_result(inp.session_id, inp.position, rejected, inp.batch_start, len(inp.batch))
    if streams(header):
        finished = rejected_call(inp, header.step_index, store.tool_result(inp.session_id, inp.position))
        write_events_now(deps, inp.session_id, [finished])
    return count


def grant_id_for(approval_id: str) -> str:
    """The id of the grant an approval makes: one per approval, the same on every retry."""
    return f"grant-{approval_id}"


def make_grant(deps: ActivityDeps, inp: RecordDecisionInput, call: ToolCall) -> Grant:
    """The grant ``inp``'s decision asks for, kept in the policy book (a retry finds it kept)."""
    asked, decision = inp.decision.grant, inp.decision
    assert asked is not None
    book = policy_book(deps)
    if book is None:
        raise ApplicationError(
            f"approval {decision.approval_id} asks for a grant, but {deps.store!r} has no policy book beside it",
            type=FailureType.CONFIGURATION,
            non_retryable=True,
        )
    grant_id = grant_id_for(decision.approval_id)
    kept = book.get_grant(grant_id)
    if kept is not None:
        return kept
    now = policy_now()  # the grant's expiry counts from the decision's record, in Temporal's time
    try:
        grant = grant_from_approval(
            grant_id=grant_id,
            kind=asked.scope,
            call=PolicyCall(agent=inp.agent or "", session_id=inp.session_id, tool=call.name, arguments=call.arguments),
            approved_by=decision.decided_by or "unnamed",
            now=now,
            shown_digest=arguments_digest(call.arguments),
            edited_arguments=decision.arguments,
            exact_arguments=asked.exact_arguments,
            when=asked.when,
            expires_at=now + timedelta(seconds=asked.expires_in_seconds) if asked.expires_in_seconds else None,
            max_uses=asked.max_uses,
            approval_id=decision.approval_id,
            note=asked.note,
        )
    except (ConfigurationError, ValueError) as e:
        raise ApplicationError(
            f"the grant of approval {decision.approval_id} cannot be made: {e}",
            type=FailureType.CONFIGURATION,
            non_retryable=True,
        ) from None
    return book.add_grant(grant)
