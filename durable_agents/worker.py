"""One way to build a worker: converter, activities, store and agents wired together."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from temporalio.client import Client
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from durable_agents.activities import build_activities
from durable_agents.activities.definitions import Agent
from durable_agents.activities.providers.base import ModelProvider
from durable_agents.activities.providers.registry import ProviderRegistry
from durable_agents.checkpoint.errors import ConfigurationError
from durable_agents.checkpoint.stores.base import CheckpointStore
from durable_agents.connection import DEFAULT_TASK_QUEUE
from durable_agents.workflows import ALL_WORKFLOWS

PASSTHROUGH = (
    "pydantic",
    "pydantic_core",
    "durable_agents.checkpoint",
    "durable_agents.activities",
    "durable_agents.workflows",
)


def build_worker(
    client: Client,
    *,
    agents: Sequence[Agent],
    store: CheckpointStore,
    task_queue: str = DEFAULT_TASK_QUEUE,
    allow_memory_store: bool = False,
    providers: dict[str, ModelProvider] | None = None,
    max_concurrent_activities: int = 200,
    graceful_shutdown_timeout: timedelta = timedelta(seconds=10),
    sticky_queue_timeout: timedelta = timedelta(seconds=5),
) -> Worker:
    """A Temporal worker that runs ``agents`` with ``store`` as their checkpoint store."""
    if not store.durable and not allow_memory_store:
        raise ConfigurationError(
            f"{store!r} keeps runs in this process only, so a crash or a second worker "
            "would lose them: use SqliteStore/open_store('sqlite:///…'), or pass "
            "allow_memory_store=True when client and worker share one process (tests)"
        )
    by_name: dict[str, Agent] = {}
    for agent in agents:
        if agent.name in by_name:
            raise ConfigurationError(f"two agents are named {agent.name!r}; agent names must be unique")
        by_name[agent.name] = agent
    return Worker(
        client,
        task_queue=task_queue,
        workflows=ALL_WORKFLOWS,
        activities=build_activities(store, by_name, ProviderRegistry(providers)),
        workflow_runner=SandboxedWorkflowRunner(
            restrictions=SandboxRestrictions.default.with_passthrough_modules(*PASSTHROUGH)
        ),
        max_concurrent_activities=max_concurrent_activities,
        # On shutdown, running tools get this long to finish before they are
        # cancelled (and then retried elsewhere, not recorded as cancelled).
        graceful_shutdown_timeout=graceful_shutdown_timeout,
        # After a worker dies, its cached runs move to another worker after this.
        sticky_queue_schedule_to_start_timeout=sticky_queue_timeout,
    )
