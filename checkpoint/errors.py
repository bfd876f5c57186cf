"""Every typed error of the project, each with a stable ``code``, a ``retryable`` flag and a
``failure_type``: the one module that defines them (in the bottom layer, so any part of the
project raises them without importing upwards). Users import them from
``durable_agents.errors`` (or ``durable_agents``), whose docstring shows the hierarchy.

:class:`FailureType` is the one list of failure kinds that cross Temporal: the
``type`` of every ``ApplicationError`` an activity or workflow raises on purpose,
and the key by which the client turns a failed run back into a typed error.
It lives here, in the bottom layer (no Temporal, no LLM SDK), so that
activities, providers, workflows and the client all name failures by it.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from datetime import datetime


class FailureType(StrEnum):
    """The ``ApplicationError.type`` of each failure kind.

    The values are wire format: they are recorded in workflow histories and
    matched by running workflows' retry policies, so a value never changes
    (add a member instead). Each member has one client-side error class
    (``durable_agents.client.outcomes.FAILURE_ERRORS``).
    """

    DURABLE_AGENTS = "DurableAgentsError"
    """A :class:`DurableAgentsError` of no more specific kind."""
    CONFIGURATION = "ConfigurationError"
    CHECKPOINT_NOT_FOUND = "CheckpointNotFoundError"
    STORE_CORRUPT = "StoreCorruptError"
    STORE_UNAVAILABLE = "StoreUnavailableError"
    """The store server cannot be reached for now: retried."""
    SESSION_AWAITING_APPROVAL = "SessionAwaitingApprovalError"
    """details: (approval id,)"""
    SESSION_BUSY = "SessionBusyError"
    SESSION_FINISHED = "SessionFinishedError"
    """details: (agent, finish reason); raised by the client, before anything is sent."""
    APPROVAL_NOT_PENDING = "ApprovalNotPendingError"
    """An approval decision the run refuses (unknown or already decided); details: (approval id, pending id)."""
    AGENT_DRIFT = "AgentDriftError"
    """details: (the drift as a dict,)"""
    RESUME_TOOL_MISSING = "ResumeToolMissingError"
    TOOL_DURABILITY = "ToolDurabilityError"
    RUN_FAILED = "RunFailedError"
    MODEL_PROVIDER_REQUEST = "ModelProviderRequestError"
    """The provider refused the request (a 4xx other than 408/409/425/429): final."""
    MODEL_PROVIDER_RETRYABLE = "ModelProviderRetryableError"
    """429/5xx/timeouts/connection errors: retried by the model activity's retry policy."""
    MODEL_PROVIDER_MALFORMED_REPLY = "ModelProviderMalformedReply"
    """The provider's reply cannot be read as an assistant turn: final."""
    OUTPUT_INVALID = "OutputValidationError"
    PROPAGATING_TOOL = "PropagatingToolError"
    """A tool raised ``PropagatingToolError``: the run fails, resumable (the call runs again)."""
    HOOK_FAILED = "HookError"
    """An agent hook raised: the run fails, resumable."""
    INVALID_RUN_INPUT = "InvalidRunInputError"
    """The workflow's input does not validate (or its id is not the input's session id): the
    run fails at once, before it touches the store; the message names the field."""
    POLICY_VERSION_CONFLICT = "PolicyVersionConflictError"
    """A policy change written against a version another writer changed since; details:
    (scope, expected version, actual version, changed by, changed at)."""
    INVALID_DECISION = "InvalidDecisionError"
    """A ``decide`` update the run refuses for its payload (none, several, the wrong shape, or
    edited arguments that fail the tool's schema); details: (approval id or None, the error).
    A part too large (:class:`DecisionTooLargeError`) adds (its name, its size, the limit)."""
    """The model's final answer failed the agent's ``output_type`` after every retry: final."""

    @property
    def retryable(self) -> bool:
        """Whether an activity failing with this type should be retried."""
        return self in RETRYABLE_FAILURES


RETRYABLE_FAILURES: frozenset[FailureType] = frozenset(
    {FailureType.STORE_UNAVAILABLE, FailureType.MODEL_PROVIDER_RETRYABLE}
)
"""The transient failure kinds; every other kind fails its activity for good."""


class DurableAgentsError(Exception):
    """Base of every error this project raises on purpose.

    ``code`` is stable (for programs and logs); ``failure_type`` is the
    ``ApplicationError.type`` it crosses Temporal as when an activity raises
    it; ``retryable`` says whether the failed call is worth retrying (the
    activities retry such errors, see ``ActivityDeps.in_store``).
    """

    code: ClassVar[str] = "DURABLE_AGENTS_ERROR"
    failure_type: ClassVar[FailureType] = FailureType.DURABLE_AGENTS
    retryable: ClassVar[bool] = False

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def failure_details(self) -> tuple[object, ...]:
        """JSON-able details that travel with the failure (``ApplicationError.details``)."""
        return ()


