"""Run input and pending approvals from the store, and Temporal failures turned into typed errors."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from durable_agents.activities.contracts import PendingApproval
from durable_agents.activities.transcript import pending_tool_calls
from durable_agents.checkpoint.errors import FailureType
from durable_agents.checkpoint.format import CheckpointHeader, CheckpointStatus, Message
from durable_agents.checkpoint.stores.base import CheckpointStore, last_turn_messages
from durable_agents.checkpoint.waiting import WaitingHeader
from durable_agents.errors import (
    AgentDriftError,
    ApprovalNotPendingError,
    CheckpointNotFoundError,
    ConfigurationError,
    DecisionTooLargeError,
    DurableAgentsError,
    HookFailedError,
    InvalidDecisionError,
    InvalidRunInputError,
    ModelProviderError,
    OutputValidationError,
    PolicyVersionConflictError,
    PropagatingToolError,
    ResumeToolMissingError,
    RunFailedError,
    SessionAwaitingApprovalError,
    SessionBusyError,
    SessionFinishedError,
    StoreCorruptError,
    StoreUnavailableError,
    ToolDurabilityError,
)


def as_messages(input: str | Message | Sequence[str | Message]) -> list[Message]:
    items = [input] if isinstance(input, (str, Message)) else list(input)
    return [Message.user(i) if isinstance(i, str) else i for i in items]


def pending_from_store(store: CheckpointStore, session_id: str) -> PendingApproval | None:
    """The pending approval as the checkpoint records it (no live run needed)."""
    header = store.load_header(session_id)
    if header is None or header.status != CheckpointStatus.AWAITING_APPROVAL:
        return None
    return pending_in(header, last_turn_messages(store, header))  # not the whole of a long session


def pending_in(header: CheckpointHeader | WaitingHeader, last_turn: list[Message]) -> PendingApproval | None:
    """The approval a waiting session's checkpoint records: ``header`` and its last turn."""
    session_id = header.session_id
    if header.status != CheckpointStatus.AWAITING_APPROVAL or not header.approval_id:
        return None
    nested = header.subagent_approval
    if nested is not None and nested.approval_id == header.approval_id:  # the call waits in a sub-agent
        inner = nested.innermost()
        if inner.tool_call is None:
            return None
        return PendingApproval(
            approval_id=header.approval_id,
            session_id=session_id,
            agent=header.agent or "",
            tool_name=inner.tool_call.name,
            tool_call_id=inner.tool_call.id,
            arguments=inner.tool_call.arguments,
            requested_at=header.updated_at or datetime.now(UTC),
            remaining_tool_calls=inner.remaining_tool_calls or [],
            subagent_session_id=inner.session_id,
            subagent_agent=inner.agent,
            parent_session_id=header.parent_session_id,
        )
    pending, _ = pending_tool_calls(last_turn)
    if not pending:
        return None
    call = pending[0]
    requested = header.updated_at or datetime.now(UTC)  # the pause's save
    spec = next((t for t in header.run_config.tools if t.name == call.name), None) if header.run_config else None
    timeout = spec.approval_timeout_seconds if spec else None
    return PendingApproval(
        approval_id=header.approval_id,
        session_id=session_id,
        agent=header.agent or "",
        tool_name=call.name,
        tool_call_id=call.id,
        arguments=call.arguments,
        requested_at=requested,
        remaining_tool_calls=header.remaining_tool_calls or [],
        timeout_at=requested + timedelta(seconds=timeout) if timeout else None,
        parent_session_id=header.parent_session_id,
    )


# -- failures: ApplicationError.type (a FailureType) -> the typed error -------------------

if TYPE_CHECKING:  # the Temporal SDK is imported where a failure is mapped: store-only CLI commands skip it
    from temporalio.exceptions import ApplicationError

FailureMapper = Callable[[str, "ApplicationError"], DurableAgentsError]


def _detail(failure: ApplicationError, index: int) -> object:
    return failure.details[index] if len(failure.details) > index else None


def _text(failure: ApplicationError, index: int) -> str | None:
    value = _detail(failure, index)
    return value if isinstance(value, str) else None


def _run_failed(kind: type[RunFailedError]) -> FailureMapper:
    def make(session_id: str, failure: ApplicationError) -> DurableAgentsError:
        return kind(
            f"run of session {session_id!r} failed: {failure.message}", session_id=session_id, cause_type=failure.type
        )

    return make


def _checkpoint_not_found(session_id: str, failure: ApplicationError) -> DurableAgentsError:
    kept = _detail(failure, 1)
    return CheckpointNotFoundError(
        failure.message,
        session_id=_text(failure, 0) or session_id,
        kept_steps=[int(k) for k in kept] if isinstance(kept, list) else None,
    )


