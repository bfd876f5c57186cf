"""What every activity needs: the store, the agents, the providers."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError

from durable_agents.activities.definitions import Agent
from durable_agents.activities.providers.registry import ProviderRegistry
from durable_agents.checkpoint.errors import DurableAgentsError
from durable_agents.checkpoint.stores.base import CheckpointStore

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
        """Run a store call off the event loop, heartbeating so a dead worker is noticed
        in seconds; typed store errors fail for good, others are retried by Temporal."""
        try:
            async with heartbeating(0.5):
                return await asyncio.to_thread(fn, *args)
        except DurableAgentsError as e:
            raise ApplicationError(e.message, type=type(e).__name__, non_retryable=True) from e

    async def record_until_stored(self, fn: Callable[..., T], *args: object) -> T:
        """A write that must not be lost once a tool has run: retried here, with
        backoff, through a store outage (a retried activity would not know the
        result and would have to report a durability error instead)."""
        delay = 0.2
        while True:
            try:
                return await self.in_store(fn, *args)
            except ApplicationError:
                raise
            except Exception as e:  # noqa: BLE001 - the store is unavailable for now
                activity.logger.warning("store write failed (%s); retrying in %.1fs", e, delay)
                async with heartbeating(0.5):
                    await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)


@contextlib.asynccontextmanager
async def heartbeating(every: float) -> AsyncIterator[None]:
    """Heartbeat in the background so a dead worker is noticed within seconds."""

    if not activity.in_activity() or activity.info().is_local:  # local ones cannot heartbeat
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
