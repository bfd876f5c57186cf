"""The run's definition as the checkpoint records it: its agent's model, tools and
settings resolved at run start (``RunConfig``), the tools' specs as the model and the
workflow see them (``ToolSpec``), and the fingerprint that tells when an agent changed.
Part of the checkpoint format (re-exported by ``checkpoint.format``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from durable_agents.checkpoint._format_model import FormatModel
from durable_agents.checkpoint.context_policy import ContextPolicy
from durable_agents.checkpoint.run_options import ModelSettings, UsageLimits

__all__ = ["AUTO_LOCAL_TOOL_SECONDS", "ActivityMode", "Fingerprint", "RunConfig", "ToolFingerprint", "ToolSpec"]


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
    mcp_server: str | None = None
    """The MCP server (by the name the worker's agent gives it) that serves this tool, as
    listed when the run started; None: a local tool. The server's command, URL, env and
    headers stay on the worker."""
    mcp_tool: str | None = None
    """The tool's name on that server (``name`` is it after the server's ``tool_prefix``)."""
    subagent: str | None = None
    """The agent this tool runs as a sub-agent (a child workflow of the run); None: not one."""


ActivityMode = Literal["regular", "local", "auto"]
"""How a run schedules its model turns, tools and store steps (``Agent(activities=…)``)."""

AUTO_LOCAL_TOOL_SECONDS = 300.0
"""In ``auto`` mode a tool whose timeout is over this (``@tool(timeout=…)``; 300 s by
default) runs as a regular activity: a long call then shows in the Temporal UI as a
pending activity with its heartbeats, and adds no workflow task heartbeats to the run's
history."""


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
    """Run model turns, tools and store writes as local activities (see docs/how-to/production/activity-modes.md);
    written as ``activities == "local"`` for readers from before ``activities``."""
    activities: ActivityMode | None = None
    """How the run's steps are scheduled: ``regular`` activities, ``local`` ones, or
    ``auto`` (model turns and store steps local, a tool local unless its timeout is over
    ``AUTO_LOCAL_TOOL_SECONDS``). None (runs from before it): ``localActivities`` says."""
    model_settings: ModelSettings | None = None
    usage_limits: UsageLimits | None = None
    output_schema: dict[str, Any] | None = None
    """The JSON schema of the agent's ``output_type``: the run's final answer must match it."""
    output_name: str | None = None
    output_mode: Literal["native", "tool"] | None = None
    output_retries: int = 2
    stream: bool | None = None
    """The run streams: its activities write its events (text deltas included) to the
    store's event log (``durable_agents.checkpoint.events``); None: it does not."""
    context: ContextPolicy | None = None
    """What of the transcript each model request carries (``KeepLastTurns``, ``TokenBudget``,
    ``SummarizeOlder``); None: all of it. A resumed run keeps its own."""

    @property
    def activity_mode(self) -> ActivityMode:
        """``activities``, or for a run from before it, what ``localActivities`` says."""
        if self.activities is not None:
            return self.activities
        return "local" if self.local_activities else "regular"

    def runs_locally(self, tool_timeout: float | None = None) -> bool:
        """Whether a step of this run is a local activity: a model turn or store step
        (``tool_timeout`` None), or a tool call of that timeout."""
        mode = self.activity_mode
        if mode == "auto":
            return tool_timeout is None or tool_timeout <= AUTO_LOCAL_TOOL_SECONDS
        return mode == "local"

    def runs_in_turn(self, spec: ToolSpec, *, approved: bool = False) -> bool:
        """Whether a call of this tool can run in its local step's model turn (one local activity
        a step): a tool of the agent's own (not an MCP tool, not a sub-agent) that runs locally and
        waits for no one (no approval, no approval rule: the workflow holds those; ``approved``:
        the approval policy approved this call in its turn)."""
        return (
            spec.subagent is None
            and spec.mcp_server is None
            and (approved or not spec.needs_approval)
            and not spec.approval_conditional
            and self.runs_locally(spec.timeout_seconds)
        )
