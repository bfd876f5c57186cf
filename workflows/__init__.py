"""Deterministic workflow code only: no I/O, clocks, randomness or SDK clients."""

from durable_agents.workflows.agent_run import AgentRunWorkflow
from durable_agents.workflows.contracts import AGENT_RUN_WORKFLOW, AgentRunInput, ResumePoint, RunSummary
from durable_agents.workflows.fork import FORK_WORKFLOW, ForkSessionWorkflow

ALL_WORKFLOWS = [AgentRunWorkflow, ForkSessionWorkflow]

__all__ = [
    "AGENT_RUN_WORKFLOW",
    "ALL_WORKFLOWS",
    "FORK_WORKFLOW",
    "AgentRunInput",
    "AgentRunWorkflow",
    "ForkSessionWorkflow",
    "ResumePoint",
    "RunSummary",
]
