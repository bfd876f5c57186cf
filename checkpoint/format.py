"""The checkpoint format: provider-neutral messages and the checkpoint record.

JSON keys are camelCase (pydantic aliases); Python attributes are snake_case.
Persisted models are durable contracts: fields are only ever added, optional,
never renamed. ``formatVersion`` tells readers which version wrote a record.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import ConfigDict, Field, model_validator

from durable_agents.checkpoint._format_model import FormatModel
from durable_agents.checkpoint.context_policy import ContextSummary, ContextWindow
from durable_agents.checkpoint.parts import DocumentPart, ImagePart, OpaquePart, Part, TextPart, as_parts, parts_text
from durable_agents.checkpoint.run_config import (
    AUTO_LOCAL_TOOL_SECONDS,
    ActivityMode,
    Fingerprint,
    RunConfig,
    ToolFingerprint,
    ToolSpec,
)
from durable_agents.checkpoint.run_options import (
    MaxTokensParam,
    ModelPrice,
    ModelSettings,
    RunError,
    ToolChoice,
    UsageLimits,
)

__all__ = [
    "AUTO_LOCAL_TOOL_SECONDS",
    "FORMAT_VERSION",
    "ActivityMode",
    "BuildRecord",
    "Checkpoint",
    "CheckpointFields",
    "CheckpointHeader",
    "CheckpointStatus",
    "Decision",
    "DecisionSource",
    "Evaluation",
    "Fingerprint",
    "FinishReason",
    "FormatModel",
    "HistoryEntry",
    "InstructionsChange",
    "MaxTokensParam",
    "Message",
    "Migration",
    "ModelPrice",
    "ModelSettings",
    "Role",
    "RunConfig",
    "RunError",
    "SessionSummary",
    "SubagentApproval",
    "ToolCall",
    "ToolChoice",
    "ToolFingerprint",
    "ToolSpec",
    "Usage",
    "UsageLimits",
]

FORMAT_VERSION = 2
"""2: messages may carry ``parts`` (images, documents, providers' opaque blocks) and usage
its cache tokens. A record without ``formatVersion`` was written by the first release (1)."""


class Role(StrEnum):
    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


class CheckpointStatus(StrEnum):
    IN_PROGRESS = "in-progress"
    AWAITING_APPROVAL = "awaiting-approval"
    FINISHED = "finished"


class FinishReason(StrEnum):
    STOP = "stop"
    MAX_STEPS = "max-steps"
    AWAITING_APPROVAL = "awaiting-approval"
    ABORTED = "aborted"
    ERROR = "error"
    USAGE_LIMIT = "usage-limit"


class ToolCall(FormatModel):
    """One tool call of an assistant turn; ``id`` is the model's id for it."""

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class InstructionsChange(FormatModel):
    """The marker of an instructions change (a ``system`` message's ``instructionsChange``): from
    this message on, its content is the session's instructions. Each request sends the newest one
    in place of the transcript's leading system messages (its first instructions), and never at
    its own position; empty content: no instructions."""

    previous: int | None = None
    """Where the instructions it replaces are: the change before it; None: the leading system messages."""


class Message(FormatModel):
    role: Role
    content: str | None = None
    """The message's text (with ``parts``: the concatenated text of its text parts)."""
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    tool_name: str | None = None
    is_error: bool | None = None
    parts: list[Part] | None = None
    """Its content in order, when it is more than text (format 2): the truth when present.
    An assistant turn's tool calls stay in ``toolCalls`` and follow its parts."""
    summary: ContextSummary | None = None
    """Set on a context summary (a ``system`` message a ``SummarizeOlder`` policy stored): the
    messages it stands for. Summaries are sent only in place of those messages, never as such."""
    context: ContextWindow | None = None
    """Set on an assistant turn made under a context policy: the transcript ranges its request
    was made of (``durable_agents.checkpoint.context.sent_messages`` rebuilds it)."""
    instructions_change: InstructionsChange | None = None
    """Set on a ``system`` message that changes the session's instructions (a run of an agent
    whose instructions differ from what the session was sent: a migrated session, a deploy)."""

    @model_validator(mode="after")
    def _content_from_parts(self) -> Message:
        if self.parts is not None and self.content is None:
            self.content = parts_text(self.parts)
        return self

    @classmethod
    def system(cls, text: str) -> Message:
        return cls(role=Role.SYSTEM, content=text)

    @classmethod
    def user(cls, *content: str | TextPart | ImagePart | DocumentPart | OpaquePart) -> Message:
        """A user message: ``Message.user("hi")``, or text and parts in order:
        ``Message.user("What is this?", ImagePart.from_path("cat.png"))``."""
        if len(content) == 1 and isinstance(content[0], str):
            return cls(role=Role.USER, content=content[0])
        parts = as_parts(content)
        return cls(role=Role.USER, content=parts_text(parts), parts=parts)

    @classmethod
    def tool_result(cls, call: ToolCall, content: str, *, is_error: bool = False) -> Message:
        return cls(
            role=Role.TOOL,
            content=content,
            tool_call_id=call.id,
            tool_name=call.name,
            is_error=is_error or None,
        )


class Usage(FormatModel):
    input_tokens: int = 0
    """Every input token of the requests, cached or not (cache reads and writes included)."""
    output_tokens: int = 0
    requests: int = 0
    cache_read_tokens: int | None = None
    """Of ``input_tokens``, those read from the provider's prompt cache (None: never reported)."""
    cache_write_tokens: int | None = None
    """Of ``input_tokens``, those written to the provider's prompt cache (None: never reported)."""

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            requests=self.requests + other.requests,
            cache_read_tokens=_combined(self.cache_read_tokens, other.cache_read_tokens, 1),
            cache_write_tokens=_combined(self.cache_write_tokens, other.cache_write_tokens, 1),
        )

    def __sub__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens - other.input_tokens,
            output_tokens=self.output_tokens - other.output_tokens,
            requests=self.requests - other.requests,
            cache_read_tokens=_combined(self.cache_read_tokens, other.cache_read_tokens, -1),
            cache_write_tokens=_combined(self.cache_write_tokens, other.cache_write_tokens, -1),
        )


