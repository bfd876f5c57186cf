"""What listing approvals reads of a waiting session: a few header fields and its last turn."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from durable_agents.checkpoint._format_model import FormatModel
from durable_agents.checkpoint.format import CheckpointHeader, CheckpointStatus, Message, SubagentApproval, ToolCall


class ApprovalTimeout(FormatModel):
    """Of a tool's spec in ``runConfig``: its name and how long an approval may wait."""

    name: str
    approval_timeout_seconds: float | None = None


class WaitingRunConfig(FormatModel):
    tools: list[ApprovalTimeout] = []


class WaitingHeader(FormatModel):
    """The fields of a checkpoint header (the same JSON) that say what its session waits
    for. Parsing a header as this skips the rest (instructions, tool schemas, fingerprint,
    decisions…) unparsed: listing ten thousand waiting sessions reads only these."""

    session_id: str
    agent: str | None = None
    status: CheckpointStatus
    approval_id: str | None = None
    remaining_tool_calls: list[ToolCall] | None = None
    subagent_approval: SubagentApproval | None = None
    parent_session_id: str | None = None
    run_config: WaitingRunConfig | None = None
    message_count: int = 0
    updated_at: datetime | None = None

    @classmethod
    def of(cls, header: CheckpointHeader) -> WaitingHeader:
        return cls.model_validate(header, from_attributes=True)


@dataclass(frozen=True)
class WaitingSession:
    """A session waiting for an approval decision, as ``CheckpointStore.waiting_sessions`` reads it."""

    header: WaitingHeader
    last_turn: list[Message]
    """The end of its transcript, from its last assistant turn on (at least): the turn's
    calls and the results recorded so far, what ``pending_tool_calls`` needs."""
