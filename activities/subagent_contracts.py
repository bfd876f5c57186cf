"""Contracts of sub-agent calls: what the workflow and its sub-agent activities exchange.

Durable contracts recorded in workflow history (add optional fields, never
rename). Like every other contract, none carries a transcript, an argument or
a result: the sub-agent's task is read from the parent's stored turn and put
in the store's run-input inbox; its answer is read from its session.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from durable_agents.activities.contracts import ApprovalDecision, PendingApproval
from durable_agents.checkpoint.format import FinishReason, FormatModel, ToolCall

START_SUBAGENT = "durable_agents.start_subagent"
RECORD_SUBAGENT_RESULT = "durable_agents.record_subagent_result"
RELAY_SUBAGENT_APPROVAL = "durable_agents.relay_subagent_approval"
SUBAGENT_APPROVAL_SIGNAL = "subagent_approval"
"""The signal a sub-agent's run sends its parent's run when it pauses or goes on."""


class SubagentParent(FormatModel):
    """Who runs a sub-agent's run: carried by the child's ``AgentRunInput``."""

    session_id: str
    tool_call_id: str
    position: int
    """Where the parent's result for the call goes in the parent's transcript."""
    depth: int = 1
    """1 for a sub-agent of a top-level run, 2 for one of its sub-agents, …"""
    max_depth: int = 1
    """The top-level agent's ``max_subagent_depth``: a run at this depth calls no sub-agent."""
    session_uid: str | None = None
    """The parent's ``sessionUid``, recorded in the child's new session."""


class StartSubagentInput(FormatModel):
    session_id: str
    """The parent's session."""
    agent: str
    """The parent's agent."""
    call: ToolCall
    """A reference (id and name); the arguments are in the stored turn at ``turn_position``."""
    turn_position: int | None = None
    batch_start: int
    batch: list[str]
    index: int
    depth: int = 0
    """The parent's depth (0: a top-level run)."""
    max_depth: int | None = None
    """Inherited from the top-level run; None: the parent is top-level (its agent's limit applies)."""
    approval_id: str | None = None
    """A decision the parent's run holds for this call (given after an earlier run closed):
    the start says whether the child's session waits on exactly this approval."""
    decision: ApprovalDecision | None = None
    """That decision (for the parent's ``ApprovalDecided`` event, when it streams)."""

    @property
    def position(self) -> int:
        return self.batch_start + self.index


class StartSubagentOutput(FormatModel):
    recorded_through: int | None = None
    """Set when the call needs no child run: its result is recorded (a validation error,
    the depth limit, a child that had finished, or a result recorded earlier)."""
    child_session_id: str | None = None
    child_agent: str | None = None
    input_token: str | None = None
    """The child's task, in the store's run-input inbox under this token (a new child only)."""
    max_depth: int = 1
    parent_session_uid: str | None = None
    pass_approval: bool = False
    """The parent's decision is the one the child waits for: the child's run applies it."""


class RecordSubagentResultInput(FormatModel):
    session_id: str
    call: ToolCall
    batch_start: int
    batch: list[str]
    index: int
    child_session_id: str
    finish_reason: FinishReason

    @property
    def position(self) -> int:
        return self.batch_start + self.index


class RecordSubagentResultOutput(FormatModel):
    recorded_through: int


class RelaySubagentApprovalInput(FormatModel):
    """Save the parent's checkpoint as waiting on its sub-agent's approval, or as going on."""

    session_id: str
    approval_id: str
    child_session_id: str | None = None
    """Set: the parent now waits (its snapshot is read from the child's checkpoint); None: it goes on."""
    remaining_tool_calls: list[ToolCall] = Field(default_factory=list)
    """The parent's calls after the sub-agent's (references when ``turn_position`` is set)."""
    turn_position: int | None = None
    outcome: dict[str, Any] | None = None
    """A streamed parent's ``RunPaused`` (JSON; its message count is set by the activity), written with the pause."""
    decision: ApprovalDecision | None = None
    """Going on: the decision this run passed to the child (None: the child went on by itself)."""
    call: ToolCall | None = None
    """Going on: this run's call of the sub-agent (for the ``SubAgentStarted`` that follows it again)."""
    position: int | None = None
    """Going on: where that call's result goes."""


class RelaySubagentApprovalOutput(FormatModel):
    relayed: bool
    """False when the child had moved on already (its checkpoint no longer waits on the approval)."""
    message_count: int = 0
    """The parent's messages (its results recorded so far)."""


class SubagentApprovalEvent(FormatModel):
    """What a child's run tells its parent's run: it waits on ``pending``, or (None) goes on."""

    session_id: str
    """The child's session."""
    pending: PendingApproval | None = None
    resolved_approval_id: str | None = None


__all__ = [
    "RECORD_SUBAGENT_RESULT",
    "RELAY_SUBAGENT_APPROVAL",
    "START_SUBAGENT",
    "SUBAGENT_APPROVAL_SIGNAL",
    "RecordSubagentResultInput",
    "RecordSubagentResultOutput",
    "RelaySubagentApprovalInput",
    "RelaySubagentApprovalOutput",
    "StartSubagentInput",
    "StartSubagentOutput",
    "SubagentApprovalEvent",
    "SubagentParent",
]
