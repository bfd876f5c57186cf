"""Engine-independent checkpoints: the format, the stores, history.

This package imports neither Temporal nor any LLM SDK: a run's stored record
can be read, listed and compared with it alone. The format and errors load
with the package; the stores and the policy book (``sqlite3``, ``psycopg``)
load on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from durable_agents.checkpoint.approval_decision import PolicyDecision, decide
from durable_agents.checkpoint.approval_grants import Grant, GrantScope
from durable_agents.checkpoint.approval_policy import (
    ApprovalPolicy,
    ArgumentCondition,
    AutoMode,
    CriteriaSet,
    EvaluatorRef,
    PolicyCall,
    PolicyRule,
    check_policy_against_tools,
    parse_policy,
)
from durable_agents.checkpoint.errors import (
    CheckpointNotFoundError,
    ConfigurationError,
    DurableAgentsError,
    StoreCorruptError,
    StoreUnavailableError,
)
from durable_agents.checkpoint.format import (
    FORMAT_VERSION,
    Checkpoint,
    CheckpointHeader,
    CheckpointStatus,
    Fingerprint,
    FinishReason,
    HistoryEntry,
    Message,
    Role,
    RunConfig,
    SessionSummary,
    ToolCall,
    ToolSpec,
    Usage,
)
from durable_agents.checkpoint.parts import DocumentPart, ImagePart, OpaquePart, Part, TextPart
from durable_agents.checkpoint.policy_backtest import BacktestReport, RecordedDecision, backtest, recorded_decisions

if TYPE_CHECKING:
    from durable_agents.checkpoint.policy_book import (
        MemoryPolicyBook,
        PolicyBook,
        PolicyScope,
        PostgresPolicyBook,
        SqlitePolicyBook,
        effective_policy,
        policy_book_for,
    )
    from durable_agents.checkpoint.stores import (
        DEFAULT_STORE_URL,
        CheckpointStore,
        FileStore,
        MemoryStore,
        PostgresStore,
        SqliteStore,
        get_checkpoint_history,
        open_store,
    )

_LAZY_NAMES: dict[str, str] = {
    **dict.fromkeys(
        (
            "DEFAULT_STORE_URL",
            "CheckpointStore",
            "FileStore",
            "MemoryStore",
            "PostgresStore",
            "SqliteStore",
            "get_checkpoint_history",
            "open_store",
        ),
        "durable_agents.checkpoint.stores",
    ),
    **dict.fromkeys(
        (
            "MemoryPolicyBook",
            "PolicyBook",
            "PolicyScope",
            "PostgresPolicyBook",
            "SqlitePolicyBook",
            "effective_policy",
            "policy_book_for",
        ),
        "durable_agents.checkpoint.policy_book",
    ),
}

__all__ = [
    "DEFAULT_STORE_URL",
    "FORMAT_VERSION",
    "ApprovalPolicy",
    "ArgumentCondition",
    "AutoMode",
    "BacktestReport",
    "Checkpoint",
    "CheckpointHeader",
    "CheckpointNotFoundError",
    "CheckpointStatus",
    "CheckpointStore",
    "ConfigurationError",
    "CriteriaSet",
    "DocumentPart",
    "DurableAgentsError",
    "EvaluatorRef",
    "FileStore",
    "Fingerprint",
    "FinishReason",
    "Grant",
    "GrantScope",
    "HistoryEntry",
    "ImagePart",
    "MemoryPolicyBook",
    "MemoryStore",
    "Message",
    "OpaquePart",
    "Part",
    "PolicyBook",
    "PolicyCall",
    "PolicyDecision",
    "PolicyRule",
    "PolicyScope",
    "PostgresPolicyBook",
    "PostgresStore",
    "RecordedDecision",
    "Role",
    "RunConfig",
    "SessionSummary",
    "SqlitePolicyBook",
    "SqliteStore",
    "StoreCorruptError",
    "StoreUnavailableError",
    "TextPart",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "backtest",
    "check_policy_against_tools",
    "decide",
    "effective_policy",
    "get_checkpoint_history",
    "open_store",
    "parse_policy",
    "policy_book_for",
    "recorded_decisions",
]


def __getattr__(name: str) -> Any:
    if name not in _LAZY_NAMES:
        raise AttributeError(f"module 'durable_agents.checkpoint' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY_NAMES[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
