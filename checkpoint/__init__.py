"""Engine-independent checkpoints: the format, the stores, history.

This package imports neither Temporal nor any LLM SDK: a run's stored record
can be read, listed and compared with it alone.
"""

from checkpoint.errors import (
    CheckpointNotFoundError,
    ConfigurationError,
    DurableAgentsError,
    StoreCorruptError,
    StoreUnavailableError,
)
from checkpoint.format import (
    FORMAT_VERSION,
    Checkpoint,
    CheckpointHeader,
    CheckpointStatus,
    FinishReason,
    Fingerprint,
    HistoryEntry,
    Message,
    Role,
    RunConfig,
    SessionSummary,
    ToolCall,
    ToolSpec,
    Usage,
)
from checkpoint.stores import (
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
    "FORMAT_VERSION",
    "DEFAULT_STORE_URL",
    "Checkpoint",
    "CheckpointHeader",
    "CheckpointNotFoundError",
    "CheckpointStatus",
    "CheckpointStore",
    "ConfigurationError",
    "DurableAgentsError",
    "FinishReason",
    "Fingerprint",
    "HistoryEntry",
    "MemoryStore",
    "Message",
    "Role",
    "RunConfig",
    "SessionSummary",
    "SqliteStore",
    "StoreCorruptError",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "get_checkpoint_history",
    "open_store",
    "FileStore",
    "PostgresStore",
    "StoreUnavailableError",
]
