"""What every activity needs: the store, the agents, the providers."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError

from durable_agents.activities import tracing
from durable_agents.activities.mcp_client import MCPConnections
from durable_agents.activities.transcript_cache import TranscriptCache
from durable_agents.activities.versioning import WorkerBuild
from durable_agents.agent.agent import Agent
from durable_agents.checkpoint.errors import (
    CheckpointNotFoundError,
    ConfigurationError,
    DurableAgentsError,
    FailureType,
)
from durable_agents.checkpoint.format import CheckpointHeader, Message, ToolCall
from durable_agents.checkpoint.policy_book import PolicyBook, policy_book_for
from durable_agents.checkpoint.stores.base import CheckpointStore, WouldWait
from durable_agents.checkpoint.stores.encrypted import refuse_sealed
from durable_agents.providers.registry import ProviderRegistry

T = TypeVar("T")

RECORD_RETRY_SECONDS = 600.0
"""How long :meth:`ActivityDeps.record_until_stored` rides out a store outage at most."""


@dataclass
class ActivityDeps:
    store: CheckpointStore
    agents: Mapping[str, Agent]
    providers: ProviderRegistry = field(default_factory=ProviderRegistry)
    mcp: MCPConnections = field(default_factory=MCPConnections)
    """The worker's MCP sessions (closed when the worker stops, by its plugin)."""
    transcripts: TranscriptCache = field(default_factory=TranscriptCache)
    """The worker's cached transcripts: a step reads only the messages added since."""
    build: WorkerBuild = field(default_factory=WorkerBuild)
    """The worker's deployment version (Worker Versioning), when it has one."""
    book: PolicyBook | bool | None = False
    """The policy book beside the store, opened on first use (False: not yet; None: the store
    has none, so no policy and no grant applies: every gated call asks a person)."""

    def agent(self, name: str) -> Agent:
        agent = self.agents.get(name)
        if agent is None:
            known = ", ".join(sorted(self.agents)) or "none"
            raise ApplicationError(
                f"this worker has no agent named {name!r} (it has: {known}); start a worker "
                f"with `durable-agents worker --agent module:attr` for it",
                type=FailureType.CONFIGURATION,
                non_retryable=True,
            )
        return agent

    def live_header(self, session_id: str) -> CheckpointHeader:
        """The checkpoint of a session whose run is live; its absence (deleted, pruned,
        another store) stops the run with a typed, non-retryable error naming it."""
        header = self.store.load_header(session_id)
        if header is None:
            raise CheckpointNotFoundError(
                f"session {session_id!r} is not in {self.store!r} any more, though a run of it is live "
                "(deleted or pruned meanwhile, or the worker uses another store): the run stops; its "
                "Temporal history is kept",
                session_id=session_id,
            )
        return header

    def transcript(self, session_id: str) -> tuple[CheckpointHeader | None, list[Message]]:
        """The session's latest header and whole transcript (``(None, [])``: no such
        session), in one store read of what this worker has not cached yet. Messages
        sealed at rest, read through a store without the keys, are refused (each
        message is checked once, when it is read)."""
        return self.transcripts.read(self.store, session_id, lambda new: refuse_sealed(new, session_id))

    def stored_turn(self, session_id: str, turn_position: int) -> Message:
        """The stored turn at ``turn_position`` of a session whose run is live; a session gone
        from the store stops the run with ``live_header``'s typed error naming it."""
        found = self.store.load_messages(session_id, turn_position, turn_position + 1)
        if not found:
            self.live_header(session_id)  # raises CheckpointNotFoundError when the session is gone
            raise CheckpointNotFoundError(
                f"session {session_id!r} has no message at position {turn_position}, the turn its run is on",
                session_id=session_id,
            )
        return found[0]

    def stored_call(self, session_id: str, turn_position: int, position: int) -> ToolCall:
        """The call (with its arguments) whose result goes at ``position``, from its stored turn."""
        turn = self.stored_turn(session_id, turn_position)
        return (turn.tool_calls or [])[position - turn_position - 1]

    def stored_calls(self, session_id: str, turn_position: int, refs: list[ToolCall]) -> list[ToolCall]:
        """``refs`` (the last ``len(refs)`` calls of the stored turn) with their arguments."""
        turn = self.stored_turn(session_id, turn_position)
        calls = turn.tool_calls or []
        stored = calls[len(calls) - len(refs) :] if refs else []
        assert [c.id for c in stored] == [r.id for r in refs], "the stored turn does not hold these calls"
        return stored

    async def in_store(self, fn: Callable[..., T], *args: object) -> T:
        """Run a store call off the event loop, heartbeating so a dead worker is noticed
        in seconds.

        A typed store error fails the activity with an ``ApplicationError`` of its
        ``failure_type``: retryable if the error is (``StoreUnavailableError``), so
        Temporal retries the activity under the workflow's retry policy for it
        (store and tool activities: until the store is back; the model activity:
        its ``maximum_attempts``); non-retryable otherwise. Other exceptions pass
        through unchanged (Temporal retries them too).
        """
        try:
            return await self._call(fn, *args)
        except DurableAgentsError as e:
            raise application_error(e) from e

    async def record_until_stored(
        self, fn: Callable[..., T], *args: object, max_seconds: float = RECORD_RETRY_SECONDS
    ) -> T:
        """A write that must not be lost once a tool has run: retried here, in
        process, through a store outage (a retried activity would not know the
        result and would have to report a durability error instead).

        Retried: a store outage, i.e. a retryable typed error
        (``StoreUnavailableError``) or a driver's own I/O error (``OSError``,
        ``sqlite3.OperationalError`` such as a lock), with exponential backoff
        from 0.2 s up to 5 s between attempts, heartbeating throughout. Not
        retried: a non-retryable typed error fails at once with a non-retryable
        ``ApplicationError`` of its ``failure_type``; any other exception (an
        encoding or programming error) is raised at once: it would fail again.

        Bounded: it gives up after ``max_seconds`` (default
        :data:`RECORD_RETRY_SECONDS`), and in an activity one second before the
        attempt's start-to-close timeout would cancel it, whichever comes
        first; then it raises the last error as :meth:`in_store` would (so
        Temporal retries the activity).
        """
        delay = 0.2
        deadline = time.monotonic() + min(max_seconds, _attempt_time_left() - 1.0)
        while True:
            try:
                return await self._call(fn, *args)
            except ApplicationError:
                raise
            except Exception as e:
                if not _is_outage(e) or time.monotonic() + delay > deadline:
                    if isinstance(e, DurableAgentsError):
                        raise application_error(e) from e
                    raise
                activity.logger.warning("store write failed (%s); retrying in %.1fs", e, delay)
                async with heartbeating(0.5):
                    await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def _call(self, fn: Callable[..., T], *args: object) -> T:
        """``fn(*args)`` on the event loop when the store can run it there without waiting
        (``CheckpointStore.without_waiting``: SQLite, uncontended), else in a thread."""
        scope = tracing.scope_needing_header()
        if scope is not None:  # tracing: the session's agent and step, for the spans the input leaves without
            await self._learn_scope(scope)
        with tracing.store_call(fn):  # a span per store call when the worker traces
            return await self._run(fn, *args)

    async def _run(self, fn: Callable[..., T], *args: object) -> T:
        with self.store.without_waiting() as now:
            if now:
                with contextlib.suppress(WouldWait):
                    return fn(*args)
        async with heartbeating(0.5):
            return await asyncio.to_thread(fn, *args)

    async def _learn_scope(self, scope: tracing.Scope) -> None:
        """Read the session's header (no span of its own) for its agent and step; a failed read
        leaves them unsaid (the store call that follows says what is wrong)."""
        assert scope.session_id is not None
        try:
            header = await self._run(self.store.load_header, scope.session_id)
        except Exception:  # noqa: BLE001 - a span's attributes never fail a store call
            scope.looked_up = True
            return
        scope.learn(header)


