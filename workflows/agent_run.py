"""The agent-run workflow: model turn, the turn's tools, repeat.

Deterministic code only: every read and write of the transcript happens in
activities, which take the session id and positions, never the transcript.
Handlers: ``approve`` (signal) and ``decide`` (update, validated) carry human
decisions; ``wait_outcome`` (update) returns the run's next pause or its end;
``run_state`` and ``pending_approval`` are queries. Any Temporal client may call
them (the wire contract: ``durable_agents/contract/``), so no input they take can
fail a workflow task: a bad start fails the run at once, a bad signal is dropped
and said, a bad update is refused.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    ChildWorkflowError,
    WorkflowAlreadyStartedError,
    is_cancelled_exception,
)
from temporalio.workflow import ActivityCancellationType, ChildWorkflowCancellationType, ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    import durable_agents.activities.contracts as c
    import durable_agents.activities.metrics as metrics
    from durable_agents.activities.approval_policy import (
        DecideByPolicyInput,
        DecideByPolicyOutput,
        PolicyDecisionActivities,
    )
    from durable_agents.activities.approvals import ApprovalActivities
    from durable_agents.activities.events import EventActivities
    from durable_agents.activities.model import ModelActivities
    from durable_agents.activities.session import SessionActivities
    from durable_agents.activities.subagent_activities import SubagentActivities
    from durable_agents.activities.subagent_contracts import (
        SUBAGENT_APPROVAL_SIGNAL,
        RecordSubagentResultInput,
        RelaySubagentApprovalInput,
        StartSubagentInput,
        SubagentApprovalEvent,
        SubagentParent,
    )
    from durable_agents.activities.tools import ToolActivities
    from durable_agents.checkpoint.errors import FailureType
    from durable_agents.checkpoint.format import (
        CheckpointStatus,
        FinishReason,
        Message,
        RunConfig,
        RunError,
        ToolCall,
        ToolSpec,
    )
    from durable_agents.checkpoint.pricing import limit_reached
    from durable_agents.workflows import budget_waits, options, search  # budget_waits: issue 33
    from durable_agents.workflows.approval_policy import (
        APPROVAL_POLICY_IN_TURN_PATCH,
        APPROVAL_POLICY_PATCH,
        Evaluator,
        said,
    )
    from durable_agents.workflows.approvals import ApprovalGate, one_decision, too_large
    from durable_agents.workflows.contracts import (
        AGENT_RUN_WORKFLOW,
        AgentRunInput,
        Handoff,
        InvalidRunInput,
        Outcome,
        ResumePoint,
        RunSummary,
        run_input,
    )
    from durable_agents.workflows.endings import concise_failure, outcome_event, status_after
    from durable_agents.workflows.subagents import (
        LIVE_CHILD_RETRIES,
        SUBAGENTS_PATCH,
        Child,
        SubagentRelays,
        child_failure,
        store_attribute,
    )

WAIT_CANCEL = ActivityCancellationType.WAIT_CANCELLATION_COMPLETED
In = TypeVar("In")
Out = TypeVar("Out")


@workflow.defn(name=AGENT_RUN_WORKFLOW, sandboxed=options.SANDBOXED)
class AgentRunWorkflow:
    """One run of a session. Its state lives here; activities get references to it."""

    def __init__(self) -> None:
        self._inp: AgentRunInput | None = None
        self._config: RunConfig | None = None
        self._state: c.RunState | None = None
        self._outcome: RunSummary | None = None
        self._handoff: Handoff | None = None
        """Set when waiting handlers must answer without a summary (continued or failed)."""
        self._gate = ApprovalGate()
        self._subagents = SubagentRelays()
        self._details = ""
        self._last_decision = ""
        """The run's latest decision by policy, in words (shown in Current Details)."""
        self._policy_approved: dict[int, c.PolicyVerdict] = {}
        """The last model turn's gated calls the approval policy approved (by index)."""
        self._budget_waits = budget_waits.BudgetWaits()  # rate-limit budgets (issue 33)

    # -- handlers (any Temporal client may call them: see the wire contract) -------------
    @workflow.signal(
        name=budget_waits.BUDGET_WAIT_SIGNAL,
        description="Internal: the run's model call waits for its rate-limit budget (shown in Current Details).",
    )
    def budget_wait(self, *payloads: Any) -> None:  # rate-limit budgets (issue 33)
        try:  # any client may send it: a payload that is not one notice is dropped, never a failed task
            (payload,) = payloads
            notice = budget_waits.BudgetWaitNotice.model_validate(payload)
        except ValueError as e:
            workflow.logger.warning(
                "ignoring a %s signal of %d payloads: %s", budget_waits.BUDGET_WAIT_SIGNAL, len(payloads), e
            )
            return
        self._set_details(None)
        workflow.set_current_details(budget_waits.show_wait(workflow.get_current_details(), notice))

    @workflow.query(
        name="run_state",
        description="Where the run stands (step, usage, message count) and its pending tool calls "
        "with their arguments (each at most 4 KiB of JSON, else a $truncated marker); null before it began.",
    )
    def run_state(self) -> c.RunState | None:
        return self._state.view() if self._state is not None else None

    @workflow.query(
        name="pending_approval",
        description="The tool call waiting for a person's decision (approvalId, toolName, arguments, "
        "requestedAt, timeoutAt), or null.",
    )
    def pending_approval(self) -> c.PendingApproval | None:
        return self._gate.pending

    @workflow.signal(
        name="approve",
        description='Decide the pending approval: one payload {"approvalId": "…", "approved": true, '
        '"note"?: "…", "arguments"?: {edited}, "decidedBy"?: "…"}. A payload that is not one decision for '
        f"the pending approval, or with a part over {c.MAX_DECISION_BYTES // 1024} KiB, is ignored: logged by "
        "the worker and shown in the run's Current Details.",
    )
    def approve(self, *payloads: Any) -> None:
        try:
            decision = self._gate.check(
                payloads,
                self._pending_spec(check=workflow.patched(SIGNAL_CHECK_PATCH)),
                bounded=lambda: workflow.patched(DECISION_SIZE_PATCH),
            )
        except ApplicationError as e:
            self._gate.drop(e.message)
            self._set_details(None)
            return
        self._gate.offer(decision)

    @workflow.update(
        name="decide",
        description="Decide the pending approval (the payload of approve) and wait for what the run does "
        "next: returns {summary: its next pause or its end, handoff: null | continued | failed}. Refused "
        "(nothing decided) for an approval that is not pending, edited arguments that fail the tool's schema, "
        f"or a part over {c.MAX_DECISION_BYTES // 1024} KiB.",
    )
    async def decide(self, *payloads: Any) -> Outcome:
        decision = one_decision(payloads)  # the validator took it
        self._gate.offer(decision)
        await workflow.wait_condition(
            lambda: (
                self._handoff is not None
                or (self._outcome is not None and self._outcome.approval_id != decision.approval_id)
            )
        )
        return self._answer()

    @decide.validator
    def _validate_decision(self, *payloads: Any) -> None:
        self._gate.check(payloads, self._pending_spec())

    @workflow.update(
        name="wait_outcome",
        description="Wait for the run's next pause or its end: {summary, handoff}; handoff 'continued' "
        "(ask the run that continued it, same workflow id) or 'failed' (the workflow's failure says why).",
    )
    async def wait_outcome(self) -> Outcome:
        await workflow.wait_condition(lambda: self._handoff is not None or self._outcome is not None)
        return self._answer()

    def _answer(self) -> Outcome:
        if self._handoff is not None:
            return Outcome(handoff=self._handoff)
        return Outcome(summary=self._outcome)

    # -- the run ----------------------------------------------------------------
    @workflow.run
    async def run(self, raw: Any) -> RunSummary:
        """``raw`` is an ``AgentRunInput`` as JSON: checked here, so a bad one fails the run at
        once with one readable error (decoded by the SDK, it would fail every workflow task)."""
        try:
            self._inp = inp = run_input(raw, workflow.info().workflow_id)
            refusal = too_large(inp.approval) if inp.approval is not None else None
            if refusal is not None and workflow.patched(DECISION_SIZE_PATCH):
                raise InvalidRunInput(f"AgentRun's approval is refused: {refusal.message}; nothing was decided")
            problem = c.grant_problem(inp.approval, None) if inp.approval is not None else None
            if problem is not None:  # (a grant is new: no older run has one)
                raise InvalidRunInput(f"AgentRun's approval is refused: {problem}; nothing was decided")
        except InvalidRunInput as e:
            self._handoff = "failed"
            await workflow.wait_condition(workflow.all_handlers_finished)
            raise ApplicationError(str(e), type=FailureType.INVALID_RUN_INPUT, non_retryable=True) from None
        try:
            return await self._run()
        except (ActivityError, ApplicationError) as e:
            # One concise failure (the cause's own message and type, no nested traces),
            # said in the checkpoint too; waiting clients learn of it before the run closes.
            self._handoff = "failed"
            failure = concise_failure(e)
            metrics.run_ended(inp.agent, "failed")
            if self._state is not None and workflow.patched(RECORD_FAILURE_PATCH):
                await self._record_failure(failure)
            await workflow.wait_condition(workflow.all_handlers_finished)
            raise failure from None
        except Exception:
            self._handoff = "failed"
            await workflow.wait_condition(workflow.all_handlers_finished)
            raise

    async def _record_failure(self, failure: ApplicationError) -> None:
        error = RunError(message=failure.message, type=failure.type, step=self.state.step_index)
        try:
            await workflow.execute_activity_method(
                SessionActivities.record_failure,
                c.RecordFailureInput(session_id=self.session_id, error=error),
                start_to_close_timeout=options.STORE_TIMEOUT,
                retry_policy=options.RECORD_FAILURE_RETRY,
                summary="record the failure",
            )
        except ActivityError:
            workflow.logger.warning("could not record the failure of %s in the store", self.session_id)

    async def _run(self) -> RunSummary:
        point = self.inp.resume or await self._begin()
        self._config, self._state = point.config, point.state
        if self.inp.approval is not None and self.state.pending_tool_calls:
            self._gate.preset(self.state.pending_tool_calls[0].id, self.inp.approval)
        try:
            summary = await self._loop(point)
        except (asyncio.CancelledError, ActivityError) as e:
            if not is_cancelled_exception(e):
                raise
            summary = await self._abort()
        summary.drift = point.drift
        await self._record_outcome(summary)
        self._outcome = summary
        self._publish(status_after(summary.finish_reason), None, summary.finish_reason)
        metrics.run_ended(self.config.agent, str(summary.finish_reason))
        await workflow.wait_condition(workflow.all_handlers_finished)
        return summary

    async def _loop(self, point: ResumePoint) -> RunSummary:
        queued = point.queued_input
        while True:
            if self.state.pending_tool_calls:
                await self._run_tools()
            if queued:
                await self._append_input(queued)
                queued = []
            if self.state.step_index - self.state.run_start_step >= self.config.max_steps:
                return await self._finish(FinishReason.MAX_STEPS)
            limited = limit_reached(
                self.config.usage_limits, self.state.usage - self.state.run_start_usage, self.config.model
            )
            if limited is not None:
                summary = await self._finish(FinishReason.USAGE_LIMIT)
                summary.detail = limited
                return summary
            if workflow.info().is_continue_as_new_suggested():
                await self._continue_as_new(point)
            turn = await self._model_turn()
            if turn.output_retry:  # the answer failed the output type; the model was told why
                self.state.output_retries += 1
                continue
            if not turn.tool_calls:
                summary = self._summary(FinishReason.STOP)  # the model activity saved it as finished
                summary.text, summary.text_truncated, summary.output = turn.text, turn.text_truncated, turn.output
                return summary
            if turn.tools_recorded_through is not None:  # a local step: its calls ran in its model turn
                self.state.message_count = turn.tools_recorded_through
                self.state.tool_calls += len(turn.tool_calls)
                continue
            self.state.pending_tool_calls = turn.tool_calls
            self.state.pending_arguments = turn.tool_call_arguments

    async def _begin(self) -> ResumePoint:
        inp = self.inp
        # a run started without saying (any client but ours): its attributes where the namespace has them
        ask = inp.search_attributes is None and workflow.patched(SEARCH_ATTRIBUTES_PATCH)
        # our client's word that the agent steps locally: begin in this workflow task, the first
        # model turn right after it (no activity task and no second workflow task before it)
        local = bool(inp.begin_locally) and workflow.patched(LOCAL_BEGIN_PATCH)
        begun = await self._store(
            SessionActivities.begin_run,
            c.BeginRunInput(
                **inp.request(),
                resolve_approval_id=inp.approval.approval_id if inp.approval else None,
                parent_session_id=inp.parent.session_id if inp.parent else None,
                parent_tool_call_id=inp.parent.tool_call_id if inp.parent else None,
                parent_session_uid=inp.parent.session_uid if inp.parent else None,
                search_attributes=list(search.RUN_ATTRIBUTES) if ask else [],
            ),
            summary=f"begin run of {inp.agent}",
            local=local,
        )
        if inp.search_attributes is None:  # decided once: continue-as-new and sub-agents carry it
            self._inp = inp.model_copy(update={"search_attributes": bool(begun.search_attributes)})
        if begun.drift is not None:
            workflow.logger.warning("agent %s drifted: %s", inp.agent, begun.drift.describe())
        self._config, self._state = begun.config, begun.state
        self._publish(CheckpointStatus.IN_PROGRESS, None)
        return ResumePoint(config=begun.config, state=begun.state, queued_input=begun.queued_input, drift=begun.drift)

    async def _continue_as_new(self, point: ResumePoint) -> None:
        self._handoff = "continued"
        await workflow.wait_condition(workflow.all_handlers_finished)
        resume = ResumePoint(config=self.config, state=self.state, drift=point.drift)
        workflow.continue_as_new(self.inp.model_copy(update={"resume": resume, "approval": None}))

    async def _append_input(self, messages: list[Message]) -> None:
        appended = await self._store(
            SessionActivities.append_input,
            c.AppendInputInput(session_id=self.session_id, position=self.state.message_count, messages=messages),
        )
        self.state.message_count = appended.message_count

    async def _model_turn(self) -> c.ModelTurnOutput:
        step = self.state.step_index + 1
        self._set_details(f"model turn {step}")
        # rate-limit budgets (issue 33): a wait for budget the call cannot make in its attempt comes back and
        # waits on a timer; after one, the run's turns have slack for a wait inside the attempt (the call keeps
        # its own timeout); a worker without budgets never hands one back (slack 0: the timeout as before)
        # the approval policy decides the turn's gated calls in the model activity (issue 42: no
        # activity of their own; a local step runs those it approves); before the patch each had a
        # local activity of its own (decide_by_policy)
        decide_gated = any(
            spec.needs_approval and not spec.approval_conditional for spec in self.config.tools
        ) and workflow.patched(APPROVAL_POLICY_IN_TURN_PATCH)
        tools_seconds = self._turn_tools_seconds(decide_gated)
        turn = await self._budget_waits.turn(
            lambda slack: self._call(
                ModelActivities.model_turn,
                c.ModelTurnInput(
                    session_id=self.session_id,
                    position=self.state.message_count,
                    step=step,
                    output_retries_used=self.state.output_retries,
                    tools_seconds=tools_seconds,
                    decide_gated=decide_gated,
                    asked_at=workflow.now() if decide_gated else None,
                ),
                timeout=self.config.model_timeout_seconds + slack + tools_seconds,
                heartbeat=self.config.model_heartbeat_seconds,
                retry=options.MODEL_RETRY,
                summary=f"model turn {step} ({self.config.model})",
                local=self.config.runs_locally(),
            ),
            lambda line: self._set_details(f"model turn {step}\n{line}"),
        )
        self.state.step_index = step
        # after a context summary stored with it, when there is one (older histories: None)
        self.state.turn_position = turn.turn_position if turn.turn_position is not None else self.state.message_count
        self.state.arguments_in_store = turn.arguments_in_store
        self.state.message_count += turn.appended
        self.state.usage = turn.usage
        self._policy_approved = turn.policy_approved
        return turn

    def _turn_tools_seconds(self, decide_gated: bool = False) -> float:
        """The time a local step's model turn gets for running the turn's calls itself (one local
        activity a step: docs/design.md §2): the longest of the agent's tools that could run so, and
        the margin a tool activity gets; 0 when the workflow runs the calls, as before the patch."""
        config = self.config
        if not config.runs_locally():
            return 0.0
        longest = max(
            (spec.timeout_seconds for spec in config.tools if config.runs_in_turn(spec, approved=decide_gated)),
            default=None,
        )  # (decide_gated: a gated call the policy approves runs in the turn too)
        if longest is None or not workflow.patched(LOCAL_STEP_PATCH):
            return 0.0
        return longest + options.TOOL_TIMEOUT_MARGIN_SECONDS

    # -- endings --------------------------------------------------------------------
    async def _abort(self) -> RunSummary:
        """Cancelled: unfinished calls get ``cancelled`` results; the checkpoint stays resumable."""
        self._gate.close()
        aborted = await self._store(
            SessionActivities.abort_run,
            c.AbortRunInput(
                session_id=self.session_id,
                batch_start=self.state.message_count,
                batch=self.state.pending_tool_calls,
            ),
        )
        self.state.tool_calls += len(self.state.pending_tool_calls)
        self.state.pending_tool_calls = []
        self.state.pending_arguments = []
        self.state.message_count = aborted.message_count
        return self._summary(FinishReason.ABORTED)

    async def _finish(self, reason: FinishReason) -> RunSummary:
        await self._store(
            SessionActivities.finish_run,
            c.FinishRunInput(session_id=self.session_id, finish_reason=reason, message_count=self.state.message_count),
        )
        return self._summary(reason)

    def _summary(self, reason: FinishReason, approval_id: str | None = None) -> RunSummary:
        state = self.state
        self._set_details(str(reason))
        return RunSummary(
            session_id=self.session_id,
            finish_reason=reason,
            steps=state.step_index - state.run_start_step,
            usage=state.usage - state.run_start_usage,
            tool_calls=state.tool_calls,
            message_count=state.message_count,
            run_start_index=state.run_start_index,
            approval_id=approval_id,
        )

    # -- plumbing ---------------------------------------------------------------------
    @property
    def inp(self) -> AgentRunInput:
        assert self._inp is not None
        return self._inp

    @property
    def config(self) -> RunConfig:
        assert self._config is not None, "the run has not begun"
        return self._config

    @property
    def state(self) -> c.RunState:
        assert self._state is not None, "the run has not begun"
        return self._state

    @property
    def session_id(self) -> str:
        return self.inp.session_id

    async def _store(
        self, fn: Callable[[Any, In], Awaitable[Out]], arg: In, summary: str | None = None, local: bool = False
    ) -> Out:
        return await self._call(
            fn,
            arg,
            timeout=options.STORE_TIMEOUT.total_seconds(),
            heartbeat=options.STORE_HEARTBEAT_SECONDS,
            retry=options.STORE_RETRY,
            summary=summary,
            local=local or (self._config is not None and self._config.runs_locally()),  # begin_run: as _begin says
        )

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
        """A regular activity, or a local one (the run's activity mode decides, per step).

        Local activities re-run after a crash instead of resuming; the store
        makes that harmless (a stored turn is returned, a started
        at-most-once tool becomes a durability-error result). A crash is noticed
        when the run's workflow task times out (``AgentClient(workflow_task_timeout=…)``)."""
        if local:
            return await workflow.execute_local_activity_method(
                fn,
                arg,
                start_to_close_timeout=timedelta(seconds=timeout),
                retry_policy=retry,
                cancellation_type=WAIT_CANCEL,
                summary=summary,
            )
        return await workflow.execute_activity_method(
            fn,
            arg,
            start_to_close_timeout=timedelta(seconds=timeout),
            heartbeat_timeout=timedelta(seconds=heartbeat) if heartbeat else None,
            retry_policy=retry,
            cancellation_type=WAIT_CANCEL,
            summary=summary,
        )

    def _publish(
        self, status: CheckpointStatus, approval_id: str | None, finish_reason: FinishReason | None = None
    ) -> None:
        search.publish(
            bool(self.inp.search_attributes),
            agent=self.config.agent,
            status=str(status),
            step=self.state.step_index,
            approval_id=approval_id,
            finish_reason=str(finish_reason) if finish_reason else None,
        )

    def _set_details(self, status: str | None, arguments: dict[str, Any] | None = None) -> None:
        """The run's Current Details in the Temporal UI: its step and status (None: keep the
        last one), a pending call's arguments, and the signals it ignored lately."""
        if status is not None:
            self._details = f"step {self.state.step_index} · {status}"
            if arguments is not None:
                self._details += f"\narguments: {json.dumps(arguments, ensure_ascii=False, sort_keys=True)}"
        dropped = "".join(f"\nignored a signal: {why}" for why in self._gate.dropped)
        decided = f"\nlast decision: {self._last_decision}" if self._last_decision else ""
        workflow.set_current_details(self._details + decided + dropped)

    def _pending_spec(self, check: bool = True) -> ToolSpec | None:
        """The pending call's tool, whose schema edited arguments must fit (None: not known
        here, as for a sub-agent's call, or not checked)."""
        pending = self._gate.pending
        if not check or pending is None or pending.subagent_session_id is not None or self._config is None:
            return None
        return next((t for t in self._config.tools if t.name == pending.tool_name), None)

    # -- streaming: the outcome in the run's event log ------------------------------------
    async def _record_outcome(self, summary: RunSummary) -> None:
        """A streamed run writes its outcome to its event log before a caller can learn it
        from the run (so a reader that has the outcome finds the event there)."""
        if not self.config.stream or not workflow.patched(STREAM_OUTCOME_PATCH):
            return
        key = f"outcome:{workflow.info().run_id}:{summary.finish_reason}"
        await self._store(
            EventActivities.record_events,
            c.RecordEventsInput(session_id=self.session_id, events=[outcome_event(summary)], keys=[key]),
            summary="stream the outcome",
        )

    def _outcome_event(self, reason: FinishReason, approval_id: str, message_count: int) -> dict[str, Any] | None:
        """The pause of a streamed run as its ``RunPaused`` event (written with the pause)."""
        if not self.config.stream:
            return None
        summary = self._summary(reason, approval_id)
        summary.message_count = message_count
        return outcome_event(summary)

    # -- the turn's tools: in order, gating the calls a human decides ---------------------
    async def _run_tools(self) -> None:
        """Run the turn's calls in order; a call that needs approval pauses the batch there."""
        calls = self.state.pending_tool_calls
        batch = Batch(start=self.state.message_count, calls=calls)
        limit = asyncio.Semaphore(self.config.tool_concurrency)

        async def run_one(index: int) -> int:
            async with limit:
                return await self._execute_tool(calls[index], batch, index)

        needs = await self._needs_approval(calls)
        approved = {i: v for i, v in self._policy_approved.items() if i < len(calls) and needs[i]}
        self._policy_approved = {}
        for index in approved:  # approved by policy in the model turn: they run as ungated calls
            needs[index] = False
        recorded = batch.start
        start = 0
        while start < len(calls):
            gated = next((i for i in range(start, len(calls)) if needs[i]), len(calls))
            for index in range(start, gated):  # said in call order, with the decisions made here
                if index in approved:
                    self._noted(calls[index], approved[index])
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
        ruled: DecideByPolicyOutput | None = None
        evaluator: Evaluator | None = None
        by_policy = workflow.patched(APPROVAL_POLICY_PATCH)
        if decision is None and by_policy:
            approval_id = str(workflow.uuid4())
            ruled = await self._decide_by_policy(approval_id, batch, index)
            if ruled.recorded_through is not None:  # approved or denied by policy, and recorded
                return await self._ruled(ruled, call, batch, index)
            decision, evaluator = await self._wait_for_decision(call, remaining, recorded, index, approval_id, ruled)
        elif decision is None:
            decision, evaluator = await self._wait_for_decision(call, remaining, recorded, index)
        source = "person"
        if evaluator is not None and evaluator.decided:
            source = "evaluator"
        elif decision.approval_id in self._gate.timed_out:
            source = "timeout"
        evaluation = evaluator.evaluation if evaluator is not None else None
        done = await self._store(
            ApprovalActivities.record_decision,
            c.RecordDecisionInput(
                session_id=self.session_id,
                decision=decision,
                call=call,
                batch_start=batch.start,
                batch=batch.ids,
                index=index,
                agent=self.config.agent if by_policy else None,
                turn_position=self._refs_turn() if by_policy else None,
                source=source if by_policy else None,  # (older histories: as recorded then)
                evaluation=evaluation,
                policy=ruled.verdict if ruled is not None else None,
                asked_at=workflow.now() if by_policy else None,
            ),
        )
        if evaluator is not None and evaluator.decided and evaluation is not None:
            self._last_decision = (
                f"{call.name} {call.id} {'approved' if decision.approved else 'denied'} by the evaluator "
                f"(criteria {evaluation.criteria!r}, confidence {evaluation.confidence or 0:.2f})"
            )
        if not decision.approved:
            return done.recorded_through
        if decision.arguments is not None:  # a human's edit runs instead of the model's arguments
            edited = call.model_copy(update={"arguments": decision.arguments})
            return await self._execute_tool(edited, batch, index, arguments_in_store=False)
        return await self._execute_tool(call, batch, index)

    async def _decide_by_policy(self, approval_id: str, batch: Batch, index: int) -> DecideByPolicyOutput:
        """The policy's decision on the gated call (recorded when it approves or denies)."""
        call = batch.calls[index]
        return await self._store(
            PolicyDecisionActivities.decide_by_policy,
            DecideByPolicyInput(
                session_id=self.session_id,
                agent=self.config.agent,
                approval_id=approval_id,
                call=call,
                batch_start=batch.start,
                batch=batch.ids,
                index=index,
                turn_position=self._refs_turn(),
                asked_at=workflow.now(),
            ),
            summary=f"approval policy {call.name} {call.id}",
            local=True,  # a few reads and one write: cheap, and re-run safely (it finds its record)
        )

    async def _ruled(self, ruled: DecideByPolicyOutput, call: ToolCall, batch: Batch, index: int) -> int:
        """A call the policy approved (it runs) or denied (its rejection is recorded)."""
        approved = ruled.verdict.outcome == "approve"
        self._noted(call, ruled.verdict)
        if not approved:
            return ruled.recorded_through or batch.start
        return await self._execute_tool(call, batch, index)

    def _noted(self, call: ToolCall, verdict: c.PolicyVerdict) -> None:
        """The policy's decision on a call, said in Current Details and the approval metrics."""
        self._last_decision = f"{call.name} {call.id} {said(verdict)}"
        metrics.approval(self.config.agent, "approved" if verdict.outcome == "approve" else "rejected")
        self._set_details(f"tool {call.name} {said(verdict)}")

    async def _wait_for_decision(
        self,
        call: ToolCall,
        remaining: list[ToolCall],
        recorded: int,
        index: int,
        approval_id: str | None = None,
        ruled: DecideByPolicyOutput | None = None,
    ) -> tuple[c.ApprovalDecision, Evaluator | None]:
        approval_id = approval_id or str(workflow.uuid4())
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
        waiting = f"awaiting approval {approval_id} for {call.name}"
        evaluator = None
        if ruled is not None and ruled.auto is not None:
            evaluator = Evaluator(self._gate, pending, ruled.auto)
            waiting += f" (auto mode: evaluator judging by {ruled.auto.criteria.name!r})"

            def escalated(evaluation: c.Evaluation) -> None:
                if self._gate.pending is not None and self._gate.pending.approval_id == approval_id:
                    self._set_details(
                        f"awaiting approval {approval_id} for {call.name} (the evaluator left it to a person: "
                        f"{evaluation.escalated})",
                        pending.arguments,
                    )

            evaluator.on_escalated = escalated
            evaluator.start(
                self.session_id, self.config.agent, call, self.state.message_count + index, self._refs_turn()
            )
        self._set_details(waiting, pending.arguments)
        metrics.approval(self.config.agent, "requested")
        await self._tell_parent(pending)  # a sub-agent's run: the parent's pauses too
        try:
            decision = await self._gate.wait(pending)
        finally:  # decided, or the run aborted: the evaluator has nothing more to do
            if evaluator is not None:
                await evaluator.stop()
        self._outcome = None  # the run goes on: its next pause or its end is what waiters get
        metrics.approval(self.config.agent, "approved" if decision.approved else "rejected")
        self._publish(CheckpointStatus.IN_PROGRESS, None)
        await self._tell_parent(None, approval_id)
        return decision, evaluator

    async def _execute_tool(self, call: ToolCall, batch: Batch, index: int, arguments_in_store: bool = True) -> int:
        spec = self._spec(call)
        if spec is not None and spec.subagent and workflow.patched(SUBAGENTS_PATCH):
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

    # -- sub-agent calls: a child workflow each (see workflows/subagents.py) ------------
    @workflow.signal(
        name=SUBAGENT_APPROVAL_SIGNAL,
        description="Internal, not for people or other clients: a sub-agent's run tells its parent's run "
        "that it waits for an approval or went on. Decide sub-agent approvals with approve or decide.",
    )
    def subagent_approval(self, *payloads: Any) -> None:
        try:
            (payload,) = payloads
            event = SubagentApprovalEvent.model_validate(payload)
        except ValueError as e:  # pydantic's ValidationError too: never a failed workflow task
            workflow.logger.warning(
                "ignoring a %s signal of %d payloads: %s", SUBAGENT_APPROVAL_SIGNAL, len(payloads), e
            )
            return
        self._subagents.events[event.session_id] = event

    async def _run_subagent(self, call: ToolCall, batch: Batch, index: int) -> int:
        preset = self._gate.take_preset(call.id)  # decided after an earlier run of this session closed
        parent = self.inp.parent
        started = await self._store(
            SubagentActivities.start_subagent,
            StartSubagentInput(
                session_id=self.session_id,
                agent=self.config.agent,
                call=call,
                turn_position=self._refs_turn(),
                batch_start=batch.start,
                batch=batch.ids,
                index=index,
                depth=parent.depth if parent else 0,
                max_depth=parent.max_depth if parent else None,
                approval_id=preset.approval_id if preset else None,
                decision=preset,
            ),
            summary=f"start sub-agent {call.name} {call.id}",
        )
        if started.recorded_through is not None:
            return started.recorded_through
        assert started.child_session_id is not None and started.child_agent is not None
        child_id = started.child_session_id
        self._set_details(f"sub-agent {call.name} ({child_id})")
        child = await self._start_child(
            AgentRunInput(
                session_id=child_id,
                agent=started.child_agent,
                input_token=started.input_token,
                store_id=self.inp.store_id,
                store_location=self.inp.store_location,
                approval=preset if started.pass_approval else None,
                search_attributes=self.inp.search_attributes,
                stream=self.inp.stream,
                parent=SubagentParent(
                    session_id=self.session_id,
                    tool_call_id=call.id,
                    position=batch.start + index,
                    depth=(parent.depth if parent else 0) + 1,
                    max_depth=started.max_depth,
                    session_uid=started.parent_session_uid,
                ),
            )
        )
        try:
            summary = await self._follow(child, child_id, batch, index)
        except ChildWorkflowError as e:
            if workflow.cancellation_reason() is not None:
                raise asyncio.CancelledError() from None  # this run was cancelled: it aborts
            raise child_failure(call, child_id, e) from None
        if workflow.cancellation_reason() is not None:
            raise asyncio.CancelledError()  # the child aborted because this run was cancelled
        recorded = await self._store(
            SubagentActivities.record_subagent_result,
            RecordSubagentResultInput(
                session_id=self.session_id,
                call=call,
                batch_start=batch.start,
                batch=batch.ids,
                index=index,
                child_session_id=child_id,
                finish_reason=summary.finish_reason,
            ),
            summary=f"record sub-agent {call.name} {call.id}",
        )
        return recorded.recorded_through

    async def _start_child(self, inp: AgentRunInput) -> Child:
        for _ in range(LIVE_CHILD_RETRIES):
            try:
                return await workflow.start_child_workflow(
                    AGENT_RUN_WORKFLOW,
                    inp,
                    id=inp.session_id,
                    result_type=RunSummary,
                    # a sub-agent session may need a later run (after its parent's run closed)
                    id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
                    parent_close_policy=ParentClosePolicy.TERMINATE,
                    cancellation_type=ChildWorkflowCancellationType.WAIT_CANCELLATION_COMPLETED,
                    static_summary=f"{inp.agent} (sub-agent of {self.session_id})",
                    search_attributes=store_attribute(),
                    task_timeout=workflow.info().task_timeout,  # the parent's (a child gets Temporal's 10 s)
                )
            except WorkflowAlreadyStartedError:
                # the child's run of this session's previous, closed run: Temporal terminates it
                # with that run (parent close policy) in a moment; never a second live run
                await workflow.sleep(timedelta(seconds=1))
        raise ApplicationError(
            f"sub-agent session {inp.session_id!r} has a live run that no run of {self.session_id!r} "
            f"started (still running after {LIVE_CHILD_RETRIES} s): cancel it, then resume {self.session_id!r}",
            type=FailureType.SESSION_BUSY,
            non_retryable=True,
        )

    async def _follow(self, child: Child, child_id: str, batch: Batch, index: int) -> RunSummary:
        """The child's result, relaying each of its approvals meanwhile."""
        try:
            while not child.done():
                await workflow.wait_condition(lambda: child.done() or self._waits(child_id) is not None)
                if not child.done():
                    await self._relay(child, child_id, batch, index)
            return await child
        except BaseException as e:
            if is_cancelled_exception(e) and not child.done():
                child.cancel()  # the child aborts (cancelled results for its calls), then so do we
                try:
                    await child
                except BaseException:  # noqa: BLE001 - this run aborts whatever the child's end
                    pass
            raise

    def _waits(self, child_id: str) -> c.PendingApproval | None:
        event = self._subagents.events.get(child_id)
        return event.pending if event is not None else None

    async def _relay(self, child: Child, child_id: str, batch: Batch, index: int) -> None:
        """Wait on the child's approval as if it were this run's own, and pass the decision on."""
        pending = self._waits(child_id)
        assert pending is not None
        approval_id = pending.approval_id

        def moved_on() -> bool:
            now = self._waits(child_id)
            return child.done() or now is None or now.approval_id != approval_id

        def free() -> bool:  # one approval at a time: a parallel sub-agent's may be shown
            return self._gate.pending is None and self._subagents.showing is None

        while not free():
            await workflow.wait_condition(lambda: free() or moved_on())
            if moved_on():
                return
        self._subagents.showing = child_id  # taken before any await: a sibling waits
        try:
            await self._relay_taken(child, child_id, pending, moved_on, batch, index)
        finally:
            self._subagents.showing = None

    async def _relay_taken(
        self,
        child: Child,
        child_id: str,
        pending: c.PendingApproval,
        moved_on: Callable[[], bool],
        batch: Batch,
        index: int,
    ) -> None:
        approval_id = pending.approval_id
        relayed = await self._store(
            SubagentActivities.relay_subagent_approval,
            RelaySubagentApprovalInput(
                session_id=self.session_id,
                approval_id=approval_id,
                child_session_id=child_id,
                remaining_tool_calls=batch.calls[index + 1 :],
                turn_position=self._refs_turn(),
                outcome=self._outcome_event(FinishReason.AWAITING_APPROVAL, approval_id, 0),
            ),
        )
        if not relayed.relayed:  # the child went on already; its signal is on its way
            await workflow.wait_condition(moved_on)
            return
        shown = self._gate.relay(
            pending.model_copy(
                update={
                    "session_id": self.session_id,
                    "agent": self.config.agent,
                    "subagent_session_id": pending.subagent_session_id or child_id,
                    "subagent_agent": pending.subagent_agent or pending.agent,
                    "parent_session_id": None,  # set by _tell_parent when this run is a sub-agent's too
                }
            )
        )
        self._outcome = self._summary(FinishReason.AWAITING_APPROVAL, approval_id)
        self._outcome.message_count = relayed.message_count
        self._publish(CheckpointStatus.AWAITING_APPROVAL, approval_id)
        self._set_details(
            f"awaiting approval {approval_id} for {pending.tool_name} in {shown.subagent_session_id}",
            pending.arguments,
        )
        await self._tell_parent(shown)
        await workflow.wait_condition(lambda: self._gate.decision(approval_id) is not None or moved_on())
        decision = self._gate.decision(approval_id)
        self._gate.close()
        self._outcome = None  # the run goes on: its next pause or its end is what waiters get
        if decision is not None and not moved_on():
            await child.signal("approve", decision)
        await self._store(
            SubagentActivities.relay_subagent_approval,
            RelaySubagentApprovalInput(
                session_id=self.session_id,
                approval_id=approval_id,
                decision=decision,
                call=batch.calls[index],
                position=batch.start + index,
            ),
        )
        self._publish(CheckpointStatus.IN_PROGRESS, None)
        await self._tell_parent(None, approval_id)

    async def _tell_parent(self, pending: c.PendingApproval | None, resolved: str | None = None) -> None:
        """A sub-agent's run tells its parent's run that it waits on ``pending``, or went on."""
        link, parent = self.inp.parent, workflow.info().parent
        if link is None or parent is None:
            return
        if pending is not None:
            pending.parent_session_id = link.session_id
        event = SubagentApprovalEvent(session_id=self.session_id, pending=pending, resolved_approval_id=resolved)
        try:
            await workflow.get_external_workflow_handle(parent.workflow_id, run_id=parent.run_id).signal(
                SUBAGENT_APPROVAL_SIGNAL, event
            )
        except Exception as e:  # noqa: BLE001 - its run closed: the decision comes with its next run
            workflow.logger.warning("could not tell %s about approval of %s: %s", link.session_id, self.session_id, e)


