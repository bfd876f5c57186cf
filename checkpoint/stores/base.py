"""The store interface every backend implements.

Two kinds of method:

- the public, engine-independent ones (``load``, ``save``, ``delete``,
  ``history``, ``list_sessions``, ``prune``) that take and return whole
  checkpoints in the documented format;
- the data-plane ones the worker's activities use on every step
  (``load_header``, ``load_messages``, ``load_transcript_tail``, ``append``,
  tool markers keyed by transcript position). ``append``
  writes only the new messages, so a save costs the same at step 10 and at
  step 10,000, and a retried write lands on the same positions instead of
  appending twice.

Methods are synchronous: stores are plain libraries usable without Temporal.
The worker calls them from a thread so its event loop never waits on disk or a
lock, except where a store says a call cannot wait (``without_waiting``): then on
the event loop, which saves the thread hop.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import ClassVar

from durable_agents.checkpoint.events import StoredEvent
from durable_agents.checkpoint.format import (
    Checkpoint,
    CheckpointHeader,
    CheckpointStatus,
    HistoryEntry,
    Message,
    Role,
    SessionSummary,
    ToolCall,
)
from durable_agents.checkpoint.waiting import WaitingHeader, WaitingSession

DEFAULT_HISTORY_LIMIT = 50
TAIL = 64
"""Messages read from a session's end to find its last turn (more only when that is not enough)."""


class WouldWait(Exception):
    """Raised by a call made inside :meth:`CheckpointStore.without_waiting` that would have had
    to wait (another process holds the database's write lock) before it changed anything:
    make the call again where it may wait (a thread)."""


@dataclass(frozen=True)
class TranscriptTail:
    """A session's latest header and its messages from ``start`` on, read together.

    ``token`` names the transcript those messages belong to: while a store
    reports the same token for a session, a message at a position it once held
    never changes (saves that only add messages keep the token; one that changes
    an earlier message, a delete and re-create, a fork into the id, each give a
    new one, never one used before). A worker that holds the first ``start``
    messages of a transcript may therefore read only the rest. ``None``: the
    store makes no such promise, and readers must read from position 0.
    """

    header: CheckpointHeader
    token: str | None
    start: int
    messages: list[Message]
    """Positions ``start … header.message_count - 1`` (empty when ``start`` is past them)."""


@dataclass(frozen=True)
class StoreCapabilities:
    """What a store claims beyond the methods every store has.

    The conformance suite (``durable_agents.checkpoint.conformance``) checks
    each claim and skips, naming the claim, the checks of one a store does not
    make. The defaults claim everything: a new store is held to the whole
    contract until it declares less.
    """

    history: bool = True
    """Keeps a ring of the newest ``history_limit`` saves (``history()``)."""
    durable: bool = True
    """What was saved survives ``close()`` and the process: a new handle reads it."""
    shared_across_processes: bool = True
    """Handles opened on the same location share one store (workers in several processes)."""
    concurrent: bool = True
    """Safe to call from several threads at once (the worker calls from a thread pool)."""
    transcript_tokens: bool = True
    """``load_transcript_tail`` reports a token per transcript (see :class:`TranscriptTail`),
    so a worker reads only a session's new messages each step; without it (the default
    method) every step reads the whole transcript."""
    events: bool = True
    """Keeps each session's event log (``append_events`` / ``read_events``): what
    ``AgentClient.stream`` and ``watch`` read. Without it, runs cannot stream."""


@dataclass(frozen=True)
class ToolCallStart:
    """What a tool call's activity knows before the tool runs (:meth:`CheckpointStore.begin_tool_call`)."""

    recorded: Message | None
    """The call's recorded result: it ran (or was answered) already and is not run again."""
    header: CheckpointHeader | None
    """The session's checkpoint (None: the session is not in the store)."""
    call: ToolCall
    """The call with its arguments (read from its stored turn when asked)."""
    starts: int | None
    """The starts recorded before this one, when this one was recorded; None when no start
    was recorded (a recorded result, no session, or ``admit`` said no)."""


