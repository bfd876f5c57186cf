"""The agent-run workflow: model turn, the turn's tools, repeat.

Deterministic code only: every read and write of the transcript happens in
activities, which take the session id and positions, never the transcript.
Handlers: ``approve`` (signal) and ``decide`` (update, validated) carry human
decisions; ``wait_outcome`` (update) returns the run's next pause or its end;
``run_state`` and ``pending_approval`` are queries.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, is_cancelled_exception
from temporalio.workflow import ActivityCancellationType

with workflow.unsafe.imports_passed_through():
    import durable_agents.activities.contracts as c
    from durable_agents.checkpoint.format import FinishReason, RunConfig, ToolCall
    from durable_agents.workflows import options, search
    from durable_agents.workflows.approvals import ApprovalGate
    from durable_agents.workflows.contracts import AGENT_RUN_WORKFLOW, AgentRunInput, Outcome, ResumePoint, RunSummary

WAIT_CANCEL = ActivityCancellationType.WAIT_CANCELLATION_COMPLETED


@workflow.defn(name=AGENT_RUN_WORKFLOW)
class AgentRunWorkflow:
    def __init__(self) -> None:
        self._state: c.RunState | None = None
        self._outcome: RunSummary | None = None
        self._handoff: str | None = None  # "continued" | "failed": waiting handlers answer without a summary
        self._gate = ApprovalGate()
        self._inp: AgentRunInput | None = None
        self._local = False

    # -- handlers ---------------------------------------------------------------
    @workflow.query(name="run_state")
    def run_state(self) -> c.RunState | None:
        return self._state

    @workflow.query(name="pending_approval")
    def pending_approval(self) -> c.PendingApproval | None:
        return self._gate.pending

    @workflow.signal(name="approve")
    def approve(self, decision: c.ApprovalDecision) -> None:
        self._gate.offer(decision)

    @workflow.update(name="decide")
    async def decide(self, decision: c.ApprovalDecision) -> Outcome:
        self._gate.offer(decision)
        await workflow.wait_condition(
            lambda: (
                self._handoff is not None
                or (self._outcome is not None and self._outcome.approval_id != decision.approval_id)
            )
        )
        return self._answer()

    @decide.validator
    def _validate_decision(self, decision: c.ApprovalDecision) -> None:
        self._gate.validate(decision)

    @workflow.update(name="wait_outcome")
    async def wait_outcome(self) -> Outcome:
        await workflow.wait_condition(lambda: self._handoff is not None or self._outcome is not None)
        return self._answer()

    def _answer(self) -> Outcome:
        if self._handoff is not None:
            return Outcome(handoff=self._handoff)
        return Outcome(summary=self._outcome)

    # -- the run ----------------------------------------------------------------
    @workflow.run
    async def run(self, inp: AgentRunInput) -> RunSummary:
        self._inp = inp
        try:
            return await self._run(inp)
        except Exception:
            # Let waiting clients know before the failure closes the run.
            self._handoff = "failed"
            await workflow.wait_condition(workflow.all_handlers_finished)
            raise

    async def _run(self, inp: AgentRunInput) -> RunSummary:
        point = inp.resume or await self._begin(inp)
        self._state = point.state
        if inp.approval is not None and point.state.pending_tool_calls:
            self._gate.preset(point.state.pending_tool_calls[0].id, inp.approval)
        try:
            summary = await self._loop(inp, point)
        except (asyncio.CancelledError, ActivityError) as e:
            if not is_cancelled_exception(e):
                raise
            summary = await self._abort(inp.session_id, point.state)
        summary.drift = point.drift
        self._outcome = summary
        self._publish(point.config, point.state, str(summary.finish_reason), None)
        await workflow.wait_condition(workflow.all_handlers_finished)
        return summary

    async def _loop(self, inp: AgentRunInput, point: ResumePoint) -> RunSummary:
        config, state, queued = point.config, point.state, point.queued_input
        self._local = config.local_activities
        while True:
            if state.pending_tool_calls:
                await self._run_tools(inp.session_id, config, state)
            if queued:
                state.message_count = (
                    await self._store_activity(
                        c.APPEND_INPUT,
                        c.AppendInputInput(session_id=inp.session_id, position=state.message_count, messages=queued),
                        c.AppendInputOutput,
                    )
                ).message_count
                queued = []
            if state.step_index - state.run_start_step >= config.max_steps:
                return await self._finish(inp.session_id, state, FinishReason.MAX_STEPS)
            if workflow.info().is_continue_as_new_suggested():
                await self._continue_as_new(inp, ResumePoint(config=config, state=state, drift=point.drift))
            turn = await self._model_turn(inp.session_id, config, state)
            if not turn.tool_calls:
                return self._summary(inp.session_id, state, FinishReason.STOP)
            state.pending_tool_calls = turn.tool_calls

    async def _continue_as_new(self, inp: AgentRunInput, point: ResumePoint) -> None:
        self._handoff = "continued"
        await workflow.wait_condition(workflow.all_handlers_finished)
        workflow.continue_as_new(inp.model_copy(update={"resume": point, "approval": None}))

    async def _begin(self, inp: AgentRunInput) -> ResumePoint:
        begun = await self._store_activity(
            c.BEGIN_RUN,
            c.BeginRunInput(
                session_id=inp.session_id,
                agent=inp.agent,
                input=inp.input,
                model=inp.model,
                resolve_approval_id=inp.approval.approval_id if inp.approval else None,
            ),
            c.BeginRunOutput,
            summary=f"begin run of {inp.agent}",
        )
        if begun.drift is not None:
            workflow.logger.warning("agent %s drifted: %s", inp.agent, begun.drift.describe())
        self._publish(begun.config, begun.state, "in-progress", None)
        return ResumePoint(config=begun.config, state=begun.state, queued_input=begun.queued_input, drift=begun.drift)

    async def _model_turn(self, session_id: str, config: RunConfig, state: c.RunState) -> c.ModelTurnOutput:
        step = state.step_index + 1
        self._set_details(state, f"model turn {step}")
        turn = await self._activity(
            c.MODEL_TURN,
            c.ModelTurnInput(session_id=session_id, position=state.message_count, step=step),
            c.ModelTurnOutput,
            timeout=config.model_timeout_seconds,
            heartbeat=config.model_heartbeat_seconds,
            retry=options.MODEL_RETRY,
            summary=f"model turn {step} ({config.model})",
        )
        state.step_index = step
        state.message_count += 1
        state.usage = turn.usage
        return turn

    # -- tools and approvals ------------------------------------------------------
    async def _run_tools(self, session_id: str, config: RunConfig, state: c.RunState) -> None:
        """Run the turn's calls in order; a call that needs approval pauses the batch there."""
        calls = state.pending_tool_calls
        batch = [call.id for call in calls]
        batch_start = state.message_count
        limit = asyncio.Semaphore(config.tool_concurrency)

        async def run_one(call: ToolCall) -> int:
            async with limit:
                return await self._execute_tool(session_id, config, state, call, batch_start, batch)

        needs = await self._needs_approval(session_id, config, state, calls)
        recorded = batch_start
        start = 0
        while start < len(calls):
            gated = next((i for i in range(start, len(calls)) if needs[i]), len(calls))
            done = await asyncio.gather(*(run_one(call) for call in calls[start:gated]))
            recorded = max([recorded, *done])
            if gated == len(calls):
                break
            recorded = max(
                recorded, await self._approval(session_id, config, state, calls, gated, batch_start, recorded)
            )
            start = gated + 1
        if recorded != batch_start + len(calls):
            raise ApplicationError(
                f"tool results recorded through {recorded}, expected {batch_start + len(calls)}", non_retryable=True
            )
        state.message_count = recorded
        state.tool_calls += len(calls)
        state.pending_tool_calls = []

    async def _needs_approval(
        self, session_id: str, config: RunConfig, state: c.RunState, calls: list[ToolCall]
    ) -> list[bool]:
        specs = {t.name: t for t in config.tools}
        needs = [bool(specs.get(x.name) and specs[x.name].needs_approval) for x in calls]
        if any(specs.get(x.name) and specs[x.name].approval_conditional for x in calls):
            checked = await self._store_activity(
                c.CHECK_APPROVALS,
                c.CheckApprovalsInput(session_id=session_id, agent=config.agent, step=state.step_index, calls=calls),
                c.CheckApprovalsOutput,
            )
            needs = checked.needs_approval
        return needs

    async def _approval(
        self,
        session_id: str,
        config: RunConfig,
        state: c.RunState,
        calls: list[ToolCall],
        index: int,
        batch_start: int,
        recorded: int,
    ) -> int:
        call, spec = calls[index], next((t for t in config.tools if t.name == calls[index].name), None)
        decision = self._gate.take_preset(call.id)
        if decision is None:
            approval_id = str(workflow.uuid4())
            await self._store_activity(
                c.PAUSE_FOR_APPROVAL,
                c.PauseForApprovalInput(
                    session_id=session_id, approval_id=approval_id, remaining_tool_calls=calls[index + 1 :]
                ),
                None,
            )
            pending = self._gate.open(
                approval_id,
                session_id,
                config.agent,
                call,
                calls[index + 1 :],
                spec.approval_timeout_seconds if spec else None,
            )
            self._outcome = self._summary(session_id, state, FinishReason.AWAITING_APPROVAL, approval_id)
            self._outcome.message_count = recorded
            self._publish(config, state, "awaiting-approval", approval_id)
            self._set_details(state, f"awaiting approval {approval_id} for {call.name}")
            decision = await self._gate.wait(pending)
            self._publish(config, state, "in-progress", None)
        batch = [x.id for x in calls]
        recorded = (
            await self._store_activity(
                c.RECORD_DECISION,
                c.RecordDecisionInput(
                    session_id=session_id, decision=decision, call=call, batch_start=batch_start, batch=batch
                ),
                c.RecordDecisionOutput,
            )
        ).recorded_through
        if not decision.approved:
            return recorded
        approved = call.model_copy(update={"arguments": decision.arguments}) if decision.arguments else call
        return await self._execute_tool(session_id, config, state, approved, batch_start, batch)

    async def _execute_tool(
        self, session_id: str, config: RunConfig, state: c.RunState, call: ToolCall, batch_start: int, batch: list[str]
    ) -> int:
        spec = next((t for t in config.tools if t.name == call.name), None)
        self._set_details(state, f"tool {call.name}")
        out = await self._activity(
            c.EXECUTE_TOOL,
            c.ExecuteToolInput(
                session_id=session_id,
                agent=config.agent,
                step=state.step_index,
                call=call,
                batch_start=batch_start,
                batch=batch,
                safe_to_retry=bool(spec and spec.safe_to_retry),
            ),
            c.ExecuteToolOutput,
            timeout=spec.timeout_seconds if spec else 60,
            heartbeat=(spec.heartbeat_seconds or 10) if spec else 10,
            retry=options.TOOL_RETRY,
            summary=f"tool {call.name} {call.id}",
        )
        return out.recorded_through

    # -- endings --------------------------------------------------------------------
    async def _abort(self, session_id: str, state: c.RunState) -> RunSummary:
        """Cancelled: unfinished calls get ``cancelled`` results; the checkpoint stays resumable."""
        self._gate.close()
        aborted = await self._store_activity(
            c.ABORT_RUN,
            c.AbortRunInput(session_id=session_id, batch_start=state.message_count, batch=state.pending_tool_calls),
            c.AbortRunOutput,
        )
        state.tool_calls += len(state.pending_tool_calls)
        state.pending_tool_calls = []
        state.message_count = aborted.message_count
        return self._summary(session_id, state, FinishReason.ABORTED)

    async def _finish(self, session_id: str, state: c.RunState, reason: FinishReason) -> RunSummary:
        await self._store_activity(
            c.FINISH_RUN,
            c.FinishRunInput(session_id=session_id, finish_reason=reason, message_count=state.message_count),
            None,
        )
        return self._summary(session_id, state, reason)

    def _summary(
        self, session_id: str, state: c.RunState, reason: FinishReason, approval_id: str | None = None
    ) -> RunSummary:
        self._set_details(state, str(reason))
        return RunSummary(
            session_id=session_id,
            finish_reason=reason,
            steps=state.step_index - state.run_start_step,
            usage=state.usage - state.run_start_usage,
            tool_calls=state.tool_calls,
            message_count=state.message_count,
            run_start_index=state.run_start_index,
            approval_id=approval_id,
        )

    # -- plumbing ---------------------------------------------------------------------
    async def _store_activity(self, name: str, arg: object, result_type: type | None, summary: str | None = None):
        return await self._activity(
            name,
            arg,
            result_type,
            timeout=options.STORE_TIMEOUT.total_seconds(),
            heartbeat=options.STORE_HEARTBEAT_SECONDS,
            retry=options.STORE_RETRY,
            summary=summary,
        )

    async def _activity(
        self,
        name: str,
        arg: object,
        result_type: type | None,
        *,
        timeout: float,
        heartbeat: float | None,
        retry,
        summary: str | None,
    ):
        """A regular activity, or a local one when the agent asks for the fast path.

        Local activities re-run after a crash instead of resuming; the store
        makes that harmless (a stored turn is returned, a started
        at-most-once tool becomes a durability-error result)."""
        if self._local:
            return await workflow.execute_local_activity(
                name,
                arg,
                result_type=result_type,
                start_to_close_timeout=timedelta(seconds=timeout),
                retry_policy=retry,
                cancellation_type=WAIT_CANCEL,
                summary=summary,
            )
        return await workflow.execute_activity(
            name,
            arg,
            result_type=result_type,
            start_to_close_timeout=timedelta(seconds=timeout),
            heartbeat_timeout=timedelta(seconds=heartbeat) if heartbeat else None,
            retry_policy=retry,
            cancellation_type=WAIT_CANCEL,
            summary=summary,
        )

    def _publish(self, config: RunConfig, state: c.RunState, status: str, approval_id: str | None) -> None:
        assert self._inp is not None
        search.publish(
            self._inp.search_attributes,
            agent=config.agent,
            status=status,
            step=state.step_index,
            approval_id=approval_id,
        )

    def _set_details(self, state: c.RunState, status: str) -> None:
        workflow.set_current_details(f"step {state.step_index} · {status}")
