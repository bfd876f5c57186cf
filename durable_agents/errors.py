"""Errors a user of durable-agents can catch, each with a stable ``code``, a
``retryable`` flag and the ``failure_type`` (:class:`FailureType`) it crosses
Temporal as.

Hierarchy::

    DurableAgentsError                      DURABLE_AGENTS_ERROR
    ├── ConfigurationError                  CONFIGURATION_ERROR
    ├── CheckpointNotFoundError             CHECKPOINT_NOT_FOUND
    ├── StoreCorruptError                   STORE_CORRUPT
    ├── StoreUnavailableError               STORE_UNAVAILABLE       retryable
    ├── SessionAwaitingApprovalError        SESSION_AWAITING_APPROVAL
    ├── SessionBusyError                    SESSION_BUSY
    ├── ApprovalNotPendingError             APPROVAL_NOT_PENDING
    ├── InvalidDecisionError                INVALID_DECISION
    ├── InvalidRunInputError                INVALID_RUN_INPUT
    ├── AgentDriftError                     AGENT_DRIFT
    ├── ResumeToolMissingError              RESUME_TOOL_MISSING
    ├── ToolDurabilityError                 TOOL_DURABILITY_ERROR
    └── RunFailedError                      RUN_FAILED
        ├── ModelProviderError              MODEL_PROVIDER_ERROR
        ├── OutputValidationError           OUTPUT_INVALID
        ├── PropagatingToolError            PROPAGATING_TOOL_ERROR
        └── HookFailedError                 HOOK_FAILED
"""

from __future__ import annotations

from durable_agents.checkpoint.errors import (
    CheckpointNotFoundError,
    ConfigurationError,
    DurableAgentsError,
    FailureType,
    StoreCorruptError,
    StoreDamageWarning,
    StoreUnavailableError,
)


class SessionAwaitingApprovalError(DurableAgentsError):
    code = "SESSION_AWAITING_APPROVAL"
    failure_type = FailureType.SESSION_AWAITING_APPROVAL

    def __init__(self, session_id: str, approval_id: str | None) -> None:
        super().__init__(
            f"session {session_id!r} is waiting for approval {approval_id}: approve or "
            "reject it first (durable-agents approve), then send new input"
        )
        self.session_id = session_id
        self.approval_id = approval_id

    def failure_details(self) -> tuple[object, ...]:
        return (self.approval_id,)


class SessionBusyError(DurableAgentsError):
    code = "SESSION_BUSY"
    failure_type = FailureType.SESSION_BUSY

    def __init__(self, session_id: str) -> None:
        super().__init__(
            f"session {session_id!r} has a live run; wait for it, or send with "
            "interrupt=True to abort it and continue with the new input"
        )
        self.session_id = session_id


class ApprovalNotPendingError(DurableAgentsError):
    """A decision for an approval that is unknown, already decided, or timed out."""

    code = "APPROVAL_NOT_PENDING"
    failure_type = FailureType.APPROVAL_NOT_PENDING

    def __init__(
        self, session_id: str, approval_id: str | None, pending: str | None, *, detail: str | None = None
    ) -> None:
        what = f"no approval {approval_id}" if approval_id else "no approval"
        waiting = f"; pending: {pending}" if pending else "; nothing is pending"
        super().__init__(
            (detail and f"session {session_id!r}: {detail}") or f"session {session_id!r} has {what} to decide{waiting}"
        )
        self.session_id = session_id
        self.approval_id = approval_id
        self.pending_approval_id = pending

    def failure_details(self) -> tuple[object, ...]:
        return (self.approval_id, self.pending_approval_id)


class InvalidDecisionError(DurableAgentsError):
    """A decision the run refuses for what it says: edited arguments that fail the tool's
    input schema, or a payload that is not one decision. Nothing was decided; the approval
    is still pending."""

    code = "INVALID_DECISION"
    failure_type = FailureType.INVALID_DECISION

    def __init__(self, session_id: str, approval_id: str | None, problem: str) -> None:
        super().__init__(f"session {session_id!r}: {problem}")
        self.session_id = session_id
        self.approval_id = approval_id
        self.problem = problem

    def failure_details(self) -> tuple[object, ...]:
        return (self.approval_id, self.problem)


class InvalidRunInputError(DurableAgentsError):
    """An ``AgentRun`` started with input that does not validate, a workflow id other than its
    session id, or inline input over its limit: the run failed at once, touching nothing."""

    code = "INVALID_RUN_INPUT"
    failure_type = FailureType.INVALID_RUN_INPUT


class AgentDriftError(DurableAgentsError):
    code = "AGENT_DRIFT"
    failure_type = FailureType.AGENT_DRIFT


class ResumeToolMissingError(DurableAgentsError):
    code = "RESUME_TOOL_MISSING"
    failure_type = FailureType.RESUME_TOOL_MISSING


class ToolDurabilityError(DurableAgentsError):
    """Also the ``kind`` of a tool result recorded when a tool's execution was lost."""

    code = "TOOL_DURABILITY_ERROR"
    failure_type = FailureType.TOOL_DURABILITY
    kind = "tool-durability-error"


class RunFailedError(DurableAgentsError):
    """A run stopped on an error; its last checkpoint is kept and it can be resumed."""

    code = "RUN_FAILED"
    failure_type = FailureType.RUN_FAILED

    def __init__(self, message: str, *, session_id: str, cause_type: str | None = None) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.cause_type = cause_type


class ModelProviderError(RunFailedError):
    """The model provider refused the request (e.g. a 400) or replied unreadably."""

    code = "MODEL_PROVIDER_ERROR"
    failure_type = FailureType.MODEL_PROVIDER_REQUEST


class OutputValidationError(RunFailedError):
    """The model's final answer did not validate against the agent's ``output_type``,
    even after it was told why ``output_retries`` times. The session stays resumable:
    the last error was sent back, so a resume asks the model once more."""

    code = "OUTPUT_INVALID"
    failure_type = FailureType.OUTPUT_INVALID


class PropagatingToolError(RunFailedError):
    """Raise it in a tool to fail the run instead of giving the model an error result.

    The call gets no result and the checkpoint stays ``in-progress``: a resume runs the
    call again (an at-most-once tool too: its start is forgotten, since it says it did
    not complete). The client raises it (with ``session_id``) for the failed run."""

    code = "PROPAGATING_TOOL_ERROR"
    failure_type = FailureType.PROPAGATING_TOOL

    def __init__(self, message: str, *, session_id: str = "", cause_type: str | None = None) -> None:
        super().__init__(message, session_id=session_id, cause_type=cause_type)


class HookFailedError(RunFailedError):
    """An agent hook raised; the run failed resumably (the step runs again, hook included)."""

    code = "HOOK_FAILED"
    failure_type = FailureType.HOOK_FAILED


__all__ = [
    "AgentDriftError",
    "ApprovalNotPendingError",
    "CheckpointNotFoundError",
    "ConfigurationError",
    "DurableAgentsError",
    "FailureType",
    "HookFailedError",
    "InvalidDecisionError",
    "InvalidRunInputError",
    "ModelProviderError",
    "OutputValidationError",
    "PropagatingToolError",
    "ResumeToolMissingError",
    "RunFailedError",
    "SessionAwaitingApprovalError",
    "SessionBusyError",
    "StoreCorruptError",
    "StoreDamageWarning",
    "StoreUnavailableError",
    "ToolDurabilityError",
]
