"""One way to build a worker: ``DurableAgentsPlugin`` with the agents and the store."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from datetime import timedelta

from temporalio.client import Client
from temporalio.worker import Interceptor, Worker
from temporalio.worker import Plugin as WorkerPlugin

from durable_agents.activities.definitions import Agent
from durable_agents.activities.providers.base import ModelProvider
from durable_agents.checkpoint.errors import ConfigurationError
from durable_agents.checkpoint.stores.base import CheckpointStore
from durable_agents.connection import DEFAULT_TASK_QUEUE
from durable_agents.plugin import DurableAgentsPlugin, carries_our_payloads

__all__ = ["build_worker"]


def build_worker(
    client: Client,
    *,
    agents: Sequence[Agent],
    store: CheckpointStore,
    task_queue: str = DEFAULT_TASK_QUEUE,
    allow_memory_store: bool = False,
    providers: Mapping[str, ModelProvider] | None = None,
    interceptors: Sequence[Interceptor] = (),
    plugins: Sequence[WorkerPlugin] = (),
    max_concurrent_activities: int = 200,
    graceful_shutdown_timeout: timedelta = timedelta(seconds=10),
    sticky_queue_timeout: timedelta = timedelta(seconds=5),
) -> Worker:
    """A Temporal worker that runs ``agents`` with ``store`` as their checkpoint store.

    ``interceptors`` and ``plugins`` are handed to the ``Worker`` after ours
    (e.g. ``temporalio.contrib.opentelemetry.TracingInterceptor()``). The
    client must carry the pydantic data converter: connect it with
    ``durable_agents.connect()`` or ``Client.connect(..., plugins=[DurableAgentsPlugin()])``.
    """
    if not carries_our_payloads(client.data_converter):
        raise ConfigurationError(
            "this Temporal client's data converter cannot carry durable-agents' payloads "
            f"({client.data_converter.payload_converter_class.__name__}): connect it with "
            "durable_agents.connect(), or Client.connect(..., plugins=[DurableAgentsPlugin()]) "
            "(a payload codec of yours is kept)"
        )
    ours = DurableAgentsPlugin(agents=agents, store=store, providers=providers, allow_memory_store=allow_memory_store)
    with warnings.catch_warnings():
        # A client connected with DurableAgentsPlugin() hands it to the worker too;
        # applying it twice is harmless (each of its settings is idempotent).
        warnings.filterwarnings("ignore", message=r"The same plugin type .*DurableAgentsPlugin")
        return Worker(
            client,
            task_queue=task_queue,
            plugins=[ours, *plugins],
            interceptors=list(interceptors),
            max_concurrent_activities=max_concurrent_activities,
            # On shutdown, running tools get this long to finish before they are
            # cancelled (and then retried elsewhere, not recorded as cancelled).
            graceful_shutdown_timeout=graceful_shutdown_timeout,
            # After a worker dies, its cached runs move to another worker after this.
            sticky_queue_schedule_to_start_timeout=sticky_queue_timeout,
        )
