"""In-memory store: the SQLite store on ``:memory:``, so both behave alike."""

from __future__ import annotations

from typing import ClassVar

from durable_agents.checkpoint.stores.base import DEFAULT_HISTORY_LIMIT, StoreCapabilities
from durable_agents.checkpoint.stores.sqlite import SqliteStore


class MemoryStore(SqliteStore):
    """For tests and notebooks. Loses everything with its process.

    A worker refuses it (its runs could not survive a crash) unless built with
    ``allow_memory_store=True``, which is right only when client and worker
    share this one process.
    """

    durable = False
    capabilities: ClassVar[StoreCapabilities] = StoreCapabilities(durable=False, shared_across_processes=False)

    def __init__(self, *, history_limit: int = DEFAULT_HISTORY_LIMIT) -> None:
        super().__init__(":memory:", history_limit=history_limit)

    def __repr__(self) -> str:
        return f"MemoryStore(history_limit={self.history_limit})"
