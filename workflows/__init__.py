"""Deterministic workflow code only: no I/O, clocks, randomness or SDK clients.

The contracts (names, inputs, results) load with the package; the workflow
classes, which reference the activities, load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from durable_agents.workflows.contracts import (
    AGENT_RUN_WORKFLOW,
    FORK_WORKFLOW,
    AgentRunInput,
    ResumePoint,
    RunSummary,
)

if TYPE_CHECKING:
    from durable_agents.workflows.agent_run import AgentRunWorkflow
    from durable_agents.workflows.fork import ForkSessionWorkflow
    from durable_agents.workflows.migrate import MigrateSessionWorkflow
    from durable_agents.workflows.policies import ApprovalPoliciesWorkflow

ALL_WORKFLOWS: list[type]
"""Every workflow a durable-agents worker registers."""

__all__ = [
    "AGENT_RUN_WORKFLOW",
    "ALL_WORKFLOWS",
    "FORK_WORKFLOW",
    "AgentRunInput",
    "AgentRunWorkflow",
    "ApprovalPoliciesWorkflow",
    "ForkSessionWorkflow",
    "MigrateSessionWorkflow",
    "ResumePoint",
    "RunSummary",
]


def __getattr__(name: str) -> Any:
    if name not in (
        "AgentRunWorkflow",
        "ApprovalPoliciesWorkflow",
        "ForkSessionWorkflow",
        "MigrateSessionWorkflow",
        "ALL_WORKFLOWS",
    ):
        raise AttributeError(f"module 'durable_agents.workflows' has no attribute {name!r}")
    from durable_agents.workflows.agent_run import AgentRunWorkflow
    from durable_agents.workflows.fork import ForkSessionWorkflow
    from durable_agents.workflows.migrate import MigrateSessionWorkflow
    from durable_agents.workflows.policies import ApprovalPoliciesWorkflow

    found = {
        "AgentRunWorkflow": AgentRunWorkflow,
        "ForkSessionWorkflow": ForkSessionWorkflow,
        "MigrateSessionWorkflow": MigrateSessionWorkflow,
        "ApprovalPoliciesWorkflow": ApprovalPoliciesWorkflow,
        "ALL_WORKFLOWS": [AgentRunWorkflow, ForkSessionWorkflow, MigrateSessionWorkflow, ApprovalPoliciesWorkflow],
    }
    globals().update(found)
    return found[name]
