"""An agent, and agents offered to another agent as tools (sub-agents).

What a user defines lives in this package (``durable_agents.agent``; tools in
``tools``, hooks in ``hooks``, MCP servers in ``mcp``, output types in
``output``), re-exported by ``durable_agents``. The activities run them; the
workflow only ever sees their data, a ``RunConfig``.

Sub-agents: ``Agent(subagents=[researcher, writer.as_tool(description=…)])``: the
model sees each as a tool (input ``{"task": str}`` unless ``as_tool(input_model=…)``
declares another), and each call runs as a Temporal child workflow of the calling
run (the same ``AgentRun`` workflow type) in a session of its own, ``<parent
session>/<result position>``. Checked when the agent is built: names (unique among
its tools), cycles (an agent below itself, by name: the worker finds agents by name)
and depth (``max_subagent_depth``).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field

from durable_agents.agent.hooks import Hooks
from durable_agents.agent.mcp import MCPServerHTTP, MCPServerStdio, check_servers
from durable_agents.agent.output import OUTPUT_TOOL, default_output_mode
from durable_agents.agent.schemas import json_schema
from durable_agents.agent.tools import Tool
from durable_agents.checkpoint.context_policy import KeepLastTurns, SummarizeOlder, TokenBudget
from durable_agents.checkpoint.errors import ConfigurationError
from durable_agents.checkpoint.fingerprint import compute_fingerprint
from durable_agents.checkpoint.format import (
    ActivityMode,
    Fingerprint,
    Message,
    ModelSettings,
    RunConfig,
    ToolSpec,
    UsageLimits,
)
from durable_agents.checkpoint.stores._subagents import SESSION_ID_BYTES as SESSION_ID_BYTES
from durable_agents.checkpoint.stores._subagents import subagent_session_id as subagent_session_id
from durable_agents.providers.anthropic_settings import check_thinking
from durable_agents.providers.registry import check_model_string

DriftPolicy = Literal["warn", "error", "ignore"]
Versioning = Literal["pinned", "auto-upgrade"]
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")


def is_agent_name(name: str) -> bool:
    """Whether an agent may be named ``name`` (letters, digits, ``_ . -``; at most 64)."""
    return bool(_NAME.match(name))


DEFAULT_MAX_DEPTH = 3
"""How deep sub-agents may nest below a top-level agent unless it says otherwise."""
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


MODEL_HEARTBEAT_SECONDS = 4.0
"""Default seconds without a heartbeat after which a model call's worker counts as dead."""


