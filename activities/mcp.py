"""MCP tools in a run: listed when the run starts, called through the normal tool path.

**Listing.** ``begin_run`` (the activity every run starts with) lists the tools
of each of the agent's MCP servers and records them in the run's config as
``ToolSpec``\\ s with ``mcpServer`` set: name (after ``tool_prefix``),
description, input schema, and the durability, approval and timeout options
the worker's definition gives them. So a replay reads the list from history
(no I/O in the workflow), every step of the run offers the model the same
tools, and the run's fingerprint covers them: a server whose list changed
since a session was saved is drift on resume, like a changed local tool.
``Agent.fingerprint()`` on its own (no I/O) covers the local tools only; a
run's fingerprint is completed after the listing. No activity is added to the
workflow, so histories of agents without MCP servers are unchanged.

**Calls.** An MCP tool call is the regular tool activity: arguments are
checked against the server's input schema (``jsonschema``), a human approves
it first if it is gated, it runs at most once unless it is safe to retry, and
within its timeout. The request's ``_meta`` carries
``durable-agents/idempotencyKey`` (what side effects should be keyed by:
stable across retries and resumes of the call, unique across sessions,
turns and forks), ``durable-agents/toolCallId`` (the model's id for the call)
and ``durable-agents/attempt`` (1, then 2… for a safe tool run again). An
``isError`` result is the call's error result; see ``mcp_client`` for
transport failures.
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import RootModel, model_validator
from pydantic_core import PydanticCustomError
from temporalio import activity
from temporalio.exceptions import ApplicationError

from durable_agents.activities.deps import ActivityDeps, heartbeating
from durable_agents.activities.mcp_client import MCPConnections, MCPLost, MCPRefused, MCPUnavailable
from durable_agents.agent.agent import Agent
from durable_agents.agent.mcp import MCPServerHTTP, MCPServerStdio
from durable_agents.agent.output import OUTPUT_TOOL
from durable_agents.agent.tools import TOOL_HEARTBEAT_SECONDS, Tool, ToolContext, ToolResultError
from durable_agents.checkpoint.errors import ConfigurationError, FailureType
from durable_agents.checkpoint.format import ToolCall, ToolSpec
from durable_agents.checkpoint.transcript import durability_error

if TYPE_CHECKING:
    from mcp.types import CallToolResult
    from mcp.types import Tool as MCPTool

META_IDEMPOTENCY_KEY = "durable-agents/idempotencyKey"
META_TOOL_CALL_ID = "durable-agents/toolCallId"
META_ATTEMPT = "durable-agents/attempt"
_MODEL_TOOL_NAME = re.compile(r"[^A-Za-z0-9_-]")
LISTING_MARGIN_SECONDS = 2.0
"""Listing stops this long before the run start's activity attempt would time out."""

Server = MCPServerStdio | MCPServerHTTP


# -- listing, at the run's start ----------------------------------------------------------
async def with_listed_mcp_tools(pool: MCPConnections, agent: Agent) -> Agent:
    """``agent`` for one run: its MCP servers' tools listed now (all servers at once)."""
    budget = _listing_budget()
    async with heartbeating(1.0):  # a server that takes seconds to start is not a dead worker
        listed = await asyncio.gather(*(_server_specs(pool, agent, s, budget) for s in agent.mcp_servers))
    specs = [spec for group in listed for spec in group]
    _check_names(agent, specs)
    return agent.with_mcp_tools(specs)


