"""``DurableAgentsPlugin``: everything a Temporal client or worker needs, in one object.

Built on ``temporalio.plugin.SimplePlugin``, like Temporal's own integrations:

- the pydantic data converter (a payload codec the client already has, e.g.
  encryption, is kept; ``codec=`` sets one, e.g. ``EncryptionCodec.from_env()``);
- the agent-run and fork workflows, and the activities bound to a store and
  agents (worker only, when ``store`` is given);
- the workflow sandbox's passthrough modules (only the contracts the workflows
  import);
- the workflow failure exception types (our typed errors fail a run instead of
  retrying its workflow task forever).

Give it to ``Client.connect(plugins=[...])`` and every worker built from that
client gets the converter, sandbox and failure types too::

    client = await Client.connect("localhost:7233", plugins=[DurableAgentsPlugin()])
    worker = Worker(client, task_queue="agents",
                    plugins=[DurableAgentsPlugin(agents=[booker], store=SqliteStore("s.db"))])

``durable_agents.connect`` and ``build_worker`` do exactly this.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from temporalio.converter import PayloadCodec
from temporalio.plugin import SimplePlugin
from temporalio.worker import WorkerConfig, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from durable_agents.checkpoint.errors import ConfigurationError, DurableAgentsError
from durable_agents.converter import with_our_converter

if TYPE_CHECKING:
    from durable_agents.activities.transcript_cache import TranscriptCache
    from durable_agents.activities.versioning import WorkerBuild
    from durable_agents.agent.agent import Agent
    from durable_agents.checkpoint.budget_ledger import BudgetLedger
    from durable_agents.checkpoint.stores.base import CheckpointStore
    from durable_agents.providers.base import ModelProvider
    from durable_agents.providers.budgets import Budget, FairShare, RateLimiter
    from durable_agents.providers.registry import ProviderRegistry

__all__ = ["DurableAgentsPlugin"]

PLUGIN_NAME = "durable_agents.DurableAgentsPlugin"

PASSTHROUGH_MODULES = (
    "pydantic",
    "pydantic_core",
    "annotated_types",
    "durable_agents.checkpoint.errors",
    "durable_agents.checkpoint.format",
    "durable_agents.checkpoint._format_model",
    "durable_agents.checkpoint.parts",
    "durable_agents.checkpoint.run_options",
    "durable_agents.checkpoint.run_config",
    "durable_agents.checkpoint.pricing",
    "durable_agents.checkpoint.fingerprint",
    "durable_agents.activities.contracts",
    "durable_agents.activities.subagent_contracts",
    "durable_agents.workflows.contracts",
)
"""What the workflows import from outside the sandbox: pure data contracts, no I/O."""

WORKFLOW_FAILURE_EXCEPTION_TYPES: tuple[type[BaseException], ...] = (DurableAgentsError,)


def with_our_passthrough(existing: WorkflowRunner | None) -> WorkflowRunner:
    """The sandboxed runner, our contracts passed through; an unsandboxed runner is kept."""
    if existing is None:
        return SandboxedWorkflowRunner(
            restrictions=SandboxRestrictions.default.with_passthrough_modules(*PASSTHROUGH_MODULES)
        )
    if isinstance(existing, SandboxedWorkflowRunner):
        return dataclasses.replace(
            existing, restrictions=existing.restrictions.with_passthrough_modules(*PASSTHROUGH_MODULES)
        )
    return existing


class DurableAgentsPlugin(SimplePlugin):
    """The converter, sandbox and failure types for a client; plus workflows and
    activities for a worker when ``store`` is given.

    ``codec``: a payload codec for the client's converter, e.g.
    ``durable_agents.EncryptionCodec.from_env()`` (with it, failures are encoded too).
    ``transcript_cache``: the worker's cache of transcripts (default: one with the
    default bounds; see ``durable_agents.activities.transcript_cache``).
    ``budgets``: the provider rate limits every model call of the fleet shares
    (``durable_agents.providers.budgets``), booked in ``budget_ledger`` (default: beside the
    store, so every worker on the store shares them); ``fair_share``: who waits behind whom."""

    def __init__(
        self,
        *,
        agents: Sequence[Agent] = (),
        store: CheckpointStore | None = None,
        providers: Mapping[str, ModelProvider] | None = None,
        allow_memory_store: bool = False,
        codec: PayloadCodec | None = None,
        transcript_cache: TranscriptCache | None = None,
        budgets: Sequence[Budget] = (),
        fair_share: FairShare | None = None,
        budget_ledger: BudgetLedger | None = None,
    ) -> None:
        activities = None
        workflows = None
        run_context = None
        interceptors = None
        self._build: WorkerBuild | None = None
        if store is not None:
            from durable_agents.activities import build_activities
            from durable_agents.activities.mcp_client import MCPConnections
            from durable_agents.activities.versioning import WorkerBuild
            from durable_agents.agent.agent import with_subagents
            from durable_agents.providers.registry import ProviderRegistry
            from durable_agents.workflows import ALL_WORKFLOWS

            _check_store(store, allow_memory_store)
            registry = ProviderRegistry(
                dict(providers or {}), budgets=_limiter(store, budgets, fair_share, budget_ledger)
            )
            agents = with_subagents(agents)  # their sub-agents' child runs run here too
            _check_providers(agents, registry)
            mcp = MCPConnections()  # the worker's MCP sessions: closed (stdio servers stopped) when it stops
            self._build = WorkerBuild()  # which Worker Deployment Version: known once a worker is configured
            activities = build_activities(
                store, _by_name(agents), registry, mcp=mcp, transcripts=transcript_cache, build=self._build
            )
            workflows = list(ALL_WORKFLOWS)
            run_context = mcp.running
            from durable_agents.activities.sticky import UnstickRetries

            interceptors = [UnstickRetries()]  # a retried step's run leaves a dead worker's sticky queue
        elif agents or budgets:
            raise ConfigurationError(
                "DurableAgentsPlugin(agents=…, budgets=…) needs store=… too: the worker's checkpoint store"
            )
        super().__init__(
            PLUGIN_NAME,
            data_converter=lambda existing: with_our_converter(existing, codec),
            activities=activities,
            interceptors=interceptors,
            workflows=workflows,
            workflow_runner=with_our_passthrough,
            workflow_failure_exception_types=_append_failure_types,
            run_context=run_context,
        )

    def configure_worker(self, config: WorkerConfig) -> WorkerConfig:
        """Also: the worker's deployment version (``deployment_config``) is what its runs
        record as their build (see ``durable_agents.versioning``)."""
        config = super().configure_worker(config)
        deployment = config.get("deployment_config")
        if self._build is not None:
            self._build.version = deployment.version if deployment and deployment.use_worker_versioning else None
        return config


def _check_providers(agents: Sequence[Agent], registry: ProviderRegistry) -> None:
    """Every agent's provider has an implementation on this worker (checked at start, not at the first turn)."""
    from durable_agents.providers.registry import preload, split_model_string

    known = registry.names()
    used = []
    for agent in agents:
        summarizer = getattr(agent.context, "model", None)
        for model in (agent.model, summarizer) if summarizer else (agent.model,):
            provider, _ = split_model_string(model)
            if provider not in known:
                raise ConfigurationError(
                    f"agent {agent.name!r} uses provider {provider!r}, which this worker does not have "
                    f"(known: {', '.join(known)}); pass build_worker(providers={{{provider!r}: ...}}) "
                    "or register it with durable_agents.register_provider()"
                )
            used.append(provider)
    preload(used)  # at start, not in the first model call's activity