@dataclass
class Agent:
    """An agent: a model, instructions and tools, run durably on Temporal."""

    name: str
    model: str
    instructions: str = ""
    tools: Sequence[Tool] = field(default_factory=list)
    max_steps: int = 20
    tool_concurrency: int = 1
    on_agent_drift: DriftPolicy = "warn"
    max_tokens: int = 4096
    model_timeout: float = 300.0
    """Seconds one model call may take before Temporal retries it."""
    model_heartbeat_timeout: float = MODEL_HEARTBEAT_SECONDS
    """Seconds without a heartbeat after which a model call's worker counts as dead
    (then the call is retried on another worker)."""
    activities: ActivityMode = "regular"
    """How steps are scheduled: ``"regular"`` activities (the default), ``"local"`` ones
    (several times less orchestration overhead), or ``"auto"`` (model turns and store steps
    local, a tool local unless its timeout is over 300 s); see docs/how-to/production/activity-modes.md."""
    local_activities: bool = False
    """``True``: ``activities="local"`` (kept for agents written before ``activities``; read
    ``activities``, which this is folded into)."""
    model_settings: ModelSettings | None = None
    """Sampling, tool choice and provider extras (recorded per run; ``send(model_settings=…)`` overrides)."""
    usage_limits: UsageLimits | None = None
    """Per-run limits on requests, tokens and cost (``send(usage_limits=…)`` overrides)."""
    output_type: type[BaseModel] | None = None
    """A pydantic model the final answer must validate against (``RunResult.output``)."""
    output_mode: Literal["native", "tool"] | None = None
    """How the answer is asked for: the provider's structured output, or a ``final_result``
    tool; None: native for ``openai:``/``scripted:``, the tool otherwise."""
    output_retries: int = 2
    """How many times an invalid answer is sent back with its validation error."""
    hooks: Hooks | None = None
    """Your code around each tool call and model turn, run in activities (``durable_agents.Hooks``)."""
    mcp_servers: Sequence[MCPServerStdio | MCPServerHTTP] = field(default_factory=list)
    """MCP servers whose tools the agent offers (listed at each run's start; see docs/how-to/mcp.md)."""
    subagents: Sequence[Agent | SubAgent] = field(default_factory=list)
    """Agents this one calls as tools, each call a child workflow (``agent.as_tool(...)`` to
    name or describe one; see the module's docstring)."""
    max_subagent_depth: int = DEFAULT_MAX_DEPTH
    """How deep sub-agents may nest below this agent (checked here, and at run time)."""
    context: KeepLastTurns | TokenBudget | SummarizeOlder | None = None
    """What of the transcript each model request carries (recorded per run; None: all of it).
    The store keeps every message either way; see docs/how-to/context.md."""
    versioning: Versioning = "pinned"
    """On a versioned worker (``build_worker(deployment=…)``): ``pinned`` keeps an unfinished
    session on the build it started on (``durable-agents migrate`` moves it); ``auto-upgrade``
    moves its runs to the deployment's current build (see docs/how-to/production/versioning.md)."""
    _mcp_tools: tuple[ToolSpec, ...] = field(default=(), init=False, repr=False, compare=False)
    _subagent_tools: tuple[SubAgent, ...] = field(default=(), init=False, repr=False, compare=False)
    """The MCP servers' tools as one run listed them (see :meth:`with_mcp_tools`)."""

    def __post_init__(self) -> None:
        if not is_agent_name(self.name or ""):
            raise ConfigurationError(
                f"An agent needs a `name` of letters, digits, _ . - (got {self.name!r}); "
                "it names the agent's runs in Temporal and the store"
            )
        check_model_string(self.model)
        seen: set[str] = set()
        for t in self.tools:
            if not isinstance(t, Tool):
                raise ConfigurationError(f"agent {self.name!r}: {t!r} is not a tool; decorate it with @tool")
            if t.name in seen:
                raise ConfigurationError(
                    f"agent {self.name!r} has two tools named {t.name!r}; "
                    "give one of them another name with @tool(name=...)"
                )
            seen.add(t.name)
        if self.max_steps < 1 or self.tool_concurrency < 1:
            raise ConfigurationError(f"agent {self.name!r}: max_steps and tool_concurrency must be at least 1")
        if self.on_agent_drift not in ("warn", "error", "ignore"):
            raise ConfigurationError(f"agent {self.name!r}: on_agent_drift must be 'warn', 'error' or 'ignore'")
        if self.activities not in ("regular", "local", "auto"):
            raise ConfigurationError(
                f"agent {self.name!r}: activities={self.activities!r}: use 'regular', 'local' or 'auto'"
            )
        if self.local_activities:
            if self.activities == "auto":
                raise ConfigurationError(
                    f"agent {self.name!r}: local_activities=True and activities='auto' disagree; give activities= alone"
                )
            self.activities = "local"
            self.local_activities = False  # folded into `activities`: a dataclasses.replace() copy keeps its own choice
        if self.versioning not in ("pinned", "auto-upgrade"):
            raise ConfigurationError(f"agent {self.name!r}: versioning must be 'pinned' or 'auto-upgrade'")
        self.tools = list(self.tools)
        self.mcp_servers = check_servers(self.name, self.mcp_servers)
        self.subagents = list(self.subagents)
        self._subagent_tools = check_subagents(self, self.subagents, [t.name for t in self.tools])
        check_model_settings(
            self.name, self.model_settings, [*(t.name for t in self.tools), *(s.name for s in self._subagent_tools)]
        )
        check_thinking(self.name, self.model_settings, self.max_tokens)
        check_usage_limits(self.name, self.model, self.usage_limits)
        check_context(self.name, self.context)
        self._check_output()

    def _check_output(self) -> None:
        if self.output_type is None:
            return
        if not (isinstance(self.output_type, type) and issubclass(self.output_type, BaseModel)):
            raise ConfigurationError(f"agent {self.name!r}: output_type must be a pydantic model class")
        if self.output_mode not in (None, "native", "tool") or self.output_retries < 0:
            raise ConfigurationError(
                f"agent {self.name!r}: output_mode must be 'native' or 'tool', output_retries 0 or more"
            )
        if self.tool_named(OUTPUT_TOOL) is not None or self.subagent_named(OUTPUT_TOOL) is not None:
            raise ConfigurationError(
                f"agent {self.name!r} has a tool named {OUTPUT_TOOL!r}, the name of its output tool; rename it"
            )

    def tool_named(self, name: str) -> Tool | None:
        return next((t for t in self.tools if t.name == name), None)

    def has_tool(self, name: str) -> bool:
        """A local tool, a sub-agent, or an MCP tool this run listed."""
        return (
            self.tool_named(name) is not None
            or self.subagent_named(name) is not None
            or any(t.name == name for t in self._mcp_tools)
        )

    @property
    def subagent_tools(self) -> tuple[SubAgent, ...]:
        return self._subagent_tools

    def subagent_named(self, name: str) -> SubAgent | None:
        return next((s for s in self._subagent_tools if s.name == name), None)

    def as_tool(
        self, *, name: str | None = None, description: str | None = None, input_model: type[BaseModel] | None = None
    ) -> SubAgent:
        """This agent as another agent's tool: ``Agent(..., subagents=[me.as_tool(description=...)])``.
        Input: ``{"task": str}``, or ``input_model`` (its JSON is the sub-agent's input)."""
        return as_tool(self, name=name, description=description, input_model=input_model)

    def with_mcp_tools(self, specs: Sequence[ToolSpec]) -> Agent:
        """This agent for one run whose MCP servers listed ``specs``: its run config and
        fingerprint include them. (Without a listing, which is I/O, they cover local tools only.)"""
        listed = copy.copy(self)
        listed._mcp_tools = tuple(specs)
        return listed

    def run_config(
        self,
        model: str | None = None,
        settings: ModelSettings | None = None,
        limits: UsageLimits | None = None,
    ) -> RunConfig:
        """The run's recorded definition; ``settings``/``limits`` are the run's own (they replace the agent's)."""
        return RunConfig(
            agent=self.name,
            model=model or self.model,
            model_override=model,
            instructions=self.instructions,
            tools=[*(t.spec() for t in self.tools), *self._mcp_tools, *(s.spec() for s in self._subagent_tools)],
            max_steps=self.max_steps,
            tool_concurrency=self.tool_concurrency,
            max_tokens=self.max_tokens,
            model_timeout_seconds=self.model_timeout,
            model_heartbeat_seconds=self.model_heartbeat_timeout,
            local_activities=self.activities == "local",
            activities="auto" if self.activities == "auto" else None,  # others as before it
            model_settings=settings or self.model_settings,
            usage_limits=limits or self.usage_limits,
            context=self.context,
            **self._output_config(model or self.model),
        )

    def _output_config(self, model: str) -> dict[str, Any]:
        if self.output_type is None:
            return {}
        return {
            "output_schema": json_schema(self.output_type),
            "output_name": self.output_type.__name__,
            "output_mode": self.output_mode or default_output_mode(model),
            "output_retries": self.output_retries,
        }

    def fingerprint(self, model: str | None = None) -> Fingerprint:
        return compute_fingerprint(
            model or self.model,
            self.instructions,
            [
                *((t.name, json_schema(t.input_model)) for t in self.tools),
                *((t.name, t.input_schema) for t in self._mcp_tools),
            ],
        )