def _combined(a: int | None, b: int | None, sign: int) -> int | None:
    # Optional counts stay None (absent in JSON) until a provider reports one.
    return None if a is None and b is None else (a or 0) + sign * (b or 0)


class Decision(FormatModel):
    """A decision on a gated tool call, as recorded when it was applied: a person's, or the
    approval policy's (a rule, a grant, the auto mode's evaluator; ``source`` says which, and
    ``reason``, ``rule`` / ``grantId`` / ``criteria``, ``policyVersion`` and ``evaluation`` why).

    ``decidedBy`` is who decided, as the caller named them (the CLI's ``--by``,
    default the OS user; ``AgentClient.approve(decided_by=…)``); absent when
    nobody was named (the Python API without ``decided_by``, an approval
    timeout). ``decidedAt`` is the time the decision was recorded (the
    recording activity's clock). ``arguments`` are the arguments the approved
    call ran with instead of the model's; absent when it ran with the model's
    (the assistant turn always keeps the model's). ``position`` is where the
    call's result is in the transcript (call ids repeat; positions do not).
    """

    model_config = ConfigDict(frozen=True)
    """Recorded once, never changed in place (a changed decision is a copy): stores keep what
    they wrote of each one."""

    approval_id: str
    tool_call_id: str
    tool_name: str
    approved: bool
    decided_at: datetime
    decided_by: str | None = None
    note: str | None = None
    arguments: dict[str, Any] | None = None
    position: int | None = None
    source: DecisionSource | None = None
    """Who or what decided (absent in records older than approval policies: a person, or a
    timeout when ``decidedBy`` is absent and the note says the approval timed out)."""
    reason: str | None = None
    """Why, in words: the rule and what matched, the grant, the evaluator's reasoning."""
    rule: str | None = None
    """The deny or allow rule that decided (``source`` ``deny-rule`` / ``allow-rule``)."""
    grant_id: str | None = None
    """The grant that approved the call (``source`` ``grant``)."""
    criteria: str | None = None
    """The auto mode's criteria set the evaluator judged by (also when it left the call to a person)."""
    policy_version: int | None = None
    """The version of the effective policy the call was decided under (the session policy's when
    the session has one, else the agent's); absent: no policy was set."""
    agent_policy_version: int | None = None
    session_policy_version: int | None = None
    arguments_digest: str | None = None
    """``sha256:`` of the arguments decided on (the model's, as shown), the binding of a grant or rule."""
    evaluation: Evaluation | None = None
    """The auto mode's evaluator on this call: its verdict, and why the call went to a person when it did."""
    grant_created: str | None = None
    """The id of the grant this decision made ("approve and stop asking")."""


