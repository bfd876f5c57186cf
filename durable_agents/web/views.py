"""What the HTTP API answers and accepts: camelCase JSON, as the checkpoint format and the
wire contract are (``FormatModel``). The OpenAPI spec (``openapi.py``) is built from these."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any

from pydantic import ConfigDict, Field
from pydantic.alias_generators import to_camel

from durable_agents.activities.contracts import DecisionGrant, PendingApproval
from durable_agents.checkpoint.format import (
    CheckpointHeader,
    CheckpointStatus,
    Decision,
    FormatModel,
    Message,
    SessionSummary,
    ToolCall,
)

Pending = PendingApproval
"""A waiting call as ``AgentClient.pending_approval`` and ``waiting_approvals`` give it."""


def arguments_digest(arguments: dict[str, Any]) -> str:
    """``sha256:<hex>`` of the arguments as canonical JSON (sorted keys, no spaces, UTF-8):
    what a decision sends back to say which arguments its approver saw."""
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


class Body(FormatModel):
    """A request body: unknown fields are refused (``decidedBy`` above all: who decides is
    the authenticated caller, never a field)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class ApprovalItem(FormatModel):
    """A tool call waiting for a decision."""

    session_id: str
    """The session to decide it in (a sub-agent's call is decided in its top-most session)."""
    agent: str
    approval_id: str
    tool_name: str
    tool_call_id: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    arguments_digest: str
    """Send it back with the decision: a decision on other arguments is refused (409)."""
    requested_at: datetime
    timeout_at: datetime | None = None
    remaining_tool_calls: list[ToolCall] = Field(default_factory=list)
    subagent_session_id: str | None = None
    subagent_agent: str | None = None
    parent_session_id: str | None = None
    temporal_url: str | None = None
    may_decide: bool = False
    """Whether the caller may decide it (role and scope)."""

    @classmethod
    def of(cls, pending: Pending, *, temporal_url: str | None, may_decide: bool) -> ApprovalItem:
        return cls(
            **pending.model_dump(),
            arguments_digest=arguments_digest(pending.arguments),
            temporal_url=temporal_url,
            may_decide=may_decide,
        )


class ApprovalDetail(ApprovalItem):
    """One waiting call with what a person needs to decide it."""

    tool_description: str | None = None
    input_schema: dict[str, Any] | None = None
    """The tool's input JSON Schema, as the model was given it (edited arguments must fit it)."""
    conversation: list[Message] = Field(default_factory=list)
    """The end of the transcript that led to the call (from its session's last user message)."""


class ApprovalPage(FormatModel):
    items: list[ApprovalItem]
    total: int
    """How many match the filters (all pages)."""
    next_cursor: str | None = None


class DecisionBody(Body):
    approval_id: str = Field(min_length=1, max_length=1000)
    approved: bool
    arguments_digest: str = Field(min_length=1, max_length=200)
    """The ``argumentsDigest`` of the approval as the approver saw it."""
    note: str | None = Field(default=None, max_length=10_000)
    arguments: dict[str, Any] | None = None
    """Approve with these arguments instead of the model's (checked against the tool's schema)."""
    grant: DecisionGrant | None = None
    """Approve and stop asking: also approve this tool's calls to come, in this session, for this
    agent or for every agent (``scope``), for ``expiresInSeconds``, at most ``maxUses`` times;
    only with an approval of the arguments shown, never wider than what the approver may decide."""


class DecisionView(FormatModel):
    approval_id: str
    approved: bool
    decided_by: str
    decided_at: datetime | None = None
    note: str | None = None
    arguments: dict[str, Any] | None = None


class DecisionResult(FormatModel):
    decision: DecisionView
    finished_waiting: bool
    """True when the run's next outcome came back in time (``outcome`` set); False: the
    decision was taken and the run goes on (follow it with the session's events)."""
    outcome: dict[str, Any] | None = None
    """The run's next pause or its end (a ``RunResult`` as JSON, without its messages)."""


class AuditEntry(FormatModel):
    session_id: str
    agent: str | None = None
    decision: Decision


class AuditPage(FormatModel):
    items: list[AuditEntry]


class SessionPage(FormatModel):
    items: list[SessionSummary]
    total: int
    next_cursor: str | None = None


class SessionView(FormatModel):
    header: CheckpointHeader
    pending: ApprovalItem | None = None
    temporal_url: str | None = None
    history: list[HistoryItem] = Field(default_factory=list)
    """The kept saves, newest first (what a fork can start from)."""


class HistoryItem(FormatModel):
    entry: int
    """1 is the newest kept save."""
    step: int
    saved_at: datetime
    status: CheckpointStatus


class TranscriptMessage(FormatModel):
    position: int
    message: Message
    subagent: Transcript | None = None
    """For a sub-agent call's result (or the call a sub-agent waits on): the sub-agent's transcript."""


class Transcript(FormatModel):
    session_id: str
    agent: str | None = None
    status: CheckpointStatus | None = None
    messages: list[TranscriptMessage] = Field(default_factory=list)


class ForkBody(Body):
    from_step: int = Field(ge=0)
    patch: dict[str, Any] | None = None
    """A ``checkpoint.fork.Patch`` as JSON (``messages`` as a list, ``appendInput``, ``toolResult``…)."""
    new_session_id: str | None = Field(default=None, min_length=1, max_length=900)
    entry: int | None = Field(default=None, ge=1)


class ForkView(FormatModel):
    session_id: str
    step: int


class LoginBody(Body):
    token: str = Field(min_length=1, max_length=500)


class Problem(FormatModel):
    """An error: ``code`` is stable (``durable_agents.errors`` codes, or the HTTP meaning)."""

    code: str
    message: str
    decided_by: str | None = None
    """On a 409 for an approval decided already: who decided it."""


SessionView.model_rebuild()
TranscriptMessage.model_rebuild()
