"""Fork a session from a step of its history, optionally patched.

``fork()`` takes the newest history entry of ``from_step`` (or the entry
numbered ``entry``, as ``durable-agents history`` numbers them), applies the
patch in a fixed order (``messages`` → ``business_state`` → ``tool_result`` →
``append_input``) and saves the result as a new session's in-progress
checkpoint, keeping the step count and usage. The source session and its
history are never written. Engine-independent: no Temporal, no LLM SDK.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from pydantic import Field

from durable_agents.checkpoint.context import newest_instructions_change
from durable_agents.checkpoint.errors import CheckpointNotFoundError, ConfigurationError
from durable_agents.checkpoint.format import (
    Checkpoint,
    CheckpointStatus,
    Decision,
    FormatModel,
    HistoryEntry,
    Message,
    Role,
    ToolCall,
)
from durable_agents.checkpoint.stores.base import get_checkpoint_history
from durable_agents.checkpoint.transcript import pending_tool_calls, result_content

MessagesFn = Callable[[list[Message]], list[Message]]


class ToolResultPatch(FormatModel):
    """The result a tool call should have had (any JSON value, or text)."""

    tool_call_id: str
    result: Any = None


class Patch(FormatModel):
    """Changes applied to the forked checkpoint, in field order.

    ``business_state`` is applied only when it was given (``None`` included):
    "given" is read from ``model_fields_set``.
    """

    messages: list[Message] | MessagesFn | None = None
    """The new transcript: a list of messages, or a function from the entry's transcript
    to the new one (``Patch(messages=lambda ms: ms[:4])``). The function form works with
    :func:`fork` called directly only: a function cannot be sent through Temporal, so
    ``AgentClient.fork`` and the CLI's ``fork`` (``--messages-file``) take a list."""
    business_state: Any = None
    tool_result: ToolResultPatch | None = None
    """A call's result: replaced in place when it has one; else recorded for it, when it
    is a call of the last assistant turn without a result (any of them, not only the next:
    a result for a later call is recorded for its position and used when the run gets
    there, as a recorded result is, without running the call)."""
    tool_results: list[ToolResultPatch] | None = None
    """More results, applied in order after ``tool_result``."""
    append_input: str | list[str] | None = None

    @property
    def sets_business_state(self) -> bool:
        return "business_state" in self.model_fields_set

    @property
    def is_data(self) -> bool:
        """False when ``messages`` is a function (the patch cannot be serialized)."""
        return not callable(self.messages)


class ForkResult(FormatModel):
    session_id: str
    step: int
    checkpoint: Checkpoint
    entry: int | None = None
    """The number of the history entry forked (1 is the newest, as ``history`` numbers them)."""
    recorded_results: list[int] = Field(default_factory=list)
    """Positions of patched results recorded for calls that wait for earlier calls' results
    (they are not in ``checkpoint.messages`` yet; ``store.tool_result`` reads them)."""


def fork(
    store: Any,
    session_id: str,
    from_step: int,
    patch: Patch | None = None,
    new_session_id: str | None = None,
    *,
    entry: int | None = None,
    messages_fn: MessagesFn | None = None,
) -> ForkResult:
    """Start session ``new_session_id`` from step ``from_step`` of ``session_id``.

    ``entry`` picks one of the step's kept checkpoints by the number ``history``
    gives it (1 is the newest save of the session; a save made since shifts the
    numbers, so an entry that is not of ``from_step`` is refused); by default
    the step's newest. ``messages_fn`` is the older spelling of
    ``Patch(messages=function)``, applied after ``patch.messages``.
    """
    patch = patch or Patch()
    entries = get_checkpoint_history(store, session_id)
    if entries is None:
        raise ConfigurationError(
            f"{type(store).__name__} keeps no checkpoint history, so session {session_id!r} "
            "cannot be forked: use a store with history (SqliteStore, FileStore, PostgresStore)"
        )
    number, source = _entry_for_step(entries, session_id, from_step, entry)
    target = _target_id(store, session_id, new_session_id)
    checkpoint, apart = _patched(source, target, patch, messages_fn)
    store.save(checkpoint)
    turn = pending_tool_calls(checkpoint.messages)[1]
    size = len(checkpoint.messages[turn].tool_calls or []) if apart else 0
    for position, result in sorted(apart.items()):
        store.record_tool_result(target, position, result, turn + 1, size)
    return ForkResult(
        session_id=target, step=from_step, checkpoint=checkpoint, entry=number, recorded_results=sorted(apart)
    )


