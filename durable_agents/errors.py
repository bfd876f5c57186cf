"""Errors a user of durable-agents can catch, each with a stable ``code``, a
``retryable`` flag and the ``failure_type`` (:class:`FailureType`) it crosses
Temporal as. They are defined in ``durable_agents.checkpoint.errors`` (the layer
every other depends on, so any part of the project can raise them); this is
their public home.

Hierarchy::

    DurableAgentsError                      DURABLE_AGENTS_ERROR
    ├── ConfigurationError                  CONFIGURATION_ERROR
    ├── CheckpointNotFoundError             CHECKPOINT_NOT_FOUND
    ├── StoreCorruptError                   STORE_CORRUPT
    ├── StoreUnavailableError               STORE_UNAVAILABLE       retryable
    ├── SessionAwaitingApprovalError        SESSION_AWAITING_APPROVAL
    ├── SessionBusyError                    SESSION_BUSY
    ├── SessionFinishedError                SESSION_FINISHED
    ├── ApprovalNotPendingError             APPROVAL_NOT_PENDING
    ├── InvalidDecisionError                INVALID_DECISION
    │   └── DecisionTooLargeError           DECISION_TOO_LARGE
    ├── PolicyVersionConflictError          POLICY_VERSION_CONFLICT
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
    AgentDriftError,
    ApprovalNotPendingError,
    CheckpointNotFoundError,
    ConfigurationError,
    DecisionTooLargeError,
    DurableAgentsError,
    FailureType,
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
    StoreDamageWarning,
    StoreUnavailableError,
    ToolDurabilityError,
)

__all__ = [
    "AgentDriftError",
    "ApprovalNotPendingError",
    "CheckpointNotFoundError",
    "ConfigurationError",
    "DecisionTooLargeError",
    "DurableAgentsError",
    "FailureType",
    "HookFailedError",
    "InvalidDecisionError",
    "InvalidRunInputError",
    "ModelProviderError",
    "OutputValidationError",
    "PolicyVersionConflictError",
    "PropagatingToolError",
    "ResumeToolMissingError",
    "RunFailedError",
    "SessionAwaitingApprovalError",
    "SessionBusyError",
    "SessionFinishedError",
    "StoreCorruptError",
    "StoreDamageWarning",
    "StoreUnavailableError",
    "ToolDurabilityError",
]