SEARCH_ATTRIBUTES_PATCH = "search-attributes-by-default"
"""A run whose input does not say whether to set search attributes asks begin_run whether the
namespace has them (before: it set none)."""
SIGNAL_CHECK_PATCH = "approve-signal-checks-arguments"
"""An ``approve`` signal whose edited arguments fail the tool's schema is dropped (before: the
call ran with them and got an invalid-arguments result)."""
DECISION_SIZE_PATCH = "decision-size-bound"
"""A decision with a part over ``MAX_DECISION_BYTES`` is not taken: an ``approve`` signal carrying
one is dropped (said in the log and Current Details) and a run started with one fails at once
(before: the run took it, and one over Temporal's payload limit failed every workflow task after)."""
RECORD_FAILURE_PATCH = "record-last-error"
STREAM_OUTCOME_PATCH = "stream-outcome-event"
"""A streamed run ends with one more store activity: its outcome in its event log."""

LOCAL_BEGIN_PATCH = "begin-run-locally"
"""A run whose input says its agent steps locally (``beginLocally``, from our client) begins with a
local ``begin_run`` (before: always a regular one, as for any other run)."""

LOCAL_STEP_PATCH = "local-step-runs-its-calls"
"""A local step's model turn runs the turn's calls itself when none needs the workflow (an approval,
a sub-agent, an MCP tool): one local activity a step (before: one for the turn and one a call)."""

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
