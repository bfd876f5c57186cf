"""durable-agents: LLM agents that run durably on Temporal.

Define agents and tools, build a worker, start runs with ``AgentClient``.
"""

from durable_agents._outcomes import RunResult
from durable_agents.activities.contracts import ApprovalDecision, PendingApproval
from durable_agents.activities.definitions import Agent, Tool, ToolContext, tool
from durable_agents.activities.providers.scripted import ScriptedToolCall, ScriptedTurn, register_script
from durable_agents.checkpoint.format import CheckpointStatus, FinishReason, Message, ToolCall, Usage
from durable_agents.client import AgentClient
from durable_agents.connection import DEFAULT_TASK_QUEUE, connect
from durable_agents.errors import (
    AgentDriftError,
    ApprovalNotPendingError,
    CheckpointNotFoundError,
    ConfigurationError,
    DurableAgentsError,
    ModelProviderError,
    ResumeToolMissingError,
    RunFailedError,
    SessionAwaitingApprovalError,
    SessionBusyError,
    StoreCorruptError,
    ToolDurabilityError,
)
from durable_agents.worker import build_worker

__all__ = [
    "DEFAULT_TASK_QUEUE",
    "Agent",
    "AgentClient",
    "AgentDriftError",
    "ApprovalDecision",
    "ApprovalNotPendingError",
    "CheckpointNotFoundError",
    "CheckpointStatus",
    "ConfigurationError",
    "DurableAgentsError",
    "FinishReason",
    "Message",
    "ModelProviderError",
    "PendingApproval",
    "ResumeToolMissingError",
    "RunFailedError",
    "RunResult",
    "ScriptedToolCall",
    "ScriptedTurn",
    "SessionAwaitingApprovalError",
    "SessionBusyError",
    "StoreCorruptError",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolDurabilityError",
    "Usage",
    "build_worker",
    "connect",
    "register_script",
    "tool",
]
