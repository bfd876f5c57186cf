"""What ``send()``, ``approve()`` and ``resume()`` return: ``RunResult``."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, Field

from durable_agents.checkpoint.fingerprint import AgentDrift
from durable_agents.checkpoint.format import FinishReason, FormatModel, Message, Role, ToolCall, Usage
from durable_agents.checkpoint.stores.base import CheckpointStore
from durable_agents.workflows.contracts import RunSummary

__all__ = ["RunResult"]

M = TypeVar("M", bound=BaseModel)


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
    output: Any = None
    """The final answer of an agent with an ``output_type``: validated JSON as stored, or an
    instance of the type when the caller gave it (``send(output_type=…)``, :meth:`output_as`)."""
    detail: str | None = None
    """Why the run ended when ``finish_reason`` alone does not say (``usage-limit``: which limit)."""
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
            detail=summary.detail,
            output=_stored_output(summary, store),
        )

    def output_as(self, output_type: type[M]) -> M:
        """The final answer as an instance of ``output_type``."""
        if self.output is None:
            raise ValueError(f"run of session {self.session_id!r} has no output ({self.finish_reason})")
        if isinstance(self.output, output_type):
            return self.output
        return output_type.model_validate(self.output)


def _stored_output(summary: RunSummary, store: CheckpointStore) -> Any:
    if summary.finish_reason != FinishReason.STOP:
        return None
    header = store.load_header(summary.session_id)
    return header.output if header is not None else None
