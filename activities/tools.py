"""The tool activity: validate, run at most once (or again if safe), record.

A tool's result is recorded by tool call id (the first recorded result wins)
and appended to the transcript as the in-order prefix of the turn's results,
so concurrent tools still leave results in call order.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from pydantic import BaseModel, ValidationError
from temporalio import activity
from temporalio.exceptions import ApplicationError

from durable_agents.activities import metrics, tracing
from durable_agents.activities.approvals import approved_content, decision_at
from durable_agents.activities.contracts import EXECUTE_TOOL, ExecuteToolInput, ExecuteToolOutput
from durable_agents.activities.deps import ActivityDeps, heartbeating
from durable_agents.activities.events import streams, write_events
from durable_agents.activities.keys import idempotency_key
from durable_agents.activities.step_events import tool_finished, tool_started
from durable_agents.activities.transcript import repair_text, repaired_value
from durable_agents.agent.hooks import Rewrite, Veto, run_hook
from durable_agents.agent.tools import Tool, ToolContext, ToolResultError
from durable_agents.checkpoint.errors import FailureType, PropagatingToolError
from durable_agents.checkpoint.format import CheckpointHeader, Message, ToolCall
from durable_agents.checkpoint.transcript import durability_error, result_content
from durable_agents.providers.base import INVALID_JSON_KEY

CANCELLED = '{"error": "cancelled"}'


_dump = result_content


def _aborted() -> bool:
    """Whether a cancelled call was cancelled by its run (an abort), rather than by a worker
    shutdown (Temporal retries the call on another worker), its run's end (terminated or
    timed out: the run's next run finds the call started without a result, as after a
    crash) or its attempt's timeout (the retry finds the same). Only an abort records
    ``cancelled``: it says the call was stopped on purpose, which none of the others did."""
    if activity.is_worker_shutdown():
        return False
    details = activity.cancellation_details()
    return details is None or not (details.not_found or details.timed_out or details.worker_shutdown)


def timeout_result(tool: Tool) -> dict[str, Any]:
    return {
        "error": f"tool {tool.name!r} did not finish within {tool.timeout_seconds:g} s; it was stopped "
        "and may or may not have taken effect",
        "kind": "tool-timeout",
    }


def _error_result(tool: Tool, ctx: ToolContext, error: BaseException) -> tuple[str, str]:
    activity.logger.warning("tool %s (%s) raised %r", tool.name, ctx.tool_call_id, error, exc_info=error)
    return _dump({"error": repair_text(f"{type(error).__name__}: {error}")}), "error"


class ToolActivities:
    def __init__(self, deps: ActivityDeps) -> None:
        self.deps = deps

    @activity.defn(name=EXECUTE_TOOL)
    async def execute_tool(self, inp: ExecuteToolInput) -> ExecuteToolOutput:
        store, position, size = self.deps.store, inp.position, len(inp.batch)
        recorded, header, call = await self.deps.in_store(self._call_state, inp)
        if recorded is None:
            try:
                content, kind = await self._run(inp, header, call)
            except PropagatingToolError as e:
                raise await self._propagate(inp, e) from None
            except asyncio.CancelledError:
                if not _aborted():
                    raise  # a worker shutdown, a run gone or an attempt timed out: see _aborted
                # The run was aborted: this call's result is "cancelled" (unless it has one).
                cancelled = Message.tool_result(inp.call, CANCELLED, is_error=True)
                await asyncio.shield(
                    self.deps.in_store(
                        store.record_tool_result, inp.session_id, position, cancelled, inp.batch_start, size
                    )
                )
                raise
            recorded = Message.tool_result(inp.call, content, is_error=kind != "result")
        else:
            kind = "recorded"  # never re-executed
        count = await self.deps.record_until_stored(
            store.record_tool_result, inp.session_id, position, recorded, inp.batch_start, size
        )
        metrics.tool_call(inp.agent, inp.call.name, kind)
        if streams(header):
            await write_events(self.deps, inp.session_id, [tool_finished(inp, recorded, kind)])
        return ExecuteToolOutput(
            tool_call_id=inp.call.id, is_error=bool(recorded.is_error), kind=kind, recorded_through=count
        )

    async def _propagate(self, inp: ExecuteToolInput, error: PropagatingToolError) -> ApplicationError:
        """The tool asked to fail the run: no result, its start forgotten, so a resume runs it again."""
        with contextlib.suppress(NotImplementedError):
            await self.deps.in_store(self.deps.store.tool_unstarted, inp.session_id, inp.position)
        return ApplicationError(
            f"tool {inp.call.name!r} (call {inp.call.id}) stopped the run: {error}",
            type=FailureType.PROPAGATING_TOOL,
            non_retryable=True,
        )

    def _call_state(self, inp: ExecuteToolInput) -> tuple[Message | None, CheckpointHeader, ToolCall]:
        """One store round trip (one snapshot) before a call: its result if one is recorded,
        the live checkpoint, and the call with its arguments (read from the stored turn when
        the workflow holds a reference)."""
        with self.deps.store.reading():
            recorded = self.deps.store.tool_result(inp.session_id, inp.position)
            header = self.deps.live_header(inp.session_id)
            call = inp.call
            if recorded is None and inp.arguments_in_store and inp.turn_position is not None:
                call = self.deps.stored_call(inp.session_id, inp.turn_position, inp.position)
        return recorded, header, call

    async def _run(self, inp: ExecuteToolInput, header: CheckpointHeader, call: ToolCall) -> tuple[str, str]:
        agent = self.deps.agent(inp.agent)
        tool = agent.tool_named(call.name)
        if tool is None and agent.mcp_servers:  # an MCP tool, as the run's config recorded it
            from durable_agents.activities.mcp import recorded_mcp_tool

            tool = await recorded_mcp_tool(self.deps, agent, inp.session_id, call.name)
        if tool is None:
            names = ", ".join(t.name for t in self.deps.agent(inp.agent).tools) or "none"
            return _dump({"error": f"unknown tool {call.name!r}; available tools: {names}"}), "unknown-tool"
        hooks = agent.hooks
        if hooks is not None and hooks.before_tool is not None:
            decided = await run_hook("before_tool", hooks.before_tool, call, self._ctx(inp, call, header, 0))
            if isinstance(decided, Veto):
                return _dump(repaired_value(decided.result)), "vetoed" if decided.is_error else "result"
            if isinstance(decided, Rewrite) and decided.arguments is not None:
                call = call.model_copy(update={"arguments": decided.arguments})
        if INVALID_JSON_KEY in call.arguments:
            return _dump(
                {"error": f"arguments are not a valid JSON object: {call.arguments[INVALID_JSON_KEY]!r}"}
            ), "validation-error"
        try:
            args = tool.input_model.model_validate(call.arguments)
        except ValidationError as e:
            return _dump(
                {
                    "error": f"invalid arguments for {call.name}",
                    "details": json.loads(e.json(include_url=False, include_input=False)),
                }
            ), "validation-error"
        starts = await self.deps.in_store(self.deps.store.tool_started, inp.session_id, inp.position)
        tracing.annotate(**{"tool.attempt": starts + 1})  # the call's span: its invocation count
        if streams(header):
            await write_events(self.deps, inp.session_id, [tool_started(inp, call)])
        if starts and not tool.safe_to_retry:
            return _dump(durability_error(call)), "tool-durability-error"
        ctx = self._ctx(inp, call, header, starts + 1)
        content, kind = await self._invoke(tool, args, ctx)
        if hooks is not None and hooks.after_tool is not None:
            decided = await run_hook("after_tool", hooks.after_tool, call, json.loads(content), ctx)
            if isinstance(decided, Rewrite) and decided.result is not None:
                content = _dump(repaired_value(decided.result))
        # an approved call's result carries the reviewer's note and edited arguments, for the model
        return approved_content(content, decision_at(header, inp.position), is_error=kind != "result"), kind

    @staticmethod
    def _ctx(inp: ExecuteToolInput, call: ToolCall, header: CheckpointHeader, attempt: int) -> ToolContext:
        return ToolContext(
            tool_call_id=call.id,
            session_id=inp.session_id,
            step=inp.step,
            attempt=attempt,
            agent=inp.agent,
            idempotency_key=idempotency_key(header, inp.position),
            position=inp.position,
        )

    async def _invoke(self, tool: Tool, args: BaseModel, ctx: ToolContext) -> tuple[str, str]:
        """Run the tool once; whatever it does becomes its result, never a retry."""
        deadline = asyncio.timeout(tool.timeout_seconds)
        try:
            async with heartbeating(max(tool.heartbeat_seconds / 3, 0.5)), deadline:
                output = await tool.fn(args, ctx)
        except TimeoutError:
            if not deadline.expired():
                return _error_result(tool, ctx, TimeoutError("the tool raised TimeoutError"))
            activity.logger.warning(
                "tool %s (%s) timed out after %gs", tool.name, ctx.tool_call_id, tool.timeout_seconds
            )
            return _dump(timeout_result(tool)), "tool-timeout"
        except ToolResultError as e:
            return _dump(repaired_value(e.content)), e.kind
        except PropagatingToolError:
            raise  # fails the run (execute_tool)
        except (Exception, SystemExit) as e:  # noqa: BLE001 - the tool's own failure is its result, not a crash
            return _error_result(tool, ctx, e)
        try:
            return _dump(repaired_value(output)), "result"
        except Exception as e:  # noqa: BLE001 - an unencodable result is the call's error, not a retry
            return _dump(
                {"error": f"the result of {tool.name} cannot be encoded as JSON: {type(e).__name__}: {e}"}
            ), "error"
