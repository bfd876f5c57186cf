"""Message content encrypted at rest: a store wrapped around any other.

    store = EncryptedStore(open_store("sqlite:///agents.db"), load_keys())
    # durable-agents --store-encryption …   (the same keys as the payload codec)

What is sealed (AES-256-SIV, with a key derived from the newest key; its id
is kept with each value): every message (its whole record: text, parts, tool
calls and their arguments, tool results), run input, every event of the
event log (its whole body: text deltas, tool results), and the checkpoint's
user-content fields (``output``, ``businessState``, ``pendingInput``, the
arguments of ``remainingToolCalls`` and of a waiting sub-agent's calls in
``subagentApproval``, ``lastError``'s message, each
decision's ``note`` and ``arguments``). What stays readable, so the store can
list and index sessions: ids, agent name, status, step, counts, usage,
approval id, tool names and call ids, run config, fingerprint, times.

Deterministic encryption, because the stores compare what they hold with what
is written again (a retried write must change nothing); it shows which
stored values are equal, nothing more. Values written before encryption was
turned on read as they are. A value sealed with a key that is not
configured raises ``EncryptionKeyError`` naming its key id.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic_core import to_jsonable_python

from durable_agents.checkpoint.encryption import EncryptionKeys
from durable_agents.checkpoint.errors import ConfigurationError, StoreCorruptError
from durable_agents.checkpoint.format import (
    Checkpoint,
    CheckpointHeader,
    CheckpointStatus,
    Decision,
    HistoryEntry,
    Message,
    RunError,
    SessionSummary,
    SubagentApproval,
    ToolCall,
)
from durable_agents.checkpoint.stores.base import CheckpointStore, TranscriptTail
from durable_agents.checkpoint.waiting import WaitingHeader, WaitingSession

if TYPE_CHECKING:
    from durable_agents.checkpoint.events import StoredEvent

__all__ = ["SEALED_PREFIX", "EncryptedStore", "refuse_sealed"]

SEALED_PREFIX = "durable-agents-sealed:v1:"
"""A sealed text: ``<prefix><key id>:<base64url ciphertext>``."""
SEALED_KEY = "durableAgentsSealed"
"""A sealed JSON value stands in its field as ``{SEALED_KEY: <sealed text>}``."""

Fields = TypeVar("Fields", CheckpointHeader, Checkpoint)


class EncryptedStore(CheckpointStore):
    """``inner`` with content sealed on the way in and opened on the way out.

    Identity, location, capabilities and every other attribute are the inner store's.
    """

    def __init__(self, inner: CheckpointStore, keys: EncryptionKeys) -> None:
        self.inner = inner
        self.keys = keys
        self.history_limit = inner.history_limit
        self.durable = inner.durable
        self.capabilities = inner.capabilities  # type: ignore[misc]

    def __getattr__(self, name: str) -> Any:  # e.g. a backend's path
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return f"{self.inner!r} (encrypted at rest)"

    @property
    def store_id(self) -> str:
        return self.inner.store_id

    @property
    def location(self) -> str:
        return self.inner.location

    @contextmanager
    def without_waiting(self) -> Iterator[bool]:
        with self.inner.without_waiting() as now:
            yield now

    @contextmanager
    def reading(self) -> Iterator[None]:
        with self.inner.reading():
            yield

    # -- sealing ------------------------------------------------------------------------------
    def _seal_text(self, text: str) -> str:
        key_id, sealed = self.keys.seal_deterministic(text.encode())
        return f"{SEALED_PREFIX}{key_id}:{base64.urlsafe_b64encode(sealed).decode()}"

    def _open_text(self, text: str, what: str) -> str:
        if not text.startswith(SEALED_PREFIX):
            return text  # written before encryption was turned on
        key_id, sep, data = text[len(SEALED_PREFIX) :].partition(":")
        try:
            sealed = base64.urlsafe_b64decode(data) if sep else None
        except ValueError:
            sealed = None
        if sealed is None:
            raise StoreCorruptError(f"{what} in {self.location} is sealed but damaged (no key id or bad base64)")
        return self.keys.open_deterministic(key_id, sealed, what).decode()

    def _seal_value(self, value: Any) -> Any:
        if value is None:
            return None
        text = json.dumps(to_jsonable_python(value), ensure_ascii=False, separators=(",", ":"))
        return {SEALED_KEY: self._seal_text(text)}

    def _open_value(self, value: Any, what: str) -> Any:
        if isinstance(value, dict) and set(value) == {SEALED_KEY} and isinstance(value[SEALED_KEY], str):
            return json.loads(self._open_text(value[SEALED_KEY], what))
        return value

    def _seal_message(self, message: Message) -> Message:
        return Message(role=message.role, content=self._seal_text(message.to_json()))

    def _open_message(self, message: Message, session_id: str) -> Message:
        content = message.content
        if content is None or not content.startswith(SEALED_PREFIX):
            return message
        return Message.model_validate_json(self._open_text(content, f"a message of session {session_id!r}"))

    def _seal_fields(self, fields: Fields) -> Fields:
        error = fields.last_error
        return fields.model_copy(
            update={
                "output": self._seal_value(fields.output),
                "business_state": self._seal_value(fields.business_state),
                "pending_input": _each(fields.pending_input, self._seal_message),
                "remaining_tool_calls": _each(fields.remaining_tool_calls, self._seal_call),
                "last_error": error.model_copy(update={"message": self._seal_text(error.message)}) if error else None,
                "decisions": _each(fields.decisions, self._seal_decision),
                "subagent_approval": _subagent_calls(fields.subagent_approval, self._seal_call),
            }
        )

    def _seal_call(self, call: ToolCall) -> ToolCall:
        return call.model_copy(update={"arguments": self._seal_value(call.arguments)})

    def _seal_decision(self, decision: Decision) -> Decision:
        return decision.model_copy(
            update={
                "note": self._seal_text(decision.note) if decision.note is not None else None,
                "arguments": self._seal_value(decision.arguments),
            }
        )

    def _open_fields(self, fields: Fields) -> Fields:
        what = f"the checkpoint of session {fields.session_id!r}"
        sid = fields.session_id
        return fields.model_copy(
            update={
                "output": self._open_value(fields.output, what),
                "business_state": self._open_value(fields.business_state, what),
                "pending_input": _each(fields.pending_input, lambda m: self._open_message(m, sid)),
                "remaining_tool_calls": _each(fields.remaining_tool_calls, lambda c: self._open_call(c, what)),
                "last_error": self._open_error(fields.last_error, what),
                "decisions": _each(fields.decisions, lambda d: self._open_decision(d, what)),
                "subagent_approval": _subagent_calls(fields.subagent_approval, lambda c: self._open_call(c, what)),
            }
        )

    def _open_call(self, call: ToolCall, what: str) -> ToolCall:
        return call.model_copy(update={"arguments": self._open_value(call.arguments, what)})

    def _open_error(self, error: RunError | None, what: str) -> RunError | None:
        return error.model_copy(update={"message": self._open_text(error.message, what)}) if error else None

    def _open_decision(self, decision: Decision, what: str) -> Decision:
        note = self._open_text(decision.note, what) if decision.note is not None else None
        return decision.model_copy(update={"note": note, "arguments": self._open_value(decision.arguments, what)})

    # -- public API ----------------------------------------------------------------------------
    def delete(self, session_id: str, keep_history: bool = False) -> None:
        self.inner.delete(session_id, keep_history)

    def history(self, session_id: str, limit: int | None = None) -> list[HistoryEntry]:
        entries = self.inner.history(session_id, limit)
        return [entry.model_copy(update={"checkpoint": self._open_checkpoint(entry.checkpoint)}) for entry in entries]

    def _open_checkpoint(self, checkpoint: Checkpoint) -> Checkpoint:
        opened = self._open_fields(checkpoint)
        messages = [self._open_message(m, checkpoint.session_id) for m in checkpoint.messages]
        return opened.model_copy(update={"messages": messages})

    def list_sessions(
        self, *, status: CheckpointStatus | None = None, agent: str | None = None
    ) -> list[SessionSummary]:
        return [
            s.model_copy(update={"last_error": self._open_error(s.last_error, f"session {s.session_id!r}")})
            for s in self.inner.list_sessions(status=status, agent=agent)
        ]

    def waiting_sessions(self, agent: str | None = None) -> list[WaitingSession]:
        return [
            WaitingSession(
                self._open_waiting(w.header), [self._open_message(m, w.header.session_id) for m in w.last_turn]
            )
            for w in self.inner.waiting_sessions(agent)
        ]

    def _open_waiting(self, header: WaitingHeader) -> WaitingHeader:
        what = f"the checkpoint of session {header.session_id!r}"
        return header.model_copy(
            update={
                "remaining_tool_calls": _each(header.remaining_tool_calls, lambda c: self._open_call(c, what)),
                "subagent_approval": _subagent_calls(header.subagent_approval, lambda c: self._open_call(c, what)),
            }
        )

    def prune(
        self, older_than: timedelta | datetime, *, keep: Collection[str] = (), include_waiting: bool = False
    ) -> int:
        return self.inner.prune(older_than, keep=keep, include_waiting=include_waiting)

    # -- data plane ------------------------------------------------------------------------------
    def load_header(self, session_id: str) -> CheckpointHeader | None:
        header = self.inner.load_header(session_id)
        return None if header is None else self._open_fields(header)

    def load_messages(self, session_id: str, start: int = 0, end: int | None = None) -> list[Message]:
        return [self._open_message(m, session_id) for m in self.inner.load_messages(session_id, start, end)]

    def load_transcript_tail(self, session_id: str, start: int = 0) -> TranscriptTail | None:
        tail = self.inner.load_transcript_tail(session_id, start)  # the inner store's token: sealing changes no content
        if tail is None:
            return None
        messages = [self._open_message(m, session_id) for m in tail.messages]
        return replace(tail, header=self._open_fields(tail.header), messages=messages)

    def append(self, header: CheckpointHeader, start: int, messages: list[Message]) -> None:
        sealed = [self._seal_message(m) for m in messages]
        if messages:
            sealed = self._keep_equal(header.session_id, start, messages, sealed)
        self.inner.append(self._seal_fields(header), start, sealed)

    def append_new(self, header: CheckpointHeader, start: int, messages: list[Message]) -> bool:
        # only positions the store does not hold yet are written: none to keep equal
        return self.inner.append_new(self._seal_fields(header), start, [self._seal_message(m) for m in messages])

    def _keep_equal(self, session_id: str, start: int, messages: list[Message], sealed: list[Message]) -> list[Message]:
        """Positions the store holds already keep their stored bytes when their content is
        the same: a message sealed with an older key must not look changed (a changed
        message starts a new transcript and drops the tool markers after it)."""
        current = self.inner.load_header(session_id)
        held = 0 if current is None else min(current.message_count, start + len(messages)) - start
        if held <= 0:
            return sealed
        stored = self.inner.load_messages(session_id, start, start + held)
        kept = list(sealed)
        for i, raw in enumerate(stored):
            if raw != sealed[i] and self._open_message(raw, session_id) == messages[i]:
                kept[i] = raw
        return kept

    def tool_started(self, session_id: str, position: int) -> int:
        return self.inner.tool_started(session_id, position)

    def tool_result(self, session_id: str, position: int) -> Message | None:
        found = self.inner.tool_result(session_id, position)
        return None if found is None else self._open_message(found, session_id)

    def record_tool_result(
        self, session_id: str, position: int, message: Message, batch_start: int, batch_size: int
    ) -> int:
        return self.inner.record_tool_result(session_id, position, self._seal_message(message), batch_start, batch_size)

    def put_run_input(self, session_id: str, token: str, messages: list[Message]) -> None:
        self.inner.put_run_input(session_id, token, [self._seal_message(m) for m in messages])

    def run_input(self, session_id: str, token: str) -> list[Message] | None:
        kept = self.inner.run_input(session_id, token)
        return None if kept is None else [self._open_message(m, session_id) for m in kept]

    def drop_run_input(self, session_id: str, token: str) -> None:
        self.inner.drop_run_input(session_id, token)

    def append_events(self, session_id: str, events: list[tuple[str | None, str]]) -> list[int]:
        return self.inner.append_events(session_id, [(key, self._seal_text(body)) for key, body in events])

    def read_events(self, session_id: str, after: int = 0, limit: int | None = None) -> list[StoredEvent]:
        what = f"an event of session {session_id!r}"
        return [
            e.model_copy(update={"body": self._open_text(e.body, what)})
            for e in self.inner.read_events(session_id, after, limit)
        ]

    def last_event_offset(self, session_id: str) -> int:
        return self.inner.last_event_offset(session_id)

    def close(self) -> None:
        self.inner.close()


def refuse_sealed(messages: list[Message], session_id: str) -> None:
    """A store opened without ``--store-encryption`` over sealed messages: say so, rather than
    hand a model the ciphertext."""
    for message in messages:
        if message.content and message.content.startswith(SEALED_PREFIX):
            key_id = message.content[len(SEALED_PREFIX) :].partition(":")[0]
            raise ConfigurationError(
                f"the messages of session {session_id!r} are encrypted at rest (key id {key_id!r}), but this "
                "worker's store is not: start it with --store-encryption (DURABLE_AGENTS_STORE_ENCRYPTION=1) "
                "and the encryption keys"
            )


T = TypeVar("T")


def _each(items: list[T] | None, fn: Any) -> list[T] | None:
    return None if items is None else [fn(item) for item in items]


def _subagent_calls(
    approval: SubagentApproval | None, change: Callable[[ToolCall], ToolCall]
) -> SubagentApproval | None:
    """``approval`` with ``change`` applied to its paused call and the calls after it, at every level."""
    if approval is None:
        return None
    return approval.model_copy(
        update={
            "tool_call": change(approval.tool_call) if approval.tool_call else None,
            "remaining_tool_calls": _each(approval.remaining_tool_calls, change),
            "subagent_approval": _subagent_calls(approval.subagent_approval, change),
        }
    )