def _approval_not_pending(session_id: str, failure: ApplicationError) -> DurableAgentsError:
    return ApprovalNotPendingError(session_id, _text(failure, 0), _text(failure, 1), detail=failure.message)


def _invalid_decision(session_id: str, failure: ApplicationError) -> DurableAgentsError:
    approval_id, problem = _text(failure, 0), _text(failure, 1) or failure.message
    part, size, limit = _detail(failure, 2), _detail(failure, 3), _detail(failure, 4)
    if isinstance(part, str) and isinstance(size, int) and isinstance(limit, int):  # a part too large
        return DecisionTooLargeError(session_id, approval_id, part, size, limit)
    return InvalidDecisionError(session_id, approval_id, problem)


def _policy_version_conflict(session_id: str, failure: ApplicationError) -> DurableAgentsError:
    scope, expected, actual, at = (
        _text(failure, 0) or "a policy",
        _detail(failure, 1),
        _detail(failure, 2),
        _text(failure, 4),
    )
    if not (isinstance(expected, int) and isinstance(actual, int)):  # (from a client that sent no details)
        return PolicyVersionConflictError(scope, 0, 0, detail=failure.message)
    changed_at = datetime.fromisoformat(at) if at else None
    return PolicyVersionConflictError(scope, expected, actual, changed_by=_text(failure, 3), changed_at=changed_at)


FAILURE_ERRORS: dict[FailureType, FailureMapper] = {
    FailureType.DURABLE_AGENTS: lambda _, f: DurableAgentsError(f.message),
    FailureType.CONFIGURATION: lambda _, f: ConfigurationError(f.message),
    FailureType.CHECKPOINT_NOT_FOUND: _checkpoint_not_found,
    FailureType.STORE_CORRUPT: lambda _, f: StoreCorruptError(f.message),
    FailureType.STORE_UNAVAILABLE: lambda _, f: StoreUnavailableError(f.message),
    FailureType.SESSION_AWAITING_APPROVAL: lambda sid, f: SessionAwaitingApprovalError(sid, _text(f, 0)),
    FailureType.SESSION_BUSY: lambda sid, _: SessionBusyError(sid),
    FailureType.SESSION_FINISHED: lambda sid, f: SessionFinishedError(sid, _text(f, 0), _text(f, 1)),
    FailureType.APPROVAL_NOT_PENDING: _approval_not_pending,
    FailureType.AGENT_DRIFT: lambda _, f: AgentDriftError(f.message),
    FailureType.RESUME_TOOL_MISSING: lambda _, f: ResumeToolMissingError(f.message),
    FailureType.TOOL_DURABILITY: lambda _, f: ToolDurabilityError(f.message),
    FailureType.RUN_FAILED: _run_failed(RunFailedError),
    FailureType.MODEL_PROVIDER_REQUEST: _run_failed(ModelProviderError),
    FailureType.MODEL_PROVIDER_RETRYABLE: _run_failed(ModelProviderError),
    FailureType.MODEL_PROVIDER_MALFORMED_REPLY: _run_failed(ModelProviderError),
    FailureType.OUTPUT_INVALID: _run_failed(OutputValidationError),
    FailureType.PROPAGATING_TOOL: _run_failed(PropagatingToolError),
    FailureType.HOOK_FAILED: _run_failed(HookFailedError),
    FailureType.INVALID_RUN_INPUT: lambda _, f: InvalidRunInputError(f.message),
    FailureType.INVALID_DECISION: _invalid_decision,
    FailureType.POLICY_VERSION_CONFLICT: _policy_version_conflict,
}
"""The client-side error for every failure type (a test checks that none is missing)."""


def failure_error(session_id: str, failure: ApplicationError) -> DurableAgentsError:
    """The typed error for an ``ApplicationError`` by its ``type``; ``RunFailedError``
    (with ``cause_type``) for a type that is not a :class:`FailureType`."""
    try:
        kind = FailureType(failure.type or "")
    except ValueError:
        return _run_failed(RunFailedError)(session_id, failure)
    return FAILURE_ERRORS[kind](session_id, failure)


def outcome_error(session_id: str, error: Exception) -> Exception:
    """A typed error for a failed run or a refused update (mapped by failure type, never by message)."""
    from temporalio.client import WorkflowFailureError
    from temporalio.exceptions import ApplicationError, FailureError

    cause: BaseException | None = getattr(error, "cause", None)
    while isinstance(cause, FailureError) and cause.cause is not None and not isinstance(cause, ApplicationError):
        cause = cause.cause
    if isinstance(cause, ApplicationError):
        return failure_error(session_id, cause)
    if isinstance(error, WorkflowFailureError):
        return RunFailedError(f"run of session {session_id!r} failed: {error.cause or error}", session_id=session_id)
    return error
