"""Reading a session's event log as a run streams: what ``AgentClient.stream`` and
``watch`` iterate.

The worker writes the events to the store (the data plane); a reader tails
the log (every :data:`POLL_SECONDS` while events flow, :data:`IDLE_POLL_SECONDS`
after a quiet second) until the run's outcome (``RunFinished``, ``RunPaused``,
``RunFailed``) is the newest event. Temporal is asked only when the log goes
quiet (every :data:`CLOSED_CHECK_SECONDS`): a run that does not stream, or
that closed without writing its outcome (terminated), ends the stream with an
outcome made from what Temporal and the store say (its ``offset`` is None).
``SubAgentStarted`` makes the reader follow the child's log too (from its
``after``, to the child's first outcome there), its events wrapped in
``SubAgentEvent`` (the contract is in ``checkpoint/events.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Protocol

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from durable_agents.checkpoint.events import (
    OUTCOME_TYPES,
    Event,
    RunFailed,
    RunFinished,
    RunOutcome,
    RunPaused,
    RunStarted,
    SubAgentEvent,
    SubAgentStarted,
    ToolCallFinished,
)
from durable_agents.checkpoint.format import CheckpointStatus, FinishReason
from durable_agents.checkpoint.stores.base import CheckpointStore
from durable_agents.client.outcomes import failure_error, outcome_error
from durable_agents.client.result import RunResult
from durable_agents.errors import CheckpointNotFoundError, DurableAgentsError
from durable_agents.workflows.contracts import RunSummary

POLL_SECONDS = 0.02
IDLE_POLL_SECONDS = 0.1
CLOSED_CHECK_SECONDS = 1.0
BATCH = 500
CLOSE_WAIT_SECONDS = 10.0
"""How long a reader that read a run's end waits for its workflow to close."""
CHILD_GRACE_SECONDS = 10.0
"""How long a parent's event that closes a sub-agent's work waits for that reader to reach its outcome."""

Emit = Callable[[Event], Awaitable[None]]


class Runs(Protocol):
    """What a reader asks about a session's runs (an ``AgentClient`` is one): the store it
    reads, Temporal for a run's state, and the ``RunResult`` an outcome stands for."""

    @property
    def temporal(self) -> Client: ...

    @property
    def store(self) -> CheckpointStore: ...

    def run_result(self, summary: RunSummary) -> RunResult: ...

    async def outcome(self, session_id: str) -> RunResult: ...


class _End:
    """What ends one session's reader: its outcome, and the error it stands for."""

    def __init__(self, error: BaseException | None = None) -> None:
        self.error = error


async def follow(agents: Runs, session_id: str, after: int = 0) -> AsyncIterator[Event]:
    """The session's events after ``after`` until its run's next outcome (see the module docstring)."""
    queue: asyncio.Queue[Event | _End] = asyncio.Queue(maxsize=1000)
    every: list[asyncio.Task[None]] = []

    def reader(sid: str, start: int, wrap: Callable[[Event], Event], nested: bool = False) -> _Reader:
        """A reader that puts its session's events (wrapped) on the queue; an event that closes
        what a sub-agent did (its call's result, the run's outcome) waits for that reader first."""
        children: dict[int | str, asyncio.Task[None]] = {}
        """Each sub-agent call's reader (by the call's result position), the latest one."""

        async def emit(event: Event) -> None:
            waits = list(children.values()) if event.type in OUTCOME_TYPES else []
            if isinstance(event, ToolCallFinished) and event.position in children:
                waits = [children[event.position]]
            if waits:
                await asyncio.wait(waits, timeout=CHILD_GRACE_SECONDS)
            await queue.put(wrap(event))

        def spawn(started: SubAgentStarted) -> None:
            def nest(event: Event) -> Event:
                return wrap(
                    SubAgentEvent(
                        session_id=started.session_id,
                        child_session_id=started.child_session_id,
                        tool_call_id=started.tool_call_id,
                        event=event,
                    )
                )

            key = started.position if started.position is not None else started.tool_call_id
            before = children.get(key)

            async def follow_child() -> None:
                if before is not None:  # the child's earlier stretch (up to its pause) comes first
                    with contextlib.suppress(BaseException):
                        await before
                await _quietly(reader(started.child_session_id, started.after, nest, nested=True).run())

            task = asyncio.create_task(follow_child())
            children[key] = task
            every.append(task)

        return _Reader(agents, sid, start, emit, spawn, first_outcome=nested)

    async def root() -> None:
        try:
            end = await reader(session_id, after, lambda e: e).run()
        except BaseException as e:  # noqa: BLE001 - handed to the iterating caller
            end = _End(e)
        await queue.put(end)

    task = asyncio.create_task(root())
    try:
        while True:
            item = await queue.get()
            if isinstance(item, _End):
                if item.error is not None:
                    raise item.error
                return
            yield item
    finally:
        for pending in [task, *every]:
            pending.cancel()
        for pending in [task, *every]:
            with contextlib.suppress(BaseException):
                await pending


async def _quietly(run: Awaitable[_End]) -> None:
    with contextlib.suppress(Exception):  # a sub-agent's reader never fails the parent's stream
        await run