class ConfigurationError(DurableAgentsError):
    """Something is set up wrongly; the message says how to fix it."""

    code = "CONFIGURATION_ERROR"
    failure_type = FailureType.CONFIGURATION


class CheckpointNotFoundError(DurableAgentsError):
    """A session or step the store does not have."""

    code = "CHECKPOINT_NOT_FOUND"
    failure_type = FailureType.CHECKPOINT_NOT_FOUND

    def __init__(self, message: str, *, session_id: str, kept_steps: list[int] | None = None) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.kept_steps = kept_steps or []

    def failure_details(self) -> tuple[object, ...]:
        return (self.session_id, self.kept_steps)


class StoreCorruptError(DurableAgentsError):
    """A store file or row that cannot be read."""

    code = "STORE_CORRUPT"
    failure_type = FailureType.STORE_CORRUPT


class StoreUnavailableError(DurableAgentsError):
    """A store server that cannot be reached (the message names it, never its password).

    Retryable: the same call may succeed once the server is back.
    """

    code = "STORE_UNAVAILABLE"
    failure_type = FailureType.STORE_UNAVAILABLE
    retryable = True


class StoreDamageWarning(UserWarning):
    """A damaged record a listing or a prune skipped (the message names its file).

    A warning, not an error: one damaged session file must not hide the others.
    Loading that session raises :class:`StoreCorruptError`.
    """


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


class SessionFinishedError(DurableAgentsError):
    """A resume of a session whose agent gave its answer: it would make one more model call
    with no new input (billed by a real model). Send new input instead, or resume with
    ``force=True`` for that one more model turn. ``finish_reason``: how the session ended."""

    code = "SESSION_FINISHED"
    failure_type = FailureType.SESSION_FINISHED

    def __init__(self, session_id: str, agent: str | None, finish_reason: str | None) -> None:
        super().__init__(
            f"session {session_id!r} is finished (the agent gave its answer): a resume would make one more "
            "model call with no new input; send new input with send() or start(), or resume(..., force=True) "
            "for one more model turn anyway"
        )
        self.session_id = session_id
        self.agent = agent
        self.finish_reason = finish_reason

    def failure_details(self) -> tuple[object, ...]:
        return (self.agent, self.finish_reason)


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


def too_large_problem(part: str, size: int, limit: int) -> str:
    """What a decision with a part over its size limit is told (one wording everywhere)."""
    return f"{part} too large: {size:,} bytes, the limit is {limit:,} bytes"


class DecisionTooLargeError(InvalidDecisionError):
    """A decision with a part over its size limit (``MAX_DECISION_BYTES``): edited arguments
    (as JSON), a note or a decider's name (as UTF-8). A decision crosses Temporal inline, and a
    payload over Temporal's limit would fail the run's workflow tasks instead of deciding:
    refused before anything is sent. Nothing was decided; the approval is still pending.
    ``part`` names what is too large, ``size`` its bytes, ``limit`` the most allowed."""

    code = "DECISION_TOO_LARGE"
    failure_type = FailureType.INVALID_DECISION

    def __init__(self, session_id: str, approval_id: str | None, part: str, size: int, limit: int) -> None:
        super().__init__(session_id, approval_id, too_large_problem(part, size, limit))
        self.part, self.size, self.limit = part, size, limit

    def failure_details(self) -> tuple[object, ...]:
        return (self.approval_id, self.problem, self.part, self.size, self.limit)


class PolicyVersionConflictError(DurableAgentsError):
    """A policy change written against a version another writer has changed since
    (``expected_version`` is not the scope's): nothing was changed. Read the scope's policy
    again and make the change on what it holds now. ``scope`` names it (``agent 'support'``,
    ``session 'chat-42'``); ``changed_by`` and ``changed_at``: its last change."""

    code = "POLICY_VERSION_CONFLICT"
    failure_type = FailureType.POLICY_VERSION_CONFLICT

    def __init__(
        self,
        scope: str,
        expected_version: int,
        actual_version: int,
        *,
        changed_by: str | None = None,
        changed_at: datetime | None = None,
        detail: str | None = None,
    ) -> None:
        when = f" at {changed_at.isoformat()}" if changed_at is not None else ""
        by = f" (changed by {changed_by}{when})" if changed_by else ""
        super().__init__(
            detail
            or f"the policy of {scope} is at version {actual_version}{by}, not {expected_version} as this change "
            "expected: nothing was changed; read it again and make the change on it"
        )
        self.scope = scope
        self.expected_version = expected_version
        self.actual_version = actual_version
        self.changed_by = changed_by
        self.changed_at = changed_at

    def failure_details(self) -> tuple[object, ...]:
        at = self.changed_at.isoformat() if self.changed_at is not None else None
        return (self.scope, self.expected_version, self.actual_version, self.changed_by, at)


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
