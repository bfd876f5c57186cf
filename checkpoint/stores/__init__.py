"""Checkpoint store backends and store-URL selection.

The interface loads with the package; each backend (and ``sqlite3`` or
``psycopg``) loads when it is first used.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from durable_agents.checkpoint.errors import ConfigurationError
from durable_agents.checkpoint.stores.base import DEFAULT_HISTORY_LIMIT, CheckpointStore, get_checkpoint_history

if TYPE_CHECKING:
    from durable_agents.checkpoint.stores.file import FileStore
    from durable_agents.checkpoint.stores.memory import MemoryStore
    from durable_agents.checkpoint.stores.postgres import PostgresStore, redact
    from durable_agents.checkpoint.stores.sqlite import SqliteStore

_BACKENDS = {
    "FileStore": "durable_agents.checkpoint.stores.file",
    "MemoryStore": "durable_agents.checkpoint.stores.memory",
    "PostgresStore": "durable_agents.checkpoint.stores.postgres",
    "SqliteStore": "durable_agents.checkpoint.stores.sqlite",
    "redact": "durable_agents.checkpoint.stores.postgres",
}

DEFAULT_STORE_URL = "sqlite:///.durable-agents/store.db"


def open_store(url: str | None = None, *, history_limit: int = DEFAULT_HISTORY_LIMIT) -> CheckpointStore:
    """Open a store from a URL: ``sqlite:///path``, ``file:///dir``,
    ``postgresql://user@host/db`` (or ``postgres://``), ``memory:``.

    ``sqlite:///relative/path`` is relative to the working directory;
    ``sqlite:////abs/path`` is absolute. ``file:///abs/dir`` is absolute (as in
    any file URL); ``file://relative/dir`` is relative to the working directory.
    """
    from durable_agents.checkpoint.stores.file import FileStore
    from durable_agents.checkpoint.stores.memory import MemoryStore
    from durable_agents.checkpoint.stores.postgres import PostgresStore, redact
    from durable_agents.checkpoint.stores.sqlite import SqliteStore

    url = url or DEFAULT_STORE_URL
    if url in ("memory:", "memory://"):
        return MemoryStore(history_limit=history_limit)
    parsed = urlparse(url)
    if parsed.scheme == "sqlite":
        path = url[len("sqlite:///") :] if url.startswith("sqlite:///") else parsed.path
        if not path:
            raise ConfigurationError(f"store URL {url!r} names no file: use sqlite:///path/to/store.db")
        return SqliteStore(Path(path), history_limit=history_limit)
    if parsed.scheme == "file":
        path = url[len("file://") :] if url.startswith("file://") else parsed.path
        if not path.strip("/"):
            raise ConfigurationError(f"store URL {url!r} names no directory: use file:///path/to/dir")
        return FileStore(Path(path), history_limit=history_limit)
    if parsed.scheme in ("postgresql", "postgres"):
        return PostgresStore(url, history_limit=history_limit)
    raise ConfigurationError(
        f"unknown store URL {redact(url)!r}: use sqlite:///path/to/store.db (default "
        f"{DEFAULT_STORE_URL}), file:///path/to/dir, postgresql://user@host/db or memory:"
    )


__all__ = [
    "DEFAULT_HISTORY_LIMIT",
    "DEFAULT_STORE_URL",
    "CheckpointStore",
    "FileStore",
    "MemoryStore",
    "PostgresStore",
    "SqliteStore",
    "get_checkpoint_history",
    "open_store",
    "redact",
]


def __getattr__(name: str) -> Any:
    module = _BACKENDS.get(name)
    if module is None:
        raise AttributeError(f"module 'durable_agents.checkpoint.stores' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
