"""A run's events: what a caller streaming it (or watching it later) reads, in order.

Stored by the worker in the session's event log in the store (never in Temporal
history), each at an ``offset`` that counts from 1 in its session. The JSON is
camelCase (pydantic aliases) like the checkpoint format; every event has a
``type``. ``durable_agents.events`` (the public module) re-exports these.

Text deltas and the retried step
--------------------------------
``TextDelta`` events carry the model's text as the provider streams it,
tagged with the model-call ``attempt`` of their step. When a step's model call
is made again (its worker died mid-stream, the provider failed, the call timed
out), the new attempt begins with ``StepRetried``, whose ``discarded_attempts``
are void: their deltas never became a stored turn. ``TurnStored`` ends a step's
model call with the turn as stored. For every step:

    "".join(d.text for d in deltas_of_the_step if d.attempt not in discarded) == turn_stored.text

(:func:`step_text` computes the left side.) A stored turn is never generated
again: a retried call that finds its turn stored returns it, and the stream
then carries ``TurnStored`` (and, if the deltas before it do not add up to the
stored text, a ``StepRetried`` voiding them and the stored text as one delta).

Sub-agents (the contract a sub-agent's parent run keeps)
--------------------------------------------------------
A sub-agent call is a tool call of the parent: ``ToolCallStarted`` and
``ToolCallFinished`` (its result, ``{"result", "subagentSessionId"}``) frame it
in the parent's log. A parent run that starts a sub-agent's run writes
``SubAgentStarted`` (the child's ``child_session_id``, and ``after``: the
child's log offset when it was written) to its own log before the child's run
starts (``start_subagent``; keyed by the call's result position and the
parent's Temporal run, so a retried or re-run start writes it once per parent
run), and starts the child's run streaming too when the parent streams. A
reader of the parent's stream that sees ``SubAgentStarted`` follows the
child's log from ``after`` until the child's first outcome there
(``RunFinished``, ``RunPaused`` or ``RunFailed``) and yields each child event
wrapped in ``SubAgentEvent`` (``child_session_id``, ``tool_call_id``,
``event``); a grandchild's events arrive wrapped twice. ``SubAgentEvent`` is
never stored: it is how a reader nests one log in another.

A child that pauses for approval pauses its parent: after the child's own
``ApprovalRequested`` and ``RunPaused``, the parent writes its
``ApprovalRequested`` (with ``subagent_session_id``: the session whose call
waits, the innermost for a grandchild's) and its ``RunPaused``. When the
parent relays the decision it writes ``ApprovalDecided`` (with
``subagent_session_id``) and ``SubAgentStarted(resumed=True)`` whose ``after``
is the child's ``RunPaused``: a reader follows the child from there to its
next outcome.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter

from durable_agents.checkpoint._format_model import FormatModel
from durable_agents.checkpoint.fingerprint import AgentDrift
from durable_agents.checkpoint.format import DecisionSource, Evaluation, FinishReason, Message, ToolCall, Usage

__all__ = [
    "OUTCOME_TYPES",
    "ApprovalDecided",
    "ApprovalRequested",
    "Drift",
    "Event",
    "EventBase",
    "ModelTurnStarted",
    "RunFailed",
    "RunFinished",
    "RunOutcome",
    "RunPaused",
    "RunStarted",
    "StepRetried",
    "StoredEvent",
    "SubAgentEvent",
    "SubAgentStarted",
    "TextDelta",
    "ToolCallFinished",
    "ToolCallStarted",
    "TurnStored",
    "parse_event",
    "step_text",
    "turn_stored_events",
]


class EventBase(FormatModel):
    type: str
    session_id: str
    """The session whose log holds the event (a sub-agent's own session for its events)."""
    offset: int | None = Field(default=None, exclude=True)
    """Its place in the session's log, from 1 (set when read; None for an event not stored)."""
    at: datetime | None = None
    """When it was written (the writer's clock)."""


class RunStarted(EventBase):
    type: Literal["run-started"] = "run-started"
    agent: str
    model: str
    step: int
    """The session's step count when the run began (its first model turn is ``step + 1``)."""
    run_id: str | None = None
    """The Temporal run id of the run's first execution."""


class Drift(EventBase):
    """The run resumed with an agent that changed since the checkpoint (``on_agent_drift="warn"``)."""

    type: Literal["drift"] = "drift"
    drift: AgentDrift
    description: str


class ModelTurnStarted(EventBase):
    type: Literal["model-turn-started"] = "model-turn-started"
    step: int
    attempt: int = 1


class TextDelta(EventBase):
    """The model's text as the provider streamed it (consecutive pieces may arrive merged)."""

    type: Literal["text-delta"] = "text-delta"
    step: int
    attempt: int = 1
    text: str


class StepRetried(EventBase):
    """The step's model call is made again as ``attempt``: the deltas of ``discarded_attempts`` are void."""

    type: Literal["step-retried"] = "step-retried"
    step: int
    attempt: int
    discarded_attempts: list[int] = Field(default_factory=list)
    reason: str = ""


class TurnStored(EventBase):
    """The step's assistant turn is in the checkpoint: its text, its tool calls, what it cost."""

    type: Literal["turn-stored"] = "turn-stored"
    step: int
    attempt: int = 1
    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    """This turn's usage."""
    total_usage: Usage = Field(default_factory=Usage)
    """The session's usage after it."""
    replayed: bool = False
    """The turn was already stored by an earlier attempt: the provider was not called again."""


class ToolCallStarted(EventBase):
    type: Literal["tool-call-started"] = "tool-call-started"
    step: int
    tool_call_id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    position: int
    """Where the call's result goes in the transcript (call ids repeat; positions do not)."""


class ToolCallFinished(EventBase):
    type: Literal["tool-call-finished"] = "tool-call-finished"
    step: int
    tool_call_id: str
    name: str
    position: int
    result: str
    """The result as recorded (JSON text): the tool's output, or ``{error, …}``."""
    is_error: bool = False
    kind: str = "result"
    """``result``, ``error``, ``validation-error``, ``tool-durability-error``, ``recorded``, …"""


class ApprovalRequested(EventBase):
    type: Literal["approval-requested"] = "approval-requested"
    approval_id: str
    tool_call_id: str
    tool_name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    remaining_tool_calls: list[ToolCall] = Field(default_factory=list)
    subagent_session_id: str | None = None
    """Set when the call that waits is a sub-agent's (relayed): that sub-agent's session."""


class ApprovalDecided(EventBase):
    type: Literal["approval-decided"] = "approval-decided"
    approval_id: str
    tool_call_id: str
    tool_name: str
    approved: bool
    note: str | None = None
    decided_by: str | None = None
    subagent_session_id: str | None = None
    """Set when the decided call is a sub-agent's (the decision was relayed to it): its session."""
    source: DecisionSource | None = None
    """Who or what decided: ``person``, ``deny-rule``, ``allow-rule``, ``approve-all``, ``grant``,
    ``evaluator``, ``timeout`` (absent in events older than approval policies: a person)."""
    reason: str | None = None
    rule: str | None = None
    grant_id: str | None = None
    criteria: str | None = None
    policy_version: int | None = None
    evaluation: Evaluation | None = None
    grant_created: str | None = None
    """The grant the decision made, if it made one."""


class SubAgentStarted(EventBase):
    """A sub-agent's run began for one of this run's tool calls (see the module docstring)."""

    type: Literal["subagent-started"] = "subagent-started"
    child_session_id: str
    tool_call_id: str
    agent: str = ""
    position: int | None = None
    after: int = 0
    """The child's log offset when this was written: its events for this call follow it."""
    resumed: bool = False
    """The child goes on after a decision this run relayed (``after`` is the child's ``RunPaused``)."""


class RunOutcome(FormatModel):
    """What the run's workflow returned (its ``RunSummary``); the reader makes a ``RunResult`` of it."""

    finish_reason: FinishReason
    steps: int
    usage: Usage
    tool_calls: int
    message_count: int
    run_start_index: int
    approval_id: str | None = None
    drift: AgentDrift | None = None
    detail: str | None = None


class RunFinished(EventBase):
    """The run ended: ``stop``, ``max-steps``, ``usage-limit`` or ``aborted``."""

    type: Literal["run-finished"] = "run-finished"
    outcome: RunOutcome
    run_id: str | None = None
    """The Temporal run (execution) that ended."""
    result: Any = None
    """The ``RunResult`` (what ``send()`` returns), made by the reader from ``outcome`` and the store."""


class RunPaused(EventBase):
    """The run waits for a human's decision on ``outcome.approval_id``."""

    type: Literal["run-paused"] = "run-paused"
    outcome: RunOutcome
    result: Any = None
    """The ``RunResult`` (``finish_reason == "awaiting-approval"``), made by the reader."""


class RunFailed(EventBase):
    """The run failed; its checkpoint stays resumable. ``error_type`` is the failure's type."""

    type: Literal["run-failed"] = "run-failed"
    message: str
    error_type: str | None = None
    step: int | None = None
    run_id: str | None = None
    """The Temporal run (execution) that failed."""


class SubAgentEvent(EventBase):
    """An event of a sub-agent's run, as a reader of the parent's stream yields it (never stored)."""

    type: Literal["subagent-event"] = "subagent-event"
    child_session_id: str
    tool_call_id: str = ""
    event: Event


Event = Annotated[
    RunStarted
    | Drift
    | ModelTurnStarted
    | TextDelta
    | StepRetried
    | TurnStored
    | ToolCallStarted
    | ToolCallFinished
    | ApprovalRequested
    | ApprovalDecided
    | SubAgentStarted
    | SubAgentEvent
    | RunFinished
    | RunPaused
    | RunFailed,
    Field(discriminator="type"),
]
SubAgentEvent.model_rebuild()

OUTCOME_TYPES = frozenset({"run-finished", "run-paused", "run-failed"})
"""The events that end a reader's wait: the run's next pause, or its end."""

_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)


