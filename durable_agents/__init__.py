"""durable-agents: LLM agents that run durably on Temporal.

Define agents and tools, build a worker, start runs with ``AgentClient``::

    from durable_agents import Agent, AgentClient, ToolContext, build_worker, tool

Names are imported on first use, so ``import durable_agents.checkpoint`` (or the
workflow contracts) loads neither the LLM SDKs nor the stores.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from durable_agents import _moved

_moved.install()

if TYPE_CHECKING:
    from durable_agents.activities.contracts import ApprovalDecision, PendingApproval
    from durable_agents.agent.agent import Agent
    from durable_agents.agent.hooks import Hooks, Rewrite, Veto
    from durable_agents.agent.mcp import MCPServerHTTP, MCPServerStdio
    from durable_agents.agent.tools import Tool, ToolContext, tool
    from durable_agents.checkpoint.context_policy import KeepLastTurns, SummarizeOlder, TokenBudget
    from durable_agents.checkpoint.fork import Patch
    from durable_agents.checkpoint.format import (
        CheckpointStatus,
        FinishReason,
        Message,
        ModelPrice,
        ModelSettings,
        ToolCall,
        Usage,
        UsageLimits,
    )
    from durable_agents.checkpoint.parts import DocumentPart, ImagePart, OpaquePart, TextPart
    from durable_agents.checkpoint.replay_report import ReplayReport
    from durable_agents.client.client import AgentClient
    from durable_agents.client.connection import DEFAULT_TASK_QUEUE, connect
    from durable_agents.client.result import RunResult
    from durable_agents.encryption import EncryptionCodec, EncryptionKeyError
    from durable_agents.errors import (
        AgentDriftError,
        ApprovalNotPendingError,
        CheckpointNotFoundError,
        ConfigurationError,
        DecisionTooLargeError,
        DurableAgentsError,
        FailureType,
        HookFailedError,
        InvalidDecisionError,
        InvalidRunInputError,
        ModelProviderError,
        OutputValidationError,
        PolicyVersionConflictError,
        PropagatingToolError,
        ResumeToolMissingError,
        RunFailedError,
        SessionAwaitingApprovalError,
        SessionBusyError,
        SessionFinishedError,
        StoreCorruptError,
        StoreDamageWarning,
        StoreUnavailableError,
        ToolDurabilityError,
    )
    from durable_agents.plugin import DurableAgentsPlugin
    from durable_agents.providers.base import ModelProvider, ModelRequest, ModelResponse
    from durable_agents.providers.budgets import Budget, BudgetCall, BudgetExceeded, FairShare, RateLimiter
    from durable_agents.providers.registry import register_provider
    from durable_agents.providers.scripted import ScriptedToolCall, ScriptedTurn, register_script
    from durable_agents.replay.policy import ReplayPolicy
    from durable_agents.worker import build_worker

_EXPORTS: dict[str, str] = {
    "DEFAULT_TASK_QUEUE": "durable_agents.client.connection",
    "Agent": "durable_agents.agent.agent",
    "AgentClient": "durable_agents.client.client",
    "AgentDriftError": "durable_agents.errors",
    "ApprovalDecision": "durable_agents.activities.contracts",
    "ApprovalNotPendingError": "durable_agents.errors",
    "InvalidDecisionError": "durable_agents.errors",
    "InvalidRunInputError": "durable_agents.errors",
    "CheckpointNotFoundError": "durable_agents.errors",
    "CheckpointStatus": "durable_agents.checkpoint.format",
    "ConfigurationError": "durable_agents.errors",
    "DecisionTooLargeError": "durable_agents.errors",
    "DurableAgentsError": "durable_agents.errors",
    "DurableAgentsPlugin": "durable_agents.plugin",
    "EncryptionCodec": "durable_agents.encryption",
    "EncryptionKeyError": "durable_agents.encryption",
    "FailureType": "durable_agents.errors",
    "FinishReason": "durable_agents.checkpoint.format",
    "Message": "durable_agents.checkpoint.format",
    "TextPart": "durable_agents.checkpoint.parts",
    "ImagePart": "durable_agents.checkpoint.parts",
    "DocumentPart": "durable_agents.checkpoint.parts",
    "OpaquePart": "durable_agents.checkpoint.parts",
    "MCPServerHTTP": "durable_agents.agent.mcp",
    "MCPServerStdio": "durable_agents.agent.mcp",
    "ModelProviderError": "durable_agents.errors",
    "OutputValidationError": "durable_agents.errors",
    "Patch": "durable_agents.checkpoint.fork",
    "PendingApproval": "durable_agents.activities.contracts",
    "ReplayPolicy": "durable_agents.replay.policy",
    "Budget": "durable_agents.providers.budgets",
    "BudgetCall": "durable_agents.providers.budgets",
    "BudgetExceeded": "durable_agents.providers.budgets",
    "FairShare": "durable_agents.providers.budgets",
    "RateLimiter": "durable_agents.providers.budgets",
    "ReplayReport": "durable_agents.checkpoint.replay_report",
    "ResumeToolMissingError": "durable_agents.errors",
    "RunFailedError": "durable_agents.errors",
    "RunResult": "durable_agents.client.result",
    "ScriptedToolCall": "durable_agents.providers.scripted",
    "ScriptedTurn": "durable_agents.providers.scripted",
    "SessionAwaitingApprovalError": "durable_agents.errors",
    "SessionBusyError": "durable_agents.errors",
    "SessionFinishedError": "durable_agents.errors",
    "StoreCorruptError": "durable_agents.errors",
    "StoreDamageWarning": "durable_agents.errors",
    "StoreUnavailableError": "durable_agents.errors",
    "Tool": "durable_agents.agent.tools",
    "ToolCall": "durable_agents.checkpoint.format",
    "ToolContext": "durable_agents.agent.tools",
    "ToolDurabilityError": "durable_agents.errors",
    "Usage": "durable_agents.checkpoint.format",
    "build_worker": "durable_agents.worker",
    "connect": "durable_agents.client.connection",
    "register_script": "durable_agents.providers.scripted",
    "ModelSettings": "durable_agents.checkpoint.format",
    "UsageLimits": "durable_agents.checkpoint.format",
    "ModelPrice": "durable_agents.checkpoint.format",
    "register_provider": "durable_agents.providers.registry",
    "ModelRequest": "durable_agents.providers.base",
    "ModelResponse": "durable_agents.providers.base",
    "ModelProvider": "durable_agents.providers.base",
    "Hooks": "durable_agents.agent.hooks",
    "Veto": "durable_agents.agent.hooks",
    "Rewrite": "durable_agents.agent.hooks",
    "PropagatingToolError": "durable_agents.errors",
    "PolicyVersionConflictError": "durable_agents.errors",
    "HookFailedError": "durable_agents.errors",
    "tool": "durable_agents.agent.tools",
    "KeepLastTurns": "durable_agents.checkpoint.context_policy",
    "TokenBudget": "durable_agents.checkpoint.context_policy",
    "SummarizeOlder": "durable_agents.checkpoint.context_policy",
}

__all__ = [
    "DEFAULT_TASK_QUEUE",
    "Agent",
    "AgentClient",
    "AgentDriftError",
    "ApprovalDecision",
    "ApprovalNotPendingError",
    "Budget",
    "BudgetCall",
    "BudgetExceeded",
    "CheckpointNotFoundError",
    "CheckpointStatus",
    "ConfigurationError",
    "DecisionTooLargeError",
    "DocumentPart",
    "DurableAgentsError",
    "DurableAgentsPlugin",
    "EncryptionCodec",
    "EncryptionKeyError",
    "FailureType",
    "FairShare",
    "FinishReason",
    "HookFailedError",
    "Hooks",
    "ImagePart",
    "InvalidDecisionError",
    "InvalidRunInputError",
    "KeepLastTurns",
    "MCPServerHTTP",
    "MCPServerStdio",
    "Message",
    "ModelPrice",
    "ModelProvider",
    "ModelProviderError",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "OpaquePart",
    "OutputValidationError",
    "Patch",
    "PendingApproval",
    "PolicyVersionConflictError",
    "PropagatingToolError",
    "RateLimiter",
    "ReplayPolicy",
    "ReplayReport",
    "ResumeToolMissingError",
    "Rewrite",
    "RunFailedError",
    "RunResult",
    "ScriptedToolCall",
    "ScriptedTurn",
    "SessionAwaitingApprovalError",
    "SessionBusyError",
    "SessionFinishedError",
    "StoreCorruptError",
    "StoreDamageWarning",
    "StoreUnavailableError",
    "SummarizeOlder",
    "TextPart",
    "TokenBudget",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolDurabilityError",
    "Usage",
    "UsageLimits",
    "Veto",
    "build_worker",
    "connect",
    "register_provider",
    "register_script",
    "tool",
]

try:
    from importlib.metadata import version as _version

    __version__ = _version("durable-agents")
except Exception:  # noqa: BLE001 - running from a source tree that is not installed
    __version__ = "0+unknown"


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'durable_agents' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
