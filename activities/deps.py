"""What every activity needs: the store, the agents, the providers."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.definitions import Agent
from activities.providers.registry import ProviderRegistry
from checkpoint.errors import DurableAgentsError
from checkpoint.stores.base import CheckpointStore

T = TypeVar("T")


@dataclass
class ActivityDeps:
    store: CheckpointStore
    agents: Mapping[str, Agent]
    providers: ProviderRegistry = field(default_factory=ProviderRegistry)

    def agent(self, name: str) -> Agent:
        agent = self.agents.get(name)
        if agent is None:
            known = ", ".join(sorted(self.agents)) or "none"
            raise ApplicationError(
                f"this worker has no agent named {name!r} (it has: {known}); start a worker "
                f"with `durable-agents worker --agent module:attr` for it",
                type="ConfigurationError",
                non_retryable=True,
            )
        return agent

    async def in_store(self, fn: Callable[..., T], *args: object) -> T:
        """Run a store call off the event loop; typed store errors fail for good."""
        try:
            return await asyncio.to_thread(fn, *args)
        except DurableAgentsError as e:
            raise ApplicationError(e.message, type=type(e).__name__, non_retryable=True) from e


@contextlib.asynccontextmanager
async def heartbeating(every: float) -> AsyncIterator[None]:
    """Heartbeat in the background so a dead worker is noticed within seconds."""

    if activity.info().is_local:  # local activities cannot heartbeat; the workflow task does
        yield
        return

    async def beat() -> None:
        while True:
            activity.heartbeat()
            await asyncio.sleep(every)

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
