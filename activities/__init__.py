"""All I/O of a run: model providers, tool execution, checkpoint writes."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from activities.approvals import ApprovalActivities
from activities.deps import ActivityDeps
from activities.fork import ForkActivities
from activities.model import ModelActivities
from activities.providers.registry import ProviderRegistry
from activities.session import SessionActivities
from activities.tools import ToolActivities
from checkpoint.stores.base import CheckpointStore


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


__all__ = ["ActivityDeps", "ProviderRegistry", "build_activities"]
