"""The activity callables a worker registers, bound to one store and agent set."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from durable_agents.activities.approval_policy import PolicyDecisionActivities
from durable_agents.activities.approvals import ApprovalActivities
from durable_agents.activities.deps import ActivityDeps
from durable_agents.activities.events import EventActivities
from durable_agents.activities.fork import ForkActivities
from durable_agents.activities.mcp_client import MCPConnections
from durable_agents.activities.migrate import MigrateActivities
from durable_agents.activities.model import ModelActivities
from durable_agents.activities.policies import PolicyActivities
from durable_agents.activities.session import SessionActivities
from durable_agents.activities.subagent_activities import SubagentActivities
from durable_agents.activities.tools import ToolActivities
from durable_agents.activities.transcript_cache import TranscriptCache
from durable_agents.activities.versioning import WorkerBuild
from durable_agents.checkpoint.stores.base import CheckpointStore
from durable_agents.providers.registry import ProviderRegistry


def build_activities(
    store: CheckpointStore,
    agents: Mapping[str, Any],
    providers: ProviderRegistry | None = None,
    mcp: MCPConnections | None = None,
    transcripts: TranscriptCache | None = None,
    build: WorkerBuild | None = None,
) -> list[Callable[..., Any]]:
    """The activity callables a worker registers, bound to one store and agent set
    (and to ``mcp``, the worker's MCP sessions, when the caller closes them at the end)."""
    deps = ActivityDeps(
        store=store, agents=agents, providers=providers or ProviderRegistry(), mcp=mcp or MCPConnections()
    )
    if transcripts is not None:
        deps.transcripts = transcripts
    if build is not None:  # the worker's deployment version, once the worker is configured
        deps.build = build
    session = SessionActivities(deps)
    approvals = ApprovalActivities(deps)
    return [
        approvals.check_approvals,
        approvals.pause_for_approval,
        approvals.record_decision,
        session.begin_run,
        session.append_input,
        session.finish_run,
        session.abort_run,
        session.record_failure,
        ModelActivities(deps).model_turn,
        ToolActivities(deps).execute_tool,
        ForkActivities(deps).fork_session,
        MigrateActivities(deps).migrate_session,
        PolicyActivities(deps).change_approval_policy,
        EventActivities(deps).record_events,
        *SubagentActivities(deps).all(),
        *PolicyDecisionActivities(deps).all(),
    ]
