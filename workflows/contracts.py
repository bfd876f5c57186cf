"""Workflow input and result (durable contracts: add optional fields only)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationError

from durable_agents.activities.contracts import ApprovalDecision, RunRequest, RunState
from durable_agents.activities.subagent_contracts import SubagentParent
from durable_agents.checkpoint.fingerprint import AgentDrift
from durable_agents.checkpoint.format import (
    FinishReason,
    FormatModel,
    Message,
    RunConfig,
    Usage,
)

AGENT_RUN_WORKFLOW = "AgentRun"
FORK_WORKFLOW = "ForkSession"
MAX_INLINE_INPUT_BYTES = 256 * 1024
"""The most JSON a run's inline ``input`` may hold: it then sits in Temporal history (under the
codec, if any) and in every continue-as-new's input. Larger input goes through the store:
``AgentClient.send`` writes it there and passes ``inputToken``."""
RUN_INPUT_SHAPE = (
    '{"sessionId": "<the workflow id>", "agent": "<agent name>", "input": [{"role": "user", "content": "…"}]}'
)

Handoff = Literal["continued", "failed"]
"""Why a waiting handler answers without a summary: the run continued-as-new, or failed."""


class ResumePoint(FormatModel):
    """What a run carries across continue-as-new instead of its transcript."""

    config: RunConfig
    state: RunState
    queued_input: list[Message] = Field(default_factory=list)
    drift: AgentDrift | None = None


class AgentRunInput(RunRequest):
    """The ``AgentRun`` workflow's input: the run's request, and what only the workflow uses."""

    resume: ResumePoint | None = None
    approval: ApprovalDecision | None = None
    """A decision for the session's pending approval, given after its run closed."""
    search_attributes: bool | None = None
    """Set AgentName/AgentStatus/AgentStep/PendingApprovalId/AgentFinishReason as the run goes
    (true: they are registered; false: never). None (the default, e.g. a run started from the
    ``temporal`` CLI): set them when the namespace has them registered, else warn and set none."""
    parent: SubagentParent | None = None
    """Set for a sub-agent's run (a child workflow): the run and call that started it."""
    begin_locally: bool | None = None
    """The starter's word that the agent's steps are local activities (``activities="local"`` or
    ``"auto"``; ``AgentClient`` says so as it last saw a run of the agent): ``begin_run`` is then a
    local activity too, in the run's first workflow task with its first model turn. None (any
    other client): a regular activity. A wrong word changes how ``begin_run`` runs, not what it does."""


class RunSummary(FormatModel):
    """The workflow's result. Messages stay in the store (they can be large)."""

    session_id: str
    finish_reason: FinishReason
    steps: int
    usage: Usage
    tool_calls: int
    message_count: int
    run_start_index: int
    approval_id: str | None = None
    drift: AgentDrift | None = None
    detail: str | None = None
    """Why the run ended when its finish reason alone does not say (e.g. which usage limit)."""
    text: str | None = None
    """The final answer's text (at most ``VIEW_BYTES`` of it; ``text_truncated`` says when cut),
    for clients that read the run's result without the store. None when the run did not end
    on an answer (a pause, an abort, max steps)."""
    text_truncated: bool = False
    output: Any = None
    """The structured output (an agent with ``output_type``) as JSON, or the ``$truncated``
    marker when its JSON is over ``VIEW_BYTES``."""


class Outcome(FormatModel):
    """What `wait_outcome` / `decide` return: the run's next pause or its end.

    ``summary`` is None when the run continued-as-new (ask the new run) or
    failed (its failure is the workflow's result): ``handoff`` says which.
    """

    summary: RunSummary | None = None
    handoff: Handoff | None = None


class InvalidRunInput(ValueError):
    """What is wrong with an ``AgentRun``'s input, in one line (the run fails with it at once,
    as ``InvalidRunInputError``)."""


def run_input(raw: Any, workflow_id: str) -> AgentRunInput:
    """An ``AgentRun`` workflow's input, checked: ``InvalidRunInput`` naming the field for input
    that does not validate, a session id that is not the workflow id (the id rule: one live run
    per session), or inline input over its limit."""
    try:
        inp = AgentRunInput.model_validate(raw)
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'the input'}: {err['msg']}"
            for err in e.errors(include_url=False)[:3]
        )
        raise _invalid(f"AgentRun input is invalid ({problems}); expected {RUN_INPUT_SHAPE}") from None
    if inp.session_id != workflow_id:
        raise _invalid(
            f"AgentRun's workflow id must be its session id: workflow id {workflow_id!r} carries "
            f"sessionId {inp.session_id!r}; start it with workflow id {inp.session_id!r}"
        )
    if inp.input and inp.resume is None:
        size = sum(len(m.model_dump_json(by_alias=True, exclude_none=True).encode()) for m in inp.input)
        if size > MAX_INLINE_INPUT_BYTES:
            raise _invalid(
                f"AgentRun's inline input is {size:,} bytes of JSON, over the limit of {MAX_INLINE_INPUT_BYTES:,}: "
                "send it with durable_agents' AgentClient (it writes the input to the store and passes "
                "inputToken), or send less"
            )
    return inp


def _invalid(message: str) -> InvalidRunInput:
    return InvalidRunInput(message)
