"""What every ``AgentClient`` method stands on: the client's settings, waiting for a
run's next outcome or its end, cancelling it, and the client's tracing spans."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable
from datetime import timedelta
from typing import Any, Literal

from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.service import RPCError, RPCStatusCode

from durable_agents._outcomes import outcome_error
from durable_agents._search import registered_attributes
from durable_agents.activities.contracts import ApprovalDecision
from durable_agents.checkpoint.stores.base import CheckpointStore
from durable_agents.connection import DEFAULT_TASK_QUEUE
from durable_agents.errors import ApprovalNotPendingError, ConfigurationError, InvalidDecisionError
from durable_agents.result import RunResult
from durable_agents.tracing import tracer_of
from durable_agents.workflows.contracts import Outcome, RunSummary

Summaries = Literal["agent-only", "first-line"]
"""What a run's static summary (shown in the Temporal UI's list) says: the agent's
name only, or ``<agent>: <first line of the input>``."""


class ClientBase:
    """``AgentClient``'s state and plumbing (documented there)."""

    def __init__(
        self,
        client: Client,
        store: CheckpointStore,
        task_queue: str = DEFAULT_TASK_QUEUE,
        *,
        summaries: Summaries | None = None,
        workflow_task_timeout: timedelta | None = None,
    ):
        self.temporal = client
        self.workflow_task_timeout = workflow_task_timeout
        self.store = store
        self.task_queue = task_queue
        if summaries not in (None, "agent-only", "first-line"):
            raise ConfigurationError(f"summaries={summaries!r}: use 'agent-only' or 'first-line'")
        self._summaries = summaries
        self._attributes: tuple[bool, bool] | None = None  # (runs upsert theirs, AgentStore exists)
        self._tracer_found = False
        self._tracer_value: Any = None

    @property
    def _tracer(self) -> Any:
        """With a client that traces (``connect(tracing=…)``): our spans' tracer (looked up on first use)."""
        if not self._tracer_found:
            self._tracer_value = tracer_of(self.temporal.config().get("interceptors"))
            self._tracer_found = True
        return self._tracer_value

    @property
    def summaries(self) -> Summaries:
        """As given; by default ``agent-only`` when the client encrypts payloads, else ``first-line``."""
        if self._summaries is not None:
            return self._summaries
        return "agent-only" if self.temporal.data_converter.payload_codec is not None else "first-line"

    async def outcome(self, session_id: str) -> RunResult:
        """Wait for the session's live run to pause for approval or end."""
        return await self._await(session_id, "wait_outcome", None)

    async def result(self, session_id: str, handle: WorkflowHandle | None = None) -> RunResult:
        """Wait for the session's run to end (through any approvals)."""
        handle = handle or self.temporal.get_workflow_handle(session_id, result_type=RunSummary)
        try:
            return self.run_result(await handle.result())
        except WorkflowFailureError as e:
            raise outcome_error(session_id, e) from e

    async def cancel(self, session_id: str) -> RunResult | None:
        """Abort the session's live run, if any; returns its (aborted) result."""
        handle = self.temporal.get_workflow_handle(session_id, result_type=RunSummary)
        if not await self._is_running(handle):
            return None
        await handle.cancel()
        return await self.result(session_id, handle)

    def _span(self, name: str, session_id: str, **attributes: Any) -> contextlib.AbstractContextManager[Any]:
        """A span of this client's (when it traces): ids and names only."""
        if self._tracer is None:
            return contextlib.nullcontext()
        from durable_agents.activities.tracing import span

        named = {f"durable_agents.{k}": v for k, v in attributes.items() if v is not None}
        return span(name, {"durable_agents.session_id": session_id, **named}, tracer=self._tracer)

    def _traced(self, result: RunResult) -> None:
        if self._tracer is not None:
            from durable_agents.activities.tracing import annotate_span

            reason = getattr(result.finish_reason, "value", result.finish_reason)
            annotate_span(finish_reason=reason, steps=result.steps, approval_id=result.approval_id)

    # -- plumbing ------------------------------------------------------------------
    async def _registered_attributes(self) -> tuple[bool, bool]:
        if self._attributes is None:
            self._attributes = await registered_attributes(self.temporal)
        return self._attributes

    async def _await(
        self,
        session_id: str,
        update: str,
        arg: ApprovalDecision | None,
        *,
        first: Awaitable[Outcome] | None = None,
    ) -> RunResult:
        """Ask the live run for its next outcome, following continue-as-new; ``first``:
        the request already made for it (``update`` with ``arg``; update-with-start)."""
        while True:
            handle = self.temporal.get_workflow_handle(session_id, result_type=RunSummary)
            try:
                args = [arg] if arg is not None else []
                if first is not None:
                    asked, first = first, None
                else:
                    asked = handle.execute_update(update, args=args, result_type=Outcome)
                outcome = await asked
            except RPCError as e:
                if e.status not in (RPCStatusCode.NOT_FOUND, RPCStatusCode.FAILED_PRECONDITION):
                    raise
                return await self.result(session_id)  # the run closed meanwhile
            except WorkflowUpdateFailedError as e:
                error = outcome_error(session_id, e)
                if isinstance(error, (ApprovalNotPendingError, InvalidDecisionError)):
                    raise error from e  # refused: nothing was decided
                return await self.result(session_id)  # the run ended before answering
            if outcome.summary is not None:
                return self.run_result(outcome.summary)
            if outcome.handoff == "failed":
                return await self.result(session_id)  # raises the run's typed error
            update, arg = "wait_outcome", None

    async def _is_running(self, handle: WorkflowHandle) -> bool:
        try:
            description = await handle.describe()
        except RPCError as e:
            if e.status == RPCStatusCode.NOT_FOUND:
                return False
            raise
        return description.status == WorkflowExecutionStatus.RUNNING

    def run_result(self, summary: RunSummary) -> RunResult:
        return RunResult.from_summary(summary, self.store)
