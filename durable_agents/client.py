"""AgentClient: start runs, wait for their outcome, decide approvals, fork sessions.

A run's outcome is its end or its next pause for approval: `send()` and
`approve()` return either. Messages are read from the store, never from
Temporal payloads. The class is built in layers: ``_client_base`` (settings,
waiting, cancelling), ``_client_runs`` (start, send, stream), and this module
(connecting, forks, approvals).
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import timedelta
from typing import TYPE_CHECKING, cast

from temporalio.client import WorkflowFailureError, WorkflowHandle
from temporalio.converter import PayloadCodec

from durable_agents._approval_listing import ASK_RUN_SECONDS, store_approvals, waiting_approvals
from durable_agents._client_base import Summaries
from durable_agents._client_runs import MAX_SESSION_ID_BYTES as MAX_SESSION_ID_BYTES  # as before the split
from durable_agents._client_runs import TEMPORAL_ID_LIMIT, RunsClient
from durable_agents._outcomes import outcome_error, pending_from_store
from durable_agents.activities.contracts import (
    ApprovalDecision,
    ForkSessionInput,
    ForkSessionOutput,
    PendingApproval,
    edited_arguments_problem,
)
from durable_agents.checkpoint.fork import Patch
from durable_agents.checkpoint.stores import open_store
from durable_agents.checkpoint.stores.base import CheckpointStore
from durable_agents.connection import DEFAULT_TASK_QUEUE, connect
from durable_agents.errors import ApprovalNotPendingError, ConfigurationError, InvalidDecisionError
from durable_agents.result import RunResult
from durable_agents.versioning import MigrateSessionOutput, migrate
from durable_agents.workflows import FORK_WORKFLOW
from durable_agents.workflows.contracts import RunSummary

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

__all__ = ["AgentClient"]


def fork_workflow_id(session_id: str) -> str:
    """``fork-<session id>-<nonce>``, or, where that would pass Temporal's limit,
    ``fork-<prefix of the id>-<hash of the whole id>-<nonce>``: it always fits."""
    nonce = uuid.uuid4().hex[:8]
    if len(session_id.encode()) + len(f"fork--{nonce}") <= TEMPORAL_ID_LIMIT:
        return f"fork-{session_id}-{nonce}"
    digest = hashlib.sha256(session_id.encode()).hexdigest()[:16]
    room = TEMPORAL_ID_LIMIT - len(f"fork--{digest}-{nonce}")
    prefix = session_id.encode()[:room].decode("utf-8", errors="ignore")  # whole characters only
    return f"fork-{prefix}-{digest}-{nonce}"


OPTIONAL_PENDING = cast(type, PendingApproval | None)
"""The ``pending_approval`` query's result type (None when nothing waits)."""


