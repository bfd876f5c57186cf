"""Inputs and outputs of the activities: one model in, one model out.

These are durable contracts recorded in workflow history: add optional
fields, never rename. None of them carries the transcript: activities read it
from the store by reference (session id + message count).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Literal

from pydantic import AwareDatetime, Field, SerializerFunctionWrapHandler, model_serializer
from pydantic_core import PydanticUndefined

from durable_agents.checkpoint.approval_grants import GrantKind
from durable_agents.checkpoint.approval_policy import ArgumentCondition, PolicyModel, check_conditions
from durable_agents.checkpoint.errors import DecisionTooLargeError
from durable_agents.checkpoint.fingerprint import AgentDrift
from durable_agents.checkpoint.format import (
    CheckpointStatus,
    DecisionSource,
    Evaluation,
    FinishReason,
    FormatModel,
    Message,
    ModelSettings,
    RunConfig,
    RunError,
    ToolCall,
    ToolSpec,
    Usage,
    UsageLimits,
)


class StepPayload(FormatModel):
    """The input or the result of an activity every step makes, as Temporal's history keeps
    it (a regular activity's schedule and completion, a local one's marker): fields at their
    default value are left out, and read back as that default (docs/design.md §2: what a step
    adds to history stays small). Older histories, which spelled every field, read the same."""

    @model_serializer(mode="wrap")
    def _without_defaults(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if not isinstance(data, dict):
            return data
        for name, field in type(self).model_fields.items():
            if field.default is not PydanticUndefined:
                default = field.default
            elif field.default_factory is not None:
                default = field.default_factory()  # type: ignore[call-arg]
            else:
                continue
            if getattr(self, name) == default:
                data.pop(field.alias or name, None)
                data.pop(name, None)
        usage = data.get("usage")
        if isinstance(usage, dict):  # a total usage's unset counters (cache tokens of a provider without caching)
            data["usage"] = {k: v for k, v in usage.items() if v is not None}
        return data


BEGIN_RUN = "durable_agents.begin_run"
MODEL_TURN = "durable_agents.model_turn"
EXECUTE_TOOL = "durable_agents.execute_tool"
FINISH_RUN = "durable_agents.finish_run"
APPEND_INPUT = "durable_agents.append_input"
ABORT_RUN = "durable_agents.abort_run"
CHECK_APPROVALS = "durable_agents.check_approvals"
PAUSE_FOR_APPROVAL = "durable_agents.pause_for_approval"
RECORD_DECISION = "durable_agents.record_decision"
RECORD_FAILURE = "durable_agents.record_failure"
RECORD_EVENTS = "durable_agents.record_events"


class RunState(FormatModel):
    """Where a run stands; small and independent of transcript length."""

    message_count: int
    step_index: int
    usage: Usage = Field(default_factory=Usage)
    run_start_step: int = 0
    run_start_index: int = 0
    run_start_usage: Usage = Field(default_factory=Usage)
    tool_calls: int = 0
    pending_tool_calls: list[ToolCall] = Field(default_factory=list)
    """Calls of the last assistant turn that have no result yet, in call order: references
    (id and name) when ``arguments_in_store``; their arguments stay in the store."""
    turn_position: int | None = None
    """Where the assistant turn of ``pending_tool_calls`` is in the transcript."""
    arguments_in_store: bool = False
    """False in histories recorded before tool calls travelled as references."""
    output_retries: int = 0
    """Invalid final answers sent back in this run."""
    recorded_positions: list[int] = Field(default_factory=list)
    """Pending calls whose result is already recorded (e.g. by a fork's patch): they are
    neither run nor gated again; their result is appended in call order."""
    pending_arguments: list[dict[str, Any]] = Field(default_factory=list)
    """The pending calls' arguments as queries show them (bounded, ``bounded``), in call
    order; never sent to an activity. Empty in histories recorded before it."""

    def arguments_of(self, index: int) -> dict[str, Any]:
        """What to show of pending call ``index``'s arguments."""
        if index < len(self.pending_arguments):
            return self.pending_arguments[index]
        return self.pending_tool_calls[index].arguments  # inline in older histories; {} as a reference

    def shown_calls(self, start: int = 0) -> list[ToolCall]:
        """The pending calls from ``start`` on, with the arguments a query shows."""
        calls = self.pending_tool_calls
        return [calls[i].model_copy(update={"arguments": self.arguments_of(i)}) for i in range(start, len(calls))]

    def view(self) -> RunState:
        """The state as the ``run_state`` query shows it: pending calls with their arguments."""
        return self.model_copy(update={"pending_tool_calls": self.shown_calls()})


def call_ref(call: ToolCall) -> ToolCall:
    """A tool call as the workflow sees it: id and name. Its arguments stay in the
    store (docs/design.md §2: no payload grows with what the model wrote)."""
    return ToolCall(id=call.id, name=call.name, arguments={})


VIEW_BYTES = 4096
"""The bound of each value a person or an outside client sees through Temporal (docs/design.md §2's
exception): a pending call's arguments, the run's final text, its structured output."""
TRUNCATED = "$truncated"
"""The key of the marker that stands for a JSON value over ``VIEW_BYTES``:
``{"$truncated": {"bytes": <its JSON's size>, "preview": <its JSON's first VIEW_BYTES characters>}}``."""


def bounded(value: Any, limit: int = VIEW_BYTES) -> Any:
    """``value`` as is when its JSON is at most ``limit`` bytes; otherwise the ``$truncated``
    marker, with the start of its JSON as a preview."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    size = len(text.encode())
    if size <= limit:
        return value
    return {TRUNCATED: {"bytes": size, "preview": _cut(text, limit)}}


def bounded_text(text: str | None, limit: int = VIEW_BYTES) -> tuple[str | None, bool]:
    """``text`` cut to at most ``limit`` bytes (UTF-8), and whether it was cut."""
    if text is None or len(text.encode()) <= limit:
        return text, False
    return _cut(text, limit), True


def _cut(text: str, limit: int) -> str:
    return text.encode()[:limit].decode(errors="ignore")


def call_views(calls: list[ToolCall]) -> list[dict[str, Any]]:
    """What a query shows of each call's arguments (bounded): they travel beside the references."""
    return [bounded(call.arguments) for call in calls]


class RunRequest(FormatModel):
    """What a run is asked to do: its session and agent, its input, this run's overrides.

    One type for the request wherever it travels: the client sends it as the workflow's
    input (``AgentRunInput`` adds what only the workflow uses), and the workflow hands
    the same fields to ``begin_run`` (``BeginRunInput`` adds what only that activity uses)."""

    session_id: str
    agent: str
    input: list[Message] = Field(default_factory=list)
    """Input inline: only from a store that keeps no run input (and older histories)."""
    input_token: str | None = None
    """The run's input, written to the store by the client before it started the run
    (``begin_run`` reads it under this token, then drops it)."""
    store_id: str | None = None
    """The client's store: a worker on another store refuses the run, naming both."""
    store_location: str | None = None
    model: str | None = None
    """Override of the agent's model for this run (e.g. from the CLI)."""
    model_settings: ModelSettings | None = None
    """This run's model settings (replacing the agent's); a resume keeps the recorded ones."""
    usage_limits: UsageLimits | None = None
    stream: bool | None = None
    """Write the run's events (text deltas included) to the store's event log, for
    ``AgentClient.stream`` / ``watch``; None or False: the run does not stream."""

    def request(self) -> dict[str, Any]:
        """This request's own fields (not a subclass's), to pass on as another request."""
        return {name: getattr(self, name) for name in RunRequest.model_fields}


class BeginRunInput(RunRequest):
    resolve_approval_id: str | None = None
    """Resume a session paused on this approval (its run had closed before the decision)."""
    parent_session_id: str | None = None
    """Set for a sub-agent's run: a new session records its parent (and the parent's call)."""
    parent_tool_call_id: str | None = None
    parent_session_uid: str | None = None
    search_attributes: list[str] = Field(default_factory=list)
    """Search attributes the run would set, when its starter did not say whether the namespace
    has them: the activity tells (``BeginRunOutput.search_attributes``)."""


class BeginRunOutput(FormatModel):
    config: RunConfig
    state: RunState
    queued_input: list[Message] = Field(default_factory=list)
    """Input to append once the pending tool calls have their results."""
    drift: AgentDrift | None = None
    """How the resuming agent differs from the one the checkpoint was saved with."""
    search_attributes: bool | None = None
    """Whether the namespace has every attribute the input's ``search_attributes`` names
    (None: not asked)."""


class ModelTurnInput(StepPayload):
    session_id: str
    position: int
    """Where the assistant turn goes: the number of messages before it."""
    step: int
    """The session's step number this turn becomes."""
    finish_if_no_tools: bool = True
    output_retries_used: int = 0
    """Invalid final answers already sent back in this run (structured output)."""
    tools_seconds: float = 0.0
    """Time the workflow added to this attempt for the turn's calls: a local step runs them in its
    model activity (:func:`~durable_agents.activities.tools.run_in_turn`). 0: the workflow runs them."""
    decide_gated: bool = False
    """The approval policy decides the turn's gated calls in this activity once the turn is
    stored (:func:`~durable_agents.activities.approval_policy.decide_in_turn`); False in older
    histories: each gated call is decided in its own local activity."""
    asked_at: AwareDatetime | None = None
    """Temporal's time when the workflow asked for the turn (``workflow.now()``), set when it
    decides gated calls: a grant's expiry is judged at the latest of it, Temporal's start of
    the attempt and the worker's clock (``activities.deps.policy_now``)."""


class ModelTurnOutput(StepPayload):
    tool_calls: list[ToolCall] = Field(default_factory=list)
    """The turn's calls, as references when ``arguments_in_store``."""
    arguments_in_store: bool = False
    usage: Usage
    """The session's total usage after this turn."""
    replayed: bool = False
    """True when the turn was already stored and the provider was not called."""
    appended: int = 1
    """Messages stored: the turn, plus what structured output stored after it."""
    output_retry: bool = False
    """The turn's answer failed the agent's ``output_type``; the error was sent back."""
    turn_position: int | None = None
    """Where the turn was stored when it is not at the input's ``position``: after the context
    summary stored before it (``appended`` counts the summary too). None: at ``position``."""
    tool_call_arguments: list[dict[str, Any]] = Field(default_factory=list)
    """The calls' arguments as queries show them (bounded): ``RunState.pending_arguments``."""
    text: str | None = None
    """A final turn's text (bounded): the run's answer, in its result. None for a turn with calls."""
    text_truncated: bool = False
    output: Any = None
    """A final turn's structured output as JSON (bounded), when the agent has an ``output_type``."""
    tools_recorded_through: int | None = None
    """The turn's calls ran in this activity (a local step): the message count after their results.
    None: the workflow runs them, each as its own activity."""
    policy_approved: dict[int, PolicyVerdict] = Field(default_factory=dict)
    """The gated calls (by their index in the turn) the approval policy approved in this activity, each decision
    recorded: they run as ungated calls do (``decide_gated``)."""


class ExecuteToolInput(StepPayload):
    session_id: str
    agent: str
    step: int
    call: ToolCall
    batch_start: int
    """Position of the batch's first result (right after the assistant turn)."""
    batch: list[str]
    """The turn's call ids in call order; results are recorded as their in-order prefix."""
    safe_to_retry: bool = False
    turn_position: int | None = None
    """Where the call's assistant turn is; with ``arguments_in_store`` the activity reads
    the call's arguments from there (``call`` is a reference)."""
    arguments_in_store: bool = False
    index: int | None = None
    """The call's place in ``batch``: its result goes at ``batch_start + index``. Results are
    keyed by that position, never by the model's id (ids repeat). None in older histories."""

    @property
    def position(self) -> int:
        return self.batch_start + (self.index if self.index is not None else self.batch.index(self.call.id))


class ExecuteToolOutput(StepPayload):
    tool_call_id: str
    is_error: bool = False
    kind: str = "result"
    """``result``, ``error``, ``validation-error``, ``unknown-tool`` or ``tool-durability-error``."""
    recorded_through: int = 0
    """Messages in the checkpoint after recording (the in-order prefix)."""


class RecordEventsInput(FormatModel):
    """Events a streamed run's workflow writes to the session's event log (its outcome)."""

    session_id: str
    events: list[dict[str, Any]]
    """Each an event of ``durable_agents.checkpoint.events`` as JSON (camelCase)."""
    keys: list[str | None] = Field(default_factory=list)
    """One per event: an event whose key the log holds already is not written again."""


class RecordFailureInput(FormatModel):
    session_id: str
    error: RunError


class FinishRunInput(FormatModel):
    session_id: str
    finish_reason: FinishReason
    message_count: int


class AppendInputInput(FormatModel):
    session_id: str
    position: int
    messages: list[Message]


class AppendInputOutput(FormatModel):
    message_count: int


class AbortRunInput(FormatModel):
    session_id: str
    batch_start: int
    batch: list[ToolCall] = Field(default_factory=list)
    """The interrupted turn's unfinished calls: each gets a ``cancelled`` result."""


class AbortRunOutput(FormatModel):
    message_count: int


class DecisionGrant(PolicyModel):
    """ "Approve and stop asking": the grant a person makes with an approval (``grant`` of an
    ``ApprovalDecision``). Only with ``approved: true`` and no edited ``arguments``: a grant
    approves calls as the model makes them. Unknown fields are refused."""

    scope: GrantKind
    """``session``: this agent's calls of the tool in this session; ``agent``: in any session;
    ``tool``: any agent's calls of the tool."""
    expires_in_seconds: float | None = Field(default=None, gt=0)
    """From when the decision is recorded; None: until revoked or used up."""
    max_uses: int | None = Field(default=None, ge=1)
    when: list[ArgumentCondition] = Field(default_factory=list)
    """Argument conditions, as a policy rule's (checked against the tool's input schema)."""
    exact_arguments: bool = False
    """Only calls with exactly the arguments shown (their digest)."""
    note: str | None = Field(default=None, max_length=2000)


class ApprovalDecision(FormatModel):
    """A human's decision on a paused tool call."""

    approval_id: str
    approved: bool
    note: str | None = None
    arguments: dict[str, Any] | None = None
    """Run the approved call with these arguments instead of the model's."""
    decided_by: str | None = None
    """Who decided (recorded with the decision); None: not named. Absent in older histories."""
    grant: DecisionGrant | None = None
    """Also approve the calls like this one to come ("approve and stop asking"); only with
    ``approved: true`` and no edited ``arguments``."""


def grant_problem(decision: ApprovalDecision, spec: ToolSpec | None) -> str | None:
    """Why a decision's ``grant`` cannot be made (None: it can, or there is none): a rejection,
    edited arguments, conditions on arguments the tool's input schema lacks."""
    grant = decision.grant
    if grant is None:
        return None
    if not decision.approved:
        return "a grant comes with an approval: a rejected call makes no grant"
    if decision.arguments is not None:
        return (
            "an approval with edited arguments makes no grant: a grant approves the arguments a call was made "
            "with, never edited ones; approve without edits, or grant by conditions on the arguments"
        )
    if spec is not None and spec.input_schema and grant.when:
        problems = check_conditions(spec.name, grant.when, spec.input_schema)
        if problems:
            return "the grant's conditions do not fit the tool: " + "; ".join(problems)
    return None


def edited_arguments_problem(decision: ApprovalDecision, spec: ToolSpec | None) -> str | None:
    """What is wrong with a decision's edited arguments against the tool's recorded input
    schema (the one the model was given); None when nothing is, or nothing can be checked.
    An invalid edit is refused when it is made, never run as a failing call."""
    if decision.arguments is None or spec is None or not spec.input_schema:
        return None
    import jsonschema  # loaded only when a person edits arguments

    validator = jsonschema.validators.validator_for(spec.input_schema)(spec.input_schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(decision.arguments))
    if error is None:
        return None
    where = ".".join(str(p) for p in error.absolute_path) or "the arguments"
    return f"edited arguments for {spec.name} do not match its input schema: {where}: {error.message}"


MAX_DECISION_BYTES = 256 * 1024
"""The most a decision's edited ``arguments`` (as compact JSON), its ``note`` or its ``decidedBy``
(as UTF-8) may hold, each. Edited arguments cannot go through the store (any Temporal client
may send a decision): a decision crosses Temporal inline, as the ``decide`` update's or the
``approve`` signal's payload, then in the inputs of the activities that record it and run the
call with the edited arguments. Temporal refuses a payload over 2 MB, and a workflow task that
schedules one fails, again and again, with nothing decided; every payload also stays in the
run's history. 256 KiB each, the bound of a run's inline input (``MAX_INLINE_INPUT_BYTES``),
keeps every payload of a decision far under Temporal's limit, with room for the rest of the
payload and an encryption codec's overhead, and is far more than a person edits by hand."""


def decision_too_large(
    arguments: dict[str, Any] | None, note: str | None = None, decided_by: str | None = None
) -> tuple[str, int] | None:
    """The first part of a decision over ``MAX_DECISION_BYTES`` (``"edited arguments"``,
    ``"note"`` or ``"decidedBy"``) and its size in bytes; None when every part fits.
    The client, the CLI, the HTTP API and the run's handlers all check with this."""
    if arguments is not None:
        size = len(json.dumps(arguments, ensure_ascii=False, separators=(",", ":"), default=str).encode())
        if size > MAX_DECISION_BYTES:
            return "edited arguments", size
    for part, text in (("note", note), ("decidedBy", decided_by)):
        if isinstance(text, str) and len(text) * 4 > MAX_DECISION_BYTES:  # cheap: most text is far under
            size = len(text.encode())
            if size > MAX_DECISION_BYTES:
                return part, size
    return None


def check_decision_size(
    session_id: str,
    approval_id: str | None,
    arguments: dict[str, Any] | None,
    note: str | None = None,
    decided_by: str | None = None,
) -> None:
    """Raise ``DecisionTooLargeError`` for a decision with a part over ``MAX_DECISION_BYTES``."""
    found = decision_too_large(arguments, note, decided_by)
    if found is not None:
        raise DecisionTooLargeError(session_id, approval_id, found[0], found[1], MAX_DECISION_BYTES)


class PendingApproval(FormatModel):
    approval_id: str
    session_id: str
    agent: str
    tool_name: str
    tool_call_id: str
    arguments: dict[str, Any]
    requested_at: datetime
    remaining_tool_calls: list[ToolCall] = Field(default_factory=list)
    timeout_at: datetime | None = None
    subagent_session_id: str | None = None
    """Set when the call waits in a sub-agent's session (``session_id`` is the session to
    approve: the run that called the sub-agent); ``remaining_tool_calls`` are the sub-agent's."""
    subagent_agent: str | None = None
    parent_session_id: str | None = None
    """Set when ``session_id`` is itself a sub-agent's session (its parent lists it too)."""


class CheckApprovalsInput(FormatModel):
    session_id: str
    agent: str
    step: int
    calls: list[ToolCall]
    batch_start: int | None = None
    """Where the calls' results go (for their idempotency keys); None in older histories."""
    turn_position: int | None = None
    """Set when ``calls`` are references: their arguments are read from this turn."""


class CheckApprovalsOutput(FormatModel):
    needs_approval: list[bool]


class PauseForApprovalInput(FormatModel):
    session_id: str
    approval_id: str
    remaining_tool_calls: list[ToolCall]
    turn_position: int | None = None
    """Set when ``remaining_tool_calls`` are references: the activity saves them with their
    arguments, read from this turn."""
    outcome: dict[str, Any] | None = None
    """A streamed run's ``RunPaused`` event (JSON), written to its event log with the pause."""


class PolicyVerdict(FormatModel):
    """What the approval policy decided on a gated call, as the workflow and the records carry it."""

    outcome: Literal["approve", "deny", "ask-evaluator", "ask-person"]
    source: DecisionSource | None = None
    """Set when the policy decided (approve or deny): which layer."""
    reason: str
    rule: str | None = None
    grant_id: str | None = None
    criteria: str | None = None
    policy_version: int | None = None
    agent_policy_version: int | None = None
    session_policy_version: int | None = None
    arguments_digest: str | None = None


class RecordDecisionInput(FormatModel):
    session_id: str
    decision: ApprovalDecision
    call: ToolCall
    batch_start: int
    batch: list[str]
    index: int | None = None
    """The paused call's place in ``batch`` (see ``ExecuteToolInput.index``)."""
    agent: str | None = None
    """The run's agent (for a grant the decision makes); None in older histories."""
    turn_position: int | None = None
    """Set when ``call`` is a reference: its arguments are read from this turn."""
    source: DecisionSource | None = None
    """Who or what decided (None: a person, as in older histories)."""
    evaluation: Evaluation | None = None
    """The auto mode's evaluator on this call, when it judged it."""
    policy: PolicyVerdict | None = None
    """The policy's decision that sent the call to the evaluator or a person (its version, reason)."""
    asked_at: AwareDatetime | None = None
    """Temporal's time when the workflow asked (``workflow.now()``): a grant the decision makes
    counts its time from the latest of it and the worker's clock (None in older histories)."""

    @property
    def position(self) -> int:
        return self.batch_start + (self.index if self.index is not None else self.batch.index(self.call.id))


class RecordDecisionOutput(FormatModel):
    recorded_through: int


FORK_SESSION = "durable_agents.fork_session"


class ForkSessionInput(FormatModel):
    session_id: str
    from_step: int
    patch: dict[str, Any] = Field(default_factory=dict)
    """A ``checkpoint.fork.Patch`` as JSON (camelCase or snake_case keys)."""
    new_session_id: str | None = None
    entry: int | None = None
    """The history entry to fork, as ``history`` numbers them (1 is the newest); None: the
    step's newest. Absent in older histories."""


class ForkSessionOutput(FormatModel):
    session_id: str
    step: int
    agent: str | None = None
    message_count: int
    entry: int | None = None
    """The number of the history entry forked (None in older histories)."""


MIGRATE_SESSION = "migrate_session"


class MigrateSessionInput(FormatModel):
    session_id: str
    to_build: str
    """``<deployment>.<build id>`` the client asked for; this worker must be it."""


class MigrateSessionOutput(FormatModel):
    agent: str
    from_build: str | None = None
    to_build: str
    drift: AgentDrift | None = None
    status: CheckpointStatus