class StoredEvent(FormatModel):
    """One row of a session's event log as a store returns it: ``body`` is the event's JSON."""

    offset: int
    body: str
    key: str | None = None

    def event(self) -> Event:
        return parse_event(self.body, self.offset)


def parse_event(body: str | bytes | dict[str, Any], offset: int | None = None) -> Event:
    """An event from its JSON (a type this version does not know raises ``ValueError``)."""
    event = _ADAPTER.validate_json(body) if isinstance(body, str | bytes) else _ADAPTER.validate_python(body)
    event.offset = offset
    return event


def step_text(events: Iterable[EventBase], step: int) -> str:
    """The text the deltas of ``step`` add up to, without those of discarded attempts."""
    seen = list(events)
    void = {a for e in seen if isinstance(e, StepRetried) and e.step == step for a in e.discarded_attempts}
    return "".join(e.text for e in seen if isinstance(e, TextDelta) and e.step == step and e.attempt not in void)


def last_attempt(events: Iterable[EventBase]) -> int:
    """The highest attempt that streamed deltas (or was announced) among a step's events; 0: none."""
    return max((e.attempt for e in events if isinstance(e, TextDelta | StepRetried)), default=0)


def turn_stored_events(
    seen: Sequence[EventBase],
    turn: Message,
    *,
    session_id: str,
    step: int,
    attempt: int,
    sent: Sequence[str],
    lost: bool,
    usage: Usage,
    total: Usage,
    replayed: bool,
    at: datetime,
) -> list[tuple[str | None, EventBase]]:
    """What a model turn's stream says once its turn is stored, each event with its key.

    ``seen`` are the step's events already in the log; ``sent`` the deltas this attempt
    (``attempt``) wrote, ``lost`` whether one of its delta writes failed. ``TurnStored`` (keyed
    ``turn:<step>``: written once) ends it. When the step's deltas would not add up to the
    stored text (an ``after_model`` hook rewrote it, a delta was lost, another attempt voided
    this one's, or a replayed turn's deltas are not all in the log), a ``StepRetried`` voiding
    every attempt so far and the stored text as one delta come first."""
    text = turn.content or ""
    if replayed:  # the attempt that stored the turn streamed its deltas before the write
        matches = step_text(seen, step) == text
        if matches:
            attempt = max(last_attempt(seen), 1)
    else:
        void = {a for e in seen if isinstance(e, StepRetried) for a in e.discarded_attempts}
        matches = attempt not in void and not lost and "".join(sent) == text
    events: list[tuple[str | None, EventBase]] = []
    if not matches:
        if last_attempt(seen) or sent or lost:
            attempt = max(last_attempt(seen), attempt) + 1
            reason = "the stored turn differs from what streamed: its text follows"
            void_all = list(range(1, attempt))
            retried = StepRetried(
                session_id=session_id, step=step, attempt=attempt, discarded_attempts=void_all, reason=reason, at=at
            )
            events.append((None, retried))
        if text:
            events.append((None, TextDelta(session_id=session_id, step=step, attempt=attempt, text=text, at=at)))
    stored = TurnStored(
        session_id=session_id,
        step=step,
        attempt=attempt,
        text=text,
        tool_calls=list(turn.tool_calls or []),
        usage=usage,
        total_usage=total,
        replayed=replayed,
        at=at,
    )
    events.append((f"turn:{step}", stored))
    return events
