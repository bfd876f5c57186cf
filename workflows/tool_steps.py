"""The tool half of a step: run the turn's calls in order, gating the ones a human decides.

A mixin of :class:`~durable_agents.workflows.agent_run.AgentRunWorkflow`
(deterministic code only, like the rest of the workflow).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    import durable_agents.activities.contracts as c
    import durable_agents.activities.metrics as metrics
    from durable_agents.activities.approvals import ApprovalActivities
    from durable_agents.activities.tools import ToolActivities
    from durable_agents.checkpoint.format import CheckpointStatus, FinishReason, RunConfig, ToolCall, ToolSpec
    from durable_agents.workflows import options
    from durable_agents.workflows.approvals import ApprovalGate
    from durable_agents.workflows.contracts import RunSummary

In = TypeVar("In")
Out = TypeVar("Out")


class ToolSteps:
    """Runs a model turn's tool calls; the workflow provides its state and activity plumbing."""

    _gate: ApprovalGate
    _outcome: RunSummary | None

    @property
    def session_id(self) -> str:
        raise NotImplementedError

    @property
    def config(self) -> RunConfig:
        raise NotImplementedError

    @property
    def state(self) -> c.RunState:
        raise NotImplementedError

    def _summary(self, reason: FinishReason, approval_id: str | None = None) -> RunSummary:
        raise NotImplementedError

    def _publish(
        self, status: CheckpointStatus, approval_id: str | None, finish_reason: FinishReason | None = None
    ) -> None:
        raise NotImplementedError

    def _set_details(self, status: str | None, arguments: dict[str, Any] | None = None) -> None:
        raise NotImplementedError

    def _outcome_event(self, reason: FinishReason, approval_id: str, message_count: int) -> dict[str, Any] | None:
        raise NotImplementedError

    async def _store(self, fn: Callable[[Any, In], Awaitable[Out]], arg: In, summary: str | None = None) -> Out:
        raise NotImplementedError

    async def _call(
        self,
        fn: Callable[[Any, In], Awaitable[Out]],
        arg: In,
        *,
        timeout: float,
        heartbeat: float | None,
        retry: RetryPolicy,
        summary: str | None,
        local: bool,
    ) -> Out:
        raise NotImplementedError

    # sub-agent calls (workflows/subagents.py)
    def _calls_subagents(self) -> bool:
        return False

    async def _run_subagent(self, call: ToolCall, batch: Batch, index: int) -> int:
        raise NotImplementedError

    async def _tell_parent(self, pending: c.PendingApproval | None, resolved: str | None = None) -> None:
        return None

    async def _run_tools(self) -> None:
        """Run the turn's calls in order; a call that needs approval pauses the batch there."""
        calls = self.state.pending_tool_calls
        batch = Batch(start=self.state.message_count, calls=calls)
        limit = asyncio.Semaphore(self.config.tool_concurrency)

        async def run_one(index: int) -> int:
            async with limit:
                return await self._execute_tool(calls[index], batch, index)

        needs = await self._needs_approval(calls)
        recorded = batch.start
        start = 0
        while start < len(calls):
            gated = next((i for i in range(start, len(calls)) if needs[i]), len(calls))
            done = await self._run_batch([run_one(i) for i in range(start, gated)])
            recorded = max([recorded, *done])
            if gated == len(calls):
                break
            recorded = max(recorded, await self._approval(batch, gated, recorded))
            start = gated + 1
        if recorded != batch.end:
            raise ApplicationError(
                f"tool results recorded through {recorded}, expected {batch.end}", non_retryable=True
            )
        self.state.message_count = recorded
        self.state.tool_calls += len(calls)
        self.state.pending_tool_calls = []
        self.state.pending_arguments = []
        self.state.recorded_positions = []

    async def _run_batch(self, calls: list[Awaitable[int]]) -> list[int]:
        """Run calls (at most ``tool_concurrency`` at once). Once one fails the run (a
        ``PropagatingToolError``, a hook that raised, a store that is down), no later call
        starts and those running are cancelled, so nothing happens after the failure that
        the resume would not do again in order (the failed call first)."""
        if not workflow.patched(BATCH_STOPS_PATCH):
            return list(await asyncio.gather(*calls))
        tasks = [asyncio.ensure_future(call) for call in calls]
        try:
            return list(await asyncio.gather(*tasks))
        except Exception:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)  # their cancellations, recorded
            raise

    async def _needs_approval(self, calls: list[ToolCall]) -> list[bool]:
        """Which calls a human must decide; a call whose result is already recorded needs none."""
        start, recorded = self.state.message_count, set(self.state.recorded_positions)
        needs = await self._gates(calls)
        return [need and start + i not in recorded for i, need in enumerate(needs)]

    async def _gates(self, calls: list[ToolCall]) -> list[bool]:
        specs = [self._spec(call) for call in calls]
        if not any(spec and spec.approval_conditional for spec in specs):
            return [bool(spec and spec.needs_approval) for spec in specs]
        checked = await self._store(
            ApprovalActivities.check_approvals,
            c.CheckApprovalsInput(
                session_id=self.session_id,
                agent=self.config.agent,
                step=self.state.step_index,
                calls=calls,
                batch_start=self.state.message_count,
                turn_position=self._refs_turn(),
            ),
        )
        return checked.needs_approval

    async def _approval(self, batch: Batch, index: int, recorded: int) -> int:
        call, remaining = batch.calls[index], batch.calls[index + 1 :]
        decision = self._gate.take_preset(call.id)
        if decision is None:
            decision = await self._wait_for_decision(call, remaining, recorded, index)
        done = await self._store(
            ApprovalActivities.record_decision,
            c.RecordDecisionInput(
                session_id=self.session_id,
                decision=decision,
                call=call,
                batch_start=batch.start,
                batch=batch.ids,
                index=index,
            ),
        )
        if not decision.approved:
            return done.recorded_through
        if decision.arguments is not None:  # a human's edit runs instead of the model's arguments
            edited = call.model_copy(update={"arguments": decision.arguments})
            return await self._execute_tool(edited, batch, index, arguments_in_store=False)
        return await self._execute_tool(call, batch, index)

    async def _wait_for_decision(
        self, call: ToolCall, remaining: list[ToolCall], recorded: int, index: int
    ) -> c.ApprovalDecision:
        approval_id = str(workflow.uuid4())
        await self._store(
            ApprovalActivities.pause_for_approval,
            c.PauseForApprovalInput(
                session_id=self.session_id,
                approval_id=approval_id,
                remaining_tool_calls=remaining,
                turn_position=self._refs_turn(),
                outcome=self._outcome_event(FinishReason.AWAITING_APPROVAL, approval_id, recorded),
            ),
        )
        spec = self._spec(call)
        shown = self.state.shown_calls(index)  # the call and those after it, with their arguments
        pending = self._gate.open(
            approval_id, self.session_id, self.config.agent, shown[0], shown[1:],
            spec.approval_timeout_seconds if spec else None,
        )  # fmt: skip
        self._outcome = self._summary(FinishReason.AWAITING_APPROVAL, approval_id)
        self._outcome.message_count = recorded
        self._publish(CheckpointStatus.AWAITING_APPROVAL, approval_id)
        self._set_details(f"awaiting approval {approval_id} for {call.name}", pending.arguments)
        metrics.approval(self.config.agent, "requested")
        await self._tell_parent(pending)  # a sub-agent's run: the parent's pauses too
        decision = await self._gate.wait(pending)
        self._outcome = None  # the run goes on: its next pause or its end is what waiters get
        metrics.approval(self.config.agent, "approved" if decision.approved else "rejected")
        self._publish(CheckpointStatus.IN_PROGRESS, None)
        await self._tell_parent(None, approval_id)
        return decision

    async def _execute_tool(self, call: ToolCall, batch: Batch, index: int, arguments_in_store: bool = True) -> int:
        spec = self._spec(call)
        if spec is not None and spec.subagent and self._calls_subagents():
            return await self._run_subagent(call, batch, index)  # a child workflow, not the tool activity
        self._set_details(f"tool {call.name}")
        timeout = spec.timeout_seconds if spec else options.TOOL_TIMEOUT_SECONDS
        out = await self._call(
            ToolActivities.execute_tool,
            c.ExecuteToolInput(
                session_id=self.session_id,
                agent=self.config.agent,
                step=self.state.step_index,
                call=call,
                batch_start=batch.start,
                batch=batch.ids,
                safe_to_retry=bool(spec and spec.safe_to_retry),
                index=index,
                turn_position=self._refs_turn() if arguments_in_store else None,
                arguments_in_store=arguments_in_store and self._refs_turn() is not None,
            ),
            timeout=timeout + options.TOOL_TIMEOUT_MARGIN_SECONDS,
            heartbeat=(spec.heartbeat_seconds or options.TOOL_HEARTBEAT_SECONDS)
            if spec
            else options.TOOL_HEARTBEAT_SECONDS,
            retry=options.TOOL_RETRY,
            summary=f"tool {call.name} {call.id}",
            local=self.config.runs_locally(timeout),
        )
        return out.recorded_through

    def _refs_turn(self) -> int | None:
        """The pending calls' turn when they are references (their arguments in the store)."""
        return self.state.turn_position if self.state.arguments_in_store else None

    def _spec(self, call: ToolCall) -> ToolSpec | None:
        return next((t for t in self.config.tools if t.name == call.name), None)


BATCH_STOPS_PATCH = "batch-stops-on-failure"
"""A call that fails the run cancels the rest of its batch (before: the later calls still ran)."""


class Batch:
    """One model turn's tool calls and where their results go."""

    def __init__(self, start: int, calls: list[ToolCall]) -> None:
        self.start = start
        self.calls = calls
        self.ids = [call.id for call in calls]

    @property
    def end(self) -> int:
        return self.start + len(self.calls)
