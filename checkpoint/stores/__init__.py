"""Checkpoint store backends and store-URL selection."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

from durable_agents.checkpoint.errors import ConfigurationError
from durable_agents.checkpoint.stores.base import DEFAULT_HISTORY_LIMIT, CheckpointStore, get_checkpoint_history
from durable_agents.checkpoint.stores.file import FileStore
from durable_agents.checkpoint.stores.memory import MemoryStore
from durable_agents.checkpoint.stores.postgres import PostgresStore, redact
from durable_agents.checkpoint.stores.sqlite import SqliteStore

DEFAULT_STORE_URL = "sqlite:///.durable-agents/store.db"


def open_store(url: str | None = None, *, history_limit: int = DEFAULT_HISTORY_LIMIT) -> CheckpointStore:
    """Open a store from a URL: ``sqlite:///path``, ``file:///dir``,
    ``postgresql://user@host/db`` (or ``postgres://``), ``memory:``.

    ``sqlite:///relative/path`` is relative to the working directory;
    ``sqlite:////abs/path`` is absolute. ``file:///abs/dir`` is absolute (as in
    any file URL); ``file://relative/dir`` is relative to the working directory.
    """
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
]
