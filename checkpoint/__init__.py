"""Engine-independent checkpoints: the format, the stores, history.

This package imports neither Temporal nor any LLM SDK: a run's stored record
can be read, listed and compared with it alone.
"""

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

__all__ = [
    "DEFAULT_STORE_URL",
    "FORMAT_VERSION",
    "Checkpoint",
    "CheckpointHeader",
    "CheckpointNotFoundError",
    "CheckpointStatus",
    "CheckpointStore",
    "ConfigurationError",
    "DurableAgentsError",
    "FileStore",
    "Fingerprint",
    "FinishReason",
    "HistoryEntry",
    "MemoryStore",
    "Message",
    "PostgresStore",
    "Role",
    "RunConfig",
    "SessionSummary",
    "SqliteStore",
    "StoreCorruptError",
    "StoreUnavailableError",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "get_checkpoint_history",
    "open_store",
]
