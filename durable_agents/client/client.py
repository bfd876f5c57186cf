"""AgentClient: start runs, wait for their outcome, decide approvals, fork and migrate sessions.

A run's outcome is its end or its next pause for approval: `send()` and
`approve()` return either. Messages are read from the store, never from
Temporal payloads. One class; the helpers it calls take what they use, not the
client: ``_approval_listing`` (which approvals wait), ``_streams`` (reading a
session's event log), ``versioning`` (the builds a session's runs go to).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal, cast

from pydantic import BaseModel
from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.common import (
    PinnedVersioningOverride,
    SearchAttributePair,
    TypedSearchAttributes,
    WorkerDeploymentVersion,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.converter import PayloadCodec
from temporalio.exceptions import TimeoutError as TemporalTimeoutError
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from durable_agents.activities.contracts import (
    ApprovalDecision,
    DecisionGrant,
    ForkSessionInput,
    ForkSessionOutput,
    MigrateSessionInput,
    MigrateSessionOutput,
    PendingApproval,
    check_decision_size,
    edited_arguments_problem,
    grant_problem,
)
from durable_agents.activities.policies import ClearPolicyRequest, PolicyTarget
from durable_agents.checkpoint.approval_grants import Grant, GrantKind
from durable_agents.checkpoint.approval_policy import ApprovalPolicy, ArgumentCondition
from durable_agents.checkpoint.dataset import Recordings, Redact, StoreRecordings, export_sessions
from durable_agents.checkpoint.events import Event
from durable_agents.checkpoint.fork import Patch
from durable_agents.checkpoint.format import (
    CheckpointHeader,
    CheckpointStatus,
    Message,
    ModelSettings,
    UsageLimits,
)
from durable_agents.checkpoint.policy_book import GrantRevocation, PolicyChange, StoredPolicy
from durable_agents.checkpoint.replay_report import ReplayReport, Scorer
from durable_agents.checkpoint.stores import open_store
from durable_agents.checkpoint.stores.base import CheckpointStore
from durable_agents.client.approvals import ASK_RUN_SECONDS, store_approvals, waiting_approvals
from durable_agents.client.batches import Batch, batch_report, start_batch
from durable_agents.client.connection import DEFAULT_TASK_QUEUE, connect
from durable_agents.client.outcomes import as_messages, outcome_error, pending_from_store
from durable_agents.client.policies import (
    CHANGE_TIMEOUT_SECONDS,
    PolicyAdmin,
    change_through_temporal,
    default_actor,
    scope_of,
    set_policy_request,
)
from durable_agents.client.result import RunResult
from durable_agents.client.search import registered_attributes
from durable_agents.client.streams import follow
from durable_agents.errors import (
    ApprovalNotPendingError,
    CheckpointNotFoundError,
    ConfigurationError,
    InvalidDecisionError,
    SessionAwaitingApprovalError,
    SessionBusyError,
)
from durable_agents.tracing import tracer_of
from durable_agents.versioning import MIGRATE_TIMEOUT, build_exists, list_builds, pinned_override
from durable_agents.workflows import FORK_WORKFLOW
from durable_agents.workflows.contracts import (
    AGENT_RUN_WORKFLOW,
    MAX_INLINE_INPUT_BYTES,
    AgentRunInput,
    Outcome,
    RunSummary,
)
from durable_agents.workflows.migrate import MIGRATE_WORKFLOW
from durable_agents.workflows.search import AGENT_STORE

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

__all__ = ["AgentClient"]

Summaries = Literal["agent-only", "first-line"]
"""What a run's static summary (shown in the Temporal UI's list) says: the agent's
name only, or ``<agent>: <first line of the input>``."""

TEMPORAL_ID_LIMIT = 1000  # bytes: Temporal's limit on a workflow id; a session's runs use the session id
MAX_SESSION_ID_BYTES = 900  # for new sessions: forks take ids made from theirs (<id>.fork-<n>)

OPTIONAL_PENDING = cast(type, PendingApproval | None)
"""The ``pending_approval`` query's result type (None when nothing waits)."""


