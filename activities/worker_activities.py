"""The activity callables a worker registers, bound to one store and agent set."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from durable_agents.activities.approvals import ApprovalActivities
from durable_agents.activities.deps import ActivityDeps
from durable_agents.activities.fork import ForkActivities
from durable_agents.activities.model import ModelActivities
from durable_agents.activities.providers.registry import ProviderRegistry
from durable_agents.activities.session import SessionActivities
from durable_agents.activities.tools import ToolActivities
from durable_agents.checkpoint.stores.base import CheckpointStore


def build_activities(
    store: CheckpointStore,
    agents: Mapping[str, Any],
    providers: ProviderRegistry | None = None,
) -> list[Callable[..., Any]]:
    """The activity callables a worker registers, bound to one store and agent set."""
    deps = ActivityDeps(store=store, agents=agents, providers=providers or ProviderRegistry())
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
        ModelActivities(deps).model_turn,
        ToolActivities(deps).execute_tool,
        ForkActivities(deps).fork_session,
    ]
