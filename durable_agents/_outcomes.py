"""Run results, and Temporal failures turned into typed errors."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import Field
from temporalio.client import WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError, FailureError

from durable_agents.activities.contracts import PendingApproval
from durable_agents.activities.transcript import pending_tool_calls
from durable_agents.checkpoint.fingerprint import AgentDrift
from durable_agents.checkpoint.format import CheckpointStatus, FinishReason, FormatModel, Message, Role, ToolCall, Usage
from durable_agents.checkpoint.stores.base import CheckpointStore
from durable_agents.errors import (
    AgentDriftError,
    ApprovalNotPendingError,
    CheckpointNotFoundError,
    ConfigurationError,
    ModelProviderError,
    ResumeToolMissingError,
    RunFailedError,
    SessionAwaitingApprovalError,
    StoreCorruptError,
)
from durable_agents.workflows.contracts import RunSummary

PROVIDER_FAILURES = {"ModelProviderRequestError", "ModelProviderMalformedReply", "ModelProviderRetryableError"}
TYPED_FAILURES = {
    "AgentDriftError": AgentDriftError,
    "ResumeToolMissingError": ResumeToolMissingError,
    "ConfigurationError": ConfigurationError,
    "StoreCorruptError": StoreCorruptError,
}


class RunResult(FormatModel):
    session_id: str
    finish_reason: FinishReason
    messages: list[Message]
    """The whole conversation, from the store."""
    steps: int
    usage: Usage
    tool_calls: list[ToolCall] = Field(default_factory=list)
    """The tool calls of this run, in order."""
    approval_id: str | None = None
    """Set when the run paused: decide it with ``AgentClient.approve``."""
    drift: AgentDrift | None = None
    """Set when the run resumed with an agent that changed since the checkpoint (on_agent_drift='warn')."""

    @property
    def text(self) -> str:
        """The last assistant text of the run."""
        for message in reversed(self.messages):
            if message.role == Role.ASSISTANT and message.content:
                return message.content
        return ""

    @classmethod
    def from_summary(cls, summary: RunSummary, store: CheckpointStore) -> RunResult:
        messages = store.load_messages(summary.session_id, 0, summary.message_count)
        run_messages = messages[summary.run_start_index :]
        calls = [c for m in run_messages if m.role == Role.ASSISTANT for c in (m.tool_calls or [])]
        return cls(
            session_id=summary.session_id,
            finish_reason=summary.finish_reason,
            messages=messages,
            steps=summary.steps,
            usage=summary.usage,
            tool_calls=calls,
            approval_id=summary.approval_id,
            drift=summary.drift,
        )


def as_messages(input: str | Message | Sequence[str | Message]) -> list[Message]:
    items = [input] if isinstance(input, (str, Message)) else list(input)
    return [Message.user(i) if isinstance(i, str) else i for i in items]


def pending_from_store(store: CheckpointStore, session_id: str) -> PendingApproval | None:
    """The pending approval as the checkpoint records it (no live run needed)."""
    header = store.load_header(session_id)
    if header is None or header.status != CheckpointStatus.AWAITING_APPROVAL or not header.approval_id:
        return None
    pending, _ = pending_tool_calls(store.load_messages(session_id, 0, header.message_count))
    if not pending:
        return None
    call = pending[0]
    return PendingApproval(
        approval_id=header.approval_id,
        session_id=session_id,
        agent=header.agent or "",
        tool_name=call.name,
        tool_call_id=call.id,
        arguments=call.arguments,
        requested_at=header.updated_at,
        remaining_tool_calls=header.remaining_tool_calls or [],
    )


def outcome_error(session_id: str, error: Exception) -> Exception:
    """A typed error for a failed run or a refused update."""
    if isinstance(error, WorkflowUpdateFailedError):
        refused = str(error.cause)
        if "is not pending" in refused or "already decided" in refused:
            return ApprovalNotPendingError(session_id, None, None, detail=refused)
    cause: BaseException | None = getattr(error, "cause", None)
    while isinstance(cause, FailureError) and cause.cause is not None and not isinstance(cause, ApplicationError):
        cause = cause.cause
    if isinstance(cause, ApplicationError):
        if cause.type == "SessionAwaitingApprovalError":
            return SessionAwaitingApprovalError(session_id, cause.details[0] if cause.details else None)
        if cause.type == "CheckpointNotFoundError":
            return CheckpointNotFoundError(cause.message, session_id=session_id)
        if cause.type in TYPED_FAILURES:
            return TYPED_FAILURES[cause.type](cause.message)
        kind = ModelProviderError if cause.type in PROVIDER_FAILURES else RunFailedError
        return kind(
            f"run of session {session_id!r} failed: {cause.message}", session_id=session_id, cause_type=cause.type
        )
    if isinstance(error, WorkflowFailureError):
        return RunFailedError(f"run of session {session_id!r} failed: {error.cause or error}", session_id=session_id)
    return error
