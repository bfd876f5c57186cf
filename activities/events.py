"""How activities write a streamed run's events to the store's event log.

Only runs that stream (``RunConfig.stream``) write events; every write of a
step-level event is keyed, so a retried activity writes it once. Text deltas
are buffered and written every :data:`FLUSH_SECONDS` (the first one at once),
from the model activity while the provider streams; see :class:`TurnStream`
for how a retried step keeps "the deltas add up to the stored turn".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from datetime import UTC, datetime

from temporalio import activity
from temporalio.exceptions import ApplicationError

from durable_agents.activities.contracts import (
    RECORD_EVENTS,
    RecordEventsInput,
)
from durable_agents.activities.deps import ActivityDeps
from durable_agents.activities.transcript import repair_text
from durable_agents.checkpoint.errors import DurableAgentsError
from durable_agents.checkpoint.events import (
    EventBase,
    ModelTurnStarted,
    StepRetried,
    TextDelta,
    TurnStored,
    last_attempt,
    parse_event,
    turn_stored_events,
)
from durable_agents.checkpoint.format import CheckpointHeader, Message, Usage
from durable_agents.providers.base import ModelProvider, ModelRequest, ModelResponse, unexpected_failure
from durable_agents.providers.registry import provider_label

FLUSH_SECONDS = 0.03
"""How often a streaming model call writes its buffered text deltas (the first at once)."""

log = logging.getLogger("durable_agents.events")
_warned: set[str] = set()

Keyed = tuple[str | None, EventBase]


def streams(header: CheckpointHeader | None) -> bool:
    return bool(header is not None and header.run_config is not None and header.run_config.stream)


def now() -> datetime:
    return datetime.now(UTC)


async def write_events(deps: ActivityDeps, session_id: str, events: Sequence[Keyed]) -> list[int] | None:
    """Append ``events`` (each with its key, or None) to the session's log; None when the
    store keeps no event log (the run then streams nothing: said once per store type)."""
    rows = [(key, event.to_json()) for key, event in events]
    try:
        return await deps.in_store(deps.store.append_events, session_id, rows)
    except NotImplementedError:
        _unsupported(deps)
        return None


def write_events_now(deps: ActivityDeps, session_id: str, events: Sequence[Keyed]) -> None:
    """:func:`write_events` from inside a store call (already off the event loop)."""
    try:
        deps.store.append_events(session_id, [(key, event.to_json()) for key, event in events])
    except NotImplementedError:
        _unsupported(deps)


def _unsupported(deps: ActivityDeps) -> None:
    kind = type(deps.store).__name__
    if kind not in _warned:
        _warned.add(kind)
        log.warning("%s keeps no event log: runs that ask to stream write no events", kind)


class TurnStream:
    """The events of one model turn of a streamed run.

    ``begin`` writes the step's ``ModelTurnStarted`` (keyed by step: once) and
    reads what followed it: deltas there are an earlier attempt's, which did
    not store the turn (or the turn is stored and its ``TurnStored`` missing).
    A new call then opens with ``StepRetried`` voiding those attempts. After the
    turn is stored, ``stored`` writes ``TurnStored``, first voiding this attempt
    and sending the stored text as one delta if what streamed differs from it
    (an ``after_model`` hook rewrote it, a delta write failed).
    """

    def __init__(self, deps: ActivityDeps, session_id: str, step: int) -> None:
        self.deps, self.session_id, self.step = deps, session_id, step
        self.attempt = 1
        self.seen: list[EventBase] = []
        """This step's events already in the log, before this attempt."""
        self.enabled = True
        self._marker = 0
        self._sent: list[str] = []
        self._pending: list[str] = []
        self._lost = False
        self._wake = asyncio.Event()
        self._closing = asyncio.Event()
        self._flusher: asyncio.Task[None] | None = None

    # -- the step's start ------------------------------------------------------------------
    async def begin(self) -> None:
        marker = ModelTurnStarted(session_id=self.session_id, step=self.step, at=now())

        def begin() -> list[EventBase]:
            [self._marker] = self.deps.store.append_events(self.session_id, [(self._key("model"), marker.to_json())])
            return self._step_events()

        try:
            self.seen = await self.deps.in_store(begin)
        except NotImplementedError:
            _unsupported(self.deps)
            self.enabled = False
            return
        self.attempt = last_attempt(self.seen) + 1 if last_attempt(self.seen) else 1

    def _step_events(self) -> list[EventBase]:
        """This step's events, from its marker on (in a store call)."""
        rows = self.deps.store.read_events(self.session_id, self._marker)
        return [e for e in (parse_event(r.body, r.offset) for r in rows) if getattr(e, "step", None) == self.step]

    @property
    def turn_recorded(self) -> bool:
        return any(isinstance(e, TurnStored) for e in self.seen)

    async def retried(self) -> None:
        """This call follows attempts that never stored the turn: say so, voiding their deltas."""
        if not self.enabled or self.attempt == 1:
            return
        retried = StepRetried(
            session_id=self.session_id,
            step=self.step,
            attempt=self.attempt,
            discarded_attempts=list(range(1, self.attempt)),
            reason="a previous attempt did not store the turn",
            at=now(),
        )
        await self._write([(None, retried)])

    # -- deltas ------------------------------------------------------------------------------
    def on_text(self, text: str) -> None:
        """The provider's callback for each piece of text (called on the event loop)."""
        if not self.enabled or not text:
            return
        self._pending.append(repair_text(text))
        if self._flusher is None:
            self._flusher = asyncio.create_task(self._flush_loop())
        self._wake.set()

    async def _flush_loop(self) -> None:
        while not self._closing.is_set():
            await self._wake.wait()
            self._wake.clear()
            await self._flush()
            with contextlib.suppress(TimeoutError):  # at most one write per FLUSH_SECONDS, unless closing
                await asyncio.wait_for(self._closing.wait(), FLUSH_SECONDS)

    async def _flush(self) -> None:
        if not self._pending:
            return
        text, self._pending = "".join(self._pending), []
        delta = TextDelta(session_id=self.session_id, step=self.step, attempt=self.attempt, text=text, at=now())
        try:
            await self._write([(None, delta)])
            self._sent.append(text)
        except Exception as e:  # noqa: BLE001 - a lost delta is repaired by `stored`, never fatal
            self._lost = True
            log.warning("could not write a text delta of session %s step %s: %s", self.session_id, self.step, e)

    async def close(self) -> None:
        """Write what is still buffered and stop the flusher (never in the middle of a write)."""
        self._closing.set()
        self._wake.set()
        if self._flusher is not None:
            await self._flusher
            self._flusher = None
        await self._flush()

    # -- the stored turn -----------------------------------------------------------------------
    async def stored(self, turn: Message, usage: Usage, total: Usage, *, replayed: bool = False) -> None:
        """``TurnStored`` for the turn as stored (after whatever it takes for the deltas to add up)."""
        if not self.enabled:
            return
        await self.close()

        def finish() -> None:  # one store call: read the step's events again, then write
            # another attempt of this step (one Temporal gave up on, still running) may have
            # voided this one's deltas, or recorded the turn already
            self.seen = self._step_events()
            if not self.turn_recorded:
                events = turn_stored_events(
                    self.seen,
                    turn,
                    session_id=self.session_id,
                    step=self.step,
                    attempt=self.attempt,
                    sent=self._sent,
                    lost=self._lost,
                    usage=usage,
                    total=total,
                    replayed=replayed,
                    at=now(),
                )
                write_events_now(self.deps, self.session_id, events)

        await self.deps.in_store(finish)

    async def _write(self, events: Sequence[Keyed]) -> None:
        if await write_events(self.deps, self.session_id, events) is None:
            self.enabled = False

    def _key(self, kind: str) -> str:
        return f"{kind}:{self.step}"


