"""Sub-agent calls: a tool call that runs another agent as a child workflow.

A mixin of :class:`~durable_agents.workflows.agent_run.AgentRunWorkflow`
(deterministic code only). For a call to a sub-agent tool the run:

1. starts it (``start_subagent``: the task goes to the store, keyed by the
   child's session ``<session>/<position>``; a call needing no child run gets
   its result there);
2. runs the child, the same ``AgentRun`` workflow type, under that session id
   as workflow id (Temporal's record of the start makes a replayed or retried
   parent re-attach to it: it is never started twice);
3. follows the child's approvals: the child signals this run when it pauses
   (and when it goes on); this run saves its own checkpoint as
   ``awaiting-approval`` with the child's approval id and a snapshot, answers
   ``pending_approval`` and ``decide`` for it, and passes the decision to the
   child (a signal), up through every level of nesting;
4. records the child's answer as the call's result (``record_subagent_result``).

Cancelling the run cancels the child (its calls get ``cancelled`` results,
then this call); closing the run otherwise (terminate, failure) terminates it
(parent close policy), and the session's next run resumes the child's session.
Only runs with a sub-agent call take these paths (``workflow.patched``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributePair, TypedSearchAttributes, WorkflowIDReusePolicy
from temporalio.exceptions import (
    ApplicationError,
    ChildWorkflowError,
    WorkflowAlreadyStartedError,
    is_cancelled_exception,
)
from temporalio.workflow import ChildWorkflowCancellationType, ChildWorkflowHandle, ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    import durable_agents.activities.contracts as c
    from durable_agents.activities.subagent_activities import SubagentActivities
    from durable_agents.activities.subagent_contracts import (
        SUBAGENT_APPROVAL_SIGNAL,
        RecordSubagentResultInput,
        RelaySubagentApprovalInput,
        StartSubagentInput,
        SubagentApprovalEvent,
        SubagentParent,
    )
    from durable_agents.checkpoint.errors import FailureType
    from durable_agents.checkpoint.format import CheckpointStatus, FinishReason, ToolCall
    from durable_agents.workflows.contracts import AGENT_RUN_WORKFLOW, AgentRunInput, RunSummary
    from durable_agents.workflows.search import AGENT_STORE
    from durable_agents.workflows.tool_steps import Batch, ToolSteps

SUBAGENTS_PATCH = "subagents-as-child-workflows"
CHILD_STORE_PATCH = "subagent-store-attribute"
LIVE_CHILD_RETRIES = 30
"""Seconds a start waits for the child's previous run (its parent's closed run's) to be terminated."""

Child = ChildWorkflowHandle[Any, RunSummary]


class SubagentRelays:
    """Deterministic state: what each child last said, and whose approval is shown here."""

    def __init__(self) -> None:
        self.events: dict[str, SubagentApprovalEvent] = {}
        """The latest word of each child (by session): the approval it waits on, or that it went on."""
        self.showing: str | None = None
        """The child whose approval this run shows (one at a time)."""


class SubagentSteps(ToolSteps):
    """Runs sub-agent calls as child workflows; the workflow provides state and plumbing."""

    _subagents: SubagentRelays

    @property
    def inp(self) -> AgentRunInput:
        raise NotImplementedError

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

    def _calls_subagents(self) -> bool:
        return workflow.patched(SUBAGENTS_PATCH)

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
            raise _child_failure(call, child_id, e) from None
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
                    search_attributes=_store_attribute(),
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


def _child_failure(call: ToolCall, child_id: str, error: ChildWorkflowError) -> ApplicationError:
    """The child's failure as this run's: its cause's type (so the client raises the same typed
    error) and message, naming the sub-agent. Both sessions stay resumable: resuming this one
    resumes the child's session in a new run of it."""
    cause: BaseException | None = error.cause
    while cause is not None and not isinstance(cause, ApplicationError):
        cause = getattr(cause, "cause", None)
    why = cause.message if cause is not None else f"its run ended: {error.cause or error}"
    return ApplicationError(
        f"sub-agent {call.name} (session {child_id}) failed: {why}",
        *(cause.details if cause is not None else ()),
        type=(cause.type if cause is not None else None) or FailureType.RUN_FAILED,
        non_retryable=True,
    )


def _store_attribute() -> TypedSearchAttributes | None:
    """The parent's ``AgentStore`` for its child (a child inherits none of its parent's
    attributes): so that listing approvals need not ask visibility for waiting sub-agents
    of this store either. Set only where the parent carries it (the attribute is registered)."""
    store = workflow.info().typed_search_attributes.get(AGENT_STORE)
    if store is None or not workflow.patched(CHILD_STORE_PATCH):
        return None
    return TypedSearchAttributes([SearchAttributePair(AGENT_STORE, store)])