# -- finding the source and the target ------------------------------------------
def _not_found(session_id: str, entries: list[HistoryEntry], problem: str) -> CheckpointNotFoundError:
    kept = sorted({e.step for e in entries})
    if kept:
        detail = f"its history keeps steps {', '.join(map(str, kept))}"
    else:
        detail = "it has no history (unknown session, or a store with history_limit=0)"
    return CheckpointNotFoundError(
        f"session {session_id!r} {problem}: {detail}", session_id=session_id, kept_steps=kept
    )


def _entry_for_step(
    entries: list[HistoryEntry], session_id: str, step: int, entry: int | None
) -> tuple[int, Checkpoint]:
    """The entry's number (newest first, from 1) and its checkpoint."""
    numbered = list(enumerate(entries, 1))  # newest first, as `history` lists and numbers them
    of_step = [n for n, e in numbered if e.step == step]
    if entry is None:
        if not of_step:
            raise _not_found(session_id, entries, f"has no checkpoint for step {step}")
        return of_step[0], entries[of_step[0] - 1].checkpoint
    if entry < 1:
        raise ConfigurationError(f"invalid history entry {entry}: entries count from 1 (the newest save)")
    if entry > len(entries):
        has = f"entries 1-{len(entries)}" if entries else "no entries"
        raise _not_found(session_id, entries, f"has no entry {entry}: its history has {has}")
    chosen = entries[entry - 1]
    if chosen.step != step:
        listed = (
            f"step {step}'s entries are {', '.join(map(str, of_step))}" if of_step else f"no entry is of step {step}"
        )
        raise _not_found(
            session_id, entries, f"has no entry {entry} of step {step}: entry {entry} is a checkpoint of "
            f"step {chosen.step}, not step {step} ({listed}; new saves shift the numbers)",
        )  # fmt: skip
    return entry, chosen.checkpoint


def _exists(store: Any, session_id: str) -> bool:
    load_header = getattr(store, "load_header", None)
    found = load_header(session_id) if load_header else store.load(session_id)
    return found is not None


def _target_id(store: Any, session_id: str, new_session_id: str | None) -> str:
    if new_session_id is None:
        n = 1
        while _exists(store, f"{session_id}.fork-{n}"):
            n += 1
        return f"{session_id}.fork-{n}"
    if new_session_id == session_id or _exists(store, new_session_id):
        raise ConfigurationError(
            f"cannot fork into session {new_session_id!r}: it already has a checkpoint; "
            "delete it first or pick another new_session_id (or omit it for "
            f"{session_id}.fork-<n>)"
        )
    return new_session_id


# -- applying the patch ------------------------------------------------------------
def _patched(
    source: Checkpoint, target: str, patch: Patch, messages_fn: MessagesFn | None
) -> tuple[Checkpoint, dict[int, Message]]:
    """The new session's checkpoint, and results recorded apart (position → result) for
    pending calls that wait for earlier calls' results."""
    messages = list(source.messages)
    if callable(patch.messages):
        messages = _checked_messages(patch.messages(list(messages)), "the Patch.messages function")
    elif patch.messages is not None:
        messages = list(patch.messages)
    if messages_fn is not None:
        messages = _checked_messages(messages_fn(list(messages)), "messages_fn")
    state = patch.business_state if patch.sets_business_state else source.business_state
    apart: dict[int, Message] = {}
    for change in ([patch.tool_result] if patch.tool_result else []) + (patch.tool_results or []):
        messages = apply_tool_result(messages, change, apart)
    run_start = len(messages)
    queued = _input_messages(patch.append_input)
    if pending_calls(messages):  # input goes after the pending calls' results, on resume
        pending_input, queued = [*(source.pending_input or []), *queued] or None, []
    else:
        pending_input = source.pending_input
    messages += queued
    checkpoint = source.model_copy(
        update={
            "session_id": target,
            "session_uid": uuid.uuid4().hex,  # its calls get keys of their own
            "messages": messages,
            "business_state": state,
            "pending_input": pending_input,
            "status": CheckpointStatus.IN_PROGRESS,
            "approval_id": None,
            "remaining_tool_calls": None,
            "subagent_approval": None,
            # a fork stands alone: a fork of a sub-agent's session is no parent's child
            "parent_session_id": None,
            "parent_tool_call_id": None,
            "parent_session_uid": None,
            "finish_reason": None,
            "run_start_index": run_start,
            # the fork goes on with the source run's budget and usage (only the rest of max_steps applies)
            "run_start_step": source.run_start_step or 0,
            "run_start_usage": source.run_start_usage,
            "decisions": _decisions_kept(source.decisions, messages),
            # where the fork's newest instructions change is (a patch may have rewritten the messages)
            "instructions_at": newest_instructions_change(messages, len(messages)),
            "updated_at": None,
        }
    )
    return checkpoint, apart