class AgentClient:
    """``summaries``: ``"first-line"`` (``<agent>: <first line of the input>``) or
    ``"agent-only"``; default ``"agent-only"`` when the client's converter has a
    payload codec (encryption: the run's text stays out of Temporal even encrypted),
    else ``"first-line"``. ``workflow_task_timeout`` (None: Temporal's 10 s) is given to
    every run this client starts, their sub-agents' runs and continued runs: a worker that
    dies inside a local activity (``Agent(activities="local" | "auto")``) is noticed when
    it passes; a worker too busy to finish a workflow task in time has its local activities
    run again (docs/how-to/production/activity-modes.md)."""

    # -- connecting and settings --------------------------------------------------------
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
        self._steps_locally: dict[str, bool] = {}
        """Agent name → whether its runs stepped locally, as this client last saw one in the store
        (told to the next run's start: ``AgentRunInput.begin_locally``)."""
        self._tracer_found = False
        self._tracer_value: Any = None
        self._policies: PolicyAdmin | None = None

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

    @property
    def summaries(self) -> Summaries:
        """As given; by default ``agent-only`` when the client encrypts payloads, else ``first-line``."""
        if self._summaries is not None:
            return self._summaries
        return "agent-only" if self.temporal.data_converter.payload_codec is not None else "first-line"

    @property
    def _tracer(self) -> Any:
        """With a client that traces (``connect(tracing=…)``): our spans' tracer (looked up on first use)."""
        if not self._tracer_found:
            self._tracer_value = tracer_of(self.temporal.config().get("interceptors"))
            self._tracer_found = True
        return self._tracer_value

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

    async def _registered_attributes(self) -> tuple[bool, bool]:
        if self._attributes is None:
            self._attributes = await registered_attributes(self.temporal)
        return self._attributes

    # -- starting and sending runs ------------------------------------------------------
    async def start(
        self,
        agent: str,
        input: str | Message | Sequence[str | Message],
        *,
        session_id: str,
        model: str | None = None,
        interrupt: bool = False,
        approval: ApprovalDecision | None = None,
        model_settings: ModelSettings | None = None,
        usage_limits: UsageLimits | None = None,
        stream: bool = False,
    ) -> WorkflowHandle:
        """Start a run and return its workflow handle without waiting.

        A session with a live run raises ``SessionBusyError``; with
        ``interrupt=True`` the live run is aborted first (its in-flight tool
        calls get ``cancelled`` results) and the new input continues the session.
        A new session's id over ``MAX_SESSION_ID_BYTES`` raises ``ConfigurationError``.
        ``model_settings`` and ``usage_limits`` replace the agent's for this run (a
        resumed run keeps the ones its run recorded unless new ones are given).
        ``stream=True``: the run writes its events (text deltas included) to the
        store's event log, for ``stream()`` / ``watch()`` (``stream()`` sets it).
        """
        run = await self._new_run(
            agent,
            input,
            session_id=session_id,
            model=model,
            interrupt=interrupt,
            approval=approval,
            model_settings=model_settings,
            usage_limits=usage_limits,
            stream=stream,
        )
        try:
            return await self.temporal.start_workflow(AGENT_RUN_WORKFLOW, run.input, **run.options)
        except WorkflowAlreadyStartedError as e:
            raise await self._busy(run) from e

    async def send(
        self,
        agent: str,
        input: str | Message | Sequence[str | Message],
        *,
        session_id: str,
        model: str | None = None,
        interrupt: bool = False,
        model_settings: ModelSettings | None = None,
        usage_limits: UsageLimits | None = None,
        output_type: type[BaseModel] | None = None,
    ) -> RunResult:
        """Run ``agent`` on ``input`` in session ``session_id``; return its end or its
        pause for approval (``finish_reason == "awaiting-approval"``).

        ``input`` may be ``[]`` to resume an unfinished run without new input. With
        ``output_type`` (the agent's), ``RunResult.output`` is an instance of it.
        """
        with self._span(f"send {agent}", session_id, agent=agent):
            result = await self._start_for_outcome(
                agent,
                input,
                session_id=session_id,
                model=model,
                interrupt=interrupt,
                model_settings=model_settings,
                usage_limits=usage_limits,
            )
            self._traced(result)
        if output_type is not None and result.output is not None:
            result.output = result.output_as(output_type)
        return result

    async def resume(self, session_id: str, *, agent: str | None = None, force: bool = False) -> RunResult:
        """Continue an unfinished session (e.g. a fork or a crashed run) without new input.

        A finished session, whose agent gave its answer, raises :class:`SessionFinishedError`
        (nothing is sent): its resume would make one more model call with no new input, which
        a real model bills. Send it new input instead; ``force=True`` makes that one more
        model turn anyway. A session stopped at its step limit (``max-steps``) has not
        answered: its resume runs more steps."""
        header = self.store.load_header(session_id)
        if header is None:
            raise CheckpointNotFoundError(f"no session {session_id!r} in {self.store!r}", session_id=session_id)
        name = agent or header.agent
        if not name:
            raise ConfigurationError(f"session {session_id!r} records no agent; pass agent=")
        if not force and answered(header) and header.parent_session_id is None:  # (a sub-agent's: refused below)
            from durable_agents.errors import SessionFinishedError

            reason = header.finish_reason.value if header.finish_reason else None
            raise SessionFinishedError(session_id, header.agent, reason)
        return await self.send(name, [], session_id=session_id)

    async def _start_for_outcome(
        self, agent: str, input: str | Message | Sequence[str | Message], *, session_id: str, **options: Any
    ) -> RunResult:
        """Start a run (``start()``'s options) and wait for its next outcome, in one request:
        update-with-start, so the run's first workflow task accepts the ``wait_outcome``
        update (no workflow task runs for the update alone)."""
        run = await self._new_run(agent, input, session_id=session_id, **options)
        operation: WithStartWorkflowOperation[Any, RunSummary] = WithStartWorkflowOperation(
            AGENT_RUN_WORKFLOW, run.input, **run.options
        )
        started = self.temporal.execute_update_with_start_workflow(
            "wait_outcome", start_workflow_operation=operation, result_type=Outcome
        )
        try:
            result = await self._await(session_id, "wait_outcome", None, first=started)
        except WorkflowAlreadyStartedError as e:
            with contextlib.suppress(WorkflowAlreadyStartedError):
                await operation.workflow_handle()  # the same error, also set there: taken, not logged as lost
            raise await self._busy(run) from e
        if agent not in self._steps_locally:  # a first run of the agent from this client: how did it step?
            self._learn_steps(agent, self.store.load_header(session_id))
        return result

    def _learn_steps(self, agent: str, header: CheckpointHeader | None) -> None:
        """Note whether ``agent``'s runs step locally, from a session's recorded run config."""
        if header is not None and header.agent == agent and header.run_config is not None:
            self._steps_locally[agent] = header.run_config.runs_locally()

    async def _new_run(
        self,
        agent: str,
        input: str | Message | Sequence[str | Message],
        *,
        session_id: str,
        model: str | None = None,
        interrupt: bool = False,
        approval: ApprovalDecision | None = None,
        model_settings: ModelSettings | None = None,
        usage_limits: UsageLimits | None = None,
        stream: bool = False,
    ) -> _NewRun:
        """A run's workflow input and start options, once the session may take it (its input kept)."""
        header = self.store.load_header(session_id)
        _check_session_id(session_id, new=header is None)
        self._learn_steps(agent, header)
        if header is not None and header.status == CheckpointStatus.AWAITING_APPROVAL and approval is None:
            raise SessionAwaitingApprovalError(session_id, header.approval_id)
        if header is not None and header.parent_session_id is not None:
            _refuse_subagent_session(self.store, session_id, header.parent_session_id, header.parent_tool_call_id)
        messages = as_messages(input)
        first = next((m.content for m in messages if m.content), "") or "(resume)"
        if interrupt:
            await self.cancel(session_id)
        upserts, store_attribute = await self._registered_attributes()
        pinned = await pinned_override(self.temporal, header)  # an unfinished session stays on its build
        token, inline = await self._keep_input(session_id, messages)
        run_input = AgentRunInput(
            session_id=session_id,
            agent=agent,
            input=inline,
            input_token=token,
            store_id=self.store.store_id,
            store_location=self.store.location,
            model=model,
            model_settings=model_settings,
            usage_limits=usage_limits,
            approval=approval,
            search_attributes=upserts,
            stream=stream or None,
            begin_locally=self._steps_locally.get(agent) or None,
        )
        options: dict[str, Any] = {
            "id": session_id,
            "task_queue": self.task_queue,
            "result_type": RunSummary,
            "id_reuse_policy": WorkflowIDReusePolicy.ALLOW_DUPLICATE,
            "id_conflict_policy": WorkflowIDConflictPolicy.FAIL,
            "task_timeout": self.workflow_task_timeout,
            "versioning_override": pinned,
            "search_attributes": (
                TypedSearchAttributes([SearchAttributePair(AGENT_STORE, self.store.store_id)])
                if store_attribute
                else None
            ),
            "static_summary": agent if self.summaries == "agent-only" else f"{agent}: {first.splitlines()[0][:120]}",
        }
        return _NewRun(run_input, options, token)

    async def _busy(self, run: _NewRun) -> SessionBusyError:
        """The session had a live run after all: its kept input is dropped."""
        if run.token is not None:
            await asyncio.to_thread(self.store.drop_run_input, run.input.session_id, run.token)
        return SessionBusyError(run.input.session_id)

    async def _keep_input(self, session_id: str, messages: list[Message]) -> tuple[str | None, list[Message]]:
        """The run's input goes to the store, and the run gets a token for it (docs/design.md §2);
        a store that keeps no run input gets small input inline."""
        if not messages:
            return None, []
        token = uuid.uuid4().hex
        try:
            await asyncio.to_thread(self.store.put_run_input, session_id, token, messages)
            return token, []
        except NotImplementedError:
            size = sum(len(m.model_dump_json()) for m in messages)
            if size > MAX_INLINE_INPUT_BYTES:
                raise ConfigurationError(
                    f"{type(self.store).__name__} keeps no run input, and this input ({size:,} bytes) is too big "
                    f"to travel in a Temporal payload (limit here {MAX_INLINE_INPUT_BYTES:,}): use a store that "
                    "implements put_run_input (all shipped stores do)"
                ) from None
            return None, messages

    # -- outcomes, waiting and cancelling -----------------------------------------------
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

    def run_result(self, summary: RunSummary) -> RunResult:
        return RunResult.from_summary(summary, self.store)

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

    # -- approvals ----------------------------------------------------------------------
    async def approve(
        self,
        session_id: str,
        approval_id: str | None = None,
        *,
        approved: bool = True,
        note: str | None = None,
        arguments: dict | None = None,
        decided_by: str | None = None,
        grant: DecisionGrant | Mapping[str, Any] | None = None,
    ) -> RunResult:
        """Decide the session's pending approval; return the run's next pause or its end.

        ``grant`` ("approve and stop asking", e.g. ``{"scope": "session", "expiresInSeconds":
        600, "maxUses": 5}``): the approval also makes a grant in the policy book, so the
        calls like this one to come are approved without asking (docs/how-to/approval-policies.md).
        Only with ``approved=True`` and no edited ``arguments`` (else ``InvalidDecisionError``).

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

        A decision crosses Temporal inline: ``arguments`` (as JSON), ``note`` or ``decided_by``
        over ``MAX_DECISION_BYTES`` (256 KiB) raise ``DecisionTooLargeError`` before anything is
        sent (nothing is decided; the approval still waits).
        """
        check_decision_size(session_id, approval_id, arguments, note, decided_by)
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
                grant=DecisionGrant.model_validate(grant) if isinstance(grant, Mapping) else grant,
            )
            if live:
                return await self._await(session_id, "decide", decision)  # the run checks the decision
            self._check_edit(session_id, pending, decision)
            if pending.parent_session_id is not None and self.store.load_header(pending.parent_session_id) is not None:
                # a sub-agent's run closed with its parent's: the parent's next run brings the decision
                return await self.approve(
                    pending.parent_session_id, pending.approval_id, approved=approved, note=note,
                    arguments=arguments, decided_by=decided_by, grant=grant,
                )  # fmt: skip
            return await self._start_for_outcome(pending.agent, [], session_id=session_id, approval=decision)

    def _check_edit(self, session_id: str, pending: PendingApproval, decision: ApprovalDecision) -> None:
        """Edited arguments for a session whose run closed must fit the tool's recorded schema,
        as the live run's ``decide`` requires."""
        checked = decision.arguments is not None or decision.grant is not None
        header = self.store.load_header(session_id) if checked else None
        tools = header.run_config.tools if header is not None and header.run_config is not None else []
        spec = next((t for t in tools if t.name == pending.tool_name), None)
        problem = edited_arguments_problem(decision, spec) or grant_problem(decision, spec)
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
        return await waiting_approvals(
            self.temporal,
            self.store,
            self.task_queue,
            self.pending_approval,
            agent,
            visibility=upserts,
            store_attribute=store_attribute,
            ask_seconds=self.ASK_RUN_SECONDS,
        )

    ASK_RUN_SECONDS = ASK_RUN_SECONDS

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

    # -- fork and migrate ---------------------------------------------------------------
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

    async def migrate(
        self,
        session_id: str,
        to_build: str,
        *,
        deployment: str | None = None,
        timeout: timedelta = MIGRATE_TIMEOUT,
    ) -> MigrateSessionOutput:
        """Move an unfinished session to build ``to_build`` (Worker Versioning) of ``deployment``
        (default: the deployment its checkpoint records), after the drift check of its agent
        there; see ``durable_agents.versioning``. Raises ``AgentDriftError`` (the target's agent
        drifted and says ``on_agent_drift="error"``), ``ResumeToolMissingError``,
        ``SessionBusyError`` (a run is live and not paused), ``ConfigurationError`` (no such
        build, a finished or sub-agent session, no worker of the build answered within ``timeout``)."""
        header = self.store.load_header(session_id)
        if header is None:
            raise CheckpointNotFoundError(f"no session {session_id!r} in {self.store!r}", session_id=session_id)
        _check_movable(self.store, header)
        name = deployment or (header.build.deployment_name if header.build else None)
        if name is None:
            raise ConfigurationError(
                f"session {session_id!r} records no build (its runs were on unversioned workers): name the "
                "deployment to move it to (--deployment NAME)"
            )
        target = WorkerDeploymentVersion(name, to_build)
        if not await build_exists(self.temporal, target):
            known = await list_builds(self.temporal, name)
            raise ConfigurationError(
                f"deployment {name!r} has no build {to_build!r} "
                + (f"(builds: {', '.join(known)})" if known else "(Temporal knows no such deployment)")
                + ": start its worker (durable-agents worker --deployment NAME --build-id ID) first"
            )
        handle = self.temporal.get_workflow_handle(session_id)
        live = await self._is_running(handle)
        if live and header.status != CheckpointStatus.AWAITING_APPROVAL:
            raise SessionBusyError(session_id)
        try:
            moved = await self.temporal.execute_workflow(
                MIGRATE_WORKFLOW,
                MigrateSessionInput(session_id=session_id, to_build=target.to_canonical_string()),
                id=f"migrate-{session_id[:900]}-{uuid.uuid4().hex[:8]}",
                task_queue=self.task_queue,
                result_type=MigrateSessionOutput,
                versioning_override=PinnedVersioningOverride(target),
                execution_timeout=timeout,
                static_summary=f"migrate {session_id} to {target.to_canonical_string()}",
            )
        except WorkflowFailureError as e:
            if isinstance(e.cause, TemporalTimeoutError):
                raise ConfigurationError(
                    f"no worker of build {target.to_canonical_string()} on task queue {self.task_queue!r} answered "
                    f"within {timeout.total_seconds():.0f} s: the session is not moved"
                ) from e
            raise outcome_error(session_id, e) from e
        if live:  # its approval resumes the session in a new run, on the target build
            await handle.terminate(reason=f"durable-agents migrate: moved to build {target.to_canonical_string()}")
        return moved

    # -- batches: replay and fork many sessions ------------------------------------------
    async def replay(
        self,
        sessions: Sequence[str],
        *,
        agent: str,
        task_queue: str,
        tag: str | None = None,
        from_step: int = 0,
        model: str | None = None,
        concurrency: int = 8,
        recordings: Recordings | None = None,
        scorers: Mapping[str, Scorer] | None = None,
    ) -> ReplayReport:
        """Replay recorded ``sessions`` against the changed agent named ``agent``, which replay
        workers serve on ``task_queue`` (``durable-agents replay-worker``; in this process:
        ``durable_agents.replay.replay``), and return the regression report.

        Each source is driven again from its first user message (or from step ``from_step``)
        in a new session ``<source>.replay-<tag>``; its tool calls are answered from the
        recording, as the workers' replay policy says. ``recordings``: where the sources are
        (default: this client's store; ``DatasetRecordings(path)`` for a dataset file, which
        the workers must read too). ``model``: a model override for every run. ``scorers``:
        ``{name: function(source, replay) -> float}``, report columns. A tag used before goes
        on with that batch: nothing it finished is replayed again."""
        batch = await self.start_replay(
            sessions, agent=agent, task_queue=task_queue, tag=tag, from_step=from_step, model=model,
            concurrency=concurrency, recordings=recordings,
        )  # fmt: skip
        return await self.batch_report(batch, recordings=recordings, scorers=scorers)

    async def start_replay(
        self,
        sessions: Sequence[str],
        *,
        agent: str,
        task_queue: str,
        tag: str | None = None,
        from_step: int = 0,
        model: str | None = None,
        concurrency: int = 8,
        recordings: Recordings | None = None,
    ) -> Batch:
        """``replay()`` without waiting: the started batch (``batch_report`` waits for it)."""
        upserts, _ = await self._registered_attributes()
        return await start_batch(
            self.temporal, self.store, sessions, mode="replay", task_queue=task_queue,
            recordings=recordings or StoreRecordings(self.store), agent=agent, tag=tag, from_step=from_step,
            model=model, concurrency=concurrency, search_attributes=upserts,
        )  # fmt: skip

    async def fork_batch(
        self,
        sessions: Sequence[str],
        *,
        from_step: int,
        batch_task_queue: str,
        patch: Patch | None = None,
        model: str | None = None,
        tag: str | None = None,
        concurrency: int = 8,
        scorers: Mapping[str, Scorer] | None = None,
    ) -> ReplayReport:
        """Fork each session at ``from_step`` with ``patch`` (into ``<source>.fork-<tag>``) and
        run the fork on this client's task queue (its own agent, live tools, ``model`` as an
        override), a batch workflow on ``batch_task_queue`` (a batch worker:
        ``durable_agents.replay.build_batch_worker``); the report compares each fork with its
        source. Select sessions with ``durable_agents.client.batches.select_sessions``."""
        patch = patch or Patch()
        if not patch.is_data:
            raise ConfigurationError("Patch(messages=<function>) cannot be sent through Temporal: pass a list")
        upserts, _ = await self._registered_attributes()
        batch = await start_batch(
            self.temporal, self.store, sessions, mode="fork", task_queue=batch_task_queue,
            recordings=StoreRecordings(self.store), tag=tag, from_step=from_step,
            patch=patch.model_dump(mode="json", exclude_unset=True), model=model, concurrency=concurrency,
            run_task_queue=self.task_queue, search_attributes=upserts,
        )  # fmt: skip
        return await self.batch_report(batch, scorers=scorers)

    async def batch_report(
        self, batch: Batch, *, recordings: Recordings | None = None, scorers: Mapping[str, Scorer] | None = None
    ) -> ReplayReport:
        """Wait for ``batch`` and compare each source with its new session."""
        outcomes = await batch.outcomes()
        sources = recordings or StoreRecordings(self.store)
        timed = isinstance(sources, StoreRecordings) and sources.store is self.store
        return await asyncio.to_thread(batch_report, self.store, batch, outcomes, sources, scorers, timed_sources=timed)

    def export(self, sessions: Sequence[str], path: str, *, redact: Redact | None = None) -> int:
        """Write ``sessions`` (their newest checkpoints, through ``redact``) to a dataset file,
        one JSON line each: a fixture of real runs to replay without this store."""
        return export_sessions(self.store, sessions, path, redact=redact)

    # -- streams ------------------------------------------------------------------------
    async def stream(
        self,
        agent: str,
        input: str | Message | Sequence[str | Message],
        *,
        session_id: str,
        model: str | None = None,
        interrupt: bool = False,
        model_settings: ModelSettings | None = None,
        usage_limits: UsageLimits | None = None,
    ) -> AsyncIterator[Event]:
        """``send()``, as the run goes: its events (``durable_agents.events``) in order, from
        ``RunStarted`` to ``RunFinished`` or ``RunPaused`` (whose ``result`` is what ``send()``
        returns). The model's text arrives as ``TextDelta`` events as the provider streams it;
        a failed run ends with ``RunFailed``, then raises its typed error as ``send()`` would.
        Each event's ``offset`` is its place in the session's log: ``watch(session_id,
        after=offset)`` goes on from there (after a lost connection, from another process).
        """
        after = await asyncio.to_thread(self._log_end, session_id)
        await self.start(
            agent,
            input,
            session_id=session_id,
            model=model,
            interrupt=interrupt,
            model_settings=model_settings,
            usage_limits=usage_limits,
            stream=True,
        )
        async for event in follow(self, session_id, after):
            yield event

    async def watch(self, session_id: str, *, after: int = 0) -> AsyncIterator[Event]:
        """The session's events with an offset above ``after`` (0: from its first), then, while
        a run is live, its events as they come, until the run's next outcome (``RunFinished``,
        ``RunPaused``, ``RunFailed``: then its typed error is raised). Runs started with
        ``stream=True`` (``stream()``, the CLI's ``run``) write events; a run that does not
        stream is followed to its outcome only (an event with ``offset`` None)."""
        if await asyncio.to_thread(self.store.load_header, session_id) is None:
            live = await self._is_running(self.temporal.get_workflow_handle(session_id))
            if not live and not await asyncio.to_thread(self._log_end, session_id):
                raise CheckpointNotFoundError(f"no session {session_id!r} in {self.store!r}", session_id=session_id)
        async for event in follow(self, session_id, after):
            yield event

    def _log_end(self, session_id: str) -> int:
        try:
            return self.store.last_event_offset(session_id)
        except NotImplementedError:
            raise ConfigurationError(
                f"{type(self.store).__name__} keeps no event log, so runs cannot stream: use a store "
                "that does (every shipped store does)"
            ) from None

    # -- approval policies and grants (durable_agents/client/policies.py) ----------------
    @property
    def policies(self) -> PolicyAdmin:
        """The store's policies and grants, read and changed without Temporal."""
        if self._policies is None:
            self._policies = PolicyAdmin(self.store)
        return self._policies

    async def set_policy(
        self,
        policy: ApprovalPolicy | Mapping[str, Any] | str,
        *,
        agent: str | None = None,
        session_id: str | None = None,
        by: str | None = None,
        expected_version: int | None = None,
        timeout: float = CHANGE_TIMEOUT_SECONDS,
    ) -> StoredPolicy:
        """Make ``policy`` (an ``ApprovalPolicy``, a dict, JSON text or a JSON file's path) the
        approval policy of ``agent`` or of ``session_id``, as its next version. It goes through
        the ``ApprovalPolicies`` workflow, so a worker serving the agent checks it against the
        agent's tools (a session's: the tools its runs recorded) before it is kept.
        ``expected_version``: the version read (0: none ever set); another one raises
        ``PolicyVersionConflictError``, nothing changed. ``by``: who (default: the OS user).
        ``TimeoutError``: no worker answered within ``timeout`` seconds (nothing changed).
        ``agent`` with ``session_id``: the agent of a session that has not run yet (its tools
        are the agent's; a session that ran is checked against the tools its runs recorded)."""
        scope_of(None if session_id is not None else agent, session_id)  # with a session: its agent, if new
        request = set_policy_request(policy, by=by, expected_version=expected_version)
        target = PolicyTarget(agent=agent, session_id=session_id)
        return await change_through_temporal(self.temporal, self.task_queue, target, request, timeout=timeout)

    async def clear_policy(
        self,
        *,
        agent: str | None = None,
        session_id: str | None = None,
        by: str | None = None,
        expected_version: int | None = None,
        timeout: float = CHANGE_TIMEOUT_SECONDS,
    ) -> StoredPolicy:
        """Remove the policy of ``agent`` or ``session_id`` (audited, the next version), through
        the ``ApprovalPolicies`` workflow."""
        scope_of(agent, session_id)
        request = ClearPolicyRequest(changed_by=by or default_actor(), expected_version=expected_version)
        target = PolicyTarget(agent=agent, session_id=session_id)
        return await change_through_temporal(self.temporal, self.task_queue, target, request, timeout=timeout)

    def policy(self, *, agent: str | None = None, session_id: str | None = None) -> StoredPolicy:
        """What the scope holds now: ``version`` (0: never set), ``policy`` (None: none), who changed it."""
        return self.policies.policy(agent=agent, session_id=session_id)

    def policy_changes(
        self, *, agent: str | None = None, session_id: str | None = None, limit: int | None = None
    ) -> list[PolicyChange]:
        """The audit of policy changes (who, when, old -> new version, both documents), newest first."""
        return self.policies.policy_changes(agent=agent, session_id=session_id, limit=limit)

    def grants(
        self, *, agent: str | None = None, session_id: str | None = None, tool: str | None = None, live: bool = False
    ) -> list[Grant]:
        """The grants that apply to such calls, newest first (``live``: only those live now)."""
        return self.policies.grants(agent=agent, session_id=session_id, tool=tool, live=live)

    def grant(
        self,
        kind: GrantKind,
        tool: str,
        *,
        agent: str | None = None,
        session_id: str | None = None,
        when: Sequence[ArgumentCondition | Mapping[str, Any]] = (),
        expires_in: timedelta | float | None = None,
        max_uses: int | None = None,
        by: str | None = None,
        note: str | None = None,
    ) -> Grant:
        """Approve ``tool``'s calls without asking ("approve and stop asking"), scoped to a
        session, an agent or every agent (``kind``), narrowed by ``when``, for ``expires_in``
        and at most ``max_uses`` calls (see ``PolicyAdmin.grant``)."""
        return self.policies.grant(
            kind, tool, agent=agent, session_id=session_id, when=when, expires_in=expires_in,
            max_uses=max_uses, by=by, note=note,
        )  # fmt: skip

    def revoke_grant(self, grant_id: str, *, by: str | None = None) -> GrantRevocation:
        """Revoke a grant from now on (a grant revoked already keeps its first revocation)."""
        return self.policies.revoke_grant(grant_id, by=by)