async def turn_stream(deps: ActivityDeps, header: CheckpointHeader, session_id: str, step: int) -> TurnStream | None:
    """The events of this model turn, when its run streams (None otherwise)."""
    if not streams(header):
        return None
    stream = TurnStream(deps, session_id, step)
    await stream.begin()
    return stream if stream.enabled else None


async def generate(provider: ModelProvider, request: ModelRequest, stream: TurnStream | None) -> ModelResponse:
    """The provider's reply; with ``stream``, its text streamed as deltas as it comes (a
    provider without ``generate_stream`` sends its whole text as one delta). An exception
    that is none of ours (not an ``ApplicationError``, not a typed error) is said with the
    provider, the model and its type (an SDK's bare ``AssertionError`` says nothing itself)."""
    try:
        return await _generate(provider, request, stream)
    except (ApplicationError, DurableAgentsError):
        raise
    except Exception as e:  # named, then raised as Temporal would raise it (same type, retried)
        raise unexpected_failure(provider_label(provider), request.model, e) from e


async def _generate(provider: ModelProvider, request: ModelRequest, stream: TurnStream | None) -> ModelResponse:
    if stream is None:
        return await provider.generate(request)
    await stream.retried()
    streaming = getattr(provider, "generate_stream", None)
    try:
        if streaming is None:
            response = await provider.generate(request)
            stream.on_text(response.message.content or "")
        else:
            response = await streaming(request, stream.on_text)
    finally:
        await stream.close()  # a failed attempt's deltas are written too: the next attempt voids them
    return response


class EventActivities:
    """``record_events``: what a streamed run's workflow itself says in its log (its outcome)."""

    def __init__(self, deps: ActivityDeps) -> None:
        self.deps = deps

    @activity.defn(name=RECORD_EVENTS)
    async def record_events(self, inp: RecordEventsInput) -> None:
        keys = [*inp.keys, *[None] * (len(inp.events) - len(inp.keys))]
        rows = [(key, parse_event(event).to_json()) for key, event in zip(keys, inp.events, strict=True)]
        try:
            await self.deps.in_store(self.deps.store.append_events, inp.session_id, rows)
        except NotImplementedError:
            _unsupported(self.deps)