async def _server_specs(pool: MCPConnections, agent: Agent, server: Server, budget: float) -> list[ToolSpec]:
    try:
        tools = await pool.list_tools(server, min(server.startup_timeout, budget))
    except (MCPUnavailable, MCPLost, MCPRefused, ConfigurationError) as e:
        raise _refuse(
            f"agent {agent.name!r} cannot start a run: {e}. Its tools are listed when a run starts; "
            "fix the server definition on the worker (or start the server), then send or resume again"
        ) from e
    listed = {t.name for t in tools}
    for option, names in server.named_tools().items():
        if unknown := sorted(names - listed):
            raise _refuse(
                f"agent {agent.name!r}: {server.describe()} has no tool named {', '.join(map(repr, unknown))} "
                f"(given in {option}); it lists: {', '.join(sorted(listed)) or 'none'}"
            )
    return [_spec(server, t) for t in tools if server.tools is None or t.name in server.tools]


def _spec(server: Server, tool: MCPTool) -> ToolSpec:
    return ToolSpec(
        name=_MODEL_TOOL_NAME.sub("_", server.tool_prefix + tool.name),
        description=tool.description or tool.title or "",
        input_schema=tool.input_schema,
        needs_approval=server.requires_approval(tool.name),
        safe_to_retry=server.is_safe_to_retry(tool.name),
        timeout_seconds=server.timeout_for(tool.name),
        heartbeat_seconds=server.heartbeat_timeout,
        mcp_server=server.name,
        mcp_tool=tool.name,
    )


def _check_names(agent: Agent, specs: list[ToolSpec]) -> None:
    """Every tool the model sees has one owner and a name model APIs accept."""
    owners: dict[str, str] = {t.name: "a local tool" for t in agent.tools}
    if agent.output_type is not None:
        owners[OUTPUT_TOOL] = "the agent's output tool"
    for spec in specs:
        owner = f"MCP server {spec.mcp_server!r} (its tool {spec.mcp_tool!r})"
        if len(spec.name) > 64:
            raise _refuse(
                f"agent {agent.name!r}: {owner} would be named {spec.name!r}, longer than the 64 characters "
                "model APIs accept; shorten tool_prefix or leave the tool out with tools={...}"
            )
        if spec.name in owners:
            raise _refuse(
                f"agent {agent.name!r}: the tool name {spec.name!r} belongs to both {owners[spec.name]} and "
                f"{owner}; give the server a tool_prefix (e.g. tool_prefix='{spec.mcp_server}_') or leave "
                "the tool out with tools={...}"
            )
        owners[spec.name] = owner


def _listing_budget() -> float:
    """Seconds left for listing in this activity attempt (inf outside an activity)."""
    if not activity.in_activity() or activity.info().start_to_close_timeout is None:
        return float("inf")
    info = activity.info()
    elapsed = (datetime.now(UTC) - info.started_time).total_seconds()
    assert info.start_to_close_timeout is not None
    return max(info.start_to_close_timeout.total_seconds() - elapsed - LISTING_MARGIN_SECONDS, 0.5)


def _refuse(message: str) -> ApplicationError:
    """A run that cannot start: final (a definition to fix), never an endless retry."""
    return ApplicationError(message, type=FailureType.CONFIGURATION, non_retryable=True)


# -- calls, in the tool activity ----------------------------------------------------------
async def recorded_mcp_tool(deps: ActivityDeps, agent: Agent, session_id: str, name: str) -> Tool | None:
    """The MCP tool ``name`` as the session's run recorded it, callable on this worker; None
    when the run has no MCP tool of that name."""
    header = await deps.in_store(deps.live_header, session_id)
    tools = header.run_config.tools if header.run_config else []
    spec = next((t for t in tools if t.name == name and t.mcp_server), None)
    if spec is None:
        return None
    server = next((s for s in agent.mcp_servers if s.name == spec.mcp_server), None)
    return mcp_tool(deps.mcp, server, spec, agent.name)