# -- helpers ----------------------------------------------------------------------------
@dataclass
class _NewRun:
    input: AgentRunInput
    options: dict[str, Any]
    """``start_workflow``'s keyword arguments (``WithStartWorkflowOperation``'s too)."""
    token: str | None
    """The kept input's token (dropped again if the session turns out busy)."""


def _check_session_id(session_id: str, *, new: bool) -> None:
    size = len(session_id.encode())
    if size > (MAX_SESSION_ID_BYTES if new else TEMPORAL_ID_LIMIT):
        why = (
            f"new session ids are limited to {MAX_SESSION_ID_BYTES} bytes, to leave room under Temporal's "
            f"{TEMPORAL_ID_LIMIT:,}-byte limit on workflow ids for the ids its forks take (<id>.fork-<n>)"
            if new
            else f"it is over Temporal's {TEMPORAL_ID_LIMIT:,}-byte limit on workflow ids: fork it into a shorter id"
        )
        raise ConfigurationError(f"session id of {size} bytes (UTF-8) is too long: {why}")


def _refuse_subagent_session(store: CheckpointStore, session_id: str, parent: str, call: str | None) -> None:
    """A sub-agent's session runs only as its parent's child (unless the parent is gone)."""
    if store.load_header(parent) is None:
        return
    raise ConfigurationError(
        f"session {session_id!r} is the sub-agent session of {parent!r} (its call {call}): its runs are "
        f"started by {parent!r}'s; send to, resume, approve or cancel {parent!r} instead"
    )


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


def answered(header: CheckpointHeader) -> bool:
    """Whether a session is finished with its agent's answer (not stopped at its step limit):
    a run with no new input would only make one more model call."""
    from durable_agents.checkpoint.format import FinishReason

    return header.status == CheckpointStatus.FINISHED and header.finish_reason != FinishReason.MAX_STEPS


def _check_movable(store: CheckpointStore, header: CheckpointHeader) -> None:
    """``migrate`` moves unfinished top-level sessions only."""
    sid = header.session_id
    if header.parent_session_id is not None and store.load_header(header.parent_session_id) is not None:
        raise ConfigurationError(
            f"session {sid!r} is a sub-agent session of {header.parent_session_id!r}: migrate that one "
            "(its sub-agents' runs follow it)"
        )
    if header.status == CheckpointStatus.FINISHED:
        raise ConfigurationError(
            f"session {sid!r} is finished: its next run starts on the deployment's current build (migrate "
            "moves unfinished sessions)"
        )
