"""One way to build a worker: ``DurableAgentsPlugin`` with the agents and the store."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Literal

from temporalio.client import Client
from temporalio.converter import PayloadCodec
from temporalio.worker import (
    Interceptor,
    PollerBehavior,
    PollerBehaviorAutoscaling,
    PollerBehaviorSimpleMaximum,
    Worker,
)
from temporalio.worker import Plugin as WorkerPlugin

from durable_agents.activities.transcript_cache import DEFAULT_CACHE_BYTES, DEFAULT_CACHE_SESSIONS, TranscriptCache
from durable_agents.agent.agent import Agent
from durable_agents.checkpoint.errors import ConfigurationError
from durable_agents.checkpoint.stores.base import CheckpointStore
from durable_agents.client.connection import DEFAULT_TASK_QUEUE
from durable_agents.converter import carries_our_payloads, with_our_converter
from durable_agents.plugin import DurableAgentsPlugin
from durable_agents.providers.base import ModelProvider
from durable_agents.providers.budgets import Budget, FairShare
from durable_agents.versioning import deployment_config

__all__ = ["build_worker"]

HEARTBEAT_THROTTLE = timedelta(seconds=1)
"""The longest the worker holds a heartbeat back before sending it to the server."""

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

    from durable_agents.checkpoint.budget_ledger import BudgetLedger


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
    max_concurrent_local_activities: int = 200,
    max_concurrent_workflow_tasks: int = 100,
    max_cached_workflows: int = 1000,
    pollers: int | Literal["auto"] = 5,
    graceful_shutdown_timeout: timedelta = timedelta(seconds=10),
    sticky_queue_timeout: timedelta = timedelta(seconds=5),
    codec: PayloadCodec | None = None,
    transcript_cache_sessions: int = DEFAULT_CACHE_SESSIONS,
    transcript_cache_bytes: int = DEFAULT_CACHE_BYTES,
    tracing: bool | TracerProvider = False,
    deployment: str | None = None,
    build_id: str | None = None,
    budgets: Sequence[Budget] = (),
    fair_share: FairShare | None = None,
    budget_ledger: BudgetLedger | None = None,
) -> Worker:
    """A Temporal worker that runs ``agents`` with ``store`` as their checkpoint store.

    ``interceptors`` and ``plugins`` are handed to the ``Worker`` after ours
    (for tracing, ``tracing=`` below rather than a bare ``TracingInterceptor``). The
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

    Tuning (defaults fit one host; ``bench/capacity.py`` measures them):
    ``max_concurrent_activities`` / ``max_concurrent_local_activities`` bound the model
    calls, tools and store steps running at once; ``max_concurrent_workflow_tasks`` the
    workflow tasks; ``max_cached_workflows`` the runs kept in memory between steps (an
    evicted run replays its history on its next step: memory against CPU, which matters
    for many sessions waiting for approval); ``pollers``: long-polls per task queue kind,
    a fixed number (default 5, the SDK's) or ``"auto"`` (the SDK's autoscaling, 1 to 100:
    it takes on more work than 2 cores can do in time, measured in ``bench/capacity.py``).
    ``sticky_queue_timeout``: after a worker dies, the next step of each run it had
    cached waits this long before another worker takes it.

    ``tracing``: OpenTelemetry spans (``durable_agents.tracing``): ``True`` with the global
    tracer provider, or a tracer provider; off by default. A client connected with
    ``tracing=`` traces its workers already.

    ``deployment`` (a Temporal Worker Deployment name) makes a versioned worker, of build
    ``build_id`` (default: derived from the agents' fingerprints,
    ``durable_agents.versioning.derive_build_id``): its runs are pinned to this build, and an
    unfinished session's next run starts here too (``Agent(versioning="auto-upgrade")``
    moves with the deployment's current build instead); ``migrate`` moves a session.

    ``budgets``: the providers' rate limits (``Budget("anthropic:claude-sonnet-4-5",
    input_tokens_per_minute=…)``), shared by every worker on the same store (its SQLite file
    or PostgreSQL database; ``budget_ledger`` overrides where they are booked); calls
    waiting for a budget are served by ``fair_share`` (default: per agent). See
    ``durable_agents.providers.budgets`` and docs/how-to/production/rate-limits.md.
    """
    if not carries_our_payloads(client.data_converter):
        raise ConfigurationError(
            "this Temporal client's data converter cannot carry durable-agents' payloads "
            f"({client.data_converter.payload_converter_class.__name__}): connect it with "
            "durable_agents.connect(), or Client.connect(..., plugins=[DurableAgentsPlugin()]) "
            "(a payload codec of yours is kept)"
        )
    if build_id is not None and deployment is None:
        raise ConfigurationError(
            f"build_id={build_id!r} needs deployment=… too: the Worker Deployment it is a build of"
        )
    versioned = deployment_config(deployment, build_id, agents) if deployment is not None else None
    client = _with_codec(client, codec)
    cache = TranscriptCache(max_sessions=transcript_cache_sessions, max_bytes=transcript_cache_bytes)
    ours = DurableAgentsPlugin(
        agents=agents,
        store=store,
        providers=providers,
        allow_memory_store=allow_memory_store,
        transcript_cache=cache,
        budgets=budgets,
        fair_share=fair_share,
        budget_ledger=budget_ledger,
    )
    with warnings.catch_warnings():
        # A client connected with DurableAgentsPlugin() hands it to the worker too;
        # applying it twice is harmless (each of its settings is idempotent).
        warnings.filterwarnings("ignore", message=r"The same plugin type .*DurableAgentsPlugin")
        return Worker(
            client,
            task_queue=task_queue,
            plugins=[ours, *plugins],
            interceptors=[*_tracing_interceptors(client, tracing), *interceptors],
            max_concurrent_activities=max_concurrent_activities,
            max_concurrent_local_activities=max_concurrent_local_activities,
            max_concurrent_workflow_tasks=max_concurrent_workflow_tasks,
            max_cached_workflows=max_cached_workflows,
            workflow_task_poller_behavior=_pollers(pollers),
            activity_task_poller_behavior=_pollers(pollers),
            # On shutdown, running tools get this long to finish before they are
            # cancelled (and then retried elsewhere, not recorded as cancelled).
            graceful_shutdown_timeout=graceful_shutdown_timeout,
            # After a worker dies, its cached runs move to another worker after this.
            sticky_queue_schedule_to_start_timeout=sticky_queue_timeout,
            # The SDK holds heartbeats back to 80 % of the timeout: 0.8 s of slack in 4 s, which a
            # busy host eats (a live call then counts as dead and is retried: paid twice). Ours
            # heartbeat every quarter/third of the timeout; send each, at most one a second.
            max_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
            deployment_config=versioned,
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


def _tracing_interceptors(client: Client, tracing: bool | TracerProvider) -> list[Interceptor]:
    """Our tracing interceptor for ``tracing=``, unless the client's (which its workers use) traces already."""
    if tracing is False or tracing is None:
        return []
    from temporalio.contrib.opentelemetry import TracingInterceptor

    from durable_agents.tracing import interceptors_for, tracer_of

    present = client.config().get("interceptors") or []
    if tracer_of(present) is not None:
        return []
    if any(isinstance(i, TracingInterceptor) for i in present):
        raise ConfigurationError(
            "this client already has a TracingInterceptor: connect it with durable_agents.connect(tracing=…) "
            "(or give it durable_agents.tracing.interceptor()) and drop build_worker(tracing=…), or drop the client's"
        )
    return list(interceptors_for(tracing))


def _pollers(pollers: int | Literal["auto"]) -> PollerBehavior:
    if pollers == "auto":
        return PollerBehaviorAutoscaling()
    if isinstance(pollers, bool) or not isinstance(pollers, int) or pollers < 1:
        raise ConfigurationError(f"pollers={pollers!r}: use a number of pollers (1 or more) or 'auto'")
    return PollerBehaviorSimpleMaximum(pollers)