class Evaluation(FormatModel):
    """What the auto mode's evaluator said about one gated call, and what it cost."""

    evaluator: str
    """``python:module:function`` or ``model:<provider>:<model>``."""
    criteria: str
    verdict: Literal["approve", "deny", "escalate"] | None = None
    """None: it gave none (an error, a timeout, cancelled because a person decided first)."""
    confidence: float | None = None
    reasoning: str | None = None
    min_confidence: float | None = None
    decided: bool = False
    """Its verdict decided the call (approve or deny at or above ``minConfidence``, before a person)."""
    escalated: str | None = None
    """Why the call went to a person instead: ``escalate``, ``low confidence``, ``error``,
    ``timeout``, ``person decided first`` …, with the detail."""
    error: str | None = None
    usage: Usage | None = None
    """A model evaluator's token usage."""
    cost_usd: float | None = None
    """What the model evaluator's call cost, when its model's price is known."""
    latency_ms: float | None = None


DecisionSource = Literal["person", "deny-rule", "allow-rule", "approve-all", "grant", "evaluator", "timeout"]
"""Who or what decided a gated call."""


class SubagentApproval(FormatModel):
    """A sub-agent's pause for approval, as the checkpoint of the run that called it records
    it (``subagentApproval``): the sub-agent's session, its paused call (with its arguments),
    the calls after it, and its fingerprint; ``subagentApproval`` again when the sub-agent
    itself waits on one of its own sub-agents (the innermost holds the call to decide)."""

    session_id: str
    agent: str | None = None
    approval_id: str
    tool_call: ToolCall | None = None
    remaining_tool_calls: list[ToolCall] | None = None
    fingerprint: Fingerprint | None = None
    subagent_approval: SubagentApproval | None = None

    def innermost(self) -> SubagentApproval:
        """The snapshot of the session whose own call waits for the decision."""
        return self.subagent_approval.innermost() if self.subagent_approval is not None else self


class BuildRecord(FormatModel):
    """The Temporal Worker Deployment Version a session's runs are on (``build``): written
    when a run begins on a versioned worker and by ``migrate``. While the session is
    unfinished, its next run starts pinned to it, unless ``versioning`` is ``auto-upgrade``."""

    deployment_name: str
    build_id: str
    versioning: Literal["pinned", "auto-upgrade"] = "pinned"
    """The agent's ``Agent(versioning=…)`` on that build."""

    @property
    def canonical(self) -> str:
        """``<deployment>.<build id>``, as Temporal writes a version."""
        return f"{self.deployment_name}.{self.build_id}"


class Migration(FormatModel):
    """One ``migrate`` of the session to another build: when, from where, to where, and
    how the target build's agent differs (``drift``: a ``checkpoint.fingerprint.AgentDrift``
    as JSON; absent when the agents are the same)."""

    at: datetime
    from_build: str | None = None
    """``<deployment>.<build id>``; None: the session recorded no build (an unversioned worker)."""
    to_build: str
    drift: dict[str, Any] | None = None


