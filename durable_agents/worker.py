"""One way to build a worker: ``DurableAgentsPlugin`` with the agents and the store."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from datetime import timedelta

from temporalio.client import Client
from temporalio.converter import PayloadCodec
from temporalio.worker import Interceptor, Worker
from temporalio.worker import Plugin as WorkerPlugin

from durable_agents.activities.definitions import Agent
from durable_agents.activities.providers.base import ModelProvider
from durable_agents.activities.transcript_cache import DEFAULT_CACHE_BYTES, DEFAULT_CACHE_SESSIONS, TranscriptCache
from durable_agents.checkpoint.errors import ConfigurationError
from durable_agents.checkpoint.stores.base import CheckpointStore
from durable_agents.connection import DEFAULT_TASK_QUEUE
from durable_agents.plugin import DurableAgentsPlugin, carries_our_payloads, with_our_converter

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
    codec: PayloadCodec | None = None,
    transcript_cache_sessions: int = DEFAULT_CACHE_SESSIONS,
    transcript_cache_bytes: int = DEFAULT_CACHE_BYTES,
) -> Worker:
    """A Temporal worker that runs ``agents`` with ``store`` as their checkpoint store.

    ``interceptors`` and ``plugins`` are handed to the ``Worker`` after ours
    (e.g. ``temporalio.contrib.opentelemetry.TracingInterceptor()``). The
    client must carry the pydantic data converter: connect it with
    ``durable_agents.connect()`` or ``Client.connect(..., plugins=[DurableAgentsPlugin()])``.

    ``codec`` (default: the client's, else the configured encryption, see
    ``durable_agents.encryption``) encodes every payload the worker writes; a
    client without it gets it for this worker only.

    The worker keeps the transcripts it reads in memory, so a step reads only
    the messages added since (per-step cost does not grow with the session):
    at most ``transcript_cache_sessions`` sessions and ``transcript_cache_bytes``
    of messages (as JSON), least recently used dropped first; a transcript over
    the byte bound is read whole each step. ``0`` turns the cache off.
    """
    if not carries_our_payloads(client.data_converter):
        raise ConfigurationError(
            "this Temporal client's data converter cannot carry durable-agents' payloads "
            f"({client.data_converter.payload_converter_class.__name__}): connect it with "
            "durable_agents.connect(), or Client.connect(..., plugins=[DurableAgentsPlugin()]) "
            "(a payload codec of yours is kept)"
        )
    client = _with_codec(client, codec)
    cache = TranscriptCache(max_sessions=transcript_cache_sessions, max_bytes=transcript_cache_bytes)
    ours = DurableAgentsPlugin(
        agents=agents,
        store=store,
        providers=providers,
        allow_memory_store=allow_memory_store,
        transcript_cache=cache,
    )
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


def _with_codec(client: Client, codec: PayloadCodec | None) -> Client:
    """``client``, or a client on its connection whose converter has ``codec``
    (default: the configured encryption when the client has no codec)."""
    current = client.data_converter.payload_codec
    if codec is None and current is None:
        from durable_agents.encryption import encryption_from_env

        codec = encryption_from_env()
    if codec is None or codec is current:
        return client
    config = client.config()
    config["data_converter"] = with_our_converter(client.data_converter, codec)  # refuses a second codec
    return Client(**config)