TOOL_CHOICES = ("auto", "required", "none")


def check_model_settings(agent: str, settings: ModelSettings | None, tools: Sequence[str]) -> None:
    choice = settings.tool_choice if settings else None
    if choice is not None and choice not in TOOL_CHOICES and choice not in tools:
        raise ConfigurationError(
            f"agent {agent!r}: tool_choice {choice!r} is not 'auto', 'required', 'none' or one of its tools "
            f"({', '.join(tools) or 'it has none'})"
        )


def check_usage_limits(agent: str, model: str, limits: UsageLimits | None) -> None:
    if limits is None:
        return
    counts = [limits.max_requests, limits.max_input_tokens, limits.max_output_tokens, limits.max_total_tokens]
    if any(n is not None and n < 1 for n in counts) or (limits.max_cost_usd is not None and limits.max_cost_usd <= 0):
        raise ConfigurationError(f"agent {agent!r}: usage limits must be positive (got {limits.to_json()})")
    if limits.max_cost_usd is not None and limits.price is None:
        from durable_agents.checkpoint.pricing import price_of

        if price_of(model) is None:
            raise ConfigurationError(
                f"agent {agent!r}: max_cost_usd needs a price for {model!r}, which the shipped table does not "
                "have; give UsageLimits(price=ModelPrice(input=…, output=…)) in US dollars per million tokens"
            )


def check_context(agent: str, policy: object) -> None:
    if policy is None:
        return
    if not isinstance(policy, KeepLastTurns | TokenBudget | SummarizeOlder):
        raise ConfigurationError(
            f"agent {agent!r}: context must be KeepLastTurns(…), TokenBudget(…) or SummarizeOlder(…), got {policy!r}"
        )
    if isinstance(policy, SummarizeOlder) and policy.model is not None:
        check_model_string(policy.model)