def _decisions_kept(decisions: list[Decision] | None, messages: list[Message]) -> list[Decision] | None:
    """The decisions on calls whose result is in the fork's transcript (a call still pending
    there is decided again when the fork runs it)."""

    def kept(d: Decision) -> bool:
        at = d.position
        if at is None:  # recorded without a position: kept
            return True
        return at < len(messages) and messages[at].role == Role.TOOL and messages[at].tool_call_id == d.tool_call_id

    return [d for d in decisions if kept(d)] or None if decisions else None


def _checked_messages(messages: Any, what: str) -> list[Message]:
    if not isinstance(messages, list) or not all(isinstance(m, Message) for m in messages):
        raise ConfigurationError(f"{what} must return a list of Message")
    return messages


def pending_calls(messages: list[Message]) -> list[ToolCall]:
    """Calls of the last assistant turn that have no result yet, in call order."""
    return pending_tool_calls(messages)[0]


def apply_tool_result(
    messages: list[Message], change: ToolResultPatch, apart: dict[int, Message] | None = None
) -> list[Message]:
    """Record ``change`` for a call of the last turn without a result, or replace a result in place.

    A pending call's result is appended when it is the next one; a later call's goes
    in ``apart`` (position → result; without ``apart`` that is refused) and is appended
    once the results before it are there. Otherwise the newest recorded result of the
    call is replaced in place (same position, call id and tool name).
    """
    content = result_content(change.result)
    out = list(messages)
    pending, turn = pending_tool_calls(out)
    first = turn + 1 + len(out[turn].tool_calls or []) - len(pending) if pending else len(out)  # the next result
    slots = [(first + i, call) for i, call in enumerate(pending) if call.id == change.tool_call_id]
    if slots:
        position, call = next(((p, c) for p, c in slots if apart is None or p not in apart), slots[0])
        result = Message.tool_result(call, content)
        if position != first:
            if apart is None:
                raise ConfigurationError(
                    f"tool call {change.tool_call_id!r} has no result yet and is not the next one: "
                    f"record {pending[0].id!r} ({pending[0].name}) first, or pass `apart`"
                )
            apart[position] = result
            return out
        out.insert(first, result)
        while apart and first + 1 in apart:  # later results waiting for this one
            first += 1
            out.insert(first, apart.pop(first))
        return out
    for i in range(len(out) - 1, -1, -1):  # the newest result of the call: ids repeat across turns
        message = out[i]
        if message.role == Role.TOOL and message.tool_call_id == change.tool_call_id:
            out[i] = message.model_copy(update={"content": content, "is_error": None})
            return out
    raise ConfigurationError(_unrecorded_reason(out, change.tool_call_id))


def _unrecorded_reason(messages: list[Message], call_id: str) -> str:
    known = any(c.id == call_id for m in messages for c in m.tool_calls or [])
    if known:
        return (
            f"tool call {call_id!r} has no result and is not pending in the last assistant "
            "turn, so there is no place to record one"
        )
    return f"no tool call {call_id!r} in the transcript at this step: check the call id"


def _input_messages(append: str | list[str] | None) -> list[Message]:
    if append is None:
        return []
    texts = [append] if isinstance(append, str) else list(append)
    return [Message.user(text) for text in texts]


__all__ = [
    "ForkResult",
    "MessagesFn",
    "Patch",
    "ToolResultPatch",
    "apply_tool_result",
    "fork",
    "pending_calls",
    "result_content",
]
