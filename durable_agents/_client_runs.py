"""Starting runs and following them: ``AgentClient.start``, ``send``, ``resume``,
``stream`` and ``watch``."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from temporalio.client import WithStartWorkflowOperation, WorkflowHandle
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import WorkflowAlreadyStartedError

from durable_agents._client_base import ClientBase
from durable_agents._outcomes import as_messages
from durable_agents._streams import follow
from durable_agents.activities.contracts import ApprovalDecision
from durable_agents.checkpoint.events import Event
from durable_agents.checkpoint.format import CheckpointStatus, Message, ModelSettings, UsageLimits
from durable_agents.checkpoint.stores.base import CheckpointStore
from durable_agents.errors import (
    CheckpointNotFoundError,
    ConfigurationError,
    SessionAwaitingApprovalError,
    SessionBusyError,
)
from durable_agents.result import RunResult
from durable_agents.versioning import pinned_override
from durable_agents.workflows.contracts import (
    AGENT_RUN_WORKFLOW,
    MAX_INLINE_INPUT_BYTES,
    AgentRunInput,
    Outcome,
    RunSummary,
)
from durable_agents.workflows.search import AGENT_STORE

TEMPORAL_ID_LIMIT = 1000  # bytes: Temporal's limit on a workflow id; a session's runs use the session id
MAX_SESSION_ID_BYTES = 900  # for new sessions: forks take ids made from theirs (<id>.fork-<n>)


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


"""Input for a store that keeps no run input travels in the workflow's input: small only."""


def _refuse_subagent_session(store: CheckpointStore, session_id: str, parent: str, call: str | None) -> None:
    """A sub-agent's session runs only as its parent's child (unless the parent is gone)."""
    if store.load_header(parent) is None:
        return
    raise ConfigurationError(
        f"session {session_id!r} is the sub-agent session of {parent!r} (its call {call}): its runs are "
        f"started by {parent!r}'s; send to, resume, approve or cancel {parent!r} instead"
    )


@dataclass
class _NewRun:
    input: AgentRunInput
    options: dict[str, Any]
    """``start_workflow``'s keyword arguments (``WithStartWorkflowOperation``'s too)."""
    token: str | None
    """The kept input's token (dropped again if the session turns out busy)."""


class RunsClient(ClientBase):
    """``AgentClient``'s runs (documented there)."""

    # -- runs ----------------------------------------------------------------------
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
            return await self._await(session_id, "wait_outcome", None, first=started)
        except WorkflowAlreadyStartedError as e:
            with contextlib.suppress(WorkflowAlreadyStartedError):
                await operation.workflow_handle()  # the same error, also set there: taken, not logged as lost
            raise await self._busy(run) from e

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

    async def resume(self, session_id: str, *, agent: str | None = None) -> RunResult:
        """Continue an unfinished session (e.g. a fork or a crashed run) without new input."""
        header = self.store.load_header(session_id)
        if header is None:
            raise CheckpointNotFoundError(f"no session {session_id!r} in {self.store!r}", session_id=session_id)
        name = agent or header.agent
        if not name:
            raise ConfigurationError(f"session {session_id!r} records no agent; pass agent=")
        return await self.send(name, [], session_id=session_id)

    # -- streams ----------------------------------------------------------------------
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
