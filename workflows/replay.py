"""``ReplayBatch``: replay (or fork and run) many sessions, a child run per session.

One batch workflow; for each session, an activity plans it (seeds the replay session or
makes the fork, on the worker holding the store), then each of its runs is a child
``AgentRun`` workflow whose id is the new session's (``<source>.replay-<tag>`` or
``<source>.fork-<tag>``), at most ``concurrency`` sessions at once. Everything the batch
did is in its history: a worker killed mid-batch loses no finished replay and redoes
none (the batch's next workflow task replays its history; the children's runs resume on
other workers as any run does). A batch started again under the same tag finds the
sessions an earlier one made and goes on from their next run.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Literal

from pydantic import Field
from temporalio import workflow
from temporalio.common import RetryPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError, WorkflowAlreadyStartedError
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from durable_agents.activities.replay import (
        BatchMode,
        KeepInputInput,
        PlanReplayInput,
        PlanReplayOutput,
        ReplayActivities,
    )
    from durable_agents.checkpoint.errors import FailureType
    from durable_agents.checkpoint.format import FinishReason, FormatModel
    from durable_agents.workflows import options
    from durable_agents.workflows.contracts import AGENT_RUN_WORKFLOW, AgentRunInput, RunSummary

REPLAY_BATCH_WORKFLOW = "ReplayBatch"
MAX_BATCH_SESSIONS = 1000
"""Sessions one batch workflow takes (its history stays far below Temporal's limits);
``AgentClient.replay`` splits bigger batches into several."""
ERROR_CHARS = 500
STORE_STEP_TIMEOUT = timedelta(seconds=10)
"""A plan or an input is a few store reads and writes: a worker killed inside one is
noticed (and the step retried elsewhere) after this."""

SessionStatus = Literal["replayed", "failed", "awaiting-approval"]


class BatchItem(FormatModel):
    source_session_id: str
    target_session_id: str


class ReplayBatchInput(FormatModel):
    tag: str
    mode: BatchMode = "replay"
    items: list[BatchItem]
    agent: str | None = None
    """The agent the runs use (replay: the changed agent's name on the replay workers; fork:
    None, each fork runs its source's agent)."""
    from_step: int = 0
    patch: dict | None = None
    model: str | None = None
    """A model override for every run (``provider:model``)."""
    concurrency: int = 8
    run_task_queue: str | None = None
    """Where the runs go (None: this workflow's task queue)."""
    store_id: str | None = None
    store_location: str | None = None
    search_attributes: bool | None = None


class SessionOutcome(FormatModel):
    source_session_id: str
    target_session_id: str
    status: SessionStatus
    runs: int = 0
    """The runs this batch made for the session."""
    finish_reason: FinishReason | None = None
    error: str | None = None


class ReplayBatchOutput(FormatModel):
    tag: str
    outcomes: list[SessionOutcome] = Field(default_factory=list)


class BatchProgress(FormatModel):
    total: int
    done: int
    failed: int


_STORE_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=20,
    non_retryable_error_types=[FailureType.CHECKPOINT_NOT_FOUND, FailureType.CONFIGURATION, FailureType.STORE_CORRUPT],
)


def _why(error: BaseException) -> str:
    cause: BaseException | None = error
    while isinstance(cause, (ActivityError, ChildWorkflowError)) and cause.cause is not None:
        cause = cause.cause
    text = str(cause or error) or type(error).__name__
    return text if len(text) <= ERROR_CHARS else text[: ERROR_CHARS - 1] + "…"


@workflow.defn(name=REPLAY_BATCH_WORKFLOW, sandboxed=options.SANDBOXED)
class ReplayBatchWorkflow:
    def __init__(self) -> None:
        self._done = 0
        self._failed = 0
        self._total = 0

    @workflow.query
    def progress(self) -> BatchProgress:
        return BatchProgress(total=self._total, done=self._done, failed=self._failed)

    @workflow.run
    async def run(self, inp: ReplayBatchInput) -> ReplayBatchOutput:
        self._total = len(inp.items)
        if self._total > MAX_BATCH_SESSIONS:
            raise ApplicationError(
                f"a batch takes at most {MAX_BATCH_SESSIONS} sessions ({self._total} given): split it",
                type=FailureType.CONFIGURATION,
                non_retryable=True,
            )
        slots = asyncio.Semaphore(max(1, inp.concurrency))

        async def one(item: BatchItem) -> SessionOutcome:
            async with slots:
                outcome = await self._session(inp, item)
            self._done += 1
            self._failed += outcome.status == "failed"
            return outcome

        outcomes = await asyncio.gather(*(one(item) for item in inp.items))
        return ReplayBatchOutput(tag=inp.tag, outcomes=list(outcomes))

    async def _session(self, inp: ReplayBatchInput, item: BatchItem) -> SessionOutcome:
        outcome = SessionOutcome(
            source_session_id=item.source_session_id, target_session_id=item.target_session_id, status="replayed"
        )
        try:
            plan = await workflow.execute_local_activity_method(
                ReplayActivities.plan_session_replay,
                PlanReplayInput(
                    mode=inp.mode,
                    source_session_id=item.source_session_id,
                    target_session_id=item.target_session_id,
                    from_step=inp.from_step,
                    patch=inp.patch,
                ),
                start_to_close_timeout=STORE_STEP_TIMEOUT,
                retry_policy=_STORE_RETRY,
                summary=f"plan {inp.mode} of {item.source_session_id}",
            )
            for run in range(plan.first, plan.runs):
                summary = await self._run(inp, item, plan, run)
                outcome.runs += 1
                outcome.finish_reason = summary.finish_reason
                if summary.finish_reason == FinishReason.AWAITING_APPROVAL:
                    outcome.status = "awaiting-approval"  # a person decides; the batch goes on
                    break
        except (ActivityError, ChildWorkflowError, ApplicationError) as e:
            outcome.status, outcome.error = "failed", _why(e)
        return outcome

    async def _run(self, inp: ReplayBatchInput, item: BatchItem, plan: PlanReplayOutput, run: int) -> RunSummary:
        token = None
        if inp.mode == "replay":
            token = await workflow.execute_local_activity_method(
                ReplayActivities.keep_replay_input,
                KeepInputInput(
                    source_session_id=item.source_session_id,
                    target_session_id=item.target_session_id,
                    from_step=inp.from_step,
                    run=run,
                    token=f"{inp.tag}-{run}",
                ),
                start_to_close_timeout=STORE_STEP_TIMEOUT,
                retry_policy=_STORE_RETRY,
                summary=f"input {run + 1} of {item.target_session_id}",
            )
        agent = inp.agent or plan.agent
        if agent is None:
            raise ApplicationError(
                f"session {item.source_session_id!r} records no agent", type=FailureType.CONFIGURATION
            )
        request = AgentRunInput(
            session_id=item.target_session_id,
            agent=agent,
            input_token=token,
            store_id=inp.store_id,
            store_location=inp.store_location,
            model=inp.model,
            search_attributes=inp.search_attributes,
        )
        for _ in range(30):
            try:
                return await workflow.execute_child_workflow(
                    AGENT_RUN_WORKFLOW,
                    request,
                    id=item.target_session_id,
                    task_queue=inp.run_task_queue or workflow.info().task_queue,
                    result_type=RunSummary,
                    id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
                    parent_close_policy=ParentClosePolicy.TERMINATE,
                    static_summary=f"{inp.mode} of {item.source_session_id} ({agent})",
                )
            except WorkflowAlreadyStartedError:
                # a run of an earlier batch of this tag, terminated with it: gone in a moment
                await workflow.sleep(timedelta(seconds=1))
        raise ApplicationError(f"session {item.target_session_id!r} has a live run that is not this batch's")


__all__ = [
    "MAX_BATCH_SESSIONS",
    "REPLAY_BATCH_WORKFLOW",
    "BatchItem",
    "BatchProgress",
    "ReplayBatchInput",
    "ReplayBatchOutput",
    "ReplayBatchWorkflow",
    "SessionOutcome",
]