def _limiter(
    store: CheckpointStore,
    budgets: Sequence[Budget],
    fair_share: FairShare | None,
    ledger: BudgetLedger | None,
) -> RateLimiter | None:
    """The worker's rate limiter: its budgets in the ledger beside the store (None: no budgets)."""
    if not budgets:
        if fair_share is not None or ledger is not None:
            raise ConfigurationError("fair_share=… and budget_ledger=… need budgets=[Budget(…), …] too")
        return None
    from durable_agents.checkpoint.budget_ledger import ledger_for
    from durable_agents.providers.budgets import RateLimiter
    from durable_agents.providers.registry import known_providers

    limiter = RateLimiter(budgets, ledger if ledger is not None else ledger_for(store), fair_share=fair_share)
    for model in limiter.budgets:
        provider = model.partition(":")[0]
        if provider not in known_providers():
            raise ConfigurationError(
                f"Budget({model!r}): no provider {provider!r} (known: {', '.join(known_providers())})"
            )
    return limiter


def _append_failure_types(existing: Sequence[type[BaseException]] | None) -> list[type[BaseException]]:
    types = list(existing or [])
    return types + [t for t in WORKFLOW_FAILURE_EXCEPTION_TYPES if t not in types]


def _check_store(store: CheckpointStore, allow_memory_store: bool) -> None:
    if not store.durable and not allow_memory_store:
        raise ConfigurationError(
            f"{store!r} keeps runs in this process only, so a crash or a second worker "
            "would lose them: use SqliteStore/open_store('sqlite:///…'), or pass "
            "allow_memory_store=True when client and worker share one process (tests)"
        )


def _by_name(agents: Sequence[Agent]) -> dict[str, Agent]:
    by_name: dict[str, Agent] = {}
    for agent in agents:
        if agent.name in by_name:
            raise ConfigurationError(f"two agents are named {agent.name!r}; agent names must be unique")
        by_name[agent.name] = agent
    return by_name
