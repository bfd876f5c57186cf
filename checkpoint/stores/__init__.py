"""Checkpoint store backends and store-URL selection."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

from checkpoint.errors import ConfigurationError
from checkpoint.stores.base import DEFAULT_HISTORY_LIMIT, CheckpointStore, get_checkpoint_history
from checkpoint.stores.memory import MemoryStore
from checkpoint.stores.sqlite import SqliteStore

DEFAULT_STORE_URL = "sqlite:///.durable-agents/store.db"


def open_store(url: str | None = None, *, history_limit: int = DEFAULT_HISTORY_LIMIT) -> CheckpointStore:
    """Open a store from a URL: ``sqlite:///path``, ``memory:``.

    ``sqlite:///relative/path`` is relative to the working directory;
    ``sqlite:////abs/path`` is absolute.
    """
    url = url or DEFAULT_STORE_URL
    if url in ("memory:", "memory://"):
        return MemoryStore(history_limit=history_limit)
    parsed = urlparse(url)
    if parsed.scheme == "sqlite":
        path = url[len("sqlite:///"):] if url.startswith("sqlite:///") else parsed.path
        if not path:
            raise ConfigurationError(f"store URL {url!r} names no file: use sqlite:///path/to/store.db")
        return SqliteStore(Path(path), history_limit=history_limit)
    raise ConfigurationError(
        f"unknown store URL {url!r}: use sqlite:///path/to/store.db (default "
        f"{DEFAULT_STORE_URL}) or memory:"
    )


__all__ = [
    "DEFAULT_HISTORY_LIMIT",
    "DEFAULT_STORE_URL",
    "CheckpointStore",
    "MemoryStore",
    "SqliteStore",
    "get_checkpoint_history",
    "open_store",
]
