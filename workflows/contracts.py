"""Workflow input and result (durable contracts: add optional fields only)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from durable_agents.activities.contracts import ApprovalDecision, RunState
from durable_agents.activities.subagent_contracts import SubagentParent
from durable_agents.checkpoint.fingerprint import AgentDrift
from durable_agents.checkpoint.format import FinishReason, Message, ModelSettings, RunConfig, Usage, UsageLimits

AGENT_RUN_WORKFLOW = "AgentRun"
FORK_WORKFLOW = "ForkSession"

Handoff = Literal["continued", "failed"]
"""Why a waiting handler answers without a summary: the run continued-as-new, or failed."""


class ResumePoint(BaseModel):
    """What a run carries across continue-as-new instead of its transcript."""

    config: RunConfig
    state: RunState
    queued_input: list[Message] = Field(default_factory=list)
    drift: AgentDrift | None = None


class AgentRunInput(BaseModel):
    session_id: str
    agent: str
    input: list[Message] = Field(default_factory=list)
    """Input inline: only from a store that keeps no run input (and older histories)."""
    input_token: str | None = None
    """The run's input, written to the store by the client before it started the run."""
    store_id: str | None = None
    """The client's store: a worker on another store refuses the run, naming both."""
    store_location: str | None = None
    model: str | None = None
    model_settings: ModelSettings | None = None
    usage_limits: UsageLimits | None = None
    resume: ResumePoint | None = None
    approval: ApprovalDecision | None = None
    """A decision for the session's pending approval, given after its run closed."""
    search_attributes: bool = False
    """Set AgentName/AgentStatus/AgentStep/PendingApprovalId (they must be registered)."""
    parent: SubagentParent | None = None
    """Set for a sub-agent's run (a child workflow): the run and call that started it."""
    stream: bool | None = None
    """Write the run's events (text deltas included) to the store's event log, for
    ``AgentClient.stream`` / ``watch``; None or False: the run does not stream."""


class RunSummary(BaseModel):
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


class Outcome(BaseModel):
    """What `wait_outcome` / `decide` return: the run's next pause or its end.

    ``summary`` is None when the run continued-as-new (ask the new run) or
    failed (its failure is the workflow's result): ``handoff`` says which.
    """

    summary: RunSummary | None = None
    handoff: Handoff | None = None