class AgentClient(RunsClient):
    """``summaries``: ``"first-line"`` (``<agent>: <first line of the input>``) or
    ``"agent-only"``; default ``"agent-only"`` when the client's converter has a
    payload codec (encryption: the run's text stays out of Temporal even encrypted),
    else ``"first-line"``. ``workflow_task_timeout`` (None: Temporal's 10 s) is given to
    every run this client starts, their sub-agents' runs and continued runs: a worker that
    dies inside a local activity (``Agent(activities="local" | "auto")``) is noticed when
    it passes; a worker too busy to finish a workflow task in time has its local activities
    run again (docs/how-to/production/activity-modes.md)."""

    @classmethod
    async def connect(
        cls,
        address: str | None = None,
        *,
        store: CheckpointStore | str | None = None,
        namespace: str | None = None,
        task_queue: str = DEFAULT_TASK_QUEUE,
        codec: PayloadCodec | None = None,
        summaries: Summaries | None = None,
        tracing: bool | TracerProvider = False,
        workflow_task_timeout: timedelta | None = None,
    ) -> AgentClient:
        """Connect to Temporal (``temporalio.envconfig`` conventions) and open the store.

        ``codec`` (e.g. an encrypting ``PayloadCodec``; default: the configured
        encryption, see ``durable_agents.encryption``) encodes every payload
        this client and a worker built from it write to Temporal history.
        ``tracing``: OpenTelemetry spans (``True``: the global tracer provider, or a
        tracer provider; see ``durable_agents.tracing``): ``send()`` and ``approve()``
        each make a span; the run, its activities and sub-agents carry its context on.
        """
        opened = store if isinstance(store, CheckpointStore) else open_store(store)
        client = await connect(address, namespace, codec=codec, tracing=tracing)
        return cls(client, opened, task_queue, summaries=summaries, workflow_task_timeout=workflow_task_timeout)

    # -- fork ------------------------------------------------------------------------
    async def fork(
        self,
        session_id: str,
        from_step: int,
        patch: Patch | None = None,
        new_session_id: str | None = None,
        *,
        entry: int | None = None,
    ) -> ForkSessionOutput:
        """Fork a session from a kept step, as a Temporal workflow on a worker that
        holds the store (so the fork is recorded and visible in the UI).

        ``entry`` picks one of the step's kept checkpoints by its number in
        ``history`` (1 is the newest save; it must be an entry of ``from_step``);
        default: the step's newest. The patch crosses Temporal as data:
        ``Patch(messages=function)`` is refused here (``ConfigurationError``);
        use it with ``checkpoint.fork.fork(store, …)``, which forks without
        Temporal. Resume the fork with ``resume(fork.session_id)``.
        """
        patch = patch or Patch()
        if not patch.is_data:
            raise ConfigurationError(
                "Patch(messages=<function>) cannot be sent through Temporal: fork with "
                "durable_agents.checkpoint.fork.fork(store, ...) in this process, or pass the new "
                "messages as a list"
            )
        inp = ForkSessionInput(
            session_id=session_id,
            from_step=from_step,
            patch=patch.model_dump(mode="json", exclude_unset=True),
            new_session_id=new_session_id,
            entry=entry,
        )
        try:
            return await self.temporal.execute_workflow(
                FORK_WORKFLOW,
                inp,
                id=fork_workflow_id(session_id),
                task_queue=self.task_queue,
                result_type=ForkSessionOutput,
                static_summary=f"fork {session_id} at step {from_step}",
            )
        except WorkflowFailureError as e:
            raise outcome_error(session_id, e) from e

    async def migrate(self, session_id: str, to_build: str, *, deployment: str | None = None) -> MigrateSessionOutput:
        """Move an unfinished session to build ``to_build`` (Worker Versioning), after the drift
        check of its agent there; see ``durable_agents.versioning.migrate``."""
        return await migrate(self, session_id, to_build, deployment=deployment)

    # -- approvals -----------------------------------------------------------------
    async def approve(
        self,
        session_id: str,
        approval_id: str | None = None,
        *,
        approved: bool = True,
        note: str | None = None,
        arguments: dict | None = None,
        decided_by: str | None = None,
    ) -> RunResult:
        """Decide the session's pending approval; return the run's next pause or its end.

        The decision goes to the live run as a validated update; if the run's
        workflow is no longer open (it was terminated, say), a new run resumes
        the session from its checkpoint with this decision.

        It is recorded in the checkpoint's ``decisions`` (``checkpoint.format.Decision``):
        ``decided_by`` (who decided; None records no decider, as ``decidedBy``
        absent), the time it was recorded, ``note`` and ``arguments`` (the
        arguments the approved call runs with instead of the model's, which
        its assistant turn keeps). The model sees the note: a rejection's
        result is ``{error, note}``; an approved call's result carries it as
        ``approvalNote`` (see ``activities.approvals.approved_content``).
        """
        decision_name = "approved" if approved else "rejected"
        with self._span("approve", session_id, approval_id=approval_id, decision=decision_name):
            handle = self.temporal.get_workflow_handle(session_id, result_type=RunSummary)
            live = await self._is_running(handle)
            pending = await self._pending(session_id, handle, live)
            if pending is None or (approval_id and approval_id != pending.approval_id):
                raise ApprovalNotPendingError(session_id, approval_id, pending.approval_id if pending else None)
            decision = ApprovalDecision(
                approval_id=pending.approval_id,
                approved=approved,
                note=note,
                arguments=arguments,
                decided_by=decided_by,
            )
            if live:
                return await self._await(session_id, "decide", decision)  # the run checks the decision
            self._check_edit(session_id, pending, decision)
            if pending.parent_session_id is not None and self.store.load_header(pending.parent_session_id) is not None:
                # a sub-agent's run closed with its parent's: the parent's next run brings the decision
                return await self.approve(
                    pending.parent_session_id, pending.approval_id, approved=approved, note=note,
                    arguments=arguments, decided_by=decided_by,
                )  # fmt: skip
            return await self._start_for_outcome(pending.agent, [], session_id=session_id, approval=decision)

    def _check_edit(self, session_id: str, pending: PendingApproval, decision: ApprovalDecision) -> None:
        """Edited arguments for a session whose run closed must fit the tool's recorded schema,
        as the live run's ``decide`` requires."""
        header = self.store.load_header(session_id) if decision.arguments is not None else None
        tools = header.run_config.tools if header is not None and header.run_config is not None else []
        problem = edited_arguments_problem(decision, next((t for t in tools if t.name == pending.tool_name), None))
        if problem is not None:
            raise InvalidDecisionError(session_id, pending.approval_id, problem)

    async def reject(
        self,
        session_id: str,
        approval_id: str | None = None,
        *,
        note: str | None = None,
        decided_by: str | None = None,
    ) -> RunResult:
        """``approve(..., approved=False)``: the call's result is ``{error, note}``."""
        return await self.approve(session_id, approval_id, approved=False, note=note, decided_by=decided_by)

    async def pending_approval(self, session_id: str) -> PendingApproval | None:
        handle = self.temporal.get_workflow_handle(session_id)
        return await self._pending(session_id, handle, await self._is_running(handle))

    def pending_approvals(self, agent: str | None = None) -> list[PendingApproval]:
        """Every session waiting for a decision, from the store only (see ``waiting_approvals``)."""
        return store_approvals(self.store, agent)

    async def waiting_approvals(self, agent: str | None = None) -> list[PendingApproval]:
        """Every approval waiting for a decision, oldest first: the live runs on this
        client's task queue that Temporal's visibility finds waiting (``PendingApprovalId``
        set, execution running), joined with the store, plus sessions the store records as
        waiting whose run has closed (``approve`` resumes those from the checkpoint). A run
        the store does not know (a client on another store) is still listed, from the run
        itself; such runs are asked at once, at most ``ASK_RUN_SECONDS`` in all (then what
        visibility says of the ones that did not answer)."""
        upserts, store_attribute = await self._registered_attributes()
        return await waiting_approvals(self, agent, visibility=upserts, store_attribute=store_attribute)

    ASK_RUN_SECONDS = ASK_RUN_SECONDS

    # -- plumbing ------------------------------------------------------------------
    async def _pending(self, session_id: str, handle: WorkflowHandle, live: bool) -> PendingApproval | None:
        stored = pending_from_store(self.store, session_id)
        if live:
            pending = await handle.query("pending_approval", result_type=OPTIONAL_PENDING)
            if pending is not None:
                if stored is not None and stored.approval_id == pending.approval_id:
                    # the run holds references; the arguments are in the store
                    pending.arguments, pending.remaining_tool_calls = stored.arguments, stored.remaining_tool_calls
                return pending
        return stored