class _Reader:
    """Tails one session's log."""

    def __init__(
        self,
        agents: Runs,
        session_id: str,
        after: int,
        emit: Emit,
        on_child: Callable[[SubAgentStarted], None],
        *,
        first_outcome: bool = False,
    ) -> None:
        self.agents, self.session_id, self.after = agents, session_id, after
        self.emit, self.on_child = emit, on_child
        self.store = agents.store
        self.first_outcome = first_outcome
        """A sub-agent's reader: it ends at the child's first outcome (its part in the parent's
        call, up to a pause or its end), whatever follows it in the log."""

    async def run(self) -> _End:
        last_seen = time.monotonic()
        check_at = last_seen + CLOSED_CHECK_SECONDS
        while True:
            rows = await asyncio.to_thread(self.store.read_events, self.session_id, self.after, BATCH)
            outcome: Event | None = None
            for row in rows:
                event = row.event()
                self.after = row.offset
                await self._complete(event)
                await self.emit(event)
                if isinstance(event, SubAgentStarted):
                    self.on_child(event)
                outcome = event if event.type in OUTCOME_TYPES else None
                if outcome is not None and self.first_outcome:
                    await self._closed(outcome)
                    return self._end(outcome)
            now = time.monotonic()
            if rows:
                last_seen, check_at = now, now + CLOSED_CHECK_SECONDS
                if outcome is not None and not await asyncio.to_thread(
                    self.store.read_events, self.session_id, self.after, 1
                ):
                    await self._closed(outcome)
                    return self._end(outcome)
                if len(rows) == BATCH:
                    continue
            elif now >= check_at:
                check_at = now + CLOSED_CHECK_SECONDS
                ended = await self._ended_without_event()
                if ended is not None:
                    return ended
            await asyncio.sleep(POLL_SECONDS if now - last_seen < 1.0 else IDLE_POLL_SECONDS)

    async def _closed(self, outcome: Event) -> None:
        """A run's end is written just before its workflow closes: wait for that (briefly), so a
        caller whose stream ended may start the session's next run at once."""
        run_id = getattr(outcome, "run_id", None)
        if not isinstance(outcome, RunFinished | RunFailed) or not run_id:
            return
        handle = self.agents.temporal.get_workflow_handle(self.session_id, run_id=run_id)
        with contextlib.suppress(Exception):  # closed (or gone) is all that matters here
            await asyncio.wait_for(handle.result(follow_runs=False), CLOSE_WAIT_SECONDS)

    def _end(self, outcome: Event) -> _End:
        if isinstance(outcome, RunFailed):
            failure = ApplicationError(outcome.message, type=outcome.error_type)
            return _End(failure_error(self.session_id, failure))
        return _End()

    async def _complete(self, event: Event) -> None:
        """An outcome event gets the ``RunResult`` it stands for (messages from the store)."""
        if isinstance(event, RunFinished | RunPaused) and event.result is None:
            summary = RunSummary(session_id=event.session_id, **event.outcome.model_dump())
            event.result = await asyncio.to_thread(self.agents.run_result, summary)

    # -- when the log is quiet ---------------------------------------------------------------
    async def _ended_without_event(self) -> _End | None:
        """The run's outcome when it will write none to the log (it does not stream, or it
        closed without writing it); None while a streamed run goes on."""
        handle = self.agents.temporal.get_workflow_handle(self.session_id, result_type=RunSummary)
        try:
            status = (await handle.describe()).status
        except RPCError as e:
            if e.status != RPCStatusCode.NOT_FOUND:
                raise
            status = None
        header = await asyncio.to_thread(self.store.load_header, self.session_id)
        streams = bool(header and header.run_config and header.run_config.stream)
        if status == WorkflowExecutionStatus.RUNNING:
            if header is None or streams or header.status != CheckpointStatus.AWAITING_APPROVAL:
                return None  # a streamed run writes its own outcome; an unstreamed one is waited for
            result = await self.agents.outcome(self.session_id)
            if result.approval_id != header.approval_id:
                return None
            outcome = RunOutcome(
                finish_reason=result.finish_reason,
                steps=result.steps,
                usage=result.usage,
                tool_calls=len(result.tool_calls),
                message_count=len(result.messages),
                run_start_index=header.run_start_index or 0,
                approval_id=result.approval_id,
                drift=result.drift,
            )
            await self.emit(RunPaused(session_id=self.session_id, outcome=outcome, result=result))
            return _End()
        if await asyncio.to_thread(self.store.read_events, self.session_id, self.after, 1):
            return None  # it wrote more before it closed: read that first
        if status is None:
            if header is None:
                raise CheckpointNotFoundError(
                    f"no session {self.session_id!r} in {self.store!r} and no run of it in Temporal",
                    session_id=self.session_id,
                )
            return _End()  # a session no run is live for: nothing more will come
        try:
            summary = await handle.result()
        except WorkflowFailureError as e:
            error = outcome_error(self.session_id, e)
            await self.emit(_failed(self.session_id, error))
            return _End(error)
        kind = RunPaused if summary.finish_reason == FinishReason.AWAITING_APPROVAL else RunFinished
        await self._emit_outcome(kind, summary)
        return _End()

    async def _emit_outcome(self, kind: type[RunFinished] | type[RunPaused], summary: RunSummary) -> None:
        outcome = RunOutcome.model_validate(summary.model_dump(exclude={"session_id"}))
        event = kind(session_id=self.session_id, outcome=outcome)
        await self._complete(event)
        await self.emit(event)


def _failed(session_id: str, error: BaseException) -> RunFailed:
    kind = getattr(error, "failure_type", None) if isinstance(error, DurableAgentsError) else None
    return RunFailed(session_id=session_id, message=str(error), error_type=str(kind) if kind else None)


def latest_run_start(store: CheckpointStore, session_id: str, window: int = BATCH) -> int:
    """The ``after`` offset that replays the session's latest run from its ``RunStarted`` (0: none found)."""
    end = store.last_event_offset(session_id)
    while end > 0:
        start = max(end - window, 0)
        rows = store.read_events(session_id, start, end - start)
        for row in reversed(rows):
            if isinstance(row.event(), RunStarted):
                return row.offset - 1
        end = start
    return 0
