"""The tool activity: validate, run at most once (or again if safe), record.

A tool's result is recorded by tool call id (the first recorded result wins)
and appended to the transcript as the in-order prefix of the turn's results,
so concurrent tools still leave results in call order.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Set
from dataclasses import dataclass
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
from durable_agents.agent.agent import Agent
from durable_agents.agent.hooks import Rewrite, Veto, run_hook
from durable_agents.agent.tools import Tool, ToolContext, ToolResultError
from durable_agents.checkpoint.errors import FailureType, PropagatingToolError
from durable_agents.checkpoint.format import CheckpointHeader, Message, RunConfig, ToolCall
from durable_agents.checkpoint.stores.base import Admit, ToolCallStart
from durable_agents.checkpoint.transcript import durability_error, result_content
from durable_agents.providers.base import INVALID_JSON_KEY

CANCELLED = '{"error": "cancelled"}'
TOOL_MARGIN_SECONDS = 15.0
"""What a call run in its step's model activity must have left of the attempt over its own timeout
(the margin the workflow gives a tool activity over it)."""


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


def _checked_arguments(tool: Tool, call: ToolCall) -> tuple[BaseModel | None, tuple[str, str] | None]:
    """The call's arguments as its tool's input model, or the result that refuses them."""
    if INVALID_JSON_KEY in call.arguments:
        return None, (
            _dump({"error": f"arguments are not a valid JSON object: {call.arguments[INVALID_JSON_KEY]!r}"}),
            "validation-error",
        )
    try:
        return tool.input_model.model_validate(call.arguments), None
    except ValidationError as e:
        details = json.loads(e.json(include_url=False, include_input=False))
        return None, (_dump({"error": f"invalid arguments for {call.name}", "details": details}), "validation-error")


@dataclass
class _Checked:
    """A call whose arguments were checked in :meth:`ToolActivities.begin_tool_call`: its tool and
    arguments with its start recorded, or the result that refuses it (nothing started)."""

    tool: Tool | None = None
    args: BaseModel | None = None
    starts: int | None = None
    refusal: tuple[str, str] | None = None


class _Admission:
    """Whether a call can be checked and started in the store call that reads it: its tool is
    one of the agent's own and no ``before_tool`` hook has to see it first (a hook may veto or
    rewrite it, and runs outside any store call)."""

    def __init__(self, agent: Agent, name: str) -> None:
        tool = agent.tool_named(name)
        hooks = agent.hooks
        self.tool = tool if tool is not None and (hooks is None or hooks.before_tool is None) else None
        self.found: _Checked | None = None

    @property
    def admit(self) -> Admit | None:
        return None if self.tool is None else self._admit

    def _admit(self, call: ToolCall, header: CheckpointHeader) -> bool:
        assert self.tool is not None
        args, refusal = _checked_arguments(self.tool, call)
        self.found = _Checked(tool=self.tool, args=args, refusal=refusal)
        return refusal is None

    def checked(self, begun: ToolCallStart) -> _Checked | None:
        """What :meth:`_admit` decided for this call, with its start (None: not decided there)."""
        if self.found is None or begun.recorded is not None:
            return None
        if self.found.refusal is None:
            self.found.starts = begun.starts
        return self.found


class ToolActivities:
    def __init__(self, deps: ActivityDeps) -> None:
        self.deps = deps

    @activity.defn(name=EXECUTE_TOOL)
    async def execute_tool(self, inp: ExecuteToolInput) -> ExecuteToolOutput:
        store, position, size = self.deps.store, inp.position, len(inp.batch)
        admitted = _Admission(self.deps.agent(inp.agent), inp.call.name)
        begun = await self.deps.in_store(self.begin_tool_call, inp, admitted)
        recorded, header = begun.recorded, begun.header
        assert header is not None  # (begin_tool_call raised if the session is gone)
        if recorded is None:
            try:
                content, kind = await self._run(inp, header, begun.call, admitted.checked(begun))
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

    def begin_tool_call(self, inp: ExecuteToolInput, admitted: _Admission) -> ToolCallStart:
        """One store round trip before a call: its result if one is recorded, the live
        checkpoint, the call with its arguments (read from the stored turn when the workflow
        holds a reference) and, when nothing has to run before it (a ``before_tool`` hook, an
        MCP tool's lookup), the call's start with its arguments checked, in the same write."""
        ref = inp.arguments_in_store and inp.turn_position is not None
        begun = self.deps.store.begin_tool_call(
            inp.session_id, inp.position, inp.call, inp.turn_position if ref else None, admitted.admit
        )
        if begun.header is None:
            self.deps.live_header(inp.session_id)  # raises: the session is gone under a live run
        return begun

    async def _run(
        self, inp: ExecuteToolInput, header: CheckpointHeader, call: ToolCall, checked: _Checked | None
    ) -> tuple[str, str]:
        """The call's result and its kind; ``checked``: its arguments were checked and its
        start recorded with the read (:meth:`begin_tool_call`), so it goes straight to the tool."""
        if checked is not None:
            if checked.refusal is not None:
                return checked.refusal
            assert checked.tool is not None and checked.args is not None and checked.starts is not None
            return await self._start(inp, header, call, checked.tool, checked.args, checked.starts)
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
        args, refusal = _checked_arguments(tool, call)
        if refusal is not None:
            return refusal
        assert args is not None
        starts = await self.deps.in_store(self.deps.store.tool_started, inp.session_id, inp.position)
        return await self._start(inp, header, call, tool, args, starts)

    async def _start(
        self, inp: ExecuteToolInput, header: CheckpointHeader, call: ToolCall, tool: Tool, args: BaseModel, starts: int
    ) -> tuple[str, str]:
        """The call's start is recorded (``starts`` before it): run it, unless an earlier start
        of an at-most-once call may have taken effect."""
        hooks = self.deps.agent(inp.agent).hooks
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


# -- a local step's calls, run in its model activity ---------------------------------------------


def runs_in_turn(config: RunConfig, agent: Agent, calls: list[ToolCall], approved: Set[int] = frozenset()) -> bool:
    """Whether a turn's calls can all run in its model activity (:meth:`RunConfig.runs_in_turn`),
    each with this worker's tool of its name; ``approved``: gated calls the approval
    policy approved (by their index), which run as ungated ones do."""
    specs = {spec.name: spec for spec in config.tools}
    return all(
        (spec := specs.get(call.name)) is not None
        and config.runs_in_turn(spec, approved=index in approved)
        and agent.tool_named(call.name)
        for index, call in enumerate(calls)
    )


async def run_in_turn(
    tools: ToolActivities, config: RunConfig, session_id: str, step: int, turn_position: int, calls: list[ToolCall]
) -> int | None:
    """Run a local step's calls in its model activity, each exactly as its own ``execute_tool``
    would (at most once, its result recorded by position, its events written), at most
    ``tool_concurrency`` at once: one local activity a step instead of one for the turn and one
    a call (docs/design.md §3). Returns the message count after the last result; None when a call
    is left to the workflow, which then schedules the turn's calls as their own activities (the
    recorded ones return their result without running): a call whose timeout does not fit in
    what is left of this attempt, or one whose own activity would have been retried (a store
    error). A failure that fails the run (a ``PropagatingToolError``) is raised as its activity
    raises it; an abort gives every call without a result ``cancelled``, as the run's abort would."""
    info = activity.info()
    deadline = None if info.start_to_close_timeout is None else time.monotonic() + (
        info.start_to_close_timeout.total_seconds() - (time.time() - info.started_time.timestamp())
    )  # fmt: skip
    ids = [call.id for call in calls]
    limit = asyncio.Semaphore(config.tool_concurrency)
    safe = {spec.name: spec.safe_to_retry for spec in config.tools}

    def request(index: int) -> ExecuteToolInput:
        return ExecuteToolInput(
            session_id=session_id,
            agent=config.agent,
            step=step,
            call=calls[index],
            batch_start=turn_position + 1,
            batch=ids,
            safe_to_retry=safe.get(calls[index].name, False),
            index=index,
        )

    failed = False

    async def one(index: int) -> int | None:
        nonlocal failed
        async with limit:
            tool = tools.deps.agent(config.agent).tool_named(calls[index].name)
            assert tool is not None  # (runs_in_turn)
            if failed or (
                deadline is not None and time.monotonic() + tool.timeout_seconds + TOOL_MARGIN_SECONDS > deadline
            ):
                return None  # no call starts after one failed; its own activity has the time
            try:
                return (await tools.execute_tool(request(index))).recorded_through
            except Exception:
                failed = True
                raise

    try:
        done = await asyncio.gather(*(one(i) for i in range(len(calls))), return_exceptions=True)
    except asyncio.CancelledError:
        if _aborted():
            await asyncio.shield(_cancel_unrecorded(tools.deps, [request(i) for i in range(len(calls))]))
        raise
    for outcome in done:
        if isinstance(outcome, ApplicationError) and outcome.non_retryable:
            raise outcome  # the run fails, as when the call's own activity fails
        if isinstance(outcome, BaseException):
            activity.logger.warning(
                "session %s step %s: a call run with its turn failed (%r); the workflow runs it as its own activity",
                session_id, step, outcome,
            )  # fmt: skip
    if any(not isinstance(outcome, int) for outcome in done):
        return None
    return max(outcome for outcome in done if isinstance(outcome, int))


async def _cancel_unrecorded(deps: ActivityDeps, requests: list[ExecuteToolInput]) -> None:
    first = requests[0]
    await deps.in_store(cancel_unrecorded, deps, first.session_id, first.batch_start, [r.call for r in requests])


def cancel_unrecorded(deps: ActivityDeps, session_id: str, batch_start: int, calls: list[ToolCall]) -> None:
    """Every call of the batch at ``batch_start`` without a result gets ``cancelled`` (a recorded
    result stays: the first recorded wins). In a store call."""
    for index, call in enumerate(calls):
        cancelled = Message.tool_result(call, CANCELLED, is_error=True)
        deps.store.record_tool_result(session_id, batch_start + index, cancelled, batch_start, len(calls))
