"""Replaying a recorded run against a changed agent: the recording, call matching, seeding.

A replay is a new session named after its source (``<source>.replay-<tag>``), driven
again from the source's first user message (or from a kept step) by the changed agent.
Its tool calls are answered from the source's recorded calls: which recorded call
answers which new one is a *matching policy* (:data:`MatchPolicy`). What this module
holds is pure: it reads transcripts, never a store, and imports no Temporal.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any, Literal

from pydantic import Field

from durable_agents.checkpoint.errors import ConfigurationError
from durable_agents.checkpoint.format import Checkpoint, CheckpointStatus, FormatModel, Message, Role, Usage

REPLAY_MARK = ".replay-"
"""What separates a replay session's id from its source's: ``<source>.replay-<tag>``."""
_TAG_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


class RecordedCall(FormatModel):
    """One tool call of a recorded run, with its recorded result."""

    index: int
    """Its place among the run's calls, from 0 (calls of one turn in call order)."""
    step: int
    """The model turn that asked for it (from 1, like ``stepIndex``)."""
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    content: str | None = None
    """The recorded result as transcript text; None when the run recorded none."""
    is_error: bool = False

    @property
    def result(self) -> Any:
        """The recorded result, parsed as JSON when it is JSON."""
        if self.content is None:
            return None
        try:
            return json.loads(self.content)
        except ValueError:
            return self.content


class ReplayCall(FormatModel):
    """A call the changed agent made during a replay, as the matching policy sees it."""

    index: int
    step: int
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


MatchFn = Callable[[ReplayCall, list[RecordedCall], list[ReplayCall]], RecordedCall | None]
"""A user's matching policy: the new call, the source's recorded calls, and the replay's
earlier calls in; the recorded call that answers it (or None: it has no recording) out."""
MatchPolicy = Literal["arguments", "position"] | MatchFn
"""``"arguments"``: the same tool with the same arguments (the n-th such call of the replay
gets the n-th such recorded call); ``"position"``: the recorded call at the same place
among the run's calls, when it is of the same tool; or a :data:`MatchFn`."""


def recorded_calls(messages: list[Message]) -> list[RecordedCall]:
    """Every tool call of ``messages`` in order, each with its result (by position)."""
    calls: list[RecordedCall] = []
    step = 0
    for position, message in enumerate(messages):
        if message.role != Role.ASSISTANT:
            continue
        step += 1
        for i, call in enumerate(message.tool_calls or []):
            at = position + 1 + i
            result = messages[at] if at < len(messages) else None
            answered = result is not None and result.role == Role.TOOL and result.tool_call_id == call.id
            calls.append(
                RecordedCall(
                    index=len(calls),
                    step=step,
                    name=call.name,
                    arguments=call.arguments,
                    content=result.content if answered and result is not None else None,
                    is_error=bool(answered and result is not None and result.is_error),
                )
            )
    return calls


def replay_calls(messages: list[Message], position: int) -> tuple[list[ReplayCall], ReplayCall]:
    """The replay's calls before the one whose result goes at ``position``, and that call.

    ``messages`` is the replay's transcript through at least the call's turn. A call's
    result goes at ``turn + 1 + i`` (call ``i`` of the turn at ``turn``), so the call is
    found by position alone, whatever the results recorded so far.
    """
    earlier: list[ReplayCall] = []
    step = 0
    for at, message in enumerate(messages[:position]):
        if message.role != Role.ASSISTANT:
            continue
        step += 1
        for i, call in enumerate(message.tool_calls or []):
            new = ReplayCall(index=len(earlier), step=step, name=call.name, arguments=call.arguments)
            if at + 1 + i == position:
                return earlier, new
            earlier.append(new)
    raise ConfigurationError(f"no tool call has its result at position {position} of the replay's transcript")


def match_call(
    policy: MatchPolicy, call: ReplayCall, recorded: list[RecordedCall], earlier: list[ReplayCall]
) -> RecordedCall | None:
    """The recorded call that answers ``call`` under ``policy`` (None: no recording)."""
    if callable(policy):
        return policy(call, recorded, earlier)
    if policy == "position":
        found = recorded[call.index] if call.index < len(recorded) else None
        return found if found is not None and found.name == call.name else None
    if policy == "arguments":
        same = [c for c in recorded if c.name == call.name and c.arguments == call.arguments]
        seen = sum(1 for c in earlier if c.name == call.name and c.arguments == call.arguments)
        return same[seen] if seen < len(same) else None
    raise ConfigurationError(f"match={policy!r}: use 'arguments', 'position' or a function")


