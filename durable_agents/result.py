"""What ``send()``, ``approve()`` and ``resume()`` return: ``RunResult``."""

from __future__ import annotations

from pydantic import Field

from durable_agents.checkpoint.fingerprint import AgentDrift
from durable_agents.checkpoint.format import FinishReason, FormatModel, Message, Role, ToolCall, Usage
from durable_agents.checkpoint.stores.base import CheckpointStore
from durable_agents.workflows.contracts import RunSummary

__all__ = ["RunResult"]


class RunResult(FormatModel):
    session_id: str
    finish_reason: FinishReason
    messages: list[Message]
    """The whole conversation, from the store."""
    steps: int
    usage: Usage
    tool_calls: list[ToolCall] = Field(default_factory=list)
    """The tool calls of this run, in order."""
    approval_id: str | None = None
    """Set when the run paused: decide it with ``AgentClient.approve``."""
    drift: AgentDrift | None = None
    """Set when the run resumed with an agent that changed since the checkpoint (on_agent_drift='warn')."""

    @property
    def text(self) -> str:
        """The last assistant text of the run."""
        for message in reversed(self.messages):
            if message.role == Role.ASSISTANT and message.content:
                return message.content
        return ""

    @classmethod
    def from_summary(cls, summary: RunSummary, store: CheckpointStore) -> RunResult:
        messages = store.load_messages(summary.session_id, 0, summary.message_count)
        run_messages = messages[summary.run_start_index :]
        calls = [c for m in run_messages if m.role == Role.ASSISTANT for c in (m.tool_calls or [])]
        return cls(
            session_id=summary.session_id,
            finish_reason=summary.finish_reason,
            messages=messages,
            steps=summary.steps,
            usage=summary.usage,
            tool_calls=calls,
            approval_id=summary.approval_id,
            drift=summary.drift,
        )
