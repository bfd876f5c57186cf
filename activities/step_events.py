"""The step-level events of a streamed run's activities (tools, approvals, run start and
failure, a sub-agent's start), each with the key that makes a retried write a no-op.
Written with :func:`durable_agents.activities.events.write_events` (or ``write_events_now``
inside a store call) when the run streams.
"""

from __future__ import annotations

from temporalio import activity

from durable_agents.activities.contracts import (
    ApprovalDecision,
    ExecuteToolInput,
    PauseForApprovalInput,
    RecordDecisionInput,
)
from durable_agents.activities.deps import ActivityDeps
from durable_agents.activities.events import Keyed, now
from durable_agents.checkpoint.events import (
    ApprovalDecided,
    ApprovalRequested,
    Drift,
    RunFailed,
    RunStarted,
    SubAgentStarted,
    ToolCallFinished,
    ToolCallStarted,
)
from durable_agents.checkpoint.fingerprint import AgentDrift
from durable_agents.checkpoint.format import Decision, Message, RunConfig, RunError, SubagentApproval, ToolCall


def tool_started(inp: ExecuteToolInput, call: ToolCall) -> Keyed:
    event = ToolCallStarted(
        session_id=inp.session_id,
        step=inp.step,
        tool_call_id=call.id,
        name=call.name,
        arguments=call.arguments,
        position=inp.position,
        at=now(),
    )
    return f"tool-started:{inp.position}", event


def tool_finished(inp: ExecuteToolInput, result: Message, kind: str) -> Keyed:
    event = ToolCallFinished(
        session_id=inp.session_id,
        step=inp.step,
        tool_call_id=inp.call.id,
        name=inp.call.name,
        position=inp.position,
        result=result.content or "",
        is_error=bool(result.is_error),
        kind=kind,
        at=now(),
    )
    return f"tool-finished:{inp.position}", event


def approval_requested(deps: ActivityDeps, inp: PauseForApprovalInput, remaining: list[ToolCall]) -> Keyed:
    """From inside the pause's store call: the gated call is the one before ``remaining`` in its turn."""
    call = ToolCall(id="", name="")
    if inp.turn_position is not None:
        [turn] = deps.store.load_messages(inp.session_id, inp.turn_position, inp.turn_position + 1)
        calls = turn.tool_calls or []
        if len(calls) > len(remaining):
            call = calls[len(calls) - len(remaining) - 1]
    event = ApprovalRequested(
        session_id=inp.session_id,
        approval_id=inp.approval_id,
        tool_call_id=call.id,
        tool_name=call.name,
        arguments=call.arguments,
        remaining_tool_calls=remaining,
        at=now(),
    )
    return f"approval:{inp.approval_id}", event


def approval_decided(inp: RecordDecisionInput, record: Decision | None = None) -> Keyed:
    """The decision's ``ApprovalDecided``, saying who or what decided and why (``record``: as recorded)."""
    decision = inp.decision
    event = ApprovalDecided(
        session_id=inp.session_id,
        approval_id=decision.approval_id,
        tool_call_id=inp.call.id,
        tool_name=inp.call.name,
        approved=decision.approved,
        note=decision.note,
        decided_by=decision.decided_by,
        at=now(),
    )
    if record is not None and record.source is not None:
        event = event.model_copy(
            update={
                "source": record.source,
                "reason": record.reason,
                "rule": record.rule,
                "grant_id": record.grant_id,
                "criteria": record.criteria,
                "policy_version": record.policy_version,
                "evaluation": record.evaluation,
                "grant_created": record.grant_created,
            }
        )
    elif record is not None and record.grant_created is not None:
        event = event.model_copy(update={"grant_created": record.grant_created})
    return f"decision:{decision.approval_id}", event


def rejected_call(inp: RecordDecisionInput, step: int, result: Message | None) -> Keyed:
    """The rejected call's ``ToolCallFinished``: its result is the rejection (or what was recorded first)."""
    event = ToolCallFinished(
        session_id=inp.session_id,
        step=step,
        tool_call_id=inp.call.id,
        name=inp.call.name,
        position=inp.position,
        result=(result.content or "") if result else "",
        is_error=True,
        kind="rejected",
        at=now(),
    )
    return f"tool-finished:{inp.position}", event


