"""Engine-independent checkpoints: the format, the stores, history.

This package imports neither Temporal nor any LLM SDK: a run's stored record
can be read, listed and compared with it alone. The format and errors load
with the package; the stores (``sqlite3``, ``psycopg``) load on first use.
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

_STORE_NAMES = frozenset(
    {
        "DEFAULT_STORE_URL",
        "CheckpointStore",
        "FileStore",
        "MemoryStore",
        "PostgresStore",
        "SqliteStore",
        "get_checkpoint_history",
        "open_store",
    }
)

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
    "MemoryStore",
    "Message",
    "OpaquePart",
    "Part",
    "PolicyCall",
    "PolicyDecision",
    "PolicyRule",
    "PostgresStore",
    "RecordedDecision",
    "Role",
    "RunConfig",
    "SessionSummary",
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
    "get_checkpoint_history",
    "open_store",
    "parse_policy",
    "recorded_decisions",
]


def __getattr__(name: str) -> Any:
    if name not in _STORE_NAMES:
        raise AttributeError(f"module 'durable_agents.checkpoint' has no attribute {name!r}")
    value = getattr(importlib.import_module("durable_agents.checkpoint.stores"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