def mcp_tool(pool: MCPConnections, server: Server | None, spec: ToolSpec, agent: str = "") -> Tool:
    """A :class:`Tool` whose call goes to ``spec``'s MCP server (``server``, the worker's definition)."""
    remote = spec.mcp_tool or spec.name

    async def call(args: MCPArguments, ctx: ToolContext) -> Any:
        if server is None:
            raise ToolResultError(
                {
                    "error": f"tool {spec.name!r} is served by MCP server {spec.mcp_server!r}, which agent "
                    f"{agent!r} on this worker does not define any more; it was not called"
                },
                kind="unknown-tool",
            )
        meta = {
            META_IDEMPOTENCY_KEY: ctx.idempotency_key,
            META_TOOL_CALL_ID: ctx.tool_call_id,
            META_ATTEMPT: ctx.attempt,
        }
        try:
            result = await pool.call_tool(server, remote, args.root, meta, retry_lost=spec.safe_to_retry)
        except MCPLost as e:
            if not spec.safe_to_retry:  # it may have run: never again, and the model is told so
                lost = durability_error(ToolCall(id=ctx.tool_call_id, name=spec.name))
                raise ToolResultError({**lost, "cause": str(e)}, kind="tool-durability-error") from e
            raise ToolResultError({"error": str(e), "kind": "mcp-connection-lost"}, kind="error") from e
        except MCPUnavailable as e:
            raise ToolResultError({"error": f"{e}; the call was not sent", "kind": "mcp-unavailable"}) from e
        except MCPRefused as e:
            raise ToolResultError({"error": str(e), "kind": "mcp-protocol-error"}) from e
        if result.is_error:
            raise ToolResultError({"error": _text(result) or f"{spec.name} failed (the server gave no text)"})
        return result_value(result)

    return Tool(
        name=spec.name,
        fn=call,
        input_model=arguments_model(json.dumps(spec.input_schema, sort_keys=True)),
        description=spec.description,
        needs_approval=spec.needs_approval,
        safe_to_retry=spec.safe_to_retry,
        timeout_seconds=spec.timeout_seconds,
        heartbeat_seconds=spec.heartbeat_seconds or TOOL_HEARTBEAT_SECONDS,
        approval_timeout_seconds=spec.approval_timeout_seconds,
    )


def result_value(result: CallToolResult) -> Any:
    """What the model reads: the structured result when there is one, else the text, else
    every content block as JSON (images and resources included, as the server sent them)."""
    if result.structured_content is not None:
        return result.structured_content
    blocks = [block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in result.content]
    if all(block.get("type") == "text" for block in blocks):
        return "\n".join(block.get("text", "") for block in blocks)
    return blocks


def _text(result: CallToolResult) -> str:
    return "\n".join(str(getattr(block, "text", "")) for block in result.content if block.type == "text").strip()


# -- arguments, checked against the server's input schema -----------------------------------
class MCPArguments(RootModel[dict[str, Any]]):
    """An MCP tool's arguments: any JSON object the tool's input schema accepts."""

    validator: ClassVar[Any] = None
    """A ``jsonschema`` validator of the tool's input schema; None: the server checks them itself."""

    @model_validator(mode="after")
    def _matches_schema(self) -> MCPArguments:
        if self.validator is None:
            return self
        problems = sorted(self.validator.iter_errors(self.root), key=lambda e: list(map(str, e.absolute_path)))
        if problems:
            raise PydanticCustomError(
                "mcp_input_schema",
                "{problems}",
                {"problems": "; ".join(f"{_path(p.absolute_path)}: {p.message}" for p in problems)},
            )
        return self


def _path(path: Any) -> str:
    return "/".join(map(str, path)) or "arguments"


@functools.lru_cache(maxsize=512)
def arguments_model(schema_json: str) -> type[MCPArguments]:
    """An :class:`MCPArguments` for one input schema (given as sorted JSON, the cache key)."""
    from jsonschema import exceptions, validators

    schema = json.loads(schema_json)
    cls = validators.validator_for(schema)
    try:
        cls.check_schema(schema)
        validator = cls(schema)
    except exceptions.SchemaError:
        validator = None  # a schema we cannot read: the server checks the arguments itself
    return type("MCPToolArguments", (MCPArguments,), {"validator": validator})