class CheckpointFields(FormatModel):
    """What a checkpoint records besides its messages."""

    format_version: int = FORMAT_VERSION
    session_id: str

    @model_validator(mode="before")
    @classmethod
    def _first_release_wrote_no_version(cls, data: Any) -> Any:
        # A stored record (camelCase keys) without ``formatVersion`` is from format 1;
        # records built in Python get the current version by default.
        if isinstance(data, dict) and "sessionId" in data and not {"formatVersion", "format_version"} & data.keys():
            return {**data, "formatVersion": 1}
        return data

    session_uid: str | None = None
    """Random, given when the session is created (a fork gets its own): part of every
    tool call's idempotency key, so keys never repeat across sessions, even a deleted
    and re-created id. Older records have none (their keys derive from the id)."""
    agent: str | None = None
    step_index: int = 0
    usage: Usage = Field(default_factory=Usage)
    business_state: Any = None
    # Records written before ``status`` existed are unfinished runs.
    status: CheckpointStatus = CheckpointStatus.IN_PROGRESS
    approval_id: str | None = None
    remaining_tool_calls: list[ToolCall] | None = None
    pending_input: list[Message] | None = None
    """Input to append once the last turn's pending tool calls have results."""
    fingerprint: Fingerprint | None = None
    finish_reason: FinishReason | None = None
    run_config: RunConfig | None = None
    run_start_index: int | None = None
    """Position of the current run's first input message."""
    run_start_step: int | None = None
    """``stepIndex`` when the current run started (its ``max_steps`` budget counts from here)."""
    run_start_usage: Usage | None = None
    """``usage`` when the current run started: a resumed run's usage counts from here."""
    output: Any = None
    """The run's final answer as JSON, validated against the agent's ``output_type`` (set when
    a run of an agent with one finishes; cleared when the next run begins)."""
    last_error: RunError | None = None
    """Set when a run fails (a provider's refusal, a store outage that outlasted its retries);
    cleared when the next run begins. The session stays resumable."""
    decisions: list[Decision] | None = None
    """Every approval decision of the session, in the order they were recorded (absent
    in records written before decisions were recorded, and in sessions without any)."""
    parent_session_id: str | None = None
    """Set on a sub-agent's session: the session whose tool call runs it."""
    parent_tool_call_id: str | None = None
    """Set on a sub-agent's session: the parent's tool call (the parent's result for it
    carries ``subagentSessionId``)."""
    parent_session_uid: str | None = None
    """The parent's ``sessionUid`` when the sub-agent's session was created (a parent deleted
    and created again under its id is another session: it does not reuse this one)."""
    subagent_approval: SubagentApproval | None = None
    """Set while the run waits on a sub-agent's approval (``approvalId`` is the sub-agent's)."""
    context_summary: int | None = None
    """Where the transcript's newest context summary is (a ``SummarizeOlder`` policy's)."""
    instructions_at: int | None = None
    """Where the transcript's newest instructions change is (the instructions every request
    sends); None: the session is sent its first instructions (its leading system messages)."""
    build: BuildRecord | None = None
    """The Worker Deployment Version the session's runs are on (absent: unversioned workers)."""
    migrations: list[Migration] | None = None
    """Each ``migrate`` of the session to another build, oldest first."""
    updated_at: datetime | None = None


class Checkpoint(CheckpointFields):
    """A run's whole transcript plus its position and status."""

    messages: list[Message] = Field(default_factory=list)

    def header(self) -> CheckpointHeader:
        return CheckpointHeader(**self.model_dump(exclude={"messages"}), message_count=len(self.messages))


class CheckpointHeader(CheckpointFields):
    """A checkpoint without its messages, plus how many messages it has.

    This is what stores keep per save; the messages themselves are shared
    rows, so a history of saves grows with the transcript, not with its square.
    """

    message_count: int = 0

    def finished(self, reason: FinishReason, **changes: Any) -> CheckpointHeader:
        """This header saved as the end of a run: the one place a run becomes ``finished``."""
        return self.model_copy(
            update={"status": CheckpointStatus.FINISHED, "finish_reason": reason, "updated_at": None, **changes}
        )

    def with_messages(self, messages: list[Message]) -> Checkpoint:
        data = self.model_dump(exclude={"message_count"})
        return Checkpoint(**data, messages=messages)


class HistoryEntry(FormatModel):
    step: int
    saved_at: datetime
    status: CheckpointStatus
    checkpoint: Checkpoint


class SessionSummary(FormatModel):
    session_id: str
    agent: str | None = None
    status: CheckpointStatus
    step_index: int
    message_count: int
    approval_id: str | None = None
    updated_at: datetime | None = None
    last_error: RunError | None = None