class SubagentTask(BaseModel):
    """The default input of a sub-agent tool."""

    task: str = Field(description="What the sub-agent should do, with everything it needs to know to do it.")


@dataclass(frozen=True)
class SubAgent:
    """An agent offered to another agent as a tool (``Agent.as_tool``)."""

    agent: Agent
    name: str
    description: str
    input_model: type[BaseModel] = SubagentTask

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            description=self.description,
            input_schema=json_schema(self.input_model),
            subagent=self.agent.name,
        )

    def task_message(self, args: BaseModel) -> Message:
        """The sub-agent's input: the task's text, or a declared input model's JSON."""
        if isinstance(args, SubagentTask):
            return Message.user(args.task)
        return Message.user(args.model_dump_json(by_alias=True))


def as_tool(
    agent: Agent, *, name: str | None = None, description: str | None = None, input_model: type[BaseModel] | None = None
) -> SubAgent:
    tool_name = name or re.sub(r"[^A-Za-z0-9_-]", "_", agent.name)[:64]
    if not _TOOL_NAME.match(tool_name):
        raise ConfigurationError(
            f"sub-agent tool name {tool_name!r} is not valid for model APIs: use 1-64 letters, digits, _ or -"
        )
    if input_model is not None and not (isinstance(input_model, type) and issubclass(input_model, BaseModel)):
        raise ConfigurationError(f"sub-agent {agent.name!r}: input_model must be a pydantic model class")
    first = agent.instructions.strip().splitlines()[0] if agent.instructions.strip() else ""
    default = f"Delegate a task to the {agent.name} agent" + (f" ({first[:200]})" if first else "") + "."
    return SubAgent(
        agent=agent, name=tool_name, description=description or default, input_model=input_model or SubagentTask
    )


def check_subagents(owner: Agent, entries: Sequence[Any], tool_names: Iterable[str]) -> tuple[SubAgent, ...]:
    """``owner``'s sub-agent tools, or a ``ConfigurationError`` saying what to fix."""
    tools: list[SubAgent] = []
    names = set(tool_names)
    for entry in entries:
        sub = entry.as_tool() if isinstance(entry, Agent) else entry
        if not isinstance(sub, SubAgent):
            raise ConfigurationError(
                f"agent {owner.name!r}: sub-agent {entry!r} is not an Agent (or agent.as_tool(...))"
            )
        if sub.name in names:
            raise ConfigurationError(
                f"agent {owner.name!r} has a tool or sub-agent named {sub.name!r} already; "
                f"give the sub-agent another name with {sub.agent.name}.as_tool(name=...)"
            )
        names.add(sub.name)
        tools.append(sub)
    if owner.max_subagent_depth < 0:
        raise ConfigurationError(f"agent {owner.name!r}: max_subagent_depth must be 0 or more")
    _check_tree(owner, tools)
    return tuple(tools)


def _check_tree(owner: Agent, tools: Sequence[SubAgent]) -> None:
    """No cycle (``owner`` below itself), one agent per name, at most ``max_subagent_depth`` deep."""
    by_name: dict[str, Agent] = {owner.name: owner}
    height = 0
    stack: list[tuple[Agent, list[str]]] = [(t.agent, [owner.name]) for t in tools]
    while stack:
        agent, path = stack.pop()
        if agent.name in path:
            chain = " -> ".join([*path, agent.name])
            raise ConfigurationError(
                f"agent {owner.name!r}: sub-agents form a cycle ({chain}); an agent cannot call itself, "
                "directly or through its sub-agents"
            )
        if by_name.setdefault(agent.name, agent) is not agent:
            raise ConfigurationError(
                f"agent {owner.name!r}: two different agents named {agent.name!r} are among its sub-agents; "
                "workers find agents by name, so give each its own"
            )
        height = max(height, len(path))
        stack += [(t.agent, [*path, agent.name]) for t in agent.subagent_tools]
    if height > owner.max_subagent_depth:
        raise ConfigurationError(
            f"agent {owner.name!r}: its sub-agents nest {height} deep, more than its max_subagent_depth "
            f"({owner.max_subagent_depth}); raise max_subagent_depth or flatten them"
        )


def with_subagents(agents: Iterable[Agent]) -> list[Agent]:
    """``agents`` and, after them, every sub-agent below them (each object once): what a
    worker must know to run their sub-agents' child runs."""
    found: list[Agent] = []
    seen: set[int] = set()
    stack = list(reversed(list(agents)))
    while stack:
        agent = stack.pop()
        if id(agent) in seen:
            continue
        seen.add(id(agent))
        found.append(agent)
        stack += reversed([t.agent for t in agent.subagent_tools])
    return found
