"""What users define as tools: ``@tool`` and the context a call gets.

Re-exported by ``durable_agents``; the tool activity runs them.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar, get_type_hints, overload

from pydantic import BaseModel
from temporalio import activity

from durable_agents.agent.schemas import json_schema
from durable_agents.checkpoint.errors import ConfigurationError
from durable_agents.checkpoint.format import ToolSpec

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class ToolResultError(Exception):
    """Raised by a tool to record exactly ``content`` (JSON) as its error result, of ``kind``
    (e.g. an MCP tool's ``isError`` result, or a durability error it detected itself)."""

    def __init__(self, content: dict[str, Any], kind: str = "error") -> None:
        super().__init__(content.get("error", kind))
        self.content, self.kind = content, kind


@dataclass(frozen=True)
class ToolContext:
    """What a tool knows about the call it serves.

    ``tool_call_id`` is the model's id for the call, as the model gave it (the
    same on every retry and resume, but models and compatible servers reuse
    ids: ``call_0`` in every turn). ``idempotency_key`` is what side effects
    should be keyed by: stable across retries and resumes of this call, unique
    across sessions, turns and forks.
    """

    tool_call_id: str
    session_id: str
    step: int
    attempt: int = 1
    agent: str = ""
    idempotency_key: str = ""
    position: int | None = None
    """Where this call's result goes in the session's transcript (what results are keyed by)."""

    def heartbeat(self, *details: Any) -> None:
        """Tell Temporal a long tool is alive (no-op outside a regular activity)."""
        if activity.in_activity() and not activity.info().is_local:
            activity.heartbeat(*details)


TOOL_HEARTBEAT_SECONDS = 4.0
"""Default seconds without a heartbeat after which a tool call's worker counts as dead
(its call is then retried elsewhere, or, at most once, gets a durability-error result).
Tools heartbeat in the background every third of this and the worker sends each, at
most one a second: 3 s of slack for a busy event loop (docs/how-to/production/crash-recovery.md: worker
tuning, where the figures are)."""
ToolFn = Callable[[Any, ToolContext], Awaitable[Any]]
ArgsT = TypeVar("ArgsT", bound=BaseModel)
ApprovalRule = bool | Callable[[Any, ToolContext], bool]


@dataclass(frozen=True)
class Tool:
    name: str
    fn: ToolFn
    input_model: type[BaseModel]
    description: str = ""
    needs_approval: ApprovalRule = False
    safe_to_retry: bool = False
    timeout_seconds: float = 300.0
    heartbeat_seconds: float = TOOL_HEARTBEAT_SECONDS
    approval_timeout_seconds: float | None = None

    def requires_approval(self, args: Any, ctx: ToolContext) -> bool:
        gate = self.needs_approval
        return bool(gate(args, ctx)) if callable(gate) else bool(gate)

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            description=self.description,
            input_schema=json_schema(self.input_model),
            needs_approval=bool(self.needs_approval),
            approval_conditional=callable(self.needs_approval),
            approval_timeout_seconds=self.approval_timeout_seconds,
            safe_to_retry=self.safe_to_retry,
            timeout_seconds=self.timeout_seconds,
            heartbeat_seconds=self.heartbeat_seconds,
        )


@overload
def tool(fn: Callable[[ArgsT, ToolContext], Awaitable[Any]], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    needs_approval: ApprovalRule = False,
    safe_to_retry: bool = False,
    timeout: float = 300.0,
    heartbeat_timeout: float = TOOL_HEARTBEAT_SECONDS,
    approval_timeout: float | None = None,
) -> Callable[[Callable[[ArgsT, ToolContext], Awaitable[Any]]], Tool]: ...


def tool(
    fn: ToolFn | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    needs_approval: ApprovalRule = False,
    safe_to_retry: bool = False,
    timeout: float = 300.0,
    heartbeat_timeout: float = TOOL_HEARTBEAT_SECONDS,
    approval_timeout: float | None = None,
) -> Tool | Callable[[ToolFn], Tool]:
    """Turn ``async def f(args: Model, ctx: ToolContext) -> Model | JSON`` into a tool.

    ``safe_to_retry=True`` declares the tool may run again after a crash lost
    its result (at-least-once, keyed by ``ctx.tool_call_id``); by default a
    tool runs at most once and a lost result becomes a durability error.
    """

    def wrap(f: ToolFn) -> Tool:
        if not inspect.iscoroutinefunction(f):
            raise ConfigurationError(f"tool {f.__name__!r} must be an `async def`")
        tool_name = name or f.__name__
        if not _TOOL_NAME.match(tool_name):
            raise ConfigurationError(
                f"tool name {tool_name!r} is not valid for model APIs: use 1-64 letters, digits, _ or -"
            )
        return Tool(
            name=tool_name,
            fn=f,
            input_model=_input_model(f),
            description=(description or inspect.getdoc(f) or "").strip(),
            needs_approval=needs_approval,
            safe_to_retry=safe_to_retry,
            timeout_seconds=timeout,
            heartbeat_seconds=heartbeat_timeout,
            approval_timeout_seconds=approval_timeout,
        )

    return wrap(fn) if fn is not None else wrap


def _input_model(f: ToolFn) -> type[BaseModel]:
    params = list(inspect.signature(f).parameters)
    hints = get_type_hints(f)
    model = hints.get(params[0]) if params else None
    if len(params) != 2 or not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise ConfigurationError(
            f"tool {f.__name__!r} must take (args: <pydantic model>, ctx: ToolContext); "
            "the model's JSON schema is what the LLM sees"
        )
    return model
