"""Deterministic workflow code only: no I/O, clocks, randomness or SDK clients."""

from workflows.agent_run import AgentRunWorkflow
from workflows.fork import FORK_WORKFLOW, ForkSessionWorkflow
from workflows.contracts import AGENT_RUN_WORKFLOW, AgentRunInput, ResumePoint, RunSummary

ALL_WORKFLOWS = [AgentRunWorkflow, ForkSessionWorkflow]

__all__ = ["AGENT_RUN_WORKFLOW", "FORK_WORKFLOW", "ForkSessionWorkflow", "ALL_WORKFLOWS", "AgentRunInput", "AgentRunWorkflow", "ResumePoint", "RunSummary"]
