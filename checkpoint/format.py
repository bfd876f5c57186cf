"""The checkpoint format: provider-neutral messages and the checkpoint record.

JSON keys are camelCase (pydantic aliases); Python attributes are snake_case.
Persisted models are durable contracts: fields are only ever added, optional,
never renamed. ``formatVersion`` tells readers which version wrote a record.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

FORMAT_VERSION = 1


class FormatModel(BaseModel):
    """Base of every persisted model: camelCase on the wire, snake_case in Python."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, exclude_none=True)

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


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


class ToolCall(FormatModel):
    """One tool call of an assistant turn; ``id`` is the model's id for it."""

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class Message(FormatModel):
    role: Role
    content: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    tool_name: str | None = None
    is_error: bool | None = None

    @classmethod
    def system(cls, text: str) -> Message:
        return cls(role=Role.SYSTEM, content=text)

    @classmethod
    def user(cls, text: str) -> Message:
        return cls(role=Role.USER, content=text)

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
    output_tokens: int = 0
    requests: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            requests=self.requests + other.requests,
        )

    def __sub__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens - other.input_tokens,
            output_tokens=self.output_tokens - other.output_tokens,
            requests=self.requests - other.requests,
        )


class ToolFingerprint(FormatModel):
    name: str
    schema_hash: str


class Fingerprint(FormatModel):
    """What identifies an agent's behaviour: model, tools, instructions."""

    model: str
    tools: list[ToolFingerprint] = Field(default_factory=list)
    instructions_hash: str
    digest: str


class ToolSpec(FormatModel):
    """A tool as the model and the workflow see it (no code)."""

    name: str
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=dict)
    needs_approval: bool = False
    approval_conditional: bool = False
    """``needs_approval`` is a function of the arguments, decided by the worker."""
    approval_timeout_seconds: float | None = None
    safe_to_retry: bool = False
    timeout_seconds: float = 300.0
    heartbeat_seconds: float | None = None
    max_attempts: int = 1


class RunConfig(FormatModel):
    """The agent definition a run uses, resolved once at run start."""

    agent: str
    model: str
    model_override: str | None = None
    """The model chosen for this run (``send(model=…)``), kept by every resume; None: the agent's."""
    instructions: str = ""
    tools: list[ToolSpec] = Field(default_factory=list)
    max_steps: int = 20
    tool_concurrency: int = 1
    max_tokens: int = 4096
    model_timeout_seconds: float = 300.0
    model_heartbeat_seconds: float = 20.0
    local_activities: bool = False
    """Run model turns, tools and store writes as local activities (see the README)."""


class Decision(FormatModel):
    """A human's decision on a paused tool call, as recorded when it was applied.

    ``decidedBy`` is who decided, as the caller named them (the CLI's ``--by``,
    default the OS user; ``AgentClient.approve(decided_by=…)``); absent when
    nobody was named (the Python API without ``decided_by``, an approval
    timeout). ``decidedAt`` is the time the decision was recorded (the
    recording activity's clock). ``arguments`` are the arguments the approved
    call ran with instead of the model's; absent when it ran with the model's
    (the assistant turn always keeps the model's). ``position`` is where the
    call's result is in the transcript (call ids repeat; positions do not).
    """

    approval_id: str
    tool_call_id: str
    tool_name: str
    approved: bool
    decided_at: datetime
    decided_by: str | None = None
    note: str | None = None
    arguments: dict[str, Any] | None = None
    position: int | None = None


class CheckpointFields(FormatModel):
    """What a checkpoint records besides its messages."""

    format_version: int = FORMAT_VERSION
    session_id: str
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
    decisions: list[Decision] | None = None
    """Every approval decision of the session, in the order they were recorded (absent
    in records written before decisions were recorded, and in sessions without any)."""
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
