"""Approval activities: decide which calls need a human, pause, record decisions."""

from __future__ import annotations

import json

from pydantic import ValidationError
from temporalio import activity

from durable_agents.activities.contracts import (
    CHECK_APPROVALS,
    PAUSE_FOR_APPROVAL,
    RECORD_DECISION,
    CheckApprovalsInput,
    CheckApprovalsOutput,
    PauseForApprovalInput,
    RecordDecisionInput,
    RecordDecisionOutput,
)
from durable_agents.activities.definitions import ToolContext
from durable_agents.activities.deps import ActivityDeps
from durable_agents.activities.tools import idempotency_key
from durable_agents.checkpoint.format import CheckpointStatus, Message


def rejection_content(note: str | None) -> str:
    return json.dumps({"error": "rejected by a human reviewer", "note": note or "no reason given"})


class ApprovalActivities:
    def __init__(self, deps: ActivityDeps) -> None:
        self.deps = deps

    @activity.defn(name=CHECK_APPROVALS)
    async def check_approvals(self, inp: CheckApprovalsInput) -> CheckApprovalsOutput:
        """Evaluate ``needs_approval`` functions on the calls' arguments (code runs here, not in the workflow)."""
        agent = self.deps.agent(inp.agent)
        header = await self.deps.in_store(self.deps.live_header, inp.session_id) if inp.batch_start else None
        needs = []
        for index, call in enumerate(inp.calls):
            tool = agent.tool_named(call.name)
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
            store = self.deps.store
            header = self.deps.live_header(inp.session_id)
            store.append(
                header.model_copy(
                    update={
                        "status": CheckpointStatus.AWAITING_APPROVAL,
                        "approval_id": inp.approval_id,
                        "remaining_tool_calls": inp.remaining_tool_calls,
                        "updated_at": None,
                    }
                ),
                header.message_count,
                [],
            )

        await self.deps.in_store(write)

    @activity.defn(name=RECORD_DECISION)
    async def record_decision(self, inp: RecordDecisionInput) -> RecordDecisionOutput:
        """The decision is saved before an approved tool runs; a rejection becomes the call's result."""

        def write() -> int:
            store = self.deps.store
            header = self.deps.live_header(inp.session_id)
            store.append(
                header.model_copy(
                    update={
                        "status": CheckpointStatus.IN_PROGRESS,
                        "approval_id": None,
                        "remaining_tool_calls": None,
                        "updated_at": None,
                    }
                ),
                header.message_count,
                [],
            )
            if inp.decision.approved:
                return header.message_count
            rejected = Message.tool_result(inp.call, rejection_content(inp.decision.note), is_error=True)
            return store.record_tool_result(inp.session_id, inp.position, rejected, inp.batch_start, len(inp.batch))

        return RecordDecisionOutput(recorded_through=await self.deps.in_store(write))