Admit = Callable[[ToolCall, CheckpointHeader], bool]
"""Whether a call may start (its arguments valid): called once, before its start is recorded."""


def call_in_turn(turn: Message, turn_position: int, position: int) -> ToolCall:
    """The call of the assistant turn at ``turn_position`` whose result goes at ``position``."""
    return (turn.tool_calls or [])[position - turn_position - 1]


class CheckpointStore(ABC):
    """A durable home for sessions: latest checkpoint plus a bounded history."""

    history_limit: int = DEFAULT_HISTORY_LIMIT
    durable: bool = True
    """False for stores that lose data with their process (MemoryStore)."""
    capabilities: ClassVar[StoreCapabilities] = StoreCapabilities()
    """What the store claims; ``capabilities.durable`` must equal ``durable``."""

    # -- identity -------------------------------------------------------
    @property
    @abstractmethod
    def store_id(self) -> str:
        """A random id made once, with the store, and read on open: the same for
        every handle on one store and after a reopen, different for another store."""

    @property
    @abstractmethod
    def location(self) -> str:
        """Where the store lives, for people: an absolute path, or a URL without its password."""

    @contextmanager
    def without_waiting(self) -> Iterator[bool]:
        """Whether calls made inside may run on the caller's own thread (an event loop's) now:
        only for a store whose calls do no I/O that can block for long (an embedded database
        on a local disk) and only while this handle is free. A call inside that would wait
        (another process holds the write lock) raises :class:`WouldWait` with nothing changed.

        The worker runs a step's store calls inside it, and in a thread when it says False:
        a thread hop per call costs more than most calls do, and a store thread competes
        with the event loop for the GIL. The default says False: every call in a thread."""
        yield False

    @contextmanager
    def reading(self) -> Iterator[None]:
        """The reads inside see one snapshot of the store (a SQL store: one read
        transaction, so one round trip's overhead instead of one per read). Reads only:
        a write inside is refused or joins a read transaction. The default does nothing."""
        yield

    # -- public API ------------------------------------------------------
    def load(self, session_id: str) -> Checkpoint | None:
        header = self.load_header(session_id)
        if header is None:
            return None
        return header.with_messages(self.load_messages(session_id, 0, header.message_count))

    def save(self, checkpoint: Checkpoint) -> None:
        """Save a whole checkpoint (rewrites only what changed).

        It is stamped with ``checkpoint.updated_at`` when set (imports keep
        their time), else now: clear it when saving a loaded checkpoint anew.
        """
        header = checkpoint.header()
        self.append(header, 0, checkpoint.messages)

    @abstractmethod
    def delete(self, session_id: str, keep_history: bool = False) -> None: ...

    @abstractmethod
    def history(self, session_id: str, limit: int | None = None) -> list[HistoryEntry]: ...

    @abstractmethod
    def list_sessions(
        self, *, status: CheckpointStatus | None = None, agent: str | None = None
    ) -> list[SessionSummary]: ...

    def waiting_sessions(self, agent: str | None = None) -> list[WaitingSession]:
        """Every session waiting for an approval decision (``agent``'s only, when named),
        newest first, each with its last turn: what listing approvals reads. This default
        reads each session in turn (two reads apiece); the SQL stores read them all in two
        queries, whatever their number."""
        found = []
        for summary in self.list_sessions(status=CheckpointStatus.AWAITING_APPROVAL, agent=agent):
            header = self.load_header(summary.session_id)
            if header is not None and header.status == CheckpointStatus.AWAITING_APPROVAL:
                found.append(WaitingSession(WaitingHeader.of(header), last_turn_messages(self, header)))
        return found

    @abstractmethod
    def prune(
        self, older_than: timedelta | datetime, *, keep: Collection[str] = (), include_waiting: bool = False
    ) -> int:
        """Delete sessions and history entries last saved before the cutoff.

        A session waiting for approval is never pruned unless ``include_waiting``
        (its decision would have nowhere to go), nor one named in ``keep`` (e.g.
        sessions with a live run, which the CLI's ``prune`` asks Temporal for).
        """

    # -- data plane -------------------------------------------------------
    @abstractmethod
    def load_header(self, session_id: str) -> CheckpointHeader | None: ...

    @abstractmethod
    def load_messages(self, session_id: str, start: int = 0, end: int | None = None) -> list[Message]: ...

    def load_transcript_tail(self, session_id: str, start: int = 0) -> TranscriptTail | None:
        """The latest header, the transcript's token and its messages from ``start`` on
        (None: no such session), in one read whose cost does not grow with the transcript
        before ``start``. This default reads the header, then the messages, and reports no
        token (``None``), so workers re-read the whole transcript every step; a store
        whose transcripts have an identity returns it (see :class:`TranscriptTail`)."""
        header = self.load_header(session_id)
        if header is None:
            return None
        count = header.message_count
        messages = self.load_messages(session_id, start, count) if start < count else []
        return TranscriptTail(header=header, token=None, start=start, messages=messages)

    @abstractmethod
    def append(self, header: CheckpointHeader, start: int, messages: list[Message]) -> None:
        """Store ``messages`` at positions ``start…`` and ``header`` as the latest save.

        ``header.message_count`` must equal ``start + len(messages)``. Writing
        the same positions again with the same content changes nothing and
        adds no history entry.
        """

    def append_new(self, header: CheckpointHeader, start: int, messages: list[Message]) -> bool:
        """``append``, only if the session holds no message at ``start`` yet (a new session, or
        one of exactly ``start`` messages); else write nothing and return False.

        What a model activity stores its turn with: an attempt Temporal gave up on (timed out,
        its worker cut off) may still be running when its retry stores the step's turn; its own
        turn must not replace the one the run acted on. This default checks, then appends (two
        calls); the shipped stores do both in one transaction."""
        current = self.load_header(header.session_id)
        if current is not None and current.message_count > start:
            return False
        self.append(header, start, messages)
        return True

    # Tool markers are keyed by the transcript position of the call's result:
    # call ``i`` of an assistant turn at position ``p`` has its result at
    # ``p + 1 + i``. Never by the model's call id alone (models and compatible
    # servers reuse ids: ``call_0`` in every turn, twice in one turn). A save
    # that drops or changes messages the checkpoint held also drops the markers
    # at and after the first such position (they belong to calls no longer there).
    @abstractmethod
    def tool_started(self, session_id: str, position: int) -> int:
        """Record that the call whose result goes at ``position`` is starting;
        return how many starts came before for that position."""

    def tool_unstarted(self, session_id: str, position: int) -> None:
        """Forget the last start of the call at ``position`` (it has no result): the tool said
        it did not complete (``PropagatingToolError``), so a resume may run it again. Stores
        that cannot raise ``NotImplementedError``; the call is then a durability error on resume."""
        raise NotImplementedError

    @abstractmethod
    def tool_result(self, session_id: str, position: int) -> Message | None:
        """The recorded result for ``position``, if any."""

    def begin_tool_call(
        self, session_id: str, position: int, call: ToolCall, turn_position: int | None, admit: Admit | None
    ) -> ToolCallStart:
        """Everything a call's activity needs before its tool runs, and its start: the result
        recorded for ``position`` (then nothing else is done), the session's header, the call
        with its arguments (from the stored turn at ``turn_position`` when given, else
        ``call`` as is) and, when ``admit`` accepts the call, its start recorded as
        :meth:`tool_started` does. ``admit`` None: nothing is recorded (the caller records
        the start later, after work that cannot run inside a store call).

        The start of an at-most-once call must be durable before the tool runs; the reads
        before it need not be a round trip of their own. This default reads in one snapshot
        and then writes; the shipped SQL stores do both in one transaction."""
        with self.reading():
            recorded = self.tool_result(session_id, position)
            header = self.load_header(session_id)
            if recorded is None and header is not None and turn_position is not None:
                [turn] = self.load_messages(session_id, turn_position, turn_position + 1)
                call = call_in_turn(turn, turn_position, position)
        if recorded is not None or header is None or admit is None or not admit(call, header):
            return ToolCallStart(recorded, header, call, None)
        return ToolCallStart(None, header, call, self.tool_started(session_id, position))

    @abstractmethod
    def record_tool_result(
        self, session_id: str, position: int, message: Message, batch_start: int, batch_size: int
    ) -> int:
        """Record ``message`` as the result for ``position`` (the first recorded
        result for a position wins), then append to the transcript the in-order
        prefix of the batch's recorded results.

        The batch is the positions ``batch_start … batch_start+batch_size-1``;
        results are appended in position order, only as far as they are
        contiguous from the first position not yet in the transcript. Returns
        the checkpoint's message count afterwards; a re-run past a batch that
        is already fully appended writes nothing and returns the count right
        after the batch (``batch_start + batch_size``). ``position`` outside the
        batch raises ``ValueError``.
        """

    # -- run input ---------------------------------------------------------
    # A client writes a run's input here before it starts the run, and the run
    # reads it by ``token``: input never rides in Temporal payloads (docs/design.md §2).
    # Optional: a store without it gets its input inline (small input only).
    def put_run_input(self, session_id: str, token: str, messages: list[Message]) -> None:
        """Keep ``messages`` as the input of the run ``token`` of ``session_id``."""
        raise NotImplementedError(f"{type(self).__name__} keeps no run input")

    def run_input(self, session_id: str, token: str) -> list[Message] | None:
        """The input kept under ``token``, or None (never kept, or dropped once applied)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no run input")

    def drop_run_input(self, session_id: str, token: str) -> None:
        """Forget the input of ``token`` (the run applied it to the checkpoint)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no run input")

    # -- event log ----------------------------------------------------------
    # A session's events (``durable_agents.checkpoint.events``) as the worker writes
    # them while a run streams: bodies are opaque JSON text to the store, each at an
    # offset counted from 1 in its session, never reused while the session exists.
    # Optional: a store without it serves runs that do not stream.
    def append_events(self, session_id: str, events: list[tuple[str | None, str]]) -> list[int]:
        """Append ``(key, body)`` pairs to the session's log in order; return their offsets.

        An event whose ``key`` (not None) the log already holds is not appended
        again: its offset is the one it was given (a retried write changes nothing).
        """
        raise NotImplementedError(f"{type(self).__name__} keeps no event log")

    def read_events(self, session_id: str, after: int = 0, limit: int | None = None) -> list[StoredEvent]:
        """The session's events with an offset above ``after``, oldest first (at most ``limit``)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no event log")

    def last_event_offset(self, session_id: str) -> int:
        """The offset of the session's newest event (0: none), where a new reader starts."""
        raise NotImplementedError(f"{type(self).__name__} keeps no event log")

    def close(self) -> None:  # noqa: B027 - optional for backends
        """Release connections."""


def get_checkpoint_history(store: object, session_id: str, limit: int | None = None) -> list[HistoryEntry] | None:
    """History of a session, or None for a store that keeps none."""
    history = getattr(store, "history", None)
    if history is None:
        return None
    return history(session_id, limit)


def last_turn_messages(store: CheckpointStore, header: CheckpointHeader | WaitingHeader) -> list[Message]:
    """The end of a session's transcript, from its last assistant turn (or the whole
    transcript when that turn is further back than ``TAIL`` messages): enough for
    :func:`~durable_agents.checkpoint.transcript.pending_tool_calls`, read without
    the rest of a long session."""
    start = max(0, header.message_count - TAIL)
    messages = store.load_messages(header.session_id, start, header.message_count)
    if start and not any(m.role == Role.ASSISTANT for m in messages):
        messages = store.load_messages(header.session_id, 0, header.message_count)
    return messages
