"""Deterministic workflow code only: no I/O, clocks, randomness or SDK clients."""

from workflows.agent_run import AgentRunWorkflow
from workflows.contracts import AGENT_RUN_WORKFLOW, AgentRunInput, ResumePoint, RunSummary

ALL_WORKFLOWS = [AgentRunWorkflow]

__all__ = ["AGENT_RUN_WORKFLOW", "ALL_WORKFLOWS", "AgentRunInput", "AgentRunWorkflow", "ResumePoint", "RunSummary"]
