"""Fork a session from a step of its history, optionally patched.

``fork()`` takes the newest history entry of ``from_step``, applies the patch
in a fixed order (``messages`` → ``business_state`` → ``tool_result`` →
``append_input``) and saves the result as a new session's in-progress
checkpoint, keeping the step count and usage. The source session and its
history are never written. Engine-independent: no Temporal, no LLM SDK.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from durable_agents.checkpoint.errors import CheckpointNotFoundError, ConfigurationError
from durable_agents.checkpoint.format import (
    Checkpoint,
    CheckpointStatus,
    FormatModel,
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

    messages: list[Message] | None = None
    business_state: Any = None
    tool_result: ToolResultPatch | None = None
    tool_results: list[ToolResultPatch] | None = None
    """More results, applied in order after ``tool_result``."""
    append_input: str | list[str] | None = None

    @property
    def sets_business_state(self) -> bool:
        return "business_state" in self.model_fields_set


class ForkResult(FormatModel):
    session_id: str
    step: int
    checkpoint: Checkpoint


def fork(
    store: Any,
    session_id: str,
    from_step: int,
    patch: Patch | None = None,
    new_session_id: str | None = None,
    *,
    messages_fn: MessagesFn | None = None,
) -> ForkResult:
    """Start session ``new_session_id`` from step ``from_step`` of ``session_id``.

    ``messages_fn`` rewrites the transcript after ``patch.messages`` (a
    callable cannot be part of a serializable patch).
    """
    patch = patch or Patch()
    entries = get_checkpoint_history(store, session_id)
    if entries is None:
        raise ConfigurationError(
            f"{type(store).__name__} keeps no checkpoint history, so session {session_id!r} "
            "cannot be forked: use a store with history (SqliteStore, FileStore, PostgresStore)"
        )
    source = _entry_for_step(entries, session_id, from_step)
    target = _target_id(store, session_id, new_session_id)
    checkpoint = _patched(source, target, patch, messages_fn)
    store.save(checkpoint)
    return ForkResult(session_id=target, step=from_step, checkpoint=checkpoint)


# -- finding the source and the target ------------------------------------------
def _entry_for_step(entries: list[Any], session_id: str, step: int) -> Checkpoint:
    for entry in entries:  # newest first
        if entry.step == step:
            return entry.checkpoint
    kept = sorted({e.step for e in entries})
    if kept:
        detail = f"its history keeps steps {', '.join(map(str, kept))}"
    else:
        detail = "it has no history (unknown session, or a store with history_limit=0)"
    raise CheckpointNotFoundError(
        f"session {session_id!r} has no checkpoint for step {step}: {detail}",
        session_id=session_id,
        kept_steps=kept,
    )


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
def _patched(source: Checkpoint, target: str, patch: Patch, messages_fn: MessagesFn | None) -> Checkpoint:
    messages = list(source.messages)
    if patch.messages is not None:
        messages = list(patch.messages)
    if messages_fn is not None:
        messages = _checked_messages(messages_fn(list(messages)))
    state = patch.business_state if patch.sets_business_state else source.business_state
    for change in ([patch.tool_result] if patch.tool_result else []) + (patch.tool_results or []):
        messages = apply_tool_result(messages, change)
    run_start = len(messages)
    queued = _input_messages(patch.append_input)
    if pending_calls(messages):  # input goes after the pending calls' results, on resume
        pending_input, queued = [*(source.pending_input or []), *queued] or None, []
    else:
        pending_input = source.pending_input
    messages += queued
    return source.model_copy(
        update={
            "session_id": target,
            "session_uid": uuid.uuid4().hex,  # its calls get keys of their own
            "messages": messages,
            "business_state": state,
            "pending_input": pending_input,
            "status": CheckpointStatus.IN_PROGRESS,
            "approval_id": None,
            "remaining_tool_calls": None,
            "finish_reason": None,
            "run_start_index": run_start,
            # the fork goes on with the source run's budget and usage (only the rest of max_steps applies)
            "run_start_step": source.run_start_step or 0,
            "run_start_usage": source.run_start_usage,
            "updated_at": None,
        }
    )


def _checked_messages(messages: Any) -> list[Message]:
    if not isinstance(messages, list) or not all(isinstance(m, Message) for m in messages):
        raise ConfigurationError("messages_fn must return a list of Message")
    return messages


def pending_calls(messages: list[Message]) -> list[ToolCall]:
    """Calls of the last assistant turn that have no result yet, in call order."""
    return pending_tool_calls(messages)[0]


def apply_tool_result(messages: list[Message], change: ToolResultPatch) -> list[Message]:
    """Replace a call's result in place, or record it as the next pending result."""
    content = result_content(change.result)
    out = list(messages)
    for i, message in enumerate(out):
        if message.role == Role.TOOL and message.tool_call_id == change.tool_call_id:
            out[i] = message.model_copy(update={"content": content, "is_error": None})
            return out
    pending = pending_calls(out)
    if pending and pending[0].id == change.tool_call_id:
        out.append(Message.tool_result(pending[0], content))
        return out
    raise ConfigurationError(_unrecorded_reason(out, pending, change.tool_call_id))


def _unrecorded_reason(messages: list[Message], pending: list[ToolCall], call_id: str) -> str:
    if any(c.id == call_id for c in pending):
        return (
            f"tool call {call_id!r} has no result yet and is not the next one: pending results "
            f"are recorded in call order, so record {pending[0].id!r} ({pending[0].name}) first"
        )
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