# -- naming ------------------------------------------------------------------------------
def check_tag(tag: str) -> str:
    """A batch's tag: letters, digits and ``_`` (it ends every replay session's id)."""
    if not tag or len(tag) > 40 or not set(tag) <= _TAG_CHARS:
        raise ConfigurationError(f"replay tag {tag!r}: use 1-40 letters, digits or _ (it names the replay sessions)")
    return tag


def new_tag() -> str:
    return uuid.uuid4().hex[:10]


def replay_session_id(source: str, tag: str) -> str:
    return f"{source}{REPLAY_MARK}{check_tag(tag)}"


def source_of(replay_session: str) -> str | None:
    """The source session of a replay session (None: not a replay session's id)."""
    source, mark, tag = replay_session.rpartition(REPLAY_MARK)
    if not mark or not source or not tag or not set(tag) <= _TAG_CHARS:
        return None
    return source


# -- what a replay sends -----------------------------------------------------------------
def input_groups(messages: list[Message], start: int = 0) -> list[tuple[int, list[Message]]]:
    """The user input of each run from ``start`` on, with where it begins: consecutive user
    messages, each group after the run before it ended (an assistant turn without tool calls)."""
    groups: list[tuple[int, list[Message]]] = []
    for at in range(start, len(messages)):
        message = messages[at]
        if message.role != Role.USER:
            continue
        if groups and groups[-1][0] + len(groups[-1][1]) == at:
            groups[-1][1].append(message)
        else:
            groups.append((at, [message]))
    return groups


def step_end(messages: list[Message], step: int) -> int:
    """The position just past step ``step`` (its turn and its results); 0 for step 0."""
    seen = 0
    for at, message in enumerate(messages):
        if message.role == Role.ASSISTANT:
            seen += 1
            if seen == step:
                end = at + 1
                while end < len(messages) and messages[end].role == Role.TOOL:
                    end += 1
                return end
    raise ConfigurationError(f"the recorded run has {seen} steps: it cannot be replayed from step {step}")


class ReplayPlan(FormatModel):
    """How one source is replayed: the seeded transcript (when starting after step 0), and
    the input of each run to send, in order."""

    seed: Checkpoint | None = None
    runs: list[list[Message]] = Field(default_factory=list)


def replay_plan(source: Checkpoint, target: str, from_step: int = 0) -> ReplayPlan:
    """From step 0: one run per recorded input group (the first with the first user message).
    From step ``n``: a seeded session holding steps 1..n (run once without input first),
    then the input groups recorded after them."""
    if from_step < 0:
        raise ConfigurationError(f"from_step {from_step}: steps count from 0")
    messages = source.messages
    if from_step == 0:
        groups = input_groups(messages)
        if not groups:
            raise ConfigurationError(f"session {source.session_id!r} has no user message to replay from")
        return ReplayPlan(runs=[g for _, g in groups])
    end = step_end(messages, from_step)
    seed = source.model_copy(
        update={
            "session_id": target,
            "session_uid": uuid.uuid4().hex,
            "messages": list(messages[:end]),
            "step_index": from_step,
            "status": CheckpointStatus.IN_PROGRESS,
            "finish_reason": None,
            "approval_id": None,
            "remaining_tool_calls": None,
            "subagent_approval": None,
            "pending_input": None,
            "parent_session_id": None,
            "parent_tool_call_id": None,
            "parent_session_uid": None,
            "decisions": None,
            "last_error": None,
            "output": None,
            "run_start_index": end,
            "run_start_step": from_step,
            "run_start_usage": None,
            # the replay's usage counts what it generates; the steps it starts from were the source's
            "usage": Usage(),
            "updated_at": None,
        }
    )
    return ReplayPlan(seed=seed, runs=[[], *(g for _, g in input_groups(messages, end))])


__all__ = [
    "REPLAY_MARK",
    "MatchFn",
    "MatchPolicy",
    "RecordedCall",
    "ReplayCall",
    "ReplayPlan",
    "check_tag",
    "input_groups",
    "match_call",
    "new_tag",
    "recorded_calls",
    "replay_calls",
    "replay_plan",
    "replay_session_id",
    "source_of",
    "step_end",
]
