"""Sub-agents: an agent that another agent calls as a tool.

``Agent(subagents=[researcher, writer.as_tool(description=…)])``: the model
sees each as a tool (input ``{"task": str}`` unless ``as_tool(input_model=…)``
declares another), and each call runs as a Temporal child workflow of the
calling run (the same ``AgentRun`` workflow type) in a session of its own,
``<parent session>/<result position>``. Checked when the agent is built: names
(unique among its tools), cycles (an agent below itself, by name: the worker
finds agents by name) and depth (``max_subagent_depth``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from durable_agents.activities.schemas import json_schema
from durable_agents.checkpoint.errors import ConfigurationError
from durable_agents.checkpoint.format import Message, ToolSpec
from durable_agents.checkpoint.stores._subagents import SESSION_ID_BYTES as SESSION_ID_BYTES
from durable_agents.checkpoint.stores._subagents import subagent_session_id as subagent_session_id

if TYPE_CHECKING:
    from durable_agents.activities.definitions import Agent

DEFAULT_MAX_DEPTH = 3
"""How deep sub-agents may nest below a top-level agent unless it says otherwise."""
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


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
    from durable_agents.activities.definitions import Agent

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