def _run_id() -> str:
    return (activity.info().workflow_run_id or "") if activity.in_activity() else ""


def run_started(session_id: str, config: RunConfig, step: int, drift: AgentDrift | None) -> list[Keyed]:
    run_id = _run_id()
    events: list[Keyed] = [
        (
            f"run:{run_id}",
            RunStarted(
                session_id=session_id, agent=config.agent, model=config.model, step=step, run_id=run_id, at=now()
            ),
        )
    ]
    if drift is not None:
        events.append(
            (f"drift:{run_id}", Drift(session_id=session_id, drift=drift, description=drift.describe(), at=now()))
        )
    return events


def run_failed(session_id: str, error: RunError) -> Keyed:
    run_id = _run_id()
    event = RunFailed(
        session_id=session_id, message=error.message, error_type=error.type, step=error.step, run_id=run_id, at=now()
    )
    return f"failed:{run_id}", event


def subagent_started(
    session_id: str,
    child_session_id: str,
    tool_call_id: str,
    agent: str,
    position: int,
    *,
    after: int = 0,
    resumed: bool = False,
    approval_id: str | None = None,
) -> Keyed:
    """The parent's ``SubAgentStarted`` for a child's run (written before the child starts,
    when the parent streams); keyed by the call's result position and the parent's Temporal
    run (a retried start writes it once; the parent's next run, which starts the child's next
    run, writes its own), or by the relayed approval for ``resumed``."""
    event = SubAgentStarted(
        session_id=session_id,
        child_session_id=child_session_id,
        tool_call_id=tool_call_id,
        agent=agent,
        position=position,
        after=after,
        resumed=resumed,
        at=now(),
    )
    key = f"subagent:{position}:resumed:{approval_id}" if resumed else f"subagent:{position}:{_run_id()}"
    return key, event


def call_started(session_id: str, step: int, call: ToolCall, position: int) -> Keyed:
    """``ToolCallStarted`` of a call that is not the tool activity's (a sub-agent's)."""
    event = ToolCallStarted(
        session_id=session_id,
        step=step,
        tool_call_id=call.id,
        name=call.name,
        arguments=call.arguments,
        position=position,
        at=now(),
    )
    return f"tool-started:{position}", event


def call_finished(session_id: str, step: int, call: ToolCall, position: int, result: Message) -> Keyed:
    """``ToolCallFinished`` of a sub-agent's call: its result as recorded."""
    event = ToolCallFinished(
        session_id=session_id,
        step=step,
        tool_call_id=call.id,
        name=call.name,
        position=position,
        result=result.content or "",
        is_error=bool(result.is_error),
        kind="error" if result.is_error else "result",
        at=now(),
    )
    return f"tool-finished:{position}", event


def subagent_approval_requested(session_id: str, approval: SubagentApproval) -> Keyed:
    """A parent's ``ApprovalRequested`` for its sub-agent's pause (the innermost call that waits)."""
    inner = approval.innermost()
    call = inner.tool_call or ToolCall(id="", name="")
    event = ApprovalRequested(
        session_id=session_id,
        approval_id=approval.approval_id,
        tool_call_id=call.id,
        tool_name=call.name,
        arguments=call.arguments,
        remaining_tool_calls=list(inner.remaining_tool_calls or []),
        subagent_session_id=inner.session_id,
        at=now(),
    )
    return f"approval:{approval.approval_id}", event


def subagent_approval_decided(session_id: str, approval: SubagentApproval, decision: ApprovalDecision) -> Keyed:
    """A parent's ``ApprovalDecided`` for the decision it relays to its sub-agent."""
    inner = approval.innermost()
    call = inner.tool_call or ToolCall(id="", name="")
    event = ApprovalDecided(
        session_id=session_id,
        approval_id=decision.approval_id,
        tool_call_id=call.id,
        tool_name=call.name,
        approved=decision.approved,
        note=decision.note,
        decided_by=decision.decided_by,
        subagent_session_id=inner.session_id,
        at=now(),
    )
    return f"decision:{decision.approval_id}", event
