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
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, is_cancelled_exception
from temporalio.workflow import ActivityCancellationType

with workflow.unsafe.imports_passed_through():
    import durable_agents.activities.contracts as c
    import durable_agents.activities.metrics as metrics
    from durable_agents.activities.events import EventActivities
    from durable_agents.activities.model import ModelActivities
    from durable_agents.activities.session import SessionActivities
    from durable_agents.checkpoint.errors import FailureType
    from durable_agents.checkpoint.format import (
        CheckpointStatus,
        FinishReason,
        Message,
        RunConfig,
        RunError,
        ToolSpec,
    )
    from durable_agents.checkpoint.pricing import limit_reached
    from durable_agents.workflows import options, search
    from durable_agents.workflows.approvals import ApprovalGate, one_decision
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
    from durable_agents.workflows.subagents import SubagentRelays, SubagentSteps

WAIT_CANCEL = ActivityCancellationType.WAIT_CANCELLATION_COMPLETED
In = TypeVar("In")
Out = TypeVar("Out")


@workflow.defn(name=AGENT_RUN_WORKFLOW, sandboxed=options.SANDBOXED)
class AgentRunWorkflow(SubagentSteps):
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

    # -- handlers (any Temporal client may call them: see the wire contract) -------------
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
        "the pending approval is ignored: logged by the worker and shown in the run's Current Details.",
    )
    def approve(self, *payloads: Any) -> None:
        try:
            decision = self._gate.check(payloads, self._pending_spec(check=workflow.patched(SIGNAL_CHECK_PATCH)))
        except ApplicationError as e:
            self._gate.drop(e.message)
            self._set_details(None)
            return
        self._gate.offer(decision)

    @workflow.update(
        name="decide",
        description="Decide the pending approval (the payload of approve) and wait for what the run does "
        "next: returns {summary: its next pause or its end, handoff: null | continued | failed}. Refused "
        "(nothing decided) for an approval that is not pending or edited arguments that fail the tool's schema.",
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
            self.state.pending_tool_calls = turn.tool_calls
            self.state.pending_arguments = turn.tool_call_arguments

    async def _begin(self) -> ResumePoint:
        inp = self.inp
        # a run started without saying (any client but ours): its attributes where the namespace has them
        ask = inp.search_attributes is None and workflow.patched(SEARCH_ATTRIBUTES_PATCH)
        begun = await self._store(
            SessionActivities.begin_run,
            c.BeginRunInput(
                session_id=inp.session_id,
                agent=inp.agent,
                input=inp.input,
                input_token=inp.input_token,
                store_id=inp.store_id,
                store_location=inp.store_location,
                model=inp.model,
                model_settings=inp.model_settings,
                usage_limits=inp.usage_limits,
                resolve_approval_id=inp.approval.approval_id if inp.approval else None,
                stream=inp.stream,
                parent_session_id=inp.parent.session_id if inp.parent else None,
                parent_tool_call_id=inp.parent.tool_call_id if inp.parent else None,
                parent_session_uid=inp.parent.session_uid if inp.parent else None,
                search_attributes=list(search.RUN_ATTRIBUTES) if ask else [],
            ),
            summary=f"begin run of {inp.agent}",
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
        turn = await self._call(
            ModelActivities.model_turn,
            c.ModelTurnInput(
                session_id=self.session_id,
                position=self.state.message_count,
                step=step,
                output_retries_used=self.state.output_retries,
            ),
            timeout=self.config.model_timeout_seconds,
            heartbeat=self.config.model_heartbeat_seconds,
            retry=options.MODEL_RETRY,
            summary=f"model turn {step} ({self.config.model})",
            local=self.config.runs_locally(),
        )
        self.state.step_index = step
        # after a context summary stored with it, when there is one (older histories: None)
        self.state.turn_position = turn.turn_position if turn.turn_position is not None else self.state.message_count
        self.state.arguments_in_store = turn.arguments_in_store
        self.state.message_count += turn.appended
        self.state.usage = turn.usage
        return turn

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

    async def _store(self, fn: Callable[[Any, In], Awaitable[Out]], arg: In, summary: str | None = None) -> Out:
        return await self._call(
            fn,
            arg,
            timeout=options.STORE_TIMEOUT.total_seconds(),
            heartbeat=options.STORE_HEARTBEAT_SECONDS,
            retry=options.STORE_RETRY,
            summary=summary,
            local=self._config is not None and self._config.runs_locally(),  # begin_run: regular
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
        workflow.set_current_details(self._details + dropped)

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


SEARCH_ATTRIBUTES_PATCH = "search-attributes-by-default"
"""A run whose input does not say whether to set search attributes asks begin_run whether the
namespace has them (before: it set none)."""
SIGNAL_CHECK_PATCH = "approve-signal-checks-arguments"
"""An ``approve`` signal whose edited arguments fail the tool's schema is dropped (before: the
call ran with them and got an invalid-arguments result)."""
RECORD_FAILURE_PATCH = "record-last-error"
STREAM_OUTCOME_PATCH = "stream-outcome-event"
"""A streamed run ends with one more store activity: its outcome in its event log."""