def _is_outage(error: Exception) -> bool:
    """A store that cannot be reached or written for now, as opposed to a write that will never work."""
    import sqlite3  # stdlib; imported here so the activity contracts stay light

    if isinstance(error, DurableAgentsError):
        return error.retryable
    return isinstance(error, (OSError, sqlite3.OperationalError))


def application_error(error: DurableAgentsError) -> ApplicationError:
    """``error`` as it crosses Temporal: its ``failure_type``, details, and retryability."""
    return ApplicationError(
        error.message, *error.failure_details(), type=error.failure_type, non_retryable=not error.retryable
    )


def attempt_time_left() -> float:
    """Seconds until this activity attempt's start-to-close timeout (infinite outside an activity)."""
    return _attempt_time_left()


def policy_book(deps: ActivityDeps) -> PolicyBook | None:
    """The approval policies and grants beside ``deps.store`` (``policy_book_for``), opened
    once per worker; None when the store has no book beside it (a store of another kind)."""
    if deps.book is False:
        try:
            deps.book = policy_book_for(deps.store)
        except ConfigurationError as e:
            logging.getLogger(__name__).warning(
                "approval policies and grants are off on this worker (every gated call asks a person): %s", e
            )
            deps.book = None
    return deps.book if isinstance(deps.book, PolicyBook) else None


_ASKED_AT: ContextVar[datetime | None] = ContextVar("durable_agents_asked_at", default=None)


@contextlib.contextmanager
def asked_at(at: datetime | None) -> Iterator[None]:
    """Within: ``at``, Temporal's time when the workflow asked for this activity
    (``workflow.now()``, in its input), counts in :func:`policy_now`. A local activity needs
    it: its start time is the worker's clock, not Temporal's."""
    token = _ASKED_AT.set(at)
    try:
        yield
    finally:
        _ASKED_AT.reset(token)


def policy_now() -> datetime:
    """Now, for what an approval policy judges against the time (a grant's making, its
    expiry): the latest of this worker's clock, Temporal's time when this activity attempt
    started, and Temporal's time when the workflow asked for it (:func:`asked_at`). On a
    real server they agree within the clocks' skew, and the latest is taken, so a worker
    whose clock lags the server's never lets a grant approve past its time. On a
    time-skipping test server Temporal's time runs ahead of the worker's, and a grant lasts
    its time in Temporal's time, as a durable timer would. Outside an activity: the
    worker's clock (and ``asked_at``)."""
    now = datetime.now(UTC)
    moments = [now, _ASKED_AT.get()]
    if activity.in_activity():
        moments.append(activity.info().started_time)
    return max(m for m in moments if m is not None)


def _attempt_time_left() -> float:
    """Seconds until this activity attempt's start-to-close timeout (infinite outside an activity)."""
    if not activity.in_activity():
        return math.inf
    info = activity.info()
    if info.start_to_close_timeout is None:
        return math.inf
    elapsed = (datetime.now(UTC) - info.started_time).total_seconds()
    return info.start_to_close_timeout.total_seconds() - elapsed


@contextlib.asynccontextmanager
async def heartbeating(every: float) -> AsyncIterator[None]:
    """Heartbeat in the background so a dead worker is noticed within seconds."""

    if not activity.in_activity() or activity.info().is_local:  # local ones cannot heartbeat
        yield
        return

    async def beat() -> None:
        # The heartbeat timeout counts from the attempt's start, so the first beat can
        # wait: an instant step then sends none (each is an RPC the server persists).
        while True:
            await asyncio.sleep(every)
            activity.heartbeat()

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
