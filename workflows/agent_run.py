"""The agent-run workflow: model turn, the turn's tools, repeat.

Deterministic code only: every read and write of the transcript happens in
activities, which take the session id and positions, never the transcript.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.workflow import ActivityCancellationType
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, is_cancelled_exception

with workflow.unsafe.imports_passed_through():
    from activities.contracts import (
        ABORT_RUN,
        APPEND_INPUT,
        BEGIN_RUN,
        EXECUTE_TOOL,
        FINISH_RUN,
        MODEL_TURN,
        AbortRunInput,
        AbortRunOutput,
        AppendInputInput,
        AppendInputOutput,
        BeginRunInput,
        BeginRunOutput,
        ExecuteToolInput,
        ExecuteToolOutput,
        FinishRunInput,
        ModelTurnInput,
        ModelTurnOutput,
        RunState,
    )
    from checkpoint.format import FinishReason, RunConfig, ToolCall
    from workflows.contracts import AGENT_RUN_WORKFLOW, AgentRunInput, ResumePoint, RunSummary

STORE_TIMEOUT = timedelta(seconds=30)
STORE_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_interval=timedelta(seconds=10))
MODEL_TIMEOUT = timedelta(minutes=5)
MODEL_HEARTBEAT = timedelta(seconds=20)
MODEL_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    maximum_interval=timedelta(seconds=60),
    maximum_attempts=8,
    non_retryable_error_types=[
        "ModelProviderRequestError", "ModelProviderMalformedReply", "ConfigurationError",
    ],
)
TOOL_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=500), maximum_interval=timedelta(seconds=30))


@workflow.defn(name=AGENT_RUN_WORKFLOW)
class AgentRunWorkflow:
    def __init__(self) -> None:
        self._state: RunState | None = None
        self._status = "starting"

    @workflow.query(name="run_state")
    def run_state(self) -> RunState | None:
        return self._state

    @workflow.run
    async def run(self, inp: AgentRunInput) -> RunSummary:
        point = inp.resume or await self._begin(inp)
        self._state = point.state
        try:
            summary = await self._loop(inp, point)
        except (asyncio.CancelledError, ActivityError) as e:
            if not is_cancelled_exception(e):
                raise
            summary = await self._abort(inp.session_id, point.state)
        summary.drift = point.drift
        return summary

    async def _loop(self, inp: AgentRunInput, point: ResumePoint) -> RunSummary:
        config, state, queued = point.config, point.state, point.queued_input
        while True:
            if state.pending_tool_calls:
                await self._run_tools(inp.session_id, config, state)
            if queued:
                state.message_count = (await workflow.execute_activity(
                    APPEND_INPUT,
                    AppendInputInput(session_id=inp.session_id, position=state.message_count,
                                     messages=queued),
                    result_type=AppendInputOutput, start_to_close_timeout=STORE_TIMEOUT,
                    retry_policy=STORE_RETRY,
                )).message_count
                queued = []
            if state.step_index - state.run_start_step >= config.max_steps:
                return await self._finish(inp.session_id, state, FinishReason.MAX_STEPS)
            if workflow.info().is_continue_as_new_suggested():
                workflow.continue_as_new(
                    inp.model_copy(update={"resume": ResumePoint(config=config, state=state,
                                                                 drift=point.drift)}))
            turn = await self._model_turn(inp.session_id, config, state)
            if not turn.tool_calls:
                return self._summary(inp.session_id, state, FinishReason.STOP)
            state.pending_tool_calls = turn.tool_calls

    async def _begin(self, inp: AgentRunInput) -> ResumePoint:
        begun = await workflow.execute_activity(
            BEGIN_RUN,
            BeginRunInput(session_id=inp.session_id, agent=inp.agent, input=inp.input, model=inp.model),
            result_type=BeginRunOutput, start_to_close_timeout=STORE_TIMEOUT,
            retry_policy=STORE_RETRY, summary=f"begin run of {inp.agent}",
        )
        if begun.drift is not None:
            workflow.logger.warning("agent %s drifted: %s", inp.agent, begun.drift.describe())
        return ResumePoint(config=begun.config, state=begun.state, queued_input=begun.queued_input,
                           drift=begun.drift)

    async def _model_turn(self, session_id: str, config: RunConfig, state: RunState) -> ModelTurnOutput:
        step = state.step_index + 1
        self._set_status(state, f"model turn {step}")
        turn = await workflow.execute_activity(
            MODEL_TURN,
            ModelTurnInput(session_id=session_id, position=state.message_count, step=step),
            result_type=ModelTurnOutput, start_to_close_timeout=MODEL_TIMEOUT,
            heartbeat_timeout=MODEL_HEARTBEAT, retry_policy=MODEL_RETRY,
            cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            summary=f"model turn {step} ({config.model})",
        )
        state.step_index = step
        state.message_count += 1
        state.usage = turn.usage
        return turn

    async def _run_tools(self, session_id: str, config: RunConfig, state: RunState) -> None:
        calls = state.pending_tool_calls
        # Resumed batches may already have some results: the first pending
        # call's result goes right after the recorded ones.
        batch_start = state.message_count
        limit = asyncio.Semaphore(config.tool_concurrency)
        specs = {t.name: t for t in config.tools}

        async def run_one(call: ToolCall) -> ExecuteToolOutput:
            spec = specs.get(call.name)
            async with limit:
                self._set_status(state, f"tool {call.name}")
                return await workflow.execute_activity(
                    EXECUTE_TOOL,
                    ExecuteToolInput(
                        session_id=session_id, agent=config.agent, step=state.step_index,
                        call=call, batch_start=batch_start, batch=[c.id for c in calls],
                        safe_to_retry=bool(spec and spec.safe_to_retry),
                    ),
                    result_type=ExecuteToolOutput,
                    start_to_close_timeout=timedelta(seconds=spec.timeout_seconds if spec else 60),
                    heartbeat_timeout=timedelta(seconds=(spec.heartbeat_seconds or 10) if spec else 10),
                    retry_policy=TOOL_RETRY, summary=f"tool {call.name} {call.id}",
                    cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
                )

        outcomes = await asyncio.gather(*(run_one(c) for c in calls))
        state.message_count = max(o.recorded_through for o in outcomes)
        expected = batch_start + len(calls)
        if state.message_count != expected:
            raise ApplicationError(
                f"tool results recorded through {state.message_count}, expected {expected}",
                non_retryable=True,
            )
        state.tool_calls += len(calls)
        state.pending_tool_calls = []

    async def _abort(self, session_id: str, state: RunState) -> RunSummary:
        """Cancelled: unfinished calls get ``cancelled`` results; the checkpoint stays resumable."""
        aborted = await workflow.execute_activity(
            ABORT_RUN,
            AbortRunInput(session_id=session_id, batch_start=state.message_count,
                          batch=state.pending_tool_calls),
            result_type=AbortRunOutput, start_to_close_timeout=STORE_TIMEOUT, retry_policy=STORE_RETRY,
        )
        state.tool_calls += len(state.pending_tool_calls)
        state.pending_tool_calls = []
        state.message_count = aborted.message_count
        return self._summary(session_id, state, FinishReason.ABORTED)

    async def _finish(self, session_id: str, state: RunState, reason: FinishReason) -> RunSummary:
        await workflow.execute_activity(
            FINISH_RUN,
            FinishRunInput(session_id=session_id, finish_reason=reason, message_count=state.message_count),
            start_to_close_timeout=STORE_TIMEOUT, retry_policy=STORE_RETRY,
        )
        return self._summary(session_id, state, reason)

    def _summary(self, session_id: str, state: RunState, reason: FinishReason) -> RunSummary:
        self._set_status(state, str(reason))
        return RunSummary(
            session_id=session_id, finish_reason=reason,
            steps=state.step_index - state.run_start_step, usage=state.usage - state.run_start_usage,
            tool_calls=state.tool_calls, message_count=state.message_count,
            run_start_index=state.run_start_index,
        )

    def _set_status(self, state: RunState, status: str) -> None:
        self._status = status
        workflow.set_current_details(f"step {state.step_index} · {status}")
